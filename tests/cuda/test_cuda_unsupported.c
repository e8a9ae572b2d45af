/* The CUDA registration calls on a machine (or build) without a usable GPU:
 * UNSUPPORTED, nothing kept, the caller's descriptor left open. Their argument
 * checks and the single namespace hold everywhere. */
#include "fixture.h"

#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
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

/* The 1.3 sources, without a usable GPU: UNSUPPORTED with the reason,
 * nothing kept, every descriptor left open. */
static void test_vmm_range_and_pool_are_unsupported(void **state)
{
    struct ut *t = *state;
    if (ut_cuda_usable())
        skip();
    int fds[3];
    for (int i = 0; i < 3; i++)
        assert_true((fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0);
    size_t sizes[3] = {2 << 20, 2 << 20, 2 << 20};
    unsigned char data[SHMREG_CUDA_POOL_EXPORT_SIZE] = {0};
    const char *why = shmreg_cuda_available() & SHMREG_CUDA_BUILT ? "no CUDA" : "built without CUDA";

    assert_fails_containing(shmreg_register_cuda_vmm_range(t->reg, "range", fds, sizes, 3, 4096, 5 << 20, 0, 0),
                            SHMREG_ERR_UNSUPPORTED, why);
    assert_true(strstr(shmreg_last_error(), "CUDA VMM range 'range'") != NULL);
    assert_fails_containing(shmreg_register_cuda_pool(t->reg, "pool", fds[0], data, sizeof data, 0, 4096, 0, 0),
                            SHMREG_ERR_UNSUPPORTED, why);
    assert_true(strstr(shmreg_last_error(), "CUDA pool region 'pool'") != NULL);
    /* By UUID too: the reason, not a complaint about the UUID. */
    shmreg_registration r;
    shmreg_registration_init(&r);
    r.source = SHMREG_SOURCE_CUDA_IPC;
    r.name = "by-uuid";
    r.raw_handle = data;
    r.raw_handle_size = sizeof data;
    r.byte_size = 4096;
    r.device_uuid = "GPU-5b3e1c2a-0f4d-4e6b-9a8c-1d2e3f405162";
    assert_fails_containing(shmreg_register(t->reg, &r), SHMREG_ERR_UNSUPPORTED, why);
    assert_int_equal(ut_status_count(t->reg, SHMREG_KIND_ANY), 0);
    for (int i = 0; i < 3; i++) {
        assert_true(fcntl(fds[i], F_GETFD) >= 0); /* the caller's, still open */
        close(fds[i]);
    }
}

/* The new sources' arguments are checked before any CUDA work, in every
 * build and on every machine. */
static void test_vmm_range_arguments(void **state)
{
    struct ut *t = *state;
    int fds[3] = {0, 0, 0}, negative[3] = {0, -1, 0};
    size_t sizes[3] = {2 << 20, 2 << 20, 2 << 20}, zero[3] = {2 << 20, 0, 2 << 20};
    size_t huge[3] = {SIZE_MAX / 2 + 1, SIZE_MAX / 2 + 1, 4096};
    shmreg_registry *reg = t->reg;

    assert_fails_containing(shmreg_register_cuda_vmm_range(reg, "r", NULL, sizes, 3, 0, 4096, 0, 0),
                            SHMREG_ERR_INVALID_ARG, "fds NULL");
    assert_fails_containing(shmreg_register_cuda_vmm_range(reg, "r", fds, NULL, 3, 0, 4096, 0, 0),
                            SHMREG_ERR_INVALID_ARG, "chunk_sizes NULL");
    assert_fails_containing(shmreg_register_cuda_vmm_range(reg, "r", fds, sizes, 0, 0, 4096, 0, 0),
                            SHMREG_ERR_INVALID_ARG, "1..253 chunks, got 0");
    assert_fails_containing(
        shmreg_register_cuda_vmm_range(reg, "r", fds, sizes, SHMREG_CUDA_CHUNKS_MAX + 1, 0, 4096, 0, 0),
        SHMREG_ERR_INVALID_ARG, "got 254");
    assert_fails_containing(shmreg_register_cuda_vmm_range(reg, "r", negative, sizes, 3, 0, 4096, 0, 0),
                            SHMREG_ERR_INVALID_ARG, "chunk 1 has descriptor -1");
    assert_fails_containing(shmreg_register_cuda_vmm_range(reg, "r", fds, zero, 3, 0, 4096, 0, 0),
                            SHMREG_ERR_INVALID_ARG, "chunk 1 has descriptor 0 and size 0");
    assert_fails_containing(shmreg_register_cuda_vmm_range(reg, "r", fds, huge, 3, 0, 4096, 0, 0),
                            SHMREG_ERR_OUT_OF_BOUNDS, "sizes overflow at chunk 1");
    /* The window against the chunks' sum: past its end, ending past it,
     * and an end that overflows. */
    assert_fails_containing(shmreg_register_cuda_vmm_range(reg, "r", fds, sizes, 3, 6 << 20, 1, 0, 0),
                            SHMREG_ERR_OUT_OF_BOUNDS, "window [6291456, +1) is past the 6291456 bytes of its 3 chunks");
    assert_fails_containing(shmreg_register_cuda_vmm_range(reg, "r", fds, sizes, 3, 4096, 6 << 20, 0, 0),
                            SHMREG_ERR_OUT_OF_BOUNDS, "is past the 6291456 bytes");
    assert_fails_containing(shmreg_register_cuda_vmm_range(reg, "r", fds, sizes, 3, SIZE_MAX, 2, 0, 0),
                            SHMREG_ERR_OUT_OF_BOUNDS, "overflows");
    assert_fails_code(shmreg_register_cuda_vmm_range(reg, "r", fds, sizes, 3, 0, 0, 0, 0),
                      SHMREG_ERR_OUT_OF_BOUNDS);
    assert_int_equal(ut_status_count(reg, SHMREG_KIND_ANY), 0);
}

static void test_pool_and_window_arguments(void **state)
{
    struct ut *t = *state;
    unsigned char data[SHMREG_CUDA_POOL_EXPORT_SIZE] = {0};
    shmreg_registry *reg = t->reg;
    assert_fails_containing(shmreg_register_cuda_pool(reg, "p", -1, data, sizeof data, 0, 4096, 0, 0),
                            SHMREG_ERR_INVALID_ARG, "pool's descriptor (got -1)");
    assert_fails_containing(shmreg_register_cuda_pool(reg, "p", 0, NULL, sizeof data, 0, 4096, 0, 0),
                            SHMREG_ERR_INVALID_ARG, "at NULL");
    assert_fails_containing(shmreg_register_cuda_pool(reg, "p", 0, data, 63, 0, 4096, 0, 0),
                            SHMREG_ERR_INVALID_ARG, "(got 63)");
    assert_fails_containing(shmreg_register_cuda_pool(reg, "p", 0, data, sizeof data, SIZE_MAX - 10, 11, 0, 0),
                            SHMREG_ERR_OUT_OF_BOUNDS, "offset 18446744073709551605 + byte_size 11 overflows");
    /* A window of legacy IPC and of one VMM descriptor: the offset's end
     * overflowing is refused before CUDA is asked. */
    shmreg_registration r;
    shmreg_registration_init(&r);
    r.source = SHMREG_SOURCE_CUDA_IPC;
    r.name = "w";
    r.raw_handle = data;
    r.raw_handle_size = 64;
    r.byte_size = 2;
    r.offset = SIZE_MAX;
    assert_fails_containing(shmreg_register(reg, &r), SHMREG_ERR_OUT_OF_BOUNDS, "CUDA IPC region 'w'");
    r.source = SHMREG_SOURCE_CUDA_FD;
    r.fd = 0;
    assert_fails_containing(shmreg_register(reg, &r), SHMREG_ERR_OUT_OF_BOUNDS, "CUDA VMM region 'w'");
    assert_int_equal(ut_status_count(reg, SHMREG_KIND_ANY), 0);
}

/* The client half: its arguments everywhere, then UNSUPPORTED with the
 * reason without a usable GPU. */
static void test_send_cuda_region_without_a_gpu(void **state)
{
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
    char dev[16];
    assert_fails_code(shmreg_send_cuda_region(-1, "t", dev, 16, 0), SHMREG_ERR_INVALID_ARG);
    assert_fails_code(shmreg_send_cuda_region(sv[0], NULL, dev, 16, 0), SHMREG_ERR_INVALID_ARG);
    assert_fails_code(shmreg_send_cuda_region(sv[0], "t", NULL, 16, 0), SHMREG_ERR_INVALID_ARG);
    assert_fails_code(shmreg_send_cuda_region(sv[0], "t", dev, 0, 0), SHMREG_ERR_INVALID_ARG);
    assert_fails_code(shmreg_send_cuda_region(sv[0], "t", dev, 16, SHMREG_PIN), SHMREG_ERR_INVALID_ARG);
    if (!ut_cuda_usable()) {
        const char *why = shmreg_cuda_available() & SHMREG_CUDA_BUILT ? "no CUDA" : "built without CUDA";
        assert_fails_containing(shmreg_send_cuda_region(sv[0], "t", dev, 16, 0), SHMREG_ERR_UNSUPPORTED, why);
    }
    close(sv[0]);
    close(sv[1]);
}

/* A UUID that is not one is refused by every CUDA source, in every build. */
static void test_bad_uuid_strings(void **state)
{
    struct ut *t = *state;
    static const char *const bad[] = {
        "",
        "0",
        "GPU-",
        "gpu-5b3e1c2a-0f4d-4e6b-9a8c-1d2e3f405162",  /* the prefix is upper case */
        "GPU-5b3e1c2a-0f4d-4e6b-9a8c-1d2e3f40516",   /* a digit short */
        "GPU-5b3e1c2a-0f4d-4e6b-9a8c-1d2e3f4051623", /* a digit long */
        "GPU-5b3e1c2a0f4d-4e6b-9a8c-1d2e3f4051623",  /* a dash missing */
        "GPU-5b3e1c2a-0f4d-4e6b-9a8c-1d2e3f40516g",  /* not hex */
        "MIG-GPU-5b3e1c2a-0f4d-4e6b-9a8c-1d2e3f405162/1/0", /* the old MIG form */
        "0000:3b:00.0", /* a PCI bus id */
    };
    unsigned char data[64] = {0};
    int fds[1] = {0};
    size_t sizes[1] = {2 << 20};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        for (int source = SHMREG_SOURCE_CUDA_IPC; source <= SHMREG_SOURCE_CUDA_POOL; source++) {
            if (source == SHMREG_SOURCE_FD || source == SHMREG_SOURCE_REMOTE)
                continue;
            shmreg_registration r;
            shmreg_registration_init(&r);
            r.source = (shmreg_source)source;
            r.name = "u";
            r.byte_size = 4096;
            r.raw_handle = data;
            r.raw_handle_size = sizeof data;
            r.fd = 0;
            r.fds = fds;
            r.chunk_sizes = sizes;
            r.chunk_count = 1;
            r.device_uuid = bad[i];
            assert_fails_containing(shmreg_register(t->reg, &r), SHMREG_ERR_INVALID_ARG, "is not a GPU's UUID");
        }
    }
    assert_int_equal(ut_status_count(t->reg, SHMREG_KIND_ANY), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        UT_TEST(test_cuda_ipc_is_unsupported),
        UT_TEST(test_cuda_fd_is_unsupported_and_keeps_the_fd),
        UT_TEST(test_cuda_calls_check_arguments_first),
        UT_TEST(test_vmm_range_and_pool_are_unsupported),
        UT_TEST(test_vmm_range_arguments),
        UT_TEST(test_pool_and_window_arguments),
        UT_TEST(test_bad_uuid_strings),
        UT_TEST(test_send_cuda_region_without_a_gpu),
    };
    return cmocka_run_group_tests(tests, ut_group_setup, NULL);
}
