/* SHMREG_SOURCE_FD: a window of a descriptor the caller
 * holds, typically a sealed memfd a client sent over a Unix socket. What a
 * hostile client can no longer do: shrink the memory under the server (the
 * seal), hand over a pipe or socket, hand over another owner's file; and
 * what the registry promises the caller: its descriptor is never consumed. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fixture.h"

#define OBJ 16384

/* A memfd of OBJ bytes filled with tu_pattern(seed, i), sealed with `seals`. */
static int make_memfd(uint8_t seed, int seals)
{
    return tu_memfd_create(OBJ, seed, seals);
}

static void test_sealed_memfd_round_trip(void **state)
{
    struct ut *t = *state;
    int fd = make_memfd(5, F_SEAL_SHRINK);
    assert_ok(shmreg_register_system_fd(t->reg, "in", fd, 4097, 5000, 0));
    /* The caller's descriptor is not consumed: close it now; the registry's
     * mapping keeps the memory. */
    assert_int_equal(fcntl(fd, F_GETFD) >= 0, 1);
    close(fd);

    shmreg_region *ref = NULL;
    shmreg_view view;
    assert_ok(shmreg_acquire(t->reg, "in", 3, 100, &ref, &view));
    assert_int_equal(view.kind, SHMREG_KIND_SYSTEM);
    assert_int_equal(view.writable, 1);
    ut_assert_pattern(view.addr, 100, 5, 4100);
    ((unsigned char *)view.addr)[0] = 0xAB; /* writable */
    shmreg_release(ref);

    shmreg_region_status *st = ut_status_of(t->reg, "in");
    assert_int_equal(st->kind, SHMREG_KIND_SYSTEM);
    assert_null(st->key); /* a descriptor has no name outside this process */
    assert_int_equal(st->offset, 4097);
    assert_int_equal(st->byte_size, 5000);
    shmreg_status_free(st, 1);
    assert_ok(shmreg_unregister(t->reg, "in", SHMREG_KIND_SYSTEM));
}

/* The registry never closes the caller's descriptor, on success or failure. */
static void test_descriptor_is_never_consumed(void **state)
{
    struct ut *t = *state;
    int fd = make_memfd(6, F_SEAL_SHRINK);
    assert_ok(shmreg_register_system_fd(t->reg, "a", fd, 0, OBJ, 0));
    assert_fails_code(shmreg_register_system_fd(t->reg, "b", fd, 1, OBJ, 0), SHMREG_ERR_OUT_OF_BOUNDS);
    assert_ok(shmreg_unregister(t->reg, "a", SHMREG_KIND_ANY));
    assert_true(fcntl(fd, F_GETFD) >= 0);
    /* Still usable: registered again. */
    assert_ok(shmreg_register_system_fd(t->reg, "a", fd, 0, OBJ, SHMREG_READONLY));
    assert_ok(shmreg_unregister(t->reg, "a", SHMREG_KIND_ANY));
    close(fd);
}

/* The seal makes truncation impossible, so no access can raise SIGBUS. */
static void test_sealed_region_cannot_be_truncated(void **state)
{
    struct ut *t = *state;
    int fd = make_memfd(7, F_SEAL_SHRINK);
    assert_ok(shmreg_register_system_fd(t->reg, "in", fd, 0, OBJ, 0));
    assert_int_equal(ftruncate(fd, 0), -1);
    assert_int_equal(errno, EPERM);
    shmreg_region *ref = NULL;
    shmreg_view view;
    assert_ok(shmreg_acquire(t->reg, "in", 0, OBJ, &ref, &view));
    ut_assert_pattern(view.addr, OBJ, 7, 0);
    shmreg_release(ref);
    close(fd);
}

static void test_unsealed_memfd_is_refused(void **state)
{
    struct ut *t = *state;
    int fd = make_memfd(8, 0);
    assert_fails_containing(shmreg_register_system_fd(t->reg, "in", fd, 0, OBJ, 0), SHMREG_ERR_INVALID_ARG,
                            "is not sealed against shrinking (F_SEAL_SHRINK)");
    assert_int_equal(ut_status_count(t->reg, SHMREG_KIND_ANY), 0);
    /* A regular file without seal support at all is refused the same way. */
    char path[] = "/tmp/shmreg-test-XXXXXX";
    int file = mkstemp(path);
    assert_true(file >= 0);
    unlink(path);
    assert_int_equal(ftruncate(file, OBJ), 0);
    assert_fails_containing(shmreg_register_system_fd(t->reg, "f", file, 0, OBJ, 0), SHMREG_ERR_INVALID_ARG,
                            "F_SEAL_SHRINK");
    close(file);

    /* The config's switch accepts it (SIGBUS-prone: see the guarded copies). */
    shmreg_config cfg;
    shmreg_config_init(&cfg);
    cfg.accept_unsealed_fds = 1;
    shmreg_registry *reg = ut_registry_config(t, &cfg);
    assert_ok(shmreg_register_system_fd(reg, "in", fd, 0, OBJ, 0));
    assert_ok(shmreg_unregister(reg, "in", SHMREG_KIND_ANY));
    close(fd);
}

/* A pipe, a socket, a directory: refused as not regular, nothing mapped. */
static void test_non_regular_descriptors_are_refused(void **state)
{
    struct ut *t = *state;
    int p[2], sv[2];
    assert_int_equal(pipe(p), 0);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    int dir = open("/", O_RDONLY | O_DIRECTORY);
    int fds[] = {p[0], p[1], sv[0], dir};
    for (size_t i = 0; i < sizeof fds / sizeof *fds; i++)
        assert_fails_containing(shmreg_register_system_fd(t->reg, "x", fds[i], 0, 1, SHMREG_READONLY),
                                SHMREG_ERR_INVALID_ARG, "is not a regular file or memfd");
    for (size_t i = 0; i < sizeof fds / sizeof *fds; i++)
        close(fds[i]);
    close(sv[1]);
    assert_int_equal(ut_status_count(t->reg, SHMREG_KIND_ANY), 0);
}

static void test_owner_allow_list_applies(void **state)
{
    struct ut *t = *state;
    uid_t other = getuid() + 4242;
    shmreg_config cfg;
    shmreg_config_init(&cfg);
    cfg.allowed_owner_uids = &other;
    cfg.allowed_owner_uid_count = 1;
    shmreg_registry *reg = ut_registry_config(t, &cfg);
    int fd = make_memfd(9, F_SEAL_SHRINK);
    assert_fails_containing(shmreg_register_system_fd(reg, "in", fd, 0, OBJ, 0), SHMREG_ERR_INVALID_ARG,
                            ut_fmt("is owned by uid %u, which this registry does not accept", (unsigned)getuid()));
    close(fd);
}

static void test_bad_arguments(void **state)
{
    struct ut *t = *state;
    int fd = make_memfd(10, F_SEAL_SHRINK);
    assert_fails(shmreg_register_system_fd(t->reg, "in", -1, 0, OBJ, 0), SHMREG_ERR_INVALID_ARG,
                 "cannot register shared memory region 'in': descriptor -1 is negative");
    assert_fails_containing(shmreg_register_system_fd(t->reg, "in", fd, 0, OBJ + 1, 0), SHMREG_ERR_OUT_OF_BOUNDS,
                            "is past the end of the 16384-byte descriptor");
    assert_fails_code(shmreg_register_system_fd(t->reg, "in", fd, SIZE_MAX, 2, 0), SHMREG_ERR_OUT_OF_BOUNDS);
    assert_fails_code(shmreg_register_system_fd(t->reg, "in", fd, 0, 0, 0), SHMREG_ERR_OUT_OF_BOUNDS);
    /* A key belongs to SHMREG_SOURCE_SHM. */
    shmreg_registration r;
    shmreg_registration_init(&r);
    r.source = SHMREG_SOURCE_FD;
    r.name = "in";
    r.fd = fd;
    r.byte_size = OBJ;
    r.key = "/x";
    assert_fails_containing(shmreg_register(t->reg, &r), SHMREG_ERR_INVALID_ARG, "takes no shm key");
    /* A read-only descriptor needs SHMREG_READONLY. */
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    int ro = open(path, O_RDONLY);
    assert_true(ro >= 0);
    assert_fails_containing(shmreg_register_system_fd(t->reg, "in", ro, 0, OBJ, 0), SHMREG_ERR_SYSTEM,
                            "Unable to map shared memory region 'in'");
    assert_ok(shmreg_register_system_fd(t->reg, "in", ro, 0, OBJ, SHMREG_READONLY));
    assert_ok(shmreg_unregister(t->reg, "in", SHMREG_KIND_ANY));
    close(ro);
    close(fd);
    assert_int_equal(ut_status_count(t->reg, SHMREG_KIND_ANY), 0);
}

/* Through shmreg_recv_fd, as a server receives it. */
static void test_received_over_a_socket(void **state)
{
    struct ut *t = *state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
    int fd = make_memfd(11, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
    assert_ok(shmreg_send_fd(sv[0], fd, "input0", 6));
    close(fd); /* the client may exit: the memory lives in the server's mapping */
    char name[16] = "";
    size_t len = 0;
    int got = -1;
    assert_ok(shmreg_recv_fd(sv[1], &got, name, sizeof name - 1, &len));
    assert_ok(shmreg_register_system_fd(t->reg, name, got, 0, OBJ, 0));
    close(got);
    shmreg_region *ref = NULL;
    shmreg_view view;
    assert_ok(shmreg_acquire(t->reg, "input0", 0, OBJ, &ref, &view));
    ut_assert_pattern(view.addr, OBJ, 11, 0);
    shmreg_release(ref);
    close(sv[0]);
    close(sv[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        UT_TEST(test_sealed_memfd_round_trip),
        UT_TEST(test_descriptor_is_never_consumed),
        UT_TEST(test_sealed_region_cannot_be_truncated),
        UT_TEST(test_unsealed_memfd_is_refused),
        UT_TEST(test_non_regular_descriptors_are_refused),
        UT_TEST(test_owner_allow_list_applies),
        UT_TEST(test_bad_arguments),
        UT_TEST(test_received_over_a_socket),
    };
    return cmocka_run_group_tests_name("fd_regions", tests, ut_group_setup, NULL);
}
