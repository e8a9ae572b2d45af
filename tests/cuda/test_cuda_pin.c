/* Pinned system regions on a GPU machine: which policy and flag pins, that a
 * pinned view is page-locked memory to CUDA (cudaPointerGetAttributes), that
 * copies through it carry the region's bytes, and that the last release
 * unpins before it unmaps. */
#include <stdio.h>
#include <sys/mman.h>

#include "gpu_test.h"

#define SIZE ((size_t)4 << 20)
#define SEED 0x33

struct fixture {
    struct gt_baseline base;
    char key[64];
    shmreg_registry *reg;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->base = gt_take_baseline();
    tu_shm_create(SIZE, SEED, f->key);
    f->reg = ut_new_registry(SHMREG_PIN_AUTO, SHMREG_POLICY_DEFER);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    shmreg_registry_destroy(f->reg);
    tu_shm_unlink(f->key);
    gt_check_baseline(f->base, SIZE);
    assert_int_equal(tu_count_shm_maps(NULL), 0);
    free(f);
    return 0;
}

/* Register, acquire the whole window and report view.pinned, after checking
 * it against status and against CUDA's own view of the pointer. */
static int pinned_after_register(struct fixture *f, const char *name, unsigned flags,
                                 shmreg_region **ref, shmreg_view *view)
{
    assert_ok(shmreg_register_system(f->reg, name, f->key, 0, SIZE, flags));
    assert_ok(shmreg_acquire(f->reg, name, 0, SIZE, ref, view));
    shmreg_region_status *st = NULL;
    size_t n = 0;
    assert_ok(shmreg_status(f->reg, name, SHMREG_KIND_SYSTEM, &st, &n));
    assert_int_equal(st[0].pinned, view->pinned);
    shmreg_status_free(st, n);
    assert_int_equal(gt_is_pinned(view->addr), view->pinned);
    return view->pinned;
}

static void test_auto_pins_and_copies_at_the_region_bytes(void **state)
{
    struct fixture *f = *state;
    shmreg_region *ref = NULL;
    shmreg_view view;
    assert_int_equal(pinned_after_register(f, "auto", 0, &ref, &view), 1);
    void *dev = NULL;
    gt_cuda_ok(cudaMalloc(&dev, SIZE));
    gt_cuda_ok(cudaMemcpy(dev, view.addr, SIZE, cudaMemcpyHostToDevice));
    gt_assert_device_pattern(dev, SIZE, SEED, 0);
    /* and back: device to the pinned region, seen through a plain mapping */
    gt_write_device_pattern(dev, 4096, SEED + 1, 0);
    gt_cuda_ok(cudaMemcpy(view.addr, dev, 4096, cudaMemcpyDeviceToHost));
    gt_cuda_ok(cudaFree(dev));
    unsigned char *plain = tu_shm_map(f->key, SIZE);
    for (size_t i = 0; i < 4096; i++)
        assert_int_equal(plain[i], tu_pattern(SEED + 1, i));
    munmap(plain, SIZE);
    shmreg_release(ref);
    assert_ok(shmreg_unregister(f->reg, "auto", SHMREG_KIND_SYSTEM));
}

static void test_flags_and_policies(void **state)
{
    struct fixture *f = *state;
    shmreg_region *ref = NULL;
    shmreg_view view;
    assert_int_equal(pinned_after_register(f, "nopin", SHMREG_NO_PIN, &ref, &view), 0);
    shmreg_release(ref);

    shmreg_registry_destroy(f->reg);
    f->reg = ut_new_registry(SHMREG_PIN_NEVER, SHMREG_POLICY_DEFER);
    assert_int_equal(pinned_after_register(f, "never", 0, &ref, &view), 0);
    shmreg_release(ref);
    assert_int_equal(pinned_after_register(f, "demanded", SHMREG_PIN, &ref, &view), 1);
    shmreg_release(ref);

    shmreg_registry_destroy(f->reg);
    f->reg = ut_new_registry(SHMREG_PIN_ALWAYS, SHMREG_POLICY_DEFER);
    assert_int_equal(pinned_after_register(f, "always", 0, &ref, &view), 1);
    shmreg_release(ref);
}

static void test_read_only_region_pins(void **state)
{
    struct fixture *f = *state;
    shmreg_region *ref = NULL;
    shmreg_view view;
    assert_int_equal(pinned_after_register(f, "ro", SHMREG_READONLY | SHMREG_PIN, &ref, &view), 1);
    void *dev = NULL;
    gt_cuda_ok(cudaMalloc(&dev, SIZE));
    gt_cuda_ok(cudaMemcpy(dev, view.addr, SIZE, cudaMemcpyHostToDevice));
    gt_assert_device_pattern(dev, SIZE, SEED, 0);
    gt_cuda_ok(cudaFree(dev));
    shmreg_release(ref);
}

static void test_two_regions_of_one_object_both_pin(void **state)
{
    struct fixture *f = *state;
    shmreg_region *r1 = NULL, *r2 = NULL;
    shmreg_view v1, v2;
    assert_int_equal(pinned_after_register(f, "one", SHMREG_PIN, &r1, &v1), 1);
    assert_int_equal(pinned_after_register(f, "two", SHMREG_PIN, &r2, &v2), 1);
    shmreg_release(r1);
    assert_ok(shmreg_unregister(f->reg, "one", SHMREG_KIND_SYSTEM));
    assert_int_equal(gt_is_pinned(v2.addr), 1); /* unpinning one left the other */
    shmreg_release(r2);
}

static void test_last_release_unpins(void **state)
{
    struct fixture *f = *state;
    shmreg_region *ref = NULL;
    shmreg_view view;
    assert_int_equal(pinned_after_register(f, "held", SHMREG_PIN, &ref, &view), 1);
    assert_ok(shmreg_unregister(f->reg, "held", SHMREG_KIND_SYSTEM)); /* DEFER */
    assert_int_equal(gt_is_pinned(view.addr), 1);
    assert_int_equal(tu_count_shm_maps(f->key), 1);
    shmreg_release(ref);
    assert_ok(shmreg_registry_trim(f->reg)); /* the reclaim thread unpins, unmaps */
    assert_int_equal(tu_count_shm_maps(f->key), 0);
}

#define TEST(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    unsigned need = SHMREG_CUDA_BUILT | SHMREG_CUDA_DRIVER | SHMREG_CUDA_DEVICE;
    unsigned caps = shmreg_cuda_available();
    if ((caps & need) != need) {
        printf("skipped: shmreg_cuda_available() = 0x%x, pinning needs 0x%x\n", caps, need);
        return 77;
    }
    /* Create this process's CUDA context, and let it reserve what a device
     * allocation needs, before the first baseline. */
    void *warm = NULL;
    if (cudaMalloc(&warm, SIZE) != cudaSuccess || cudaFree(warm) != cudaSuccess)
        return 1;
    const struct CMUnitTest tests[] = {
        TEST(test_auto_pins_and_copies_at_the_region_bytes),
        TEST(test_flags_and_policies),
        TEST(test_read_only_region_pins),
        TEST(test_two_regions_of_one_object_both_pin),
        TEST(test_last_release_unpins),
    };
    return cmocka_run_group_tests_name("cuda_pin", tests, NULL, NULL) ? 1 : 0;
}
