/* Pinned system regions on a GPU machine: which policy and flag pins, that a
 * pinned view is page-locked memory to CUDA (cudaPointerGetAttributes), that
 * copies through it carry the region's bytes, that the last release unpins
 * before it unmaps, and that a window with holes is pinned within
 * the pin budget and copied at the pinned rate. */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "gpu_test.h"

#define SIZE ((size_t)4 << 20)
#define SEED 0x33

/* fixture.h's struct ut_shm_fixture, and no device memory left behind. */
static size_t device_free_before;

static int setup(void **state)
{
    device_free_before = gt_device_free();
    *state = ut_shm_fixture_new(SIZE, SEED);
    return 0;
}

static int teardown(void **state)
{
    ut_shm_fixture_free(*state);
    gt_check_device_free(device_free_before, SIZE);
    assert_int_equal(tu_count_shm_maps(NULL), 0);
    return 0;
}

/* Register, acquire the whole window and report view.pinned, after checking
 * it against status and against CUDA's own view of the pointer. */
static int pinned_after_register(struct ut_shm_fixture *f, const char *name, unsigned flags,
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
    struct ut_shm_fixture *f = *state;
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
    struct ut_shm_fixture *f = *state;
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
    struct ut_shm_fixture *f = *state;
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
    struct ut_shm_fixture *f = *state;
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
    struct ut_shm_fixture *f = *state;
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

/* ---- windows with holes: an output region, never written by the
 * client, and an input registered before it is written. */

#define HOLES_SIZE ((size_t)256 << 20)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A shm object of `size` bytes, ftruncate'd and never written. */
static void holes_object(char *key, size_t size)
{
    tu_unique_key("shmreg-holes", key);
    int fd = shm_open(key, O_RDWR | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)size), 0);
    close(fd);
}

/* GB/s of the best of 5 copies of n bytes, each timed until the device is
 * done: from pageable memory cudaMemcpy may return while its DMA still
 * reads the source, and a buffer freed then hands the device whatever
 * replaces it (the run before this wait saw zeros arrive). */
static double copy_rate(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    double best = 1e9;
    for (int i = 0; i < 5; i++) {
        double t0 = now_s();
        gt_cuda_ok(cudaMemcpy(dst, src, n, kind));
        gt_cuda_ok(cudaDeviceSynchronize());
        double t = now_s() - t0;
        best = t < best ? t : best;
    }
    return (double)n / best / 1e9;
}

/* Every 4093rd byte of a HOLES_SIZE window holds the pattern, or the test
 * fails naming where it looked and the first byte that differs. */
static void expect_pattern(const char *where, const unsigned char *p, const char *policy)
{
    for (size_t i = 0; i < HOLES_SIZE; i += 4093)
        if (p[i] != tu_pattern(SEED, i))
            fail_msg("%s, %s: byte %zu is %u, expected %u", policy, where, i, p[i],
                     tu_pattern(SEED, i));
}

/* Under AUTO, ALWAYS and SHMREG_PIN a window with holes is pinned (CUDA
 * sees it page-locked), the device writes into it (the output's direction)
 * and reads from it at the pinned rate, and the bytes arrive; the lines
 * "pin-holes:" give the registration time (the pin allocates every page)
 * and the copy rates, beside a pageable buffer's for comparison. */
static void test_window_with_holes_is_pinned(void **state)
{
    struct ut_shm_fixture *f = *state;
    static const struct {
        shmreg_pin_policy policy;
        unsigned flags;
        const char *what;
    } cases[] = {{SHMREG_PIN_AUTO, 0, "AUTO"}, {SHMREG_PIN_ALWAYS, 0, "PIN_ALWAYS"},
                 {SHMREG_PIN_NEVER, SHMREG_PIN, "SHMREG_PIN"}};
    void *dev = NULL;
    gt_cuda_ok(cudaMalloc(&dev, HOLES_SIZE));
    gt_write_device_pattern(dev, HOLES_SIZE, SEED, 0);
    void *pageable = malloc(HOLES_SIZE);
    assert_non_null(pageable);
    memset(pageable, 0, HOLES_SIZE);
    double pageable_d2h = copy_rate(pageable, dev, HOLES_SIZE, cudaMemcpyDeviceToHost);
    expect_pattern("a pageable buffer after D2H", pageable, "no pin");
    double pageable_h2d = copy_rate(dev, pageable, HOLES_SIZE, cudaMemcpyHostToDevice);
    gt_assert_device_pattern(dev, HOLES_SIZE, SEED, 0);
    printf("pin-holes: pageable malloc buffer: D2H %.1f GB/s, H2D %.1f GB/s\n", pageable_d2h,
           pageable_h2d);
    free(pageable);
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char key[64];
        holes_object(key, HOLES_SIZE);
        shmreg_registry_destroy(f->reg);
        f->reg = ut_new_registry(cases[c].policy, SHMREG_POLICY_DEFER);
        double t0 = now_s();
        assert_ok(shmreg_register_system(f->reg, "out", key, 0, HOLES_SIZE, cases[c].flags));
        double reg_ms = (now_s() - t0) * 1e3;
        shmreg_region *ref = NULL;
        shmreg_view view;
        assert_ok(shmreg_acquire(f->reg, "out", 0, HOLES_SIZE, &ref, &view));
        assert_int_equal(view.pinned, 1);
        assert_int_equal(gt_is_pinned(view.addr), 1);
        shmreg_stats st;
        assert_ok(shmreg_registry_stats(f->reg, &st));
        assert_int_equal(st.pinned_bytes, HOLES_SIZE);
        /* The output's direction: the device's bytes arrive where the
         * server and the client (a mapping of its own) read them. */
        double d2h = copy_rate(view.addr, dev, HOLES_SIZE, cudaMemcpyDeviceToHost);
        expect_pattern("the server's view after D2H", view.addr, cases[c].what);
        unsigned char *plain = tu_shm_map(key, HOLES_SIZE);
        expect_pattern("the client's mapping after D2H", plain, cases[c].what);
        munmap(plain, HOLES_SIZE);
        /* The input's direction, into a cleared device buffer. */
        gt_cuda_ok(cudaMemset(dev, 0, HOLES_SIZE));
        double h2d = copy_rate(dev, view.addr, HOLES_SIZE, cudaMemcpyHostToDevice);
        gt_assert_device_pattern(dev, HOLES_SIZE, SEED, 0);
        gt_write_device_pattern(dev, HOLES_SIZE, SEED, 0); /* for the next case's D2H */
        printf("pin-holes: %-10s 256 MiB never written: registered pinned in %.1f ms (%.0f ms/GiB); "
               "D2H %.1f GB/s, H2D %.1f GB/s\n",
               cases[c].what, reg_ms, reg_ms * 4, d2h, h2d);
        shmreg_release(ref);
        assert_ok(shmreg_unregister(f->reg, "out", SHMREG_KIND_SYSTEM));
        tu_shm_unlink(key);
    }
    gt_cuda_ok(cudaFree(dev));
}

/* Past the pin budget a window with holes is not pinned: AUTO registers it
 * unpinned, a demanded pin is refused naming the budget; a sparse 32 GiB
 * object answers at once (the time is printed). */
static void test_sparse_32_gib_is_not_pinned(void **state)
{
    struct ut_shm_fixture *f = *state;
    const size_t size = (size_t)32 << 30;
    char key[64];
    holes_object(key, size);
    double t0 = now_s();
    assert_ok(shmreg_register_system(f->reg, "sparse", key, 0, size, 0));
    double auto_ms = (now_s() - t0) * 1e3;
    shmreg_region_status *st = ut_status_of(f->reg, "sparse");
    assert_int_equal(st->pinned, 0);
    shmreg_status_free(st, 1);
    assert_ok(shmreg_unregister(f->reg, "sparse", SHMREG_KIND_SYSTEM));
    t0 = now_s();
    assert_fails_containing(shmreg_register_system(f->reg, "sparse", key, 0, size, SHMREG_PIN),
                            SHMREG_ERR_NO_MEMORY, "pin budget, a limit of 1073741824 (SHMREG_AUTO_PIN_BUDGET");
    double pin_ms = (now_s() - t0) * 1e3;
    printf("pin-holes: sparse 32 GiB: AUTO registered unpinned in %.3f ms, SHMREG_PIN refused in %.3f ms\n",
           auto_ms, pin_ms);
    tu_shm_unlink(key);
}

/* What another thread's copies see while a registration pins a window
 * with holes: the pin runs in the registering call and holds no lock of the
 * registry (tests/security/test_pin_rules.c proves that on the CPU), but
 * cudaHostRegister itself may hold the driver's. A request's copy is the
 * stand-in: 1 MiB host to device from page-locked memory, in a loop. */
#define COPY_SIZE ((size_t)1 << 20)

struct copier {
    void *dev, *host;
    atomic_int phase; /* 0: alone, 1: during the pin, 2: stop */
    unsigned n[2];
    double max_ms[2], sum_ms[2];
};

static void *copy_loop(void *arg)
{
    struct copier *c = arg;
    int phase;
    while ((phase = atomic_load(&c->phase)) < 2) {
        double t0 = now_s();
        if (cudaMemcpy(c->dev, c->host, COPY_SIZE, cudaMemcpyHostToDevice) != cudaSuccess)
            break;
        double ms = (now_s() - t0) * 1e3;
        /* Counted in the phase it started in. */
        c->n[phase]++;
        c->sum_ms[phase] += ms;
        c->max_ms[phase] = ms > c->max_ms[phase] ? ms : c->max_ms[phase];
    }
    return NULL;
}

static void test_pin_with_holes_beside_copies(void **state)
{
    struct ut_shm_fixture *f = *state;
    const size_t size = SHMREG_AUTO_PIN_BUDGET;
    char key[64];
    holes_object(key, size);
    struct copier c = {0};
    gt_cuda_ok(cudaMalloc(&c.dev, COPY_SIZE));
    gt_cuda_ok(cudaMallocHost(&c.host, COPY_SIZE));
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, copy_loop, &c), 0);
    struct timespec pause = {0, 100 * 1000 * 1000};
    nanosleep(&pause, NULL);
    atomic_store(&c.phase, 1);
    double t0 = now_s();
    assert_ok(shmreg_register_system(f->reg, "big", key, 0, size, 0));
    double pin_ms = (now_s() - t0) * 1e3;
    atomic_store(&c.phase, 2);
    assert_int_equal(pthread_join(thread, NULL), 0);
    shmreg_region *ref = NULL;
    shmreg_view view;
    assert_ok(shmreg_acquire(f->reg, "big", 0, size, &ref, &view));
    assert_int_equal(view.pinned, 1);
    shmreg_release(ref);
    assert_ok(shmreg_unregister(f->reg, "big", SHMREG_KIND_SYSTEM));
    assert_ok(shmreg_registry_trim(f->reg));
    gt_cuda_ok(cudaFreeHost(c.host));
    gt_cuda_ok(cudaFree(c.dev));
    tu_shm_unlink(key);
    assert_true(c.n[0] > 0);
    printf("pin-holes: AUTO pin of a never-written 1 GiB window: %.0f ms; another thread's 1 MiB H2D copies: "
           "alone %u, mean %.3f ms, max %.3f ms; during the pin %u, mean %.3f ms, max %.3f ms\n",
           pin_ms, c.n[0], c.n[0] ? c.sum_ms[0] / c.n[0] : 0, c.max_ms[0], c.n[1],
           c.n[1] ? c.sum_ms[1] / c.n[1] : 0, c.max_ms[1]);
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
        TEST(test_window_with_holes_is_pinned),
        TEST(test_sparse_32_gib_is_not_pinned),
        TEST(test_pin_with_holes_beside_copies),
    };
    return cmocka_run_group_tests_name("cuda_pin", tests, NULL, NULL) ? 1 : 0;
}
