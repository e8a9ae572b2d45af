/* CUDA regions through the public API, against a second process that owns
 * the GPU memory. The same body runs for both CUDA kinds: compiled with
 * GT_KIND=GT_KIND_IPC (legacy cudaIpcMemHandle) and GT_KIND=GT_KIND_VMM
 * (cuMemCreate exported as a POSIX descriptor and passed with
 * shmreg_send_fd). Every test starts from a fresh allocation in the exporter
 * and ends by proving no descriptor, mapping or device memory is left. */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#include "exporter.h"
#include "gpu_test.h"

#ifndef GT_KIND
#error "compile with -DGT_KIND=GT_KIND_IPC or GT_KIND_VMM"
#endif

#define SIZE ((size_t)64 << 20) /* a multiple of the VMM granularity (2 MiB) */
#define SEED 0x21
#define SEED2 0x5a

static struct gt_exporter exporter;

struct fixture {
    struct gt_baseline base;
    struct gt_export ex;
    shmreg_registry *reg;
};

/* Register the fixture's allocation under name, the way its kind is
 * registered. */
static shmreg_err register_export(shmreg_registry *reg, const char *name,
                                  const struct gt_export *ex, int device, size_t byte_size,
                                  unsigned flags)
{
    if (GT_KIND == GT_KIND_IPC)
        return shmreg_register_cuda_ipc(reg, name, ex->ipc, sizeof ex->ipc, device, byte_size,
                                        flags);
    return shmreg_register_cuda_fd(reg, name, ex->fd, device, byte_size, flags);
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->base = gt_take_baseline();
    assert_int_equal(gt_exporter_alloc(&exporter, GT_KIND, SIZE, SEED, &f->ex), 0);
    f->reg = ut_new_registry(SHMREG_PIN_AUTO, SHMREG_POLICY_DEFER);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    shmreg_registry_destroy(f->reg);
    if (f->ex.fd >= 0)
        close(f->ex.fd);
    assert_int_equal(gt_exporter_free(&exporter, f->ex.id), 0);
    /* A leaked region keeps the whole allocation alive: SIZE bytes. */
    gt_check_baseline(f->base, SIZE / 4);
    free(f);
    return 0;
}

/* One whole lifecycle on every device before the tests, so that what CUDA
 * sets up once per process and device (contexts and their descriptors, IPC
 * and UVM bookkeeping, copy staging buffers) is not counted against one. */
static int group_setup(void **state)
{
    void *fstate = NULL;
    setup(&fstate);
    struct fixture *f = fstate;
    int devices = 0;
    gt_cuda_ok(cudaGetDeviceCount(&devices));
    for (int d = 0; d < devices; d++) {
        assert_ok(register_export(f->reg, "warmup", &f->ex, d, SIZE, 0));
        shmreg_region *ref = NULL;
        shmreg_view view;
        assert_ok(shmreg_acquire(f->reg, "warmup", 0, (size_t)1 << 20, &ref, &view));
        gt_cuda_ok(cudaSetDevice(d));
        gt_assert_device_pattern(view.addr, (size_t)1 << 20, SEED, 0);
        gt_write_device_pattern(view.addr, 64, SEED, 0);
        shmreg_release(ref);
        assert_ok(shmreg_unregister(f->reg, "warmup", SHMREG_KIND_CUDA));
    }
    gt_cuda_ok(cudaSetDevice(0));
    shmreg_registry_destroy(f->reg);
    f->reg = NULL;
    if (f->ex.fd >= 0)
        close(f->ex.fd);
    gt_exporter_free(&exporter, f->ex.id);
    free(f);
    return 0;
}

static void test_read_write_across_processes(void **state)
{
    struct fixture *f = *state;
    assert_ok(register_export(f->reg, "r", &f->ex, 0, SIZE, 0));

    shmreg_region_status *st = NULL;
    size_t n = 0;
    assert_ok(shmreg_status(f->reg, "r", SHMREG_KIND_CUDA, &st, &n));
    assert_int_equal(n, 1);
    assert_int_equal(st[0].kind, SHMREG_KIND_CUDA);
    assert_null(st[0].key);
    assert_int_equal(st[0].device_id, 0);
    assert_int_equal(st[0].byte_size, SIZE);
    assert_int_equal(st[0].pinned, 0);
    shmreg_status_free(st, n);

    const size_t off = 4096, len = (size_t)1 << 20;
    shmreg_region *ref = NULL;
    shmreg_view view;
    assert_ok(shmreg_acquire(f->reg, "r", off, len, &ref, &view));
    assert_int_equal(view.kind, SHMREG_KIND_CUDA);
    assert_int_equal(view.device_id, 0);
    assert_int_equal(view.byte_size, len);
    assert_int_equal(view.pinned, 0);
    /* What the exporter wrote is what this process reads... */
    gt_assert_device_pattern(view.addr, len, SEED, off);
    /* ...and what this process writes, the exporter reads. */
    gt_write_device_pattern(view.addr, len, SEED2, off);
    gt_cuda_ok(cudaDeviceSynchronize());
    assert_int_equal(gt_exporter_check(&exporter, f->ex.id, SEED2, off, len), 0);
    assert_int_equal(gt_exporter_check(&exporter, f->ex.id, SEED, 0, off), 0);

    void *base = (char *)view.addr - off;
    shmreg_release(ref);
    assert_true(gt_device_mapped(base));
    assert_ok(shmreg_unregister(f->reg, "r", SHMREG_KIND_CUDA));
    assert_false(gt_device_mapped(base));
}

static void test_bounds(void **state)
{
    struct fixture *f = *state;
    assert_fails_containing(register_export(f->reg, "big", &f->ex, 0, SIZE + 1, 0),
                            SHMREG_ERR_OUT_OF_BOUNDS,
                            "failed to register shared memory region 'big': invalid args");
    assert_fails_containing(register_export(f->reg, "zero", &f->ex, 0, 0, 0),
                            SHMREG_ERR_OUT_OF_BOUNDS, "byte_size is 0");
    assert_int_equal(ut_status_count(f->reg, SHMREG_KIND_ANY), 0);

    /* A window smaller than the allocation, not a whole number of pages or
     * granules: the view ends where the caller said. A VMM region maps its
     * whole allocation (the driver maps no other length), so its window may
     * only end inside the last granule; legacy IPC opens the whole allocation
     * whatever the window. */
    size_t part = SIZE / 2 - 100;
    if (GT_KIND == GT_KIND_VMM) {
        assert_fails_containing(register_export(f->reg, "half", &f->ex, 0, part, 0),
                                SHMREG_ERR_OUT_OF_BOUNDS,
                                "a CUDA VMM region maps its whole allocation");
        part = SIZE - 100;
    }
    assert_ok(register_export(f->reg, "part", &f->ex, 0, part, 0));
    shmreg_region *ref = NULL;
    shmreg_view view;
    assert_fails_containing(shmreg_acquire(f->reg, "part", part, 1, &ref, &view),
                            SHMREG_ERR_OUT_OF_BOUNDS, "part");
    assert_fails_containing(shmreg_acquire(f->reg, "part", 1, part, &ref, &view),
                            SHMREG_ERR_OUT_OF_BOUNDS, "part");
    assert_null(ref);
    assert_ok(shmreg_acquire(f->reg, "part", part - 64, 64, &ref, &view));
    gt_assert_device_pattern(view.addr, 64, SEED, part - 64);
    shmreg_release(ref);
    assert_ok(shmreg_unregister(f->reg, "part", SHMREG_KIND_CUDA));
}

static void test_read_only(void **state)
{
    struct fixture *f = *state;
    assert_ok(register_export(f->reg, "ro", &f->ex, 0, SIZE, SHMREG_READONLY));
    shmreg_region_status *st = NULL;
    size_t n = 0;
    assert_ok(shmreg_status(f->reg, "ro", SHMREG_KIND_CUDA, &st, &n));
    assert_int_equal(st[0].flags & SHMREG_READONLY, SHMREG_READONLY);
    shmreg_status_free(st, n);
    shmreg_region *ref = NULL;
    shmreg_view view;
    assert_ok(shmreg_acquire(f->reg, "ro", 0, SIZE, &ref, &view));
    gt_assert_device_pattern(view.addr, 4096, SEED, 0);
    if (GT_KIND == GT_KIND_VMM) {
        /* VMM enforces it: the device may only read the range. (Legacy IPC
         * has no read-only open; there the flag is the caller's promise.) */
        unsigned long long access = 0;
        CUmemLocation loc = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
        assert_int_equal(gt_cu.cuMemGetAccess(&access, &loc, (CUdeviceptr)(uintptr_t)view.addr),
                         CUDA_SUCCESS);
        assert_int_equal(access, CU_MEM_ACCESS_FLAGS_PROT_READ);
    }
    shmreg_release(ref);
    assert_ok(shmreg_unregister(f->reg, "ro", SHMREG_KIND_CUDA));
    assert_false(gt_device_mapped(view.addr));
}

static void test_bad_handles(void **state)
{
    struct fixture *f = *state;
    assert_fails_containing(register_export(f->reg, "dev", &f->ex, 99, SIZE, 0),
                            SHMREG_ERR_INVALID_ARG, "CUDA device 99 does not exist");
    assert_fails_containing(register_export(f->reg, "dev", &f->ex, -1, SIZE, 0),
                            SHMREG_ERR_INVALID_ARG, "CUDA device -1 does not exist");
    if (GT_KIND == GT_KIND_IPC) {
        assert_fails_containing(
            shmreg_register_cuda_ipc(f->reg, "short", f->ex.ipc, 63, 0, SIZE, 0),
            SHMREG_ERR_INVALID_ARG, "a CUDA IPC handle is 64 bytes, got 63");
        unsigned char junk[64];
        memset(junk, 0xab, sizeof junk);
        assert_fails_containing(
            shmreg_register_cuda_ipc(f->reg, "junk", junk, sizeof junk, 0, SIZE, 0),
            SHMREG_ERR_CUDA, "cudaIpcOpenMemHandle: cudaError");
    } else {
        assert_fails_containing(shmreg_register_cuda_fd(f->reg, "neg", -1, 0, SIZE, 0),
                                SHMREG_ERR_INVALID_ARG, "descriptor -1 is negative");
        int p[2];
        assert_int_equal(pipe(p), 0);
        assert_fails_containing(shmreg_register_cuda_fd(f->reg, "pipe", p[0], 0, SIZE, 0),
                                SHMREG_ERR_CUDA, "is not a CUDA VMM shareable handle");
        /* The registry never closes a descriptor, even one it rejects. */
        assert_int_not_equal(fcntl(p[0], F_GETFD), -1);
        close(p[0]);
        close(p[1]);
        assert_fails_containing(shmreg_register_cuda_fd(f->reg, "closed", p[0], 0, SIZE, 0),
                                SHMREG_ERR_CUDA, "CUDA_ERROR");
    }
    assert_int_equal(ut_status_count(f->reg, SHMREG_KIND_ANY), 0);
}

static void test_registered_twice(void **state)
{
    struct fixture *f = *state;
    assert_ok(register_export(f->reg, "a", &f->ex, 0, SIZE, 0));
    assert_ok(register_export(f->reg, "b", &f->ex, 0, SIZE, 0));
    if (GT_KIND == GT_KIND_VMM)
        assert_int_not_equal(fcntl(f->ex.fd, F_GETFD), -1); /* still the caller's */
    assert_fails_containing(register_export(f->reg, "a", &f->ex, 0, SIZE, 0),
                            SHMREG_ERR_ALREADY_EXISTS, "a");

    shmreg_region *ra = NULL, *rb = NULL;
    shmreg_view va, vb;
    assert_ok(shmreg_acquire(f->reg, "a", 0, SIZE, &ra, &va));
    assert_ok(shmreg_acquire(f->reg, "b", 0, SIZE, &rb, &vb));
    shmreg_release(ra);
    /* Each registration holds its own open: closing one leaves the other. */
    assert_ok(shmreg_unregister(f->reg, "a", SHMREG_KIND_CUDA));
    gt_assert_device_pattern(vb.addr, 4096, SEED, 0);
    gt_write_device_pattern((char *)vb.addr + SIZE - 4096, 4096, SEED2, SIZE - 4096);
    gt_cuda_ok(cudaDeviceSynchronize());
    assert_int_equal(gt_exporter_check(&exporter, f->ex.id, SEED2, SIZE - 4096, 4096), 0);
    shmreg_release(rb);
    assert_ok(shmreg_unregister(f->reg, "b", SHMREG_KIND_CUDA));
    assert_false(gt_device_mapped(va.addr));
    assert_false(gt_device_mapped(vb.addr));
}

/* Register "p" in a registry of `policy`, hold a reference, unregister. */
static shmreg_region *hold_and_unregister(struct fixture *f, shmreg_policy policy,
                                          shmreg_err expect, shmreg_view *view)
{
    shmreg_registry_destroy(f->reg);
    f->reg = ut_new_registry(SHMREG_PIN_AUTO, policy);
    assert_ok(register_export(f->reg, "p", &f->ex, 0, SIZE, 0));
    shmreg_region *ref = NULL;
    assert_ok(shmreg_acquire(f->reg, "p", 0, SIZE, &ref, view));
    assert_int_equal(shmreg_unregister(f->reg, "p", SHMREG_KIND_CUDA), expect);
    /* Whatever the policy said, the held reference still reads and writes. */
    gt_assert_device_pattern(view->addr, 4096, SEED, 0);
    gt_write_device_pattern(view->addr, 16, SEED2, 0);
    gt_cuda_ok(cudaDeviceSynchronize());
    assert_int_equal(gt_exporter_check(&exporter, f->ex.id, SEED2, 0, 16), 0);
    return ref;
}

static void test_policy_defer(void **state)
{
    struct fixture *f = *state;
    shmreg_view view;
    shmreg_region *ref = hold_and_unregister(f, SHMREG_POLICY_DEFER, SHMREG_OK, &view);
    shmreg_region_status *st = NULL;
    size_t n = 0;
    assert_ok(shmreg_status(f->reg, "p", SHMREG_KIND_CUDA, &st, &n));
    assert_int_equal(st[0].pending_unregister, 1);
    assert_int_equal(st[0].references, 1);
    shmreg_status_free(st, n);
    shmreg_region *again = NULL;
    shmreg_view v2;
    assert_ok(shmreg_acquire(f->reg, "p", 0, 16, &again, &v2)); /* still acquirable */
    shmreg_release(again);
    shmreg_release(ref); /* the last one: the reclaim thread unmaps */
    assert_int_equal(ut_status_count(f->reg, SHMREG_KIND_ANY), 0);
    assert_ok(shmreg_registry_trim(f->reg));
    assert_false(gt_device_mapped(view.addr));
    assert_int_equal(ut_status_count(f->reg, SHMREG_KIND_ANY), 0);
}

static void test_policy_detach(void **state)
{
    struct fixture *f = *state;
    shmreg_view view;
    shmreg_region *ref = hold_and_unregister(f, SHMREG_POLICY_DETACH, SHMREG_OK, &view);
    shmreg_region *again = NULL;
    shmreg_view v2;
    assert_fails_containing(shmreg_acquire(f->reg, "p", 0, 16, &again, &v2),
                            SHMREG_ERR_NOT_FOUND, "p");
    /* The name is free at once, even for the same GPU memory. */
    assert_ok(register_export(f->reg, "p", &f->ex, 0, SIZE, 0));
    assert_ok(shmreg_acquire(f->reg, "p", 0, 16, &again, &v2));
    gt_assert_device_pattern(v2.addr, 16, SEED2, 0);
    shmreg_release(again);
    shmreg_release(ref); /* closes the first registration's open only */
    assert_ok(shmreg_registry_trim(f->reg)); /* (on the reclaim thread) */
    /* Legacy IPC maps one handle once per process (the driver counts opens),
     * so the second registration keeps the same pointer mapped; VMM gave
     * each registration its own range. */
    if (GT_KIND == GT_KIND_VMM)
        assert_false(gt_device_mapped(view.addr));
    assert_true(gt_device_mapped(v2.addr));
    gt_assert_device_pattern(v2.addr, 16, SEED2, 0);
    assert_ok(shmreg_unregister(f->reg, "p", SHMREG_KIND_CUDA));
    assert_false(gt_device_mapped(v2.addr));
}

static void test_policy_refuse(void **state)
{
    struct fixture *f = *state;
    shmreg_view view;
    shmreg_region *ref = hold_and_unregister(f, SHMREG_POLICY_REFUSE, SHMREG_ERR_BUSY, &view);
    shmreg_region_status *st = NULL;
    size_t n = 0;
    assert_ok(shmreg_status(f->reg, "p", SHMREG_KIND_CUDA, &st, &n));
    assert_int_equal(st[0].pending_unregister, 0);
    shmreg_status_free(st, n);
    shmreg_release(ref);
    assert_true(gt_device_mapped(view.addr)); /* still registered */
    assert_ok(shmreg_unregister(f->reg, "p", SHMREG_KIND_CUDA));
    assert_false(gt_device_mapped(view.addr));
}

static void test_destroy_with_references(void **state)
{
    struct fixture *f = *state;
    assert_ok(register_export(f->reg, "kept", &f->ex, 0, SIZE, 0));
    assert_ok(register_export(f->reg, "idle", &f->ex, 0, SIZE, 0));
    shmreg_region *ref = NULL;
    shmreg_view view;
    assert_ok(shmreg_acquire(f->reg, "kept", 0, SIZE, &ref, &view));
    shmreg_registry_destroy(f->reg);
    f->reg = NULL;
    /* The reference outlives the registry and still reaches the memory. */
    gt_assert_device_pattern((char *)view.addr + SIZE - 4096, 4096, SEED, SIZE - 4096);
    assert_true(gt_device_mapped(view.addr));
    shmreg_release(ref);
    /* The destroyed registry's reclaim thread closes it, then ends. */
    assert_true(gt_wait_unmapped(view.addr));
}

/* ---- several threads acquire, copy and release while one thread keeps
 * unregistering and registering the name again (DETACH: each round leaves
 * the old mapping to its last reader). */

#define STRESS_READERS 4
#define STRESS_ROUNDS 200

struct stress {
    struct fixture *f;
    atomic_int stop;
    atomic_long acquired;
    atomic_int bad;
};

static void *stress_reader(void *arg)
{
    struct stress *s = arg;
    gt_cuda_ok(cudaSetDevice(0));
    unsigned char buf[64];
    for (long i = 0; !atomic_load(&s->stop); i++) {
        shmreg_region *ref = NULL;
        shmreg_view view;
        if (shmreg_acquire(s->f->reg, "s", 4096, sizeof buf, &ref, &view) != SHMREG_OK)
            continue; /* between an unregister and the register that follows */
        atomic_fetch_add(&s->acquired, 1);
        /* A copy through a held reference must always succeed. */
        if (i % 16 == 0 &&
            (cudaMemcpy(buf, view.addr, sizeof buf, cudaMemcpyDeviceToHost) != cudaSuccess ||
             buf[0] != tu_pattern(SEED, 4096)))
            atomic_fetch_add(&s->bad, 1);
        shmreg_release(ref);
    }
    return NULL;
}

static void test_stress_acquire_release_unregister(void **state)
{
    struct fixture *f = *state;
    shmreg_registry_destroy(f->reg);
    f->reg = ut_new_registry(SHMREG_PIN_AUTO, SHMREG_POLICY_DETACH);
    assert_ok(register_export(f->reg, "s", &f->ex, 0, SIZE, 0));
    struct stress s = {.f = f};
    pthread_t readers[STRESS_READERS];
    for (int i = 0; i < STRESS_READERS; i++)
        assert_int_equal(pthread_create(&readers[i], NULL, stress_reader, &s), 0);
    for (int round = 0; round < STRESS_ROUNDS; round++) {
        assert_ok(shmreg_unregister(f->reg, "s", SHMREG_KIND_ANY));
        assert_ok(register_export(f->reg, "s", &f->ex, 0, SIZE, 0));
    }
    atomic_store(&s.stop, 1);
    for (int i = 0; i < STRESS_READERS; i++)
        pthread_join(readers[i], NULL);
    assert_ok(shmreg_unregister_all(f->reg, SHMREG_KIND_CUDA));
    assert_int_equal(atomic_load(&s.bad), 0);
    assert_true(atomic_load(&s.acquired) > 0);
    print_message("stress: %ld acquisitions over %d re-registrations\n",
                  atomic_load(&s.acquired), STRESS_ROUNDS);
}

/* ---- two devices: the region opened on device 1, the allocation on 0. */

static void test_second_device(void **state)
{
    struct fixture *f = *state;
    int count = 0;
    gt_cuda_ok(cudaGetDeviceCount(&count));
    if (count < 2) {
        print_message("one device: nothing to test across devices\n");
        skip();
    }
    gt_cuda_ok(cudaSetDevice(0));
    assert_ok(register_export(f->reg, "d1", &f->ex, 1, SIZE, 0));
    int current = -1;
    gt_cuda_ok(cudaGetDevice(&current));
    assert_int_equal(current, 0); /* the caller's device is left as it was */
    shmreg_region *ref = NULL;
    shmreg_view view;
    assert_ok(shmreg_acquire(f->reg, "d1", 0, SIZE, &ref, &view));
    assert_int_equal(view.device_id, 1);
    gt_cuda_ok(cudaSetDevice(1));
    gt_assert_device_pattern(view.addr, 4096, SEED, 0);
    gt_cuda_ok(cudaSetDevice(0));
    shmreg_release(ref);
    assert_ok(shmreg_unregister(f->reg, "d1", SHMREG_KIND_CUDA));
    gt_cuda_ok(cudaGetDevice(&current));
    assert_int_equal(current, 0);
}

/* ---- two devices, one VMM allocation mapped for each (docs/cuda.md: one
 * registration per device, from the same descriptor): what device 1 writes
 * through its mapping, device 0 reads through its own. */

static void test_both_devices(void **state)
{
    struct fixture *f = *state;
    int count = 0;
    gt_cuda_ok(cudaGetDeviceCount(&count));
    if (GT_KIND != GT_KIND_VMM || count < 2) {
        print_message("needs a VMM region and two devices\n");
        skip();
    }
    gt_cuda_ok(cudaSetDevice(0));
    assert_ok(register_export(f->reg, "on0", &f->ex, 0, SIZE, 0));
    assert_ok(register_export(f->reg, "on1", &f->ex, 1, SIZE, 0));
    shmreg_region *ref0 = NULL, *ref1 = NULL;
    shmreg_view view0, view1;
    assert_ok(shmreg_acquire(f->reg, "on0", 0, SIZE, &ref0, &view0));
    assert_ok(shmreg_acquire(f->reg, "on1", 0, SIZE, &ref1, &view1));
    assert_int_equal(view0.device_id, 0);
    assert_int_equal(view1.device_id, 1);
    assert_ptr_not_equal(view0.addr, view1.addr); /* a virtual range each */

    gt_cuda_ok(cudaSetDevice(1));
    gt_assert_device_pattern(view1.addr, 4096, SEED, 0);
    gt_write_device_pattern((char *)view1.addr + SIZE - 4096, 4096, SEED2, 0);
    gt_cuda_ok(cudaSetDevice(0));
    gt_assert_device_pattern((char *)view0.addr + SIZE - 4096, 4096, SEED2, 0);
    gt_assert_device_pattern(view0.addr, 4096, SEED, 0);

    shmreg_release(ref0);
    shmreg_release(ref1);
    assert_ok(shmreg_unregister(f->reg, "on0", SHMREG_KIND_CUDA));
    assert_ok(shmreg_unregister(f->reg, "on1", SHMREG_KIND_CUDA));
    assert_false(gt_device_mapped(view0.addr));
    assert_false(gt_device_mapped(view1.addr));
    int current = -1;
    gt_cuda_ok(cudaGetDevice(&current));
    assert_int_equal(current, 0);
}

#define TEST(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    /* Before any CUDA call in this process: see exporter.h. */
    if (gt_exporter_start(&exporter) != 0) {
        perror("exporter");
        return 1;
    }
    unsigned need = SHMREG_CUDA_BUILT | SHMREG_CUDA_DRIVER | SHMREG_CUDA_DEVICE;
    if (GT_KIND == GT_KIND_VMM)
        need |= SHMREG_CUDA_VMM_FD;
    unsigned caps = shmreg_cuda_available();
    if ((caps & need) != need || gt_load_driver() != 0) {
        printf("skipped: shmreg_cuda_available() = 0x%x, this test needs 0x%x\n", caps, need);
        gt_exporter_stop(&exporter);
        return 77;
    }
    const struct CMUnitTest tests[] = {
        TEST(test_read_write_across_processes),
        TEST(test_bounds),
        TEST(test_read_only),
        TEST(test_bad_handles),
        TEST(test_registered_twice),
        TEST(test_policy_defer),
        TEST(test_policy_detach),
        TEST(test_policy_refuse),
        TEST(test_destroy_with_references),
        TEST(test_stress_acquire_release_unregister),
        TEST(test_second_device),
        TEST(test_both_devices),
    };
    int failed = cmocka_run_group_tests_name(GT_KIND == GT_KIND_IPC ? "cuda_ipc" : "cuda_vmm",
                                             tests, group_setup, NULL);
    gt_exporter_stop(&exporter);
    return failed ? 1 : 0;
}
