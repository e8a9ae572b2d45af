/* Runs in CI, where there is no GPU: the library (built with or without the
 * CUDA backends) loads, system regions work, every CUDA call answers
 * SHMREG_ERR_UNSUPPORTED with a message that says why and changes nothing,
 * SHMREG_PIN_AUTO quietly does not pin, and demanding pinning is
 * UNSUPPORTED. Skipped (77) on a machine where CUDA is usable. */
#include <fcntl.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"
#include "testutil.h"

#define SIZE 8192
#define SEED 0x44

/* SHMREG_TEST_CUDA_BUILT: 1 when this tree built the CUDA backends. */
#if SHMREG_TEST_CUDA_BUILT
#define WHY "no CUDA"
#else
#define WHY "built without CUDA support"
#endif

static int setup(void **state)
{
    *state = ut_shm_fixture_new(SIZE, SEED);
    return 0;
}

static int teardown(void **state)
{
    ut_shm_fixture_free(*state);
    return 0;
}

static void test_capabilities(void **state)
{
    unsigned caps = shmreg_cuda_available();
    assert_int_equal(caps & SHMREG_CUDA_BUILT, SHMREG_TEST_CUDA_BUILT ? SHMREG_CUDA_BUILT : 0);
    assert_int_equal(caps & (SHMREG_CUDA_DEVICE | SHMREG_CUDA_VMM_FD), 0);
    assert_int_equal(shmreg_cuda_available(), caps); /* stable across calls */
}

static void test_cuda_ipc_is_unsupported(void **state)
{
    struct ut_shm_fixture *f = *state;
    unsigned char handle[64] = {1, 2, 3};
    assert_fails_containing(
        shmreg_register_cuda_ipc(f->reg, "ipc", handle, sizeof handle, 0, 4096, 0),
        SHMREG_ERR_UNSUPPORTED, "failed to register CUDA IPC region 'ipc': ");
    assert_non_null(strstr(shmreg_last_error(), WHY));
    assert_int_equal(ut_status_count(f->reg, SHMREG_KIND_ANY), 0);
}

static void test_cuda_fd_is_unsupported_and_keeps_the_fd(void **state)
{
    struct ut_shm_fixture *f = *state;
    int p[2];
    assert_int_equal(pipe(p), 0);
    assert_fails_containing(shmreg_register_cuda_fd(f->reg, "vmm", p[0], 0, 4096, SHMREG_READONLY),
                            SHMREG_ERR_UNSUPPORTED, "failed to register CUDA VMM region 'vmm': ");
    assert_non_null(strstr(shmreg_last_error(), WHY));
    assert_int_not_equal(fcntl(p[0], F_GETFD), -1); /* never closed by the registry */
    close(p[0]);
    close(p[1]);
    assert_int_equal(ut_status_count(f->reg, SHMREG_KIND_ANY), 0);
}

static void test_system_region_works_unpinned(void **state)
{
    struct ut_shm_fixture *f = *state;
    assert_ok(shmreg_register_system(f->reg, "sys", f->key, 100, 4000, 0));
    shmreg_region *ref = NULL;
    shmreg_view view;
    assert_ok(shmreg_acquire(f->reg, "sys", 0, 4000, &ref, &view));
    assert_int_equal(view.pinned, 0); /* AUTO: nothing to pin with, and no error */
    assert_int_equal(view.kind, SHMREG_KIND_SYSTEM);
    const unsigned char *bytes = view.addr;
    for (size_t i = 0; i < 4000; i++)
        assert_int_equal(bytes[i], tu_pattern(SEED, 100 + i));
    shmreg_region_status *st = NULL;
    size_t n = 0;
    assert_ok(shmreg_status(f->reg, "sys", SHMREG_KIND_SYSTEM, &st, &n));
    assert_int_equal(st[0].pinned, 0);
    shmreg_status_free(st, n);
    shmreg_release(ref);
    assert_ok(shmreg_unregister(f->reg, "sys", SHMREG_KIND_SYSTEM));
}

static void test_demanded_pinning_is_unsupported(void **state)
{
    struct ut_shm_fixture *f = *state;
    assert_fails_containing(shmreg_register_system(f->reg, "pin", f->key, 0, SIZE, SHMREG_PIN),
                            SHMREG_ERR_UNSUPPORTED, "pin");
    assert_non_null(strstr(shmreg_last_error(), WHY));
    assert_int_equal(ut_status_count(f->reg, SHMREG_KIND_ANY), 0);
    assert_int_equal(tu_count_shm_maps(f->key), 0); /* the mapping was undone */

    shmreg_registry_destroy(f->reg);
    f->reg = ut_new_registry(SHMREG_PIN_ALWAYS, SHMREG_POLICY_DEFER);
    assert_fails_containing(shmreg_register_system(f->reg, "always", f->key, 0, SIZE, 0),
                            SHMREG_ERR_UNSUPPORTED, "pin");
    assert_int_equal(ut_status_count(f->reg, SHMREG_KIND_ANY), 0);
}

static void test_no_cuda_runtime_library_is_loaded(void **state)
{
    /* cudart is linked statically into libshmreg, and the driver is only
     * ever dlopened: no CUDA shared library is mapped into this process. */
    FILE *maps = fopen("/proc/self/maps", "r");
    assert_non_null(maps);
    char line[4096];
    while (fgets(line, sizeof line, maps))
        if (strstr(line, "libcudart.so") != NULL)
            fail_msg("libcudart.so is mapped: %s", line);
    fclose(maps);
}

#define TEST(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    unsigned usable = SHMREG_CUDA_BUILT | SHMREG_CUDA_DRIVER | SHMREG_CUDA_DEVICE;
    if ((shmreg_cuda_available() & usable) == usable) {
        printf("skipped: CUDA is usable here; tests/cuda/test_cuda_*.c cover this machine\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_capabilities),
        TEST(test_cuda_ipc_is_unsupported),
        TEST(test_cuda_fd_is_unsupported_and_keeps_the_fd),
        TEST(test_system_region_works_unpinned),
        TEST(test_demanded_pinning_is_unsupported),
        cmocka_unit_test(test_no_cuda_runtime_library_is_loaded),
    };
    return cmocka_run_group_tests_name("cuda_unavailable", tests, NULL, NULL) ? 1 : 0;
}
