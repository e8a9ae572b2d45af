/* shmreg_send_fd / shmreg_recv_fd over socketpairs of each AF_UNIX type: what
 * arrives, and that every refused message (truncated payload or control
 * data, no descriptor, not our framing, a closed peer) is an error that
 * leaves no descriptor behind. Needs no GPU: runs in CI. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "shmreg_assert.h"
#include "testutil.h"

struct fixture {
    struct tu_baseline base;
    int sv[2];
    int pipe[2]; /* the descriptor sent around: a pipe, so its arrival is checkable */
};

static int setup_type(void **state, int type)
{
    struct fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->base = tu_take_baseline();
    assert_int_equal(socketpair(AF_UNIX, type, 0, f->sv), 0);
    assert_int_equal(pipe(f->pipe), 0);
    *state = f;
    return 0;
}
static int setup_stream(void **state) { return setup_type(state, SOCK_STREAM); }
static int setup_seqpacket(void **state) { return setup_type(state, SOCK_SEQPACKET); }
static int setup_dgram(void **state) { return setup_type(state, SOCK_DGRAM); }

static int teardown(void **state)
{
    struct fixture *f = *state;
    for (int i = 0; i < 2; i++) {
        if (f->sv[i] >= 0)
            close(f->sv[i]);
        close(f->pipe[i]);
    }
    tu_check_baseline(f->base);
    free(f);
    return 0;
}

/* The received descriptor is the pipe's write end: bytes written to it come
 * out of the read end. */
static void assert_is_pipe_writer(struct fixture *f, int fd)
{
    assert_int_not_equal(fd, f->pipe[1]); /* a new descriptor, not the sender's */
    assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    assert_int_equal(write(fd, "x", 1), 1);
    char c = 0;
    assert_int_equal(read(f->pipe[0], &c, 1), 1);
    assert_int_equal(c, 'x');
}

/* Send the pipe's write end with msg, receive it, check both. */
static void assert_round_trip(struct fixture *f, const char *msg, size_t size)
{
    assert_ok(shmreg_send_fd(f->sv[0], f->pipe[1], msg, size));
    char got[64];
    size_t len = 0;
    int fd = -1;
    assert_ok(shmreg_recv_fd(f->sv[1], &fd, got, sizeof got, &len));
    assert_int_equal(len, size);
    assert_memory_equal(got, msg, size);
    assert_is_pipe_writer(f, fd);
    close(fd);
}

static void test_round_trip(void **state)
{
    const char msg[] = "region input0 size 1474560";
    assert_round_trip(*state, msg, sizeof msg);
}

static void test_messages_keep_their_boundaries(void **state)
{
    struct fixture *f = *state;
    static unsigned char big[SHMREG_FD_PAYLOAD_MAX];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = tu_pattern(7, i);
    assert_ok(shmreg_send_fd(f->sv[0], f->pipe[1], big, sizeof big));
    assert_ok(shmreg_send_fd(f->sv[0], f->pipe[1], "b", 1));
    static unsigned char got[SHMREG_FD_PAYLOAD_MAX];
    size_t len = 0;
    int fd1 = -1, fd2 = -1;
    assert_ok(shmreg_recv_fd(f->sv[1], &fd1, got, sizeof got, &len));
    assert_int_equal(len, sizeof big);
    assert_memory_equal(got, big, sizeof big);
    assert_ok(shmreg_recv_fd(f->sv[1], &fd2, got, sizeof got, &len));
    assert_int_equal(len, 1);
    assert_int_equal(got[0], 'b');
    assert_is_pipe_writer(f, fd1);
    assert_is_pipe_writer(f, fd2);
    close(fd1);
    close(fd2);
}

static void test_truncated_payload(void **state)
{
    struct fixture *f = *state;
    char payload[100];
    memset(payload, 'p', sizeof payload);
    assert_ok(shmreg_send_fd(f->sv[0], f->pipe[1], payload, sizeof payload));
    assert_ok(shmreg_send_fd(f->sv[0], f->pipe[1], "next", 4));
    char got[10];
    size_t len = 0;
    int fd = -1;
    assert_fails_containing(shmreg_recv_fd(f->sv[1], &fd, got, sizeof got, &len),
                            SHMREG_ERR_OUT_OF_BOUNDS,
                            "payload truncated: 100 bytes sent, room for 10");
    assert_int_equal(fd, -1);
    /* The refused message was consumed whole: the next one reads intact. */
    assert_ok(shmreg_recv_fd(f->sv[1], &fd, got, sizeof got, &len));
    assert_int_equal(len, 4);
    assert_memory_equal(got, "next", 4);
    close(fd);
}

/* Send `n` descriptors (the pipe's ends, in turn) with the `len` bytes at
 * `bytes`, in one message that is not shmreg_send_fd's framing. */
static void send_raw(struct fixture *f, const char *bytes, size_t len, int n)
{
    int fds[4];
    for (int i = 0; i < n; i++)
        fds[i] = f->pipe[i % 2];
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof fds)];
    } control;
    memset(&control, 0, sizeof control);
    struct iovec iov = {.iov_base = (void *)bytes, .iov_len = len};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                         .msg_controllen = CMSG_SPACE(n * sizeof(int))};
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(n * sizeof(int));
    memcpy(CMSG_DATA(c), fds, n * sizeof(int));
    assert_int_equal(sendmsg(f->sv[0], &msg, 0), (ssize_t)len);
}

/* `n` descriptors in one message of 10 bytes. */
static void send_descriptors(struct fixture *f, int n)
{
    send_raw(f, "xxxxxxxxxx", 10, n);
}

/* The next message is refused with code and a message containing part, and
 * no descriptor is handed out (the teardown checks none stayed open). */
static void assert_recv_refused(struct fixture *f, shmreg_err code, const char *part)
{
    char got[64];
    size_t len = 0;
    int fd = -1;
    assert_fails_containing(shmreg_recv_fd(f->sv[1], &fd, got, sizeof got, &len), code, part);
    assert_int_equal(fd, -1);
}

/* More descriptors than one: two fit the control buffer's padding, four
 * overflow it (MSG_CTRUNC). Either way all that arrived are closed. */
static void test_truncated_control_data(void **state)
{
    struct fixture *f = *state;
    for (int n = 2; n <= 4; n += 2) {
        send_descriptors(f, n);
        assert_recv_refused(f, SHMREG_ERR_OUT_OF_BOUNDS, "control data truncated");
        if (n == 2) {
            char rest[8]; /* a stream keeps the 2 bytes past the header: drop them */
            (void)recv(f->sv[1], rest, sizeof rest, MSG_DONTWAIT);
        }
    }
}

static void test_missing_descriptor(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(send(f->sv[0], "no descriptor here", 18, 0), 18);
    assert_recv_refused(f, SHMREG_ERR_NOT_FOUND, "the message carries no descriptor");
}

/* A descriptor with bytes that are not shmreg_send_fd's framing. */
static void test_foreign_message_is_refused(void **state)
{
    struct fixture *f = *state;
    send_raw(f, "garbage!garbage!", 16, 1);
    assert_recv_refused(f, SHMREG_ERR_SYSTEM, "not a shmreg_send_fd message");
}

/* A record or datagram of no bytes can still carry a descriptor; it is
 * refused and the descriptor closed (the teardown counts them). A stream
 * sends nothing for no bytes, so this is for the other two types. */
static void test_empty_message_with_a_descriptor(void **state)
{
    struct fixture *f = *state;
    send_raw(f, "", 0, 1);
    assert_recv_refused(f, SHMREG_ERR_SYSTEM, "not a shmreg_send_fd message (empty)");
}

static void test_closed_peer(void **state)
{
    struct fixture *f = *state;
    close(f->sv[0]);
    f->sv[0] = -1;
    assert_recv_refused(f, SHMREG_ERR_SYSTEM, "connection closed");
    assert_fails_containing(shmreg_send_fd(f->sv[1], f->pipe[1], "x", 1), SHMREG_ERR_SYSTEM,
                            "sendmsg");
}

static void test_peer_closes_mid_message(void **state)
{
    struct fixture *f = *state;
    /* Capture a whole frame as shmreg_send_fd writes it, then send only its
     * first part with a descriptor and close, as a peer that dies mid-write
     * would leave the stream. */
    char partial[64];
    size_t len = 0;
    int fd = -1;
    int sv2[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv2), 0);
    assert_ok(shmreg_send_fd(sv2[0], f->pipe[1], "0123456789", 10));
    char frame[32];
    ssize_t n = recv(sv2[1], frame, sizeof frame, 0); /* no control buffer: fd dropped */
    assert_int_equal(n, 18);
    close(sv2[0]);
    close(sv2[1]);
    int fds[1] = {f->pipe[1]};
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof fds)];
    } control;
    memset(&control, 0, sizeof control);
    struct iovec iov = {.iov_base = frame, .iov_len = 12}; /* header and 4 of 10 bytes */
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                         .msg_controllen = sizeof control.buf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof fds);
    memcpy(CMSG_DATA(c), fds, sizeof fds);
    assert_int_equal(sendmsg(f->sv[0], &msg, 0), 12);
    close(f->sv[0]);
    f->sv[0] = -1;
    assert_fails_containing(shmreg_recv_fd(f->sv[1], &fd, partial, sizeof partial, &len),
                            SHMREG_ERR_SYSTEM, "connection closed in the middle of a message");
}

static void test_invalid_arguments(void **state)
{
    struct fixture *f = *state;
    char big[SHMREG_FD_PAYLOAD_MAX + 1] = {0};
    assert_fails_containing(shmreg_send_fd(-1, f->pipe[1], "x", 1),
                            SHMREG_ERR_INVALID_ARG, "negative");
    assert_fails_containing(shmreg_send_fd(f->sv[0], -1, "x", 1),
                            SHMREG_ERR_INVALID_ARG, "negative");
    assert_fails_containing(shmreg_send_fd(f->sv[0], f->pipe[1], NULL, 1), SHMREG_ERR_INVALID_ARG,
                            "payload");
    assert_fails_containing(shmreg_send_fd(f->sv[0], f->pipe[1], "x", 0), SHMREG_ERR_INVALID_ARG,
                            "payload");
    assert_fails_containing(shmreg_send_fd(f->sv[0], f->pipe[1], big, sizeof big),
                            SHMREG_ERR_INVALID_ARG, "payload");
    char got[8];
    size_t len = 0;
    int fd = -1;
    assert_fails_containing(shmreg_recv_fd(f->sv[1], NULL, got, sizeof got, &len),
                            SHMREG_ERR_INVALID_ARG, "fd_out");
    assert_fails_containing(shmreg_recv_fd(f->sv[1], &fd, got, 0, &len), SHMREG_ERR_INVALID_ARG,
                            "payload");
    assert_fails_containing(shmreg_recv_fd(f->sv[1], &fd, got, sizeof got, NULL),
                            SHMREG_ERR_INVALID_ARG, "payload_size");
    /* A descriptor number that is not open: the kernel refuses to send it. */
    int closed = dup(f->pipe[1]);
    close(closed);
    assert_fails_containing(shmreg_send_fd(f->sv[0], closed, "x", 1), SHMREG_ERR_SYSTEM,
                            strerror(EBADF));
}

/* With SO_PASSCRED on the receiving socket, the kernel adds
 * SCM_CREDENTIALS to every message; the descriptor beside it still arrives
 * (before the fix every receive failed with "control data truncated" and
 * closed the descriptor), as does the next message. */
static void test_passcred_receiver(void **state)
{
    struct fixture *f = *state;
    int on = 1;
    assert_int_equal(setsockopt(f->sv[1], SOL_SOCKET, SO_PASSCRED, &on, sizeof on), 0);
    for (int i = 0; i < 2; i++)
        assert_round_trip(f, "region input0", 14);
}

/* A well-framed message without a descriptor is refused, and
 * on a stream its payload is consumed, so the next valid message is read
 * (before the fix the payload stayed and the next receive read it as a
 * header: "bad header"). */
static void test_frame_without_descriptor_is_skipped(void **state)
{
    struct fixture *f = *state;
    struct {
        uint32_t magic, size;
        char payload[11];
    } frame = {0x46524853u, 11, "no fd here!"};
    size_t frame_len = 2 * sizeof(uint32_t) + sizeof frame.payload; /* no padding */
    assert_int_equal(send(f->sv[0], &frame, frame_len, 0), (ssize_t)frame_len);
    assert_recv_refused(f, SHMREG_ERR_NOT_FOUND, "the message carries no descriptor");
    assert_round_trip(f, "next", 5);
}

/* A well-framed message carrying three descriptors is refused
 * and all three closed; on a stream its payload is consumed too, so the
 * next valid message is read (before the fix it was read as a header,
 * refused as "bad header" and its descriptor closed). */
static void test_frame_with_three_descriptors_is_skipped(void **state)
{
    struct fixture *f = *state;
    struct {
        uint32_t magic, size;
        char payload[8];
    } frame = {0x46524853u, 8, "3 fds!!"};
    send_raw(f, (const char *)&frame, sizeof frame, 3);
    assert_recv_refused(f, SHMREG_ERR_OUT_OF_BOUNDS, "the descriptors received were closed");
    assert_round_trip(f, "next", 5);
}

#define ALL_TYPES(fn)                                                                        \
    cmocka_unit_test_setup_teardown(fn, setup_stream, teardown),                             \
        cmocka_unit_test_setup_teardown(fn, setup_seqpacket, teardown),                      \
        cmocka_unit_test_setup_teardown(fn, setup_dgram, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        ALL_TYPES(test_round_trip),
        ALL_TYPES(test_messages_keep_their_boundaries),
        ALL_TYPES(test_truncated_payload),
        ALL_TYPES(test_truncated_control_data),
        ALL_TYPES(test_missing_descriptor),
        ALL_TYPES(test_foreign_message_is_refused),
        ALL_TYPES(test_passcred_receiver),
        ALL_TYPES(test_frame_without_descriptor_is_skipped),
        ALL_TYPES(test_frame_with_three_descriptors_is_skipped),
        cmocka_unit_test_setup_teardown(test_empty_message_with_a_descriptor, setup_seqpacket, teardown),
        cmocka_unit_test_setup_teardown(test_empty_message_with_a_descriptor, setup_dgram, teardown),
        cmocka_unit_test_setup_teardown(test_closed_peer, setup_stream, teardown),
        cmocka_unit_test_setup_teardown(test_closed_peer, setup_seqpacket, teardown),
        cmocka_unit_test_setup_teardown(test_peer_closes_mid_message, setup_stream, teardown),
        cmocka_unit_test_setup_teardown(test_invalid_arguments, setup_stream, teardown),
    };
    return cmocka_run_group_tests_name("fd_passing", tests, NULL, NULL) ? 1 : 0;
}
