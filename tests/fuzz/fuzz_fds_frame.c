/* libFuzzer harness: the receiving half of the several-descriptor frame
 * (shmreg_recv_fds, src/wire/fd_passing.c), the one place a client's bytes
 * and descriptors meet before a VMM range is registered, and the
 * CUDA-region request read from it (shmreg_recv_cuda_region,
 * src/wire/cuda_region_socket.c). The input's first byte picks the socket
 * type, how many descriptors ride on the message, how many the receiver
 * has room for, and (its top bit) which receiver reads it; the rest is sent
 * raw, then the sender closes. Oracles:
 *  - a receive either refuses (a code and a message, *count 0) or accepts
 *    at most the room, each descriptor open and close-on-exec;
 *  - no descriptor is left open in either case once the accepted ones are
 *    closed (the process's descriptors are counted before and after);
 *  - sending the same bytes as a payload with shmreg_send_fds round-trips
 *    them, and the descriptors, exactly;
 *  - a CUDA request accepted carries the descriptors its kind needs, and
 *    sent again by the client half it is received field for field. */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "shmreg/shmreg.h"
#include "wire/cuda_region_socket.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int open_descriptors(void)
{
    int n = 0;
    for (int fd = 0; fd < 1024; fd++)
        n += fcntl(fd, F_GETFD) >= 0;
    return n;
}

static void send_raw(int sock, const uint8_t *bytes, size_t n, const int *fds, size_t count)
{
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(4 * sizeof(int))];
    } control;
    memset(&control, 0, sizeof control);
    unsigned char empty = 0;
    struct iovec iov = {.iov_base = n ? (void *)bytes : &empty, .iov_len = n ? n : 1};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    if (count > 0) {
        msg.msg_control = control.buf;
        msg.msg_controllen = CMSG_SPACE(count * sizeof(int));
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(count * sizeof(int));
        memcpy(CMSG_DATA(c), fds, count * sizeof(int));
    }
    (void)sendmsg(sock, &msg, MSG_NOSIGNAL);
}

/* Receive one message; check the oracles; close what came. */
static shmreg_err receive_and_check(int sock, size_t room, size_t *count, uint8_t *buf, size_t cap, size_t *got)
{
    int fds[4] = {-1, -1, -1, -1};
    *count = 99;
    shmreg_err err = shmreg_recv_fds(sock, fds, room, count, buf, cap, got);
    if (err != SHMREG_OK) {
        if (*count != 0 || shmreg_last_error()[0] == '\0')
            abort();
        return err;
    }
    if (*count == 0 || *count > room || *got == 0 || *got > cap)
        abort();
    for (size_t i = 0; i < *count; i++) {
        if (!(fcntl(fds[i], F_GETFD) & FD_CLOEXEC))
            abort();
        close(fds[i]);
    }
    return err;
}

/* The CUDA-region receiver on the same bytes: its oracles, then the round
 * trip of what it accepted through the client half (its answer queued
 * first, so that one thread plays both ends). */
static void cuda_request_check(int sock)
{
    static shmreg_cuda_region_request q, again;
    shmreg_err err = shmreg_recv_cuda_region(sock, &q);
    if (err != SHMREG_OK) {
        if (q.fd_count != 0 || shmreg_last_error()[0] == '\0')
            abort();
        return;
    }
    size_t want = q.source == SHMREG_SOURCE_CUDA_VMM_RANGE ? q.fd_count : q.source == SHMREG_SOURCE_CUDA_POOL ? 1 : 0;
    if (q.fd_count != want || (q.source == SHMREG_SOURCE_CUDA_VMM_RANGE && q.fd_count == 0) || q.name[0] == '\0' ||
        (q.flags & ~SHMREG_READONLY))
        abort();
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) != 0 || shmreg_answer_region(sv[1], SHMREG_OK, "") != SHMREG_OK ||
        shmreg__send_cuda_request(sv[0], &q) != SHMREG_OK || shmreg_recv_cuda_region(sv[1], &again) != SHMREG_OK)
        abort();
    if (again.source != q.source || again.flags != q.flags || again.offset != q.offset ||
        again.byte_size != q.byte_size || strcmp(again.name, q.name) != 0 ||
        strcmp(again.device_uuid, q.device_uuid) != 0 || again.fd_count != q.fd_count ||
        memcmp(again.chunk_sizes, q.chunk_sizes, q.fd_count * sizeof q.chunk_sizes[0]) != 0 ||
        (q.source != SHMREG_SOURCE_CUDA_VMM_RANGE && memcmp(again.handle, q.handle, sizeof q.handle) != 0))
        abort();
    shmreg_cuda_region_request_close(&again);
    shmreg_cuda_region_request_close(&q);
    close(sv[0]);
    close(sv[1]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 1 + SHMREG_FD_PAYLOAD_MAX + 64)
        return 0;
    static const int types[3] = {SOCK_STREAM, SOCK_SEQPACKET, SOCK_DGRAM};
    int type = types[(data[0] & 3) % 3];
    size_t attach = (data[0] >> 2) & 3, room = 1 + ((data[0] >> 4) & 3);
    const uint8_t *body = data + 1;
    size_t n = size - 1;
    int before = open_descriptors();

    int sv[2], carried[3];
    if (socketpair(AF_UNIX, type, 0, sv) != 0)
        abort();
    /* Not the socket itself: a socket in flight in its own queue would keep
     * it open after close, and a stream's reader would wait for good. */
    for (int i = 0; i < 3; i++)
        carried[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
    send_raw(sv[0], body, n, carried, attach);
    close(sv[0]); /* a stream's reader then sees the end, never waits */
    size_t count, got;
    static uint8_t buf[SHMREG_FD_PAYLOAD_MAX];
    if (data[0] & 0x80)
        cuda_request_check(sv[1]);
    else
        (void)receive_and_check(sv[1], room, &count, buf, sizeof buf, &got);
    close(sv[1]);

    /* The round trip of the same bytes as a payload. */
    if (n >= 1 && n <= SHMREG_FD_PAYLOAD_MAX && attach >= 1) {
        if (socketpair(AF_UNIX, type, 0, sv) != 0)
            abort();
        if (shmreg_send_fds(sv[0], carried, attach, body, n) != SHMREG_OK)
            abort();
        if (receive_and_check(sv[1], 3, &count, buf, sizeof buf, &got) != SHMREG_OK || count != attach ||
            got != n || memcmp(buf, body, n) != 0)
            abort();
        close(sv[0]);
        close(sv[1]);
    }
    for (int i = 0; i < 3; i++)
        close(carried[i]);
    if (open_descriptors() != before)
        abort();
    return 0;
}
