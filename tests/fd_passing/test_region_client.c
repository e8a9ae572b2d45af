/* The client side of sealed memfd regions: shmreg_memfd_create makes a
 * memfd whose size can never change, and shmreg_send_region sends the request
 * shmreg.h documents and turns the server's answer into a code and message.
 * The "server" here is the other end of a SOCK_SEQPACKET socketpair: its
 * answer is queued before the request goes, so one thread plays both. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
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

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->base = tu_take_baseline();
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, f->sv), 0);
    assert_ok(shmreg_memfd_create("test_region_client", 8192, &f->memfd));
    *state = f;
    return 0;
}

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
    };
    return cmocka_run_group_tests_name("region_client", tests, NULL, NULL) ? 1 : 0;
}
