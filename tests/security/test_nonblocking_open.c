/* Any local user can create a FIFO (or a socket, or a
 * symbolic link) under /dev/shm with a key a client then registers. The
 * open must not block and the object must be refused before anything can
 * block on it. Before the fix, the READONLY register of a FIFO blocked
 * forever in shm_open; the alarm turns a hang into a failure. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "fixture.h"

static void make_path(char *key, char *path, size_t cap) /* cap <= 100: fits sun_path */
{
    tu_unique_key("shmreg-fifo", key);
    snprintf(path, cap, "/dev/shm%s", key);
}

static void test_fifo_is_refused_without_blocking(void **state)
{
    struct ut *t = *state;
    char key[64], path[100];
    make_path(key, path, sizeof path);
    assert_int_equal(mkfifo(path, 0600), 0);
    alarm(10); /* a blocking open would hang here: SIGALRM ends the test */
    for (unsigned flags = 0; flags <= SHMREG_READONLY; flags += SHMREG_READONLY)
        assert_fails(shmreg_register_system(t->reg, "f", key, 0, 1, flags), SHMREG_ERR_INVALID_ARG,
                     ut_fmt("cannot register shared memory region 'f': shm key '%s' is not a regular file "
                            "or memfd (a FIFO, socket or device is refused)",
                            key));
    alarm(0);
    unlink(path);
    assert_int_equal(ut_status_count(t->reg, SHMREG_KIND_ANY), 0);
}

/* The type is checked before the owner allow-list, and both before any
 * mapping: an allow-list that refuses us still answers "not regular". */
static void test_fifo_refused_before_owner_check(void **state)
{
    struct ut *t = *state;
    char key[64], path[100];
    make_path(key, path, sizeof path);
    assert_int_equal(mkfifo(path, 0600), 0);
    uid_t other = getuid() + 77;
    shmreg_config cfg;
    shmreg_config_init(&cfg);
    cfg.allowed_owner_uids = &other;
    cfg.allowed_owner_uid_count = 1;
    ut_registry_config(t, &cfg);
    alarm(10);
    assert_fails_containing(shmreg_register_system(t->reg, "f", key, 0, 1, SHMREG_READONLY),
                            SHMREG_ERR_INVALID_ARG, "is not a regular file");
    alarm(0);
    unlink(path);
}

/* A socket cannot be opened at all, a symbolic link is not followed. */
static void test_socket_and_symlink_are_refused(void **state)
{
    struct ut *t = *state;
    char key[64], path[100];
    make_path(key, path, sizeof path);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path);
    assert_int_equal(bind(s, (struct sockaddr *)&addr, sizeof addr), 0);
    alarm(10);
    assert_fails_code(shmreg_register_system(t->reg, "s", key, 0, 1, SHMREG_READONLY), SHMREG_ERR_SYSTEM);
    alarm(0);
    close(s);
    unlink(path);

    const char *target = ut_object(t, 4096, 3);
    make_path(key, path, sizeof path);
    char target_path[128];
    snprintf(target_path, sizeof target_path, "/dev/shm%s", target);
    assert_int_equal(symlink(target_path, path), 0);
    assert_fails_containing(shmreg_register_system(t->reg, "l", key, 0, 1, SHMREG_READONLY), SHMREG_ERR_SYSTEM,
                            strerror(ELOOP));
    unlink(path);
    assert_int_equal(ut_status_count(t->reg, SHMREG_KIND_ANY), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        UT_TEST(test_fifo_is_refused_without_blocking),
        UT_TEST(test_fifo_refused_before_owner_check),
        UT_TEST(test_socket_and_symlink_are_refused),
    };
    return cmocka_run_group_tests_name("nonblocking_open", tests, ut_group_setup, NULL);
}
