/* The memfd-region wire format, both halves. The client's:
 * shmreg_memfd_create makes a memfd whose size can never change, and
 * shmreg_send_region sends the request shmreg.h documents and turns the
 * server's answer into a code and message (the "server" is the other end of
 * a SOCK_SEQPACKET socketpair whose answer is queued before the request
 * goes, so one thread plays both). The server's: shmreg_recv_region and
 * shmreg_answer_region, round-tripped with the client's through a real
 * registry, and fed hostile frames (bad sizes, names, flags, magic, extra
 * and missing descriptors, truncated frames) on SOCK_SEQPACKET and
 * SOCK_STREAM: each is refused with no descriptor left open, and the next
 * request is still read whole. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shmreg_assert.h"
#include "testutil.h"

struct fixture {
    struct tu_baseline base;
    int sv[2]; /* sv[0]: the client's end, sv[1]: the server's */
    int memfd;
};

static int setup_type(void **state, int type)
{
    struct fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->base = tu_take_baseline();
    assert_int_equal(socketpair(AF_UNIX, type, 0, f->sv), 0);
    assert_ok(shmreg_memfd_create("test_region_socket", 8192, &f->memfd));
    *state = f;
    return 0;
}
static int setup(void **state) { return setup_type(state, SOCK_SEQPACKET); }
static int setup_stream(void **state) { return setup_type(state, SOCK_STREAM); }

static int teardown(void **state)
{
    struct fixture *f = *state;
    for (int i = 0; i < 2; i++)
        if (f->sv[i] >= 0)
            close(f->sv[i]);
    close(f->memfd);
    tu_check_baseline(f->base);
    free(f);
    return 0;
}

static void test_memfd_cannot_change_size(void **state)
{
    struct fixture *f = *state;
    struct stat st;
    assert_int_equal(fstat(f->memfd, &st), 0);
    assert_int_equal(st.st_size, 8192);
    int seals = fcntl(f->memfd, F_GET_SEALS);
    assert_true(seals & F_SEAL_SHRINK);
    assert_true(seals & F_SEAL_GROW);
    assert_true(fcntl(f->memfd, F_GETFD) & FD_CLOEXEC);
    errno = 0;
    assert_int_equal(ftruncate(f->memfd, 0), -1);
    assert_int_equal(errno, EPERM);
    assert_int_equal(ftruncate(f->memfd, 16384), -1);
    assert_int_equal(errno, EPERM);
    /* Still writable memory, zero-filled. */
    unsigned char *p = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, f->memfd, 0);
    assert_true(p != MAP_FAILED);
    assert_int_equal(p[8191], 0);
    p[8191] = 7;
    assert_int_equal(munmap(p, 8192), 0);
}

static void test_memfd_create_arguments(void **state)
{
    int fd = -1;
    assert_fails_prefix(shmreg_memfd_create("x", 0, &fd), SHMREG_ERR_INVALID_ARG, "shmreg_memfd_create: ");
    assert_fails_prefix(shmreg_memfd_create("x", 4096, NULL), SHMREG_ERR_INVALID_ARG, "shmreg_memfd_create: ");
    assert_int_equal(fd, -1);
}

static void queue_answer(struct fixture *f, const char *answer)
{
    assert_int_equal(send(f->sv[1], answer, strlen(answer), 0), (ssize_t)strlen(answer));
}

/* The request as the server receives it: fields in shmreg.h's order. */
static void assert_request(struct fixture *f, const char *name, uint64_t offset, uint64_t size,
                           uint32_t flags)
{
    unsigned char payload[SHMREG_REGION_REQUEST_HEADER + 255];
    size_t len = 0;
    int fd = -1;
    assert_ok(shmreg_recv_fd(f->sv[1], &fd, payload, sizeof payload, &len));
    assert_int_equal(len, SHMREG_REGION_REQUEST_HEADER + strlen(name));
    uint32_t magic, got_flags;
    uint64_t got_offset, got_size;
    memcpy(&magic, payload, 4);
    memcpy(&got_flags, payload + 4, 4);
    memcpy(&got_offset, payload + 8, 8);
    memcpy(&got_size, payload + 16, 8);
    assert_int_equal(magic, SHMREG_REGION_REQUEST_MAGIC);
    assert_memory_equal(payload, "SRG1", 4); /* the magic as documented, on this little-endian host */
    assert_int_equal(got_flags, flags);
    assert_int_equal(got_offset, offset);
    assert_int_equal(got_size, size);
    assert_memory_equal(payload + SHMREG_REGION_REQUEST_HEADER, name, strlen(name));
    /* The descriptor that arrived is the client's memfd. */
    struct stat mine, theirs;
    assert_int_equal(fstat(f->memfd, &mine), 0);
    assert_int_equal(fstat(fd, &theirs), 0);
    assert_int_equal(mine.st_ino, theirs.st_ino);
    close(fd);
}

static void test_accepted(void **state)
{
    struct fixture *f = *state;
    queue_answer(f, "SHMREG_OK registered 'input0'");
    assert_ok(shmreg_send_region(f->sv[0], "input0", f->memfd, 4096, 1024, SHMREG_READONLY));
    assert_request(f, "input0", 4096, 1024, SHMREG_READONLY);
}

static void test_refusal_carries_the_servers_code_and_message(void **state)
{
    struct fixture *f = *state;
    queue_answer(f, "SHMREG_ERR_ALREADY_EXISTS shared memory region 'input0' already in manager");
    assert_fails(shmreg_send_region(f->sv[0], "input0", f->memfd, 0, 8192, 0), SHMREG_ERR_ALREADY_EXISTS,
                 "shared memory region 'input0' already in manager");
    assert_request(f, "input0", 0, 8192, 0);
}

static void test_answer_not_in_the_format(void **state)
{
    struct fixture *f = *state;
    queue_answer(f, "HTTP/1.1 400 Bad Request");
    assert_fails_prefix(shmreg_send_region(f->sv[0], "in", f->memfd, 0, 1, 0), SHMREG_ERR_SYSTEM,
                        "shmreg_send_region: the server's answer about region 'in' is not in the format");
    assert_request(f, "in", 0, 1, 0);
}

static void test_server_closes_without_answer(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(shutdown(f->sv[1], SHUT_WR), 0);
    assert_fails(shmreg_send_region(f->sv[0], "in", f->memfd, 0, 1, 0), SHMREG_ERR_SYSTEM,
                 "shmreg_send_region: the server closed the connection without answering about region 'in'");
    assert_request(f, "in", 0, 1, 0);
}

static void test_send_region_arguments(void **state)
{
    struct fixture *f = *state;
    char long_name[257];
    memset(long_name, 'n', 256);
    long_name[256] = 0;
    const char *bad[] = {NULL, "", long_name};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_fails_prefix(shmreg_send_region(f->sv[0], bad[i], f->memfd, 0, 1, 0), SHMREG_ERR_INVALID_ARG,
                            "shmreg_send_region: needs a socket");
    assert_fails_prefix(shmreg_send_region(-1, "in", f->memfd, 0, 1, 0), SHMREG_ERR_INVALID_ARG,
                        "shmreg_send_region: needs a socket");
    assert_fails_prefix(shmreg_send_region(f->sv[0], "in", -1, 0, 1, 0), SHMREG_ERR_INVALID_ARG,
                        "shmreg_send_region: needs a socket");
    /* Nothing was sent: the server's end has nothing to read. */
    char c;
    assert_int_equal(recv(f->sv[1], &c, 1, MSG_DONTWAIT), -1);
    assert_int_equal(errno, EAGAIN);
}

/* ----------------------------------------------------------- server half */

/* The client's call, on a thread of its own, since it waits for the answer. */
struct client_call {
    int sock, fd;
    const char *name;
    size_t offset, byte_size;
    unsigned flags;
    shmreg_err result;
    char message[SHMREG_REGION_ANSWER_MAX + 1];
    pthread_t thread;
};

static void *client_main(void *arg)
{
    struct client_call *c = arg;
    c->result = shmreg_send_region(c->sock, c->name, c->fd, c->offset, c->byte_size, c->flags);
    snprintf(c->message, sizeof c->message, "%s", shmreg_last_error());
    return NULL;
}

static void client_start(struct client_call *c)
{
    assert_int_equal(pthread_create(&c->thread, NULL, client_main, c), 0);
}

static void client_join(struct client_call *c)
{
    assert_int_equal(pthread_join(c->thread, NULL), 0);
}

/* What a server does with a request: register the window under a tag,
 * close the descriptor, answer. */
static shmreg_err serve_one(shmreg_registry *reg, int sock)
{
    shmreg_region_request rq;
    shmreg_err e = shmreg_recv_region(sock, &rq);
    if (e == SHMREG_OK) {
        assert_true(rq.fd >= 0);
        shmreg_registration r;
        shmreg_registration_init(&r);
        r.source = SHMREG_SOURCE_FD;
        r.name = rq.name;
        r.fd = rq.fd;
        r.offset = rq.offset;
        r.byte_size = rq.byte_size;
        r.flags = rq.flags;
        r.tag = "conn-1";
        e = shmreg_register(reg, &r);
        close(rq.fd);
    } else {
        assert_int_equal(rq.fd, -1);
    }
    char why[SHMREG_REGION_ANSWER_MAX];
    snprintf(why, sizeof why, "%s", e == SHMREG_OK ? "registered" : shmreg_last_error());
    assert_ok(shmreg_answer_region(sock, e, why));
    return e;
}

/* A whole round trip through a registry: the client's bytes are what the
 * server's view reads, flags arrive, and a refusal carries the registry's
 * own code and message back to the client. */
static void test_round_trip_through_a_registry(void **state)
{
    struct fixture *f = *state;
    unsigned char *p = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, f->memfd, 0);
    assert_true(p != MAP_FAILED);
    for (int i = 0; i < 8192; i++)
        p[i] = (unsigned char)(i * 7);
    /* Unpinned: the wire format is under test, and on a GPU machine an AUTO
     * pin would start CUDA, whose descriptors the teardown's leak check
     * would count against this test. */
    shmreg_config cfg;
    shmreg_config_init(&cfg);
    cfg.pin_policy = SHMREG_PIN_NEVER;
    shmreg_registry *reg = NULL;
    assert_ok(shmreg_registry_create(&cfg, &reg));

    struct client_call c = {.sock = f->sv[0], .fd = f->memfd, .name = "input0", .offset = 4096,
                            .byte_size = 1024, .flags = SHMREG_READONLY};
    client_start(&c);
    assert_ok(serve_one(reg, f->sv[1]));
    client_join(&c);
    assert_ok(c.result);
    shmreg_region *ref = NULL;
    shmreg_view view;
    assert_ok(shmreg_acquire(reg, "input0", 0, 1024, &ref, &view));
    assert_int_equal(view.writable, 0);
    assert_memory_equal(view.addr, p + 4096, 1024);
    shmreg_release(ref);

    /* The same name again: the registry's refusal, word for word. */
    client_start(&c);
    assert_int_equal(serve_one(reg, f->sv[1]), SHMREG_ERR_ALREADY_EXISTS);
    client_join(&c);
    assert_int_equal(c.result, SHMREG_ERR_ALREADY_EXISTS);
    assert_string_equal(c.message, "shared memory region 'input0' already in manager");

    /* A window past the memfd's end: OUT_OF_BOUNDS from the registry. */
    struct client_call big = {.sock = f->sv[0], .fd = f->memfd, .name = "big", .byte_size = 8193};
    client_start(&big);
    assert_int_equal(serve_one(reg, f->sv[1]), SHMREG_ERR_OUT_OF_BOUNDS);
    client_join(&big);
    assert_int_equal(big.result, SHMREG_ERR_OUT_OF_BOUNDS);
    assert_non_null(strstr(big.message, "'big'"));
    shmreg_registry_destroy(reg);
    assert_int_equal(munmap(p, 8192), 0);
}

/* Send one shmreg_send_fd frame of `payload` by hand, carrying n copies of
 * the memfd (n may be 0), so that a test can break any part of it. */
static void send_frame(struct fixture *f, const void *payload, size_t len, int n)
{
    unsigned char frame[8 + 512];
    uint32_t magic = 0x46524853u, size = (uint32_t)len;
    assert_true(len <= 512);
    memcpy(frame, &magic, 4);
    memcpy(frame + 4, &size, 4);
    memcpy(frame + 8, payload, len);
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(4 * sizeof(int))];
    } control;
    memset(&control, 0, sizeof control);
    struct iovec iov = {.iov_base = frame, .iov_len = 8 + len};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    if (n > 0) {
        int fds[4] = {f->memfd, f->memfd, f->memfd, f->memfd};
        msg.msg_control = control.buf;
        msg.msg_controllen = CMSG_SPACE(n * sizeof(int));
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(n * sizeof(int));
        memcpy(CMSG_DATA(c), fds, n * sizeof(int));
    }
    assert_int_equal(sendmsg(f->sv[0], &msg, 0), (ssize_t)(8 + len));
}

/* A request payload: the header's fields, then name_len bytes of name. */
static size_t request(unsigned char *out, uint32_t magic, uint32_t flags, uint64_t offset, uint64_t size,
                      const char *name, size_t name_len)
{
    memcpy(out, &magic, 4);
    memcpy(out + 4, &flags, 4);
    memcpy(out + 8, &offset, 8);
    memcpy(out + 16, &size, 8);
    memcpy(out + SHMREG_REGION_REQUEST_HEADER, name, name_len);
    return SHMREG_REGION_REQUEST_HEADER + name_len;
}

/* The next request is refused with code and a message containing part,
 * handing out no descriptor (the teardown counts the open ones). */
static void assert_refused(struct fixture *f, shmreg_err code, const char *part)
{
    shmreg_region_request rq;
    memset(&rq, 0x5a, sizeof rq);
    assert_fails_containing(shmreg_recv_region(f->sv[1], &rq), code, part);
    assert_int_equal(rq.fd, -1);
}

/* A valid request sent after a refused one arrives whole: the stream (or
 * the records) are still in step. */
static void assert_next_request_arrives(struct fixture *f)
{
    unsigned char p[64];
    size_t len = request(p, SHMREG_REGION_REQUEST_MAGIC, SHMREG_NO_PIN, 3, 5, "next", 4);
    send_frame(f, p, len, 1);
    shmreg_region_request rq;
    assert_ok(shmreg_recv_region(f->sv[1], &rq));
    assert_string_equal(rq.name, "next");
    assert_int_equal(rq.flags, SHMREG_NO_PIN);
    assert_int_equal(rq.offset, 3);
    assert_int_equal(rq.byte_size, 5);
    struct stat mine, got;
    assert_int_equal(fstat(f->memfd, &mine), 0);
    assert_int_equal(fstat(rq.fd, &got), 0);
    assert_int_equal(mine.st_ino, got.st_ino);
    assert_true(fcntl(rq.fd, F_GETFD) & FD_CLOEXEC);
    close(rq.fd);
}

static void test_recv_accepts_a_valid_request(void **state)
{
    struct fixture *f = *state;
    /* The longest name, both flags, an offset and size past 32 bits. */
    char name[256];
    memset(name, 'n', 255);
    name[255] = 0;
    unsigned char p[SHMREG_REGION_REQUEST_HEADER + 255];
    size_t len = request(p, SHMREG_REGION_REQUEST_MAGIC, SHMREG_READONLY | SHMREG_NO_PIN, (uint64_t)1 << 40,
                         (uint64_t)3 << 33, name, 255);
    send_frame(f, p, len, 1);
    shmreg_region_request rq;
    assert_ok(shmreg_recv_region(f->sv[1], &rq));
    assert_string_equal(rq.name, name);
    assert_int_equal(rq.flags, SHMREG_READONLY | SHMREG_NO_PIN);
    assert_int_equal(rq.offset, (uint64_t)1 << 40);
    assert_int_equal(rq.byte_size, (uint64_t)3 << 33);
    close(rq.fd);
    assert_next_request_arrives(f);
}

/* Payloads that are not a request, each refused with its own reason. */
static void test_recv_refuses_bad_requests(void **state)
{
    struct fixture *f = *state;
    char long_name[256];
    memset(long_name, 'n', sizeof long_name);
    const struct {
        uint32_t magic, flags;
        const char *name;
        size_t name_len;
        size_t cut; /* nonzero: send only this many payload bytes */
        shmreg_err code;
        const char *part;
    } cases[] = {
        /* bad sizes: a header cut short, no name, a name of 256 bytes */
        {SHMREG_REGION_REQUEST_MAGIC, 0, "in", 2, 10, SHMREG_ERR_INVALID_ARG,
         "a register request is a 24-byte header and a region name; got 10 bytes"},
        {SHMREG_REGION_REQUEST_MAGIC, 0, "", 0, 0, SHMREG_ERR_INVALID_ARG, "; got 24 bytes"},
        {SHMREG_REGION_REQUEST_MAGIC, 0, long_name, 256, 0, SHMREG_ERR_OUT_OF_BOUNDS,
         "payload truncated: 280 bytes sent, room for 279"},
        /* another magic */
        {0x31475254u, 0, "in", 2, 0, SHMREG_ERR_INVALID_ARG, "not a register request"},
        /* flags: SHMREG_PIN is the server's to decide; unknown bits */
        {SHMREG_REGION_REQUEST_MAGIC, SHMREG_PIN, "in", 2, 0, SHMREG_ERR_INVALID_ARG,
         "flags 0x2: only SHMREG_READONLY (0x1) and SHMREG_NO_PIN (0x4) are accepted"},
        {SHMREG_REGION_REQUEST_MAGIC, 0x100, "in", 2, 0, SHMREG_ERR_INVALID_ARG, "flags 0x100"},
        /* bad names: a NUL inside, a control character */
        {SHMREG_REGION_REQUEST_MAGIC, 0, "in\0x", 4, 0, SHMREG_ERR_INVALID_ARG,
         "a region name is 1..255 bytes without NUL"},
        {SHMREG_REGION_REQUEST_MAGIC, 0, "in\nx", 4, 0, SHMREG_ERR_INVALID_ARG, "control character"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        unsigned char p[SHMREG_REGION_REQUEST_HEADER + 256];
        size_t len = request(p, cases[i].magic, cases[i].flags, 0, 1, cases[i].name, cases[i].name_len);
        send_frame(f, p, cases[i].cut ? cases[i].cut : len, 1);
        assert_refused(f, cases[i].code, cases[i].part);
        assert_next_request_arrives(f);
    }
}

/* Extra descriptors (2, 3 and 4 in one frame) and none: refused, every
 * descriptor that came closed, and the next request still read whole.
 * On SOCK_STREAM a frame refused for carrying three descriptors
 * left its payload unread, and the next request was refused as "bad
 * header" with its descriptor closed. */
static void test_recv_refuses_extra_and_missing_descriptors(void **state)
{
    struct fixture *f = *state;
    unsigned char p[64];
    size_t len = request(p, SHMREG_REGION_REQUEST_MAGIC, 0, 0, 1, "three", 5);
    for (int n = 2; n <= 4; n++) {
        send_frame(f, p, len, n);
        assert_refused(f, SHMREG_ERR_OUT_OF_BOUNDS, "the descriptors received were closed");
        assert_next_request_arrives(f);
    }
    send_frame(f, p, len, 0);
    assert_refused(f, SHMREG_ERR_NOT_FOUND, "the message carries no descriptor");
    assert_next_request_arrives(f);
}

/* A stream that ends in the middle of a request: SYSTEM, descriptor closed. */
static void test_recv_truncated_frame(void **state)
{
    struct fixture *f = *state;
    unsigned char frame[8 + 64];
    uint32_t magic = 0x46524853u, size = 30;
    memcpy(frame, &magic, 4);
    memcpy(frame + 4, &size, 4);
    request(frame + 8, SHMREG_REGION_REQUEST_MAGIC, 0, 0, 1, "truncated", 9);
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int))];
    } control;
    memset(&control, 0, sizeof control);
    struct iovec iov = {.iov_base = frame, .iov_len = 8 + 20}; /* 20 of 30 payload bytes */
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                         .msg_controllen = sizeof control.buf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &f->memfd, sizeof(int));
    assert_int_equal(sendmsg(f->sv[0], &msg, 0), 28);
    close(f->sv[0]);
    f->sv[0] = -1;
    assert_refused(f, SHMREG_ERR_SYSTEM, "connection closed in the middle of a message");
    assert_refused(f, SHMREG_ERR_SYSTEM, "connection closed");
}

static void test_recv_arguments(void **state)
{
    struct fixture *f = *state;
    shmreg_region_request rq;
    assert_fails_prefix(shmreg_recv_region(-1, &rq), SHMREG_ERR_INVALID_ARG, "shmreg_recv_region: needs a socket");
    assert_int_equal(rq.fd, -1);
    assert_fails_prefix(shmreg_recv_region(f->sv[1], NULL), SHMREG_ERR_INVALID_ARG,
                        "shmreg_recv_region: needs a socket");
}

/* The answer as the client reads it: one record, the code's name, a space,
 * the message on one line, cut to SHMREG_REGION_ANSWER_MAX. */
static void test_answer_format(void **state)
{
    struct fixture *f = *state;
    char got[SHMREG_REGION_ANSWER_MAX + 64];
    assert_ok(shmreg_answer_region(f->sv[1], SHMREG_ERR_NO_MEMORY, "line one\nline\ttwo\x7f"));
    ssize_t n = recv(f->sv[0], got, sizeof got, 0);
    assert_int_equal(n, strlen("SHMREG_ERR_NO_MEMORY line one line two "));
    assert_memory_equal(got, "SHMREG_ERR_NO_MEMORY line one line two ", (size_t)n);
    assert_ok(shmreg_answer_region(f->sv[1], SHMREG_OK, NULL));
    assert_int_equal(recv(f->sv[0], got, sizeof got, 0), 10);
    assert_memory_equal(got, "SHMREG_OK ", 10);
    char long_msg[2 * SHMREG_REGION_ANSWER_MAX];
    memset(long_msg, 'm', sizeof long_msg - 1);
    long_msg[sizeof long_msg - 1] = 0;
    assert_ok(shmreg_answer_region(f->sv[1], SHMREG_ERR_BUSY, long_msg));
    assert_int_equal(recv(f->sv[0], got, sizeof got, 0), SHMREG_REGION_ANSWER_MAX);
    /* The client half reads it back as the same code. */
    assert_ok(shmreg_answer_region(f->sv[1], SHMREG_ERR_WRONG_KIND, "kind"));
    assert_fails(shmreg_send_region(f->sv[0], "in", f->memfd, 0, 1, 0), SHMREG_ERR_WRONG_KIND, "kind");
    assert_request(f, "in", 0, 1, 0);
}

static void test_answer_arguments(void **state)
{
    struct fixture *f = *state;
    assert_fails_prefix(shmreg_answer_region(-1, SHMREG_OK, "x"), SHMREG_ERR_INVALID_ARG,
                        "shmreg_answer_region: needs a socket");
    assert_fails_prefix(shmreg_answer_region(f->sv[1], (shmreg_err)999, "x"), SHMREG_ERR_INVALID_ARG,
                        "shmreg_answer_region: needs a socket");
    char c;
    assert_int_equal(recv(f->sv[0], &c, 1, MSG_DONTWAIT), -1);
    assert_int_equal(errno, EAGAIN);
}

/* A client that reads no answers fills its socket: the answer fails at
 * once instead of blocking the server. */
static void test_answer_never_blocks(void **state)
{
    struct fixture *f = *state;
    shmreg_err e = SHMREG_OK;
    for (int i = 0; i < 100000 && e == SHMREG_OK; i++)
        e = shmreg_answer_region(f->sv[1], SHMREG_OK, "filling the client's socket");
    assert_int_equal(e, SHMREG_ERR_SYSTEM);
    assert_non_null(strstr(shmreg_last_error(), "shmreg_answer_region: send of SHMREG_OK"));
}

#define BOTH_TYPES(fn)                                                                       \
    cmocka_unit_test_setup_teardown(fn, setup, teardown),                                    \
        cmocka_unit_test_setup_teardown(fn, setup_stream, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_memfd_cannot_change_size, setup, teardown),
        cmocka_unit_test_setup_teardown(test_memfd_create_arguments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_accepted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refusal_carries_the_servers_code_and_message, setup, teardown),
        cmocka_unit_test_setup_teardown(test_answer_not_in_the_format, setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_closes_without_answer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_send_region_arguments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_round_trip_through_a_registry, setup, teardown),
        BOTH_TYPES(test_recv_accepts_a_valid_request),
        BOTH_TYPES(test_recv_refuses_bad_requests),
        BOTH_TYPES(test_recv_refuses_extra_and_missing_descriptors),
        cmocka_unit_test_setup_teardown(test_recv_truncated_frame, setup_stream, teardown),
        cmocka_unit_test_setup_teardown(test_recv_arguments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_answer_format, setup, teardown),
        cmocka_unit_test_setup_teardown(test_answer_arguments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_answer_never_blocks, setup, teardown),
    };
    return cmocka_run_group_tests_name("region_socket", tests, NULL, NULL) ? 1 : 0;
}
