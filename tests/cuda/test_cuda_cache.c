/* The registration cache and background reclaim on a GPU machine: a pinned
 * system region and a CUDA IPC handle registered again after unregister
 * reuse their mapping (pin, IPC open) with every check still made; the
 * reclaim thread unpins, closes IPC handles and unmaps VMM imports after the
 * last release; destroy and trim leave nothing pinned or open. A hit runs
 * the pinning rules (AUTO's budget, the pin of a window with holes) as a miss
 * does. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "exporter.h"
#include "gpu_test.h"

#define SIZE ((size_t)64 << 20) /* a multiple of the VMM granularity (2 MiB) */
#define SEED 0x47

static struct gt_exporter exporter;

struct fixture {
    struct gt_baseline base;
    char key[64];
    struct gt_export ipc, vmm;
    shmreg_registry *reg;   /* cache on, background reclaim */
    shmreg_registry *plain; /* no cache: what a miss answers */
};

static shmreg_registry *registry(size_t cache_bytes)
{
    shmreg_config cfg;
    shmreg_config_init(&cfg);
    cfg.cache_bytes = cache_bytes;
    shmreg_registry *reg = NULL;
    assert_ok(shmreg_registry_create(&cfg, &reg));
    return reg;
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->base = gt_take_baseline();
    tu_shm_create(SIZE, SEED, f->key);
    assert_int_equal(gt_exporter_alloc(&exporter, GT_KIND_IPC, SIZE, SEED, &f->ipc), 0);
    f->vmm.fd = -1;
    if (shmreg_cuda_available() & SHMREG_CUDA_VMM_FD)
        assert_int_equal(gt_exporter_alloc(&exporter, GT_KIND_VMM, SIZE, SEED, &f->vmm), 0);
    f->reg = registry((size_t)1 << 30);
    f->plain = registry(0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    shmreg_registry_destroy(f->reg);
    shmreg_registry_destroy(f->plain);
    tu_shm_unlink(f->key);
    assert_int_equal(gt_exporter_free(&exporter, f->ipc.id), 0);
    if (f->vmm.fd >= 0) {
        close(f->vmm.fd);
        assert_int_equal(gt_exporter_free(&exporter, f->vmm.id), 0);
    }
    gt_check_baseline(f->base, SIZE / 4);
    assert_int_equal(tu_count_shm_maps(NULL), 0);
    free(f);
    return 0;
}

static shmreg_stats stats_of(shmreg_registry *reg)
{
    shmreg_stats s;
    assert_ok(shmreg_registry_stats(reg, &s));
    return s;
}

static void test_pinned_hit_keeps_the_pin(void **state)
{
    struct fixture *f = *state;
    shmreg_region *ref;
    shmreg_view v1, v2;
    assert_ok(shmreg_register_system(f->reg, "a", f->key, 0, SIZE, SHMREG_PIN));
    assert_ok(shmreg_acquire(f->reg, "a", 0, SIZE, &ref, &v1));
    shmreg_release(ref);
    assert_ok(shmreg_unregister(f->reg, "a", SHMREG_KIND_SYSTEM));
    assert_int_equal(gt_is_pinned(v1.addr), 1); /* cached, still pinned */
    assert_int_equal(stats_of(f->reg).pinned_bytes, SIZE); /* and counted */

    assert_ok(shmreg_register_system(f->reg, "b", f->key, 4096, SIZE - 4096, SHMREG_PIN));
    assert_int_equal(stats_of(f->reg).cache_hits, 1);
    assert_ok(shmreg_acquire(f->reg, "b", 0, SIZE - 4096, &ref, &v2));
    assert_int_equal(v2.pinned, 1);
    assert_ptr_equal(v2.addr, (char *)v1.addr + 4096);
    void *dev = NULL;
    gt_cuda_ok(cudaMalloc(&dev, SIZE - 4096));
    gt_cuda_ok(cudaMemcpy(dev, v2.addr, SIZE - 4096, cudaMemcpyHostToDevice));
    gt_assert_device_pattern(dev, SIZE - 4096, SEED, 4096);
    gt_cuda_ok(cudaFree(dev));
    shmreg_release(ref);
    /* Not pinned: another identity, a miss. */
    assert_ok(shmreg_register_system(f->reg, "c", f->key, 0, 4096, SHMREG_NO_PIN));
    assert_int_equal(stats_of(f->reg).cache_hits, 1);
    assert_ok(shmreg_unregister_all(f->reg, SHMREG_KIND_ANY));
    assert_ok(shmreg_registry_trim(f->reg));
    assert_int_equal(gt_is_pinned(v1.addr), 0);
    assert_int_equal(stats_of(f->reg).pinned_bytes, 0);
}

/* max_pinned_bytes: cached pinned bytes give way to a registration. */
static void test_cached_pins_give_way(void **state)
{
    struct fixture *f = *state;
    shmreg_config cfg;
    shmreg_config_init(&cfg);
    cfg.cache_bytes = (size_t)1 << 30;
    cfg.max_pinned_bytes = SIZE;
    shmreg_registry *reg = NULL;
    assert_ok(shmreg_registry_create(&cfg, &reg));
    assert_ok(shmreg_register_system(reg, "a", f->key, 0, SIZE, SHMREG_PIN));
    assert_ok(shmreg_unregister(reg, "a", SHMREG_KIND_SYSTEM));
    assert_ok(shmreg_register_system(reg, "b", f->key, 0, SIZE / 2, SHMREG_PIN | SHMREG_READONLY));
    assert_int_equal(stats_of(reg).cache_evictions, 1);
    shmreg_registry_destroy(reg);
}

static int pinned_of(shmreg_registry *reg, const char *name)
{
    shmreg_region_status *st = ut_status_of(reg, name);
    int pinned = st->pinned;
    shmreg_status_free(st, 1);
    return pinned;
}

/* The holes rule on the hit path: a window with holes is pinned
 * within the pin budget, on a hit as on a miss. With a hole punched into
 * the object after it was cached, a demanded pin and AUTO's are pinned, as
 * a registry without the cache pins them, and the demanded one is a hit. */
static void test_pinned_hit_with_holes(void **state)
{
    struct fixture *f = *state;
    assert_ok(shmreg_register_system(f->reg, "a", f->key, 0, SIZE, SHMREG_PIN));
    assert_ok(shmreg_unregister(f->reg, "a", SHMREG_KIND_SYSTEM));
    int fd = shm_open(f->key, O_RDWR, 0);
    assert_true(fd >= 0);
    assert_int_equal(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)(SIZE / 2), 1 << 20), 0);
    close(fd);

    assert_ok(shmreg_register_system(f->plain, "b", f->key, 0, SIZE, SHMREG_PIN));
    assert_ok(shmreg_register_system(f->reg, "b", f->key, 0, SIZE, SHMREG_PIN));
    assert_int_equal(pinned_of(f->plain, "b"), 1);
    assert_int_equal(pinned_of(f->reg, "b"), 1);
    assert_int_equal(stats_of(f->reg).cache_hits, 1);
    assert_ok(shmreg_register_system(f->plain, "c", f->key, 0, SIZE, 0));
    assert_ok(shmreg_register_system(f->reg, "c", f->key, 0, SIZE, 0));
    assert_int_equal(pinned_of(f->plain, "c"), 1);
    assert_int_equal(pinned_of(f->reg, "c"), 1);
    assert_ok(shmreg_unregister_all(f->reg, SHMREG_KIND_ANY));
    assert_ok(shmreg_unregister_all(f->plain, SHMREG_KIND_ANY));
    assert_ok(shmreg_registry_trim(f->reg));
    assert_int_equal(stats_of(f->reg).pinned_bytes, 0);
}

/* AUTO's budget (max_pinned_bytes here) with the cache as without it:
 * cached pins give way to an AUTO pin before that pin is dropped, so the
 * cache never leaves unpinned what a registry without it pins; past the
 * budget with nothing left to evict, AUTO registers unpinned. */
static void test_auto_pin_budget_with_the_cache(void **state)
{
    struct fixture *f = *state;
    char key2[64];
    tu_shm_create(SIZE / 2, SEED, key2);
    for (int cached = 0; cached < 2; cached++) {
        shmreg_config cfg;
        shmreg_config_init(&cfg);
        cfg.cache_bytes = cached ? (size_t)1 << 30 : 0;
        cfg.max_pinned_bytes = SIZE;
        shmreg_registry *reg = NULL;
        assert_ok(shmreg_registry_create(&cfg, &reg));
        assert_ok(shmreg_register_system(reg, "a", f->key, 0, SIZE, 0));
        assert_int_equal(pinned_of(reg, "a"), 1);
        assert_ok(shmreg_unregister(reg, "a", SHMREG_KIND_SYSTEM));
        assert_ok(shmreg_register_system(reg, "b", key2, 0, SIZE / 2, 0));
        assert_int_equal(pinned_of(reg, "b"), 1);
        assert_ok(shmreg_register_system(reg, "c", f->key, 0, SIZE, 0));
        assert_int_equal(pinned_of(reg, "c"), 0);
        shmreg_stats s = stats_of(reg);
        assert_int_equal(s.pinned_bytes, SIZE / 2);
        assert_int_equal(s.cache_hits, 0);
        assert_int_equal(s.cache_evictions, cached);
        shmreg_registry_destroy(reg);
    }
    tu_shm_unlink(key2);
}

static void test_ipc_hit_reuses_the_open(void **state)
{
    struct fixture *f = *state;
    shmreg_region *ref;
    shmreg_view v1, v2;
    assert_ok(shmreg_register_cuda_ipc(f->reg, "a", f->ipc.ipc, 64, 0, SIZE, 0));
    assert_ok(shmreg_acquire(f->reg, "a", 0, 64, &ref, &v1));
    shmreg_release(ref);
    assert_ok(shmreg_unregister(f->reg, "a", SHMREG_KIND_CUDA));
    assert_true(gt_device_mapped(v1.addr)); /* cached: the handle stays open */

    /* Bounds against the allocation, on the hit path as on a miss. */
    assert_fails_containing(shmreg_register_cuda_ipc(f->plain, "big", f->ipc.ipc, 64, 0, SIZE + 1, 0),
                            SHMREG_ERR_OUT_OF_BOUNDS, "invalid args");
    char want[1024];
    snprintf(want, sizeof want, "%s", shmreg_last_error());
    assert_fails(shmreg_register_cuda_ipc(f->reg, "big", f->ipc.ipc, 64, 0, SIZE + 1, 0),
                 SHMREG_ERR_OUT_OF_BOUNDS, want);

    assert_ok(shmreg_register_cuda_ipc(f->reg, "b", f->ipc.ipc, 64, 0, SIZE / 2, 0));
    shmreg_region_status *st = ut_status_of(f->reg, "b");
    assert_int_equal(st->mapping_reused, 1);
    shmreg_status_free(st, 1);
    assert_ok(shmreg_acquire(f->reg, "b", 0, 4096, &ref, &v2));
    assert_ptr_equal(v2.addr, v1.addr);
    gt_assert_device_pattern(v2.addr, 4096, SEED, 0);
    shmreg_release(ref);
    assert_ok(shmreg_unregister(f->reg, "b", SHMREG_KIND_CUDA));
    assert_ok(shmreg_registry_trim(f->reg));
    assert_false(gt_device_mapped(v1.addr));
}

/* Background reclaim of each kind: the last release returns at once, the
 * reclaim thread closes. */
static void test_reclaim_thread_closes_every_kind(void **state)
{
    struct fixture *f = *state;
    shmreg_registry *reg = registry(0);
    shmreg_region *rs, *ri, *rv = NULL;
    shmreg_view vs, vi, vv;
    assert_ok(shmreg_register_system(reg, "s", f->key, 0, SIZE, SHMREG_PIN));
    assert_ok(shmreg_register_cuda_ipc(reg, "i", f->ipc.ipc, 64, 0, SIZE, 0));
    assert_ok(shmreg_acquire(reg, "s", 0, SIZE, &rs, &vs));
    assert_ok(shmreg_acquire(reg, "i", 0, SIZE, &ri, &vi));
    if (f->vmm.fd >= 0) {
        assert_ok(shmreg_register_cuda_fd(reg, "v", f->vmm.fd, 0, SIZE, 0));
        assert_ok(shmreg_acquire(reg, "v", 0, SIZE, &rv, &vv));
    }
    assert_ok(shmreg_unregister_all(reg, SHMREG_KIND_ANY)); /* DEFER: all pending */
    shmreg_release(rs);
    shmreg_release(ri);
    shmreg_release(rv);
    assert_ok(shmreg_registry_trim(reg));
    assert_int_equal(gt_is_pinned(vs.addr), 0);
    assert_false(gt_device_mapped(vi.addr));
    if (rv)
        assert_false(gt_device_mapped(vv.addr));
    assert_int_equal(stats_of(reg).mapped_bytes, 0);
    shmreg_registry_destroy(reg);
}

#define TEST(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

/* Pinning opens CUDA's context, and with it descriptors that stay open for
 * the life of the process. Do it once before any case takes its baseline,
 * so that a case counts only what it opens itself. Outside any test: a
 * failure here only leaves the warm-up undone, which the first pinned case's
 * own checks then report. */
static void warm_up_pinning(void)
{
    char key[64];
    tu_shm_create(4096, SEED, key);
    shmreg_registry *reg = NULL;
    if (shmreg_registry_create(NULL, &reg) == SHMREG_OK) {
        (void)shmreg_register_system(reg, "warm-up", key, 0, 4096, SHMREG_PIN);
        shmreg_registry_destroy(reg);
    }
    tu_shm_unlink(key);
}

int main(void)
{
    /* Before any CUDA call in this process: see exporter.h. */
    if (gt_exporter_start(&exporter) != 0) {
        perror("exporter");
        return 1;
    }
    unsigned need = SHMREG_CUDA_BUILT | SHMREG_CUDA_DRIVER | SHMREG_CUDA_DEVICE;
    unsigned caps = shmreg_cuda_available();
    if ((caps & need) != need || gt_load_driver() != 0) {
        printf("skipped: shmreg_cuda_available() = 0x%x, this test needs 0x%x\n", caps, need);
        gt_exporter_stop(&exporter);
        return 77;
    }
    warm_up_pinning();
    const struct CMUnitTest tests[] = {
        TEST(test_pinned_hit_keeps_the_pin),
        TEST(test_cached_pins_give_way),
        TEST(test_pinned_hit_with_holes),
        TEST(test_auto_pin_budget_with_the_cache),
        TEST(test_ipc_hit_reuses_the_open),
        TEST(test_reclaim_thread_closes_every_kind),
    };
    int failed = cmocka_run_group_tests_name("cuda_cache", tests, NULL, NULL);
    gt_exporter_stop(&exporter);
    return failed;
}
