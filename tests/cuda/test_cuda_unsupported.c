/* The CUDA registration calls on a machine (or build) without a usable GPU:
 * UNSUPPORTED, nothing kept, the caller's descriptor left open. Their argument
 * checks and the single namespace hold everywhere. */
#include "fixture.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#define IPC_HANDLE_SIZE 64

static void test_cuda_ipc_is_unsupported(void **state)
{
    struct ut *t = *state;
    if (ut_cuda_usable())
        skip();
    unsigned char handle[IPC_HANDLE_SIZE];
    memset(handle, 0x11, sizeof handle);

    assert_fails_code(shmreg_register_cuda_ipc(t->reg, "gpu", handle, sizeof handle, 0, 4096, 0),
                      SHMREG_ERR_UNSUPPORTED);
    assert_int_equal(ut_status_count(t->reg, SHMREG_KIND_ANY), 0);
    assert_int_equal(ut_status_count(t->reg, SHMREG_KIND_CUDA), 0);
}

static void test_cuda_fd_is_unsupported_and_keeps_the_fd(void **state)
{
    struct ut *t = *state;
    if (ut_cuda_usable())
        skip();
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);

    assert_fails_code(shmreg_register_cuda_fd(t->reg, "gpu", fd, 0, 4096, 0),
                      SHMREG_ERR_UNSUPPORTED);
    assert_int_equal(ut_status_count(t->reg, SHMREG_KIND_ANY), 0);
    /* The caller owns fd: still open. */
    assert_true(fcntl(fd, F_GETFD) >= 0);
    close(fd);
}

/* Argument checks come before any CUDA work, so they hold on every machine:
 * one namespace for all kinds, NULL arguments refused. */
static void test_cuda_calls_check_arguments_first(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, 4096, 81);
    unsigned char handle[IPC_HANDLE_SIZE] = {0};

    assert_ok(shmreg_register_system(t->reg, "taken", key, 0, 4096, 0));
    assert_fails(shmreg_register_cuda_ipc(t->reg, "taken", handle, sizeof handle, 0, 4096, 0),
                 SHMREG_ERR_ALREADY_EXISTS, "shared memory region 'taken' already in manager");
    assert_fails(shmreg_register_cuda_fd(t->reg, "taken", 0, 0, 4096, 0),
                 SHMREG_ERR_ALREADY_EXISTS, "shared memory region 'taken' already in manager");

    assert_fails_code(shmreg_register_cuda_ipc(NULL, "gpu", handle, sizeof handle, 0, 4096, 0),
                      SHMREG_ERR_INVALID_ARG);
    assert_fails_code(shmreg_register_cuda_ipc(t->reg, NULL, handle, sizeof handle, 0, 4096, 0),
                      SHMREG_ERR_INVALID_ARG);
    assert_fails_code(shmreg_register_cuda_ipc(t->reg, "gpu", NULL, sizeof handle, 0, 4096, 0),
                      SHMREG_ERR_INVALID_ARG);
    assert_fails_code(shmreg_register_cuda_fd(NULL, "gpu", 0, 0, 4096, 0),
                      SHMREG_ERR_INVALID_ARG);
    assert_fails_code(shmreg_register_cuda_fd(t->reg, NULL, 0, 0, 4096, 0),
                      SHMREG_ERR_INVALID_ARG);
    assert_int_equal(ut_status_count(t->reg, SHMREG_KIND_ANY), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        UT_TEST(test_cuda_ipc_is_unsupported),
        UT_TEST(test_cuda_fd_is_unsupported_and_keeps_the_fd),
        UT_TEST(test_cuda_calls_check_arguments_first),
    };
    return cmocka_run_group_tests(tests, ut_group_setup, NULL);
}
