/* shmreg_send_fds / shmreg_recv_fds, both halves of the several-descriptor
 * frame (how the chunks of a CUDA VMM range travel), over socketpairs of
 * each AF_UNIX type: what arrives arrives in order, and every refused
 * message (too many descriptors for the caller, a count that does not
 * match, another frame, none at all, a truncated payload) leaves no
 * descriptor behind and, on a stream, the next message readable. Needs no
 * GPU: runs in CI. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "shmreg_assert.h"
#include "testutil.h"

#define PIPES 5

struct fixture {
    struct tu_baseline base;
    int sv[2];
    int pipe[PIPES][2]; /* descriptors to send: pipes, so each arrival is checkable */
    int writers[PIPES];
};

static int setup_type(void **state, int type)
{
    struct fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->base = tu_take_baseline();
    assert_int_equal(socketpair(AF_UNIX, type, 0, f->sv), 0);
    for (int i = 0; i < PIPES; i++) {
        assert_int_equal(pipe(f->pipe[i]), 0);
        f->writers[i] = f->pipe[i][1];
    }
    *state = f;
    return 0;
}
static int setup_stream(void **state) { return setup_type(state, SOCK_STREAM); }
static int setup_seqpacket(void **state) { return setup_type(state, SOCK_SEQPACKET); }
static int setup_dgram(void **state) { return setup_type(state, SOCK_DGRAM); }

static int teardown(void **state)
{
    struct fixture *f = *state;
    for (int i = 0; i < 2; i++)
        close(f->sv[i]);
    for (int i = 0; i < PIPES; i++) {
        close(f->pipe[i][0]);
        close(f->pipe[i][1]);
    }
    tu_check_baseline(f->base);
    free(f);
    return 0;
}

/* fds[i] is pipe i's write end: a byte written to it comes out of pipe i. */
static void assert_pipes_in_order(struct fixture *f, const int *fds, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char b = (unsigned char)(0x40 + i), got = 0;
        assert_int_equal(write(fds[i], &b, 1), 1);
        assert_int_equal(read(f->pipe[i][0], &got, 1), 1);
        assert_int_equal(got, b);
        assert_true(fcntl(fds[i], F_GETFD) & FD_CLOEXEC);
        close(fds[i]);
    }
}

static void test_round_trip(void **state)
{
    struct fixture *f = *state;
    const char msg[] = "three chunks of a range";
    for (size_t n = 1; n <= PIPES; n += 2) {
        assert_ok(shmreg_send_fds(f->sv[0], f->writers, n, msg, sizeof msg));
        int fds[PIPES];
        size_t count = 0, got = 0;
        char buf[64];
        assert_ok(shmreg_recv_fds(f->sv[1], fds, PIPES, &count, buf, sizeof buf, &got));
        assert_int_equal(count, n);
        assert_int_equal(got, sizeof msg);
        assert_memory_equal(buf, msg, sizeof msg);
        assert_pipes_in_order(f, fds, n);
    }
}

/* More descriptors than the caller has room for: refused, all closed, and
 * the next message still arrives whole. */
static void test_more_than_room_is_refused_cleanly(void **state)
{
    struct fixture *f = *state;
    assert_ok(shmreg_send_fds(f->sv[0], f->writers, 4, "x", 1));
    assert_ok(shmreg_send_fds(f->sv[0], f->writers, 2, "next", 4));
    int fds[3] = {-1, -1, -1};
    size_t count = 99, got = 0;
    char buf[16];
    assert_fails_containing(shmreg_recv_fds(f->sv[1], fds, 3, &count, buf, sizeof buf, &got), SHMREG_ERR_OUT_OF_BOUNDS,
                 "more descriptors than the caller has room for");
    assert_int_equal(count, 0);
    assert_ok(shmreg_recv_fds(f->sv[1], fds, 3, &count, buf, sizeof buf, &got));
    assert_int_equal(count, 2);
    assert_memory_equal(buf, "next", 4);
    assert_pipes_in_order(f, fds, 2);
}

static void test_payload_past_room_is_refused_cleanly(void **state)
{
    struct fixture *f = *state;
    char big[300];
    memset(big, 'p', sizeof big);
    assert_ok(shmreg_send_fds(f->sv[0], f->writers, 3, big, sizeof big));
    int fds[PIPES];
    size_t count = 0, got = 0;
    char buf[16];
    shmreg_err err = shmreg_recv_fds(f->sv[1], fds, PIPES, &count, buf, sizeof buf, &got);
    assert_int_equal(err, SHMREG_ERR_OUT_OF_BOUNDS);
    assert_int_equal(count, 0);
}

/* Frames that are not shmreg_send_fds's: a one-descriptor frame of
 * shmreg_send_fd, and a plain message with no descriptor. */
static void test_other_frames_are_refused(void **state)
{
    struct fixture *f = *state;
    int fds[PIPES];
    size_t count = 0, got = 0;
    char buf[64];
    assert_ok(shmreg_send_fd(f->sv[0], f->writers[0], "one", 3));
    assert_fails_containing(shmreg_recv_fds(f->sv[1], fds, PIPES, &count, buf, sizeof buf, &got), SHMREG_ERR_SYSTEM,
                 "not a shmreg_send_fds message");
    assert_int_equal(count, 0);
}

static void test_no_descriptor_is_not_found(void **state)
{
    struct fixture *f = *state;
    unsigned char raw[20] = {0x53, 0x52, 0x46, 0x53, 4, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 'a', 'b', 'c', 'd'};
    assert_int_equal(send(f->sv[0], raw, sizeof raw, 0), (ssize_t)sizeof raw);
    assert_ok(shmreg_send_fds(f->sv[0], f->writers, 1, "ok", 2));
    int fds[PIPES];
    size_t count = 0, got = 0;
    char buf[64];
    assert_fails_containing(shmreg_recv_fds(f->sv[1], fds, PIPES, &count, buf, sizeof buf, &got), SHMREG_ERR_NOT_FOUND,
                 "carries no descriptor");
    /* The refused frame was read to its end: the next one is whole. */
    assert_ok(shmreg_recv_fds(f->sv[1], fds, PIPES, &count, buf, sizeof buf, &got));
    assert_int_equal(count, 1);
    assert_pipes_in_order(f, fds, 1);
}

/* A header promising more descriptors than came (a sender the kernel cut
 * short, or a forger): refused, the ones that came closed. */
static void test_count_mismatch_is_refused(void **state)
{
    struct fixture *f = *state;
    unsigned char raw[17] = {0x53, 0x52, 0x46, 0x53, 1, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 'z'};
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(2 * sizeof(int))];
    } control;
    memset(&control, 0, sizeof control);
    struct iovec iov = {.iov_base = raw, .iov_len = sizeof raw};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                         .msg_controllen = sizeof control.buf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(2 * sizeof(int));
    memcpy(CMSG_DATA(c), f->writers, 2 * sizeof(int));
    assert_int_equal(sendmsg(f->sv[0], &msg, 0), (ssize_t)sizeof raw);
    int fds[PIPES];
    size_t count = 0, got = 0;
    char buf[64];
    assert_fails_containing(shmreg_recv_fds(f->sv[1], fds, PIPES, &count, buf, sizeof buf, &got), SHMREG_ERR_SYSTEM,
                 "the descriptor count does not match");
    assert_int_equal(count, 0);
}

static void test_arguments(void **state)
{
    struct fixture *f = *state;
    int bad[2] = {f->writers[0], -1};
    int fds[2];
    size_t count = 0, got = 0;
    char buf[8];
    assert_fails_code(shmreg_send_fds(-1, f->writers, 1, "x", 1), SHMREG_ERR_INVALID_ARG);
    assert_fails_code(shmreg_send_fds(f->sv[0], NULL, 1, "x", 1), SHMREG_ERR_INVALID_ARG);
    assert_fails_code(shmreg_send_fds(f->sv[0], f->writers, 0, "x", 1), SHMREG_ERR_INVALID_ARG);
    assert_fails_code(shmreg_send_fds(f->sv[0], f->writers, SHMREG_FDS_MAX + 1, "x", 1), SHMREG_ERR_INVALID_ARG);
    assert_fails_containing(shmreg_send_fds(f->sv[0], bad, 2, "x", 1), SHMREG_ERR_INVALID_ARG, "descriptor 1 is -1");
    assert_fails_code(shmreg_send_fds(f->sv[0], f->writers, 1, NULL, 1), SHMREG_ERR_INVALID_ARG);
    assert_fails_code(shmreg_send_fds(f->sv[0], f->writers, 1, "x", 0), SHMREG_ERR_INVALID_ARG);
    assert_fails_code(shmreg_recv_fds(f->sv[1], NULL, 2, &count, buf, sizeof buf, &got), SHMREG_ERR_INVALID_ARG);
    assert_fails_code(shmreg_recv_fds(f->sv[1], fds, 0, &count, buf, sizeof buf, &got), SHMREG_ERR_INVALID_ARG);
    assert_fails_code(shmreg_recv_fds(f->sv[1], fds, 2, NULL, buf, sizeof buf, &got), SHMREG_ERR_INVALID_ARG);
    assert_fails_code(shmreg_recv_fds(-1, fds, 2, &count, buf, sizeof buf, &got), SHMREG_ERR_INVALID_ARG);
}

static void test_closed_peer(void **state)
{
    struct fixture *f = *state;
    close(f->sv[0]);
    f->sv[0] = socket(AF_UNIX, SOCK_STREAM, 0); /* something for teardown to close */
    int fds[2];
    size_t count = 0, got = 0;
    char buf[8];
    assert_fails_containing(shmreg_recv_fds(f->sv[1], fds, 2, &count, buf, sizeof buf, &got), SHMREG_ERR_SYSTEM,
                 "connection closed");
}

#define EACH_TYPE(fn)                                                                              \
    cmocka_unit_test_setup_teardown(fn, setup_stream, teardown),                                 \
        cmocka_unit_test_setup_teardown(fn, setup_seqpacket, teardown),                          \
        cmocka_unit_test_setup_teardown(fn, setup_dgram, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        EACH_TYPE(test_round_trip),
        EACH_TYPE(test_more_than_room_is_refused_cleanly),
        EACH_TYPE(test_payload_past_room_is_refused_cleanly),
        EACH_TYPE(test_other_frames_are_refused),
        EACH_TYPE(test_no_descriptor_is_not_found),
        EACH_TYPE(test_count_mismatch_is_refused),
        cmocka_unit_test_setup_teardown(test_arguments, setup_seqpacket, teardown),
        cmocka_unit_test_setup_teardown(test_closed_peer, setup_stream, teardown),
        cmocka_unit_test_setup_teardown(test_closed_peer, setup_seqpacket, teardown),
    };
    return cmocka_run_group_tests_name("fds_passing", tests, NULL, NULL);
}
