/* The GPU memory frameworks allocate, registered through the public API
 * against a second process that owns it (tests/support/exporter.c): a
 * window of several cuMemCreate chunks mapped back to back (PyTorch's
 * expandable segments) that spans at least three chunks and starts in the
 * middle of one; an allocation of a stream-ordered pool exported with a
 * POSIX descriptor; a window at an offset of a cudaMalloc block (legacy
 * IPC) and of one VMM allocation; a GPU named by UUID. Each is read and
 * written byte-exact by this process and checked by the exporter, and
 * every test ends with no descriptor, mapping or device memory left. */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "exporter.h"
#include "gpu_test.h"

#define SEED 0x33
#define SEED2 0x6c
#define CHUNKS 4

static struct gt_exporter exporter;

struct fixture {
    struct gt_baseline base;
    shmreg_registry *reg;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->base = gt_take_baseline();
    f->reg = ut_new_registry(SHMREG_PIN_NEVER, SHMREG_POLICY_DEFER);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    shmreg_registry_destroy(f->reg);
    gt_check_baseline(f->base, (size_t)4 << 20);
    free(f);
    return 0;
}

/* The one region's status: its device and UUID. */
static void assert_status_device(shmreg_registry *reg, const char *name, int device, const char *uuid)
{
    shmreg_region_status *st = NULL;
    size_t n = 0;
    assert_ok(shmreg_status(reg, name, SHMREG_KIND_CUDA, &st, &n));
    assert_int_equal(n, 1);
    assert_int_equal(st[0].device_id, device);
    assert_non_null(st[0].device_uuid);
    assert_string_equal(st[0].device_uuid, uuid);
    shmreg_status_free(st, n);
}

/* Read the whole window through a view, write SEED2 into it, and have the
 * exporter see exactly that at the window's place in its allocation. */
static void read_write_window(shmreg_registry *reg, const char *name, int id, size_t offset, size_t byte_size)
{
    shmreg_region *ref = NULL;
    shmreg_view view;
    assert_ok(shmreg_acquire(reg, name, 0, byte_size, &ref, &view));
    assert_int_equal(view.kind, SHMREG_KIND_CUDA);
    assert_int_equal(view.byte_size, byte_size);
    gt_assert_device_pattern(view.addr, byte_size, SEED, offset);
    gt_write_device_pattern(view.addr, byte_size, SEED2, offset);
    gt_cuda_ok(cudaDeviceSynchronize());
    assert_int_equal(gt_exporter_check(&exporter, id, SEED2, offset, byte_size), 0);
    assert_int_equal(gt_exporter_check(&exporter, id, SEED, 0, offset), 0);
    shmreg_release(ref);
}

/* GB/s of a device-to-device copy of n bytes from src, best of 5. */
static double copy_rate(const void *src, size_t n)
{
    void *dst = NULL;
    cudaEvent_t start, stop;
    gt_cuda_ok(cudaMalloc(&dst, n));
    gt_cuda_ok(cudaEventCreate(&start));
    gt_cuda_ok(cudaEventCreate(&stop));
    float best = 1e30f;
    for (int i = 0; i < 5; i++) {
        float ms = 0;
        gt_cuda_ok(cudaEventRecord(start, 0));
        gt_cuda_ok(cudaMemcpy(dst, src, n, cudaMemcpyDeviceToDevice));
        gt_cuda_ok(cudaEventRecord(stop, 0));
        gt_cuda_ok(cudaEventSynchronize(stop));
        gt_cuda_ok(cudaEventElapsedTime(&ms, start, stop));
        best = ms < best ? ms : best;
    }
    gt_cuda_ok(cudaEventDestroy(start));
    gt_cuda_ok(cudaEventDestroy(stop));
    gt_cuda_ok(cudaFree(dst));
    return (double)n / (best * 1e6);
}

/* A window of CHUNKS chunks that starts in the middle of chunk 0 and ends
 * in chunk 2: one device pointer, the bytes in the exporter's order. */
static void test_vmm_range_spans_chunks(void **state)
{
    struct fixture *f = *state;
    struct gt_export ex;
    assert_int_equal(gt_exporter_alloc_chunks(&exporter, CHUNKS, (size_t)2 << 20, SEED, &ex), 0);
    size_t sizes[CHUNKS];
    for (size_t i = 0; i < CHUNKS; i++)
        sizes[i] = ex.chunk_size;
    const size_t offset = ex.chunk_size / 2 + 4099, byte_size = 2 * ex.chunk_size + ex.chunk_size / 4;
    assert_true((offset + byte_size - 1) / ex.chunk_size >= 2); /* three chunks at least */
    assert_ok(shmreg_register_cuda_vmm_range(f->reg, "range", ex.fds, sizes, CHUNKS, offset, byte_size, 0, 0));
    gt_export_close(&ex); /* the registration holds its own imports */
    char uuid[41];
    gt_device_uuid(0, uuid);
    assert_status_device(f->reg, "range", 0, uuid);
    read_write_window(f->reg, "range", ex.id, offset, byte_size);

    /* At the speed of device memory: a copy out of the view against one
     * between plain allocations of the same size, same run. */
    shmreg_region *ref = NULL;
    shmreg_view view;
    assert_ok(shmreg_acquire(f->reg, "range", 0, byte_size, &ref, &view));
    void *plain = NULL;
    gt_cuda_ok(cudaMalloc(&plain, byte_size));
    double through_view = copy_rate(view.addr, byte_size), between_plain = copy_rate(plain, byte_size);
    print_message("vmm range: %zu bytes over %d chunks: %.1f GB/s through the view, %.1f GB/s between cudaMalloc "
                  "buffers\n", byte_size, CHUNKS, through_view, between_plain);
    gt_cuda_ok(cudaFree(plain));
    void *addr = view.addr;
    shmreg_release(ref);
    assert_ok(shmreg_unregister(f->reg, "range", SHMREG_KIND_CUDA));
    assert_false(gt_device_mapped(addr));
    assert_int_equal(gt_exporter_free(&exporter, ex.id), 0);
}

/* A chunk declared at a size that is not its allocation's is refused as
 * the caller's bounds error, and nothing is kept. */
static void test_vmm_range_wrong_sizes(void **state)
{
    struct fixture *f = *state;
    struct gt_export ex;
    assert_int_equal(gt_exporter_alloc_chunks(&exporter, 3, (size_t)2 << 20, SEED, &ex), 0);
    size_t sizes[3] = {ex.chunk_size, 2 * ex.chunk_size, ex.chunk_size};
    assert_fails_containing(shmreg_register_cuda_vmm_range(f->reg, "r", ex.fds, sizes, 3, 0, 4096, 0, 0),
                            SHMREG_ERR_OUT_OF_BOUNDS, "chunk 1's size");
    size_t odd[3] = {ex.chunk_size, ex.chunk_size - 4096, ex.chunk_size};
    assert_fails_containing(shmreg_register_cuda_vmm_range(f->reg, "r", ex.fds, odd, 3, 0, 4096, 0, 0),
                            SHMREG_ERR_OUT_OF_BOUNDS, "is not a multiple of its granularity");
    int swapped[3] = {ex.fds[0], 0 /* stdin: not a VMM handle */, ex.fds[2]};
    assert_fails_containing(shmreg_register_cuda_vmm_range(f->reg, "r", swapped, (size_t[]){ex.chunk_size,
                                ex.chunk_size, ex.chunk_size}, 3, 0, 4096, 0, 0),
                            SHMREG_ERR_CUDA, "(chunk 1) is not a CUDA VMM shareable handle");
    assert_int_equal(ut_status_count(f->reg, SHMREG_KIND_ANY), 0);
    gt_export_close(&ex);
    assert_int_equal(gt_exporter_free(&exporter, ex.id), 0);
}

/* One VMM descriptor, a window at an offset: its end rounds up to the
 * allocation's size. */
static void test_vmm_fd_window(void **state)
{
    struct fixture *f = *state;
    struct gt_export ex;
    assert_int_equal(gt_exporter_alloc(&exporter, GT_KIND_VMM, (size_t)4 << 20, SEED, &ex), 0);
    shmreg_registration r;
    shmreg_registration_init(&r);
    r.source = SHMREG_SOURCE_CUDA_FD;
    r.name = "fdwin";
    r.fd = ex.fd;
    r.offset = ((size_t)1 << 20) + 3;
    r.byte_size = ex.size - r.offset - 100;
    assert_ok(shmreg_register(f->reg, &r));
    read_write_window(f->reg, "fdwin", ex.id, r.offset, r.byte_size);
    assert_ok(shmreg_unregister(f->reg, "fdwin", SHMREG_KIND_CUDA));
    gt_export_close(&ex);
    assert_int_equal(gt_exporter_free(&exporter, ex.id), 0);
}

static char logged[1024];
static void capture_log(void *user, shmreg_log_level level, const char *msg)
{
    snprintf(logged, sizeof logged, "%s", msg);
}

/* A cudaMallocFromPoolAsync allocation of a pool exported as a descriptor:
 * the exporter frees it after the server's last release, whose deleter
 * (cuMemFree of the import, cuMemPoolDestroy of the imported pool) must
 * log nothing. */
static void test_pool_allocation(void **state)
{
    struct fixture *f = *state;
    shmreg_registry_destroy(f->reg);
    shmreg_config cfg;
    shmreg_config_init(&cfg);
    cfg.log_fn = capture_log;
    cfg.reclaim = SHMREG_RECLAIM_INLINE;
    assert_ok(shmreg_registry_create(&cfg, &f->reg));
    logged[0] = '\0';
    struct gt_export ex;
    const size_t size = ((size_t)3 << 20) + 17, offset = 4096 + 7, byte_size = (size_t)1 << 20;
    assert_int_equal(gt_exporter_alloc(&exporter, GT_KIND_POOL, size, SEED, &ex), 0);
    assert_fails_containing(shmreg_register_cuda_pool(f->reg, "pool", ex.fd, ex.ipc, sizeof ex.ipc, size - 10, 11,
                                                      0, 0),
                            SHMREG_ERR_OUT_OF_BOUNDS, "is past the end of the");
    assert_ok(shmreg_register_cuda_pool(f->reg, "pool", ex.fd, ex.ipc, sizeof ex.ipc, offset, byte_size, 0, 0));
    gt_export_close(&ex);
    char uuid[41];
    gt_device_uuid(0, uuid);
    assert_status_device(f->reg, "pool", 0, uuid);
    read_write_window(f->reg, "pool", ex.id, offset, byte_size);
    assert_ok(shmreg_unregister(f->reg, "pool", SHMREG_KIND_CUDA));
    assert_string_equal(logged, "");
    assert_int_equal(gt_exporter_free(&exporter, ex.id), 0);
}

/* What is not a pool's descriptor is refused saying what a pool needs. */
static void test_pool_refusals(void **state)
{
    struct fixture *f = *state;
    struct gt_export ex;
    assert_int_equal(gt_exporter_alloc(&exporter, GT_KIND_VMM, (size_t)2 << 20, SEED, &ex), 0);
    unsigned char data[SHMREG_CUDA_POOL_EXPORT_SIZE] = {0};
    assert_fails_containing(shmreg_register_cuda_pool(f->reg, "p", ex.fd, data, sizeof data, 0, 4096, 0, 0),
                            SHMREG_ERR_CUDA, "is not a CUDA memory pool exported as a POSIX descriptor");
    assert_int_equal(ut_status_count(f->reg, SHMREG_KIND_ANY), 0);
    gt_export_close(&ex);
    assert_int_equal(gt_exporter_free(&exporter, ex.id), 0);
}

/* A tensor at an offset of a cudaMalloc block, whose handle names the
 * block's start. */
static void test_ipc_offset_into_block(void **state)
{
    struct fixture *f = *state;
    struct gt_export ex;
    const size_t size = (size_t)8 << 20;
    assert_int_equal(gt_exporter_alloc(&exporter, GT_KIND_IPC, size, SEED, &ex), 0);
    shmreg_registration r;
    shmreg_registration_init(&r);
    r.source = SHMREG_SOURCE_CUDA_IPC;
    r.name = "block";
    r.raw_handle = ex.ipc;
    r.raw_handle_size = sizeof ex.ipc;
    r.offset = size - 4096;
    r.byte_size = 4097;
    assert_fails_containing(shmreg_register(f->reg, &r), SHMREG_ERR_OUT_OF_BOUNDS, "is past the end of the");
    r.offset = ((size_t)3 << 20) + 5;
    r.byte_size = (size_t)1 << 20;
    assert_ok(shmreg_register(f->reg, &r));
    read_write_window(f->reg, "block", ex.id, r.offset, r.byte_size);
    assert_ok(shmreg_unregister(f->reg, "block", SHMREG_KIND_CUDA));
    assert_int_equal(gt_exporter_free(&exporter, ex.id), 0);
}

/* By UUID: device_id is ignored, the view is on the UUID's device, status
 * names it; an unknown UUID is refused listing what this process sees; with
 * a second GPU, memory on the other one is refused naming both. */
static void test_register_by_uuid(void **state)
{
    struct fixture *f = *state;
    struct gt_export ex;
    assert_int_equal(gt_exporter_alloc_chunks(&exporter, 3, (size_t)2 << 20, SEED, &ex), 0);
    size_t sizes[3] = {ex.chunk_size, ex.chunk_size, ex.chunk_size};
    char uuid[41];
    gt_device_uuid(0, uuid);
    shmreg_registration r;
    shmreg_registration_init(&r);
    r.source = SHMREG_SOURCE_CUDA_VMM_RANGE;
    r.name = "uuid";
    r.fds = ex.fds;
    r.chunk_sizes = sizes;
    r.chunk_count = 3;
    r.offset = 12345;
    r.byte_size = 2 * ex.chunk_size;
    r.device_id = 7; /* ignored */
    r.device_uuid = "GPU-00000000-0000-0000-0000-000000000000";
    assert_fails_containing(shmreg_register(f->reg, &r), SHMREG_ERR_INVALID_ARG,
                            "no CUDA device of this process has UUID GPU-00000000-0000-0000-0000-000000000000 "
                            "(visible: 0: GPU-");
    r.device_uuid = uuid;
    assert_ok(shmreg_register(f->reg, &r));
    assert_status_device(f->reg, "uuid", 0, uuid);
    read_write_window(f->reg, "uuid", ex.id, r.offset, r.byte_size);
    assert_ok(shmreg_unregister(f->reg, "uuid", SHMREG_KIND_CUDA));

    int devices = 0;
    gt_cuda_ok(cudaGetDeviceCount(&devices));
    if (devices > 1) {
        char other[41];
        gt_device_uuid(1, other);
        r.device_uuid = other;
        assert_fails_containing(shmreg_register(f->reg, &r), SHMREG_ERR_INVALID_ARG,
                                "the memory lives on CUDA device 0");
    }
    gt_export_close(&ex);
    assert_int_equal(gt_exporter_free(&exporter, ex.id), 0);
}

/* The client half: the exporter registers [offset, +len) of allocation id
 * with shmreg_send_cuda_region from the pointer alone; this process is the
 * server (receive, register, answer), then reads and writes the window. */
static void sent_by_the_client(struct fixture *f, int id, size_t offset, size_t len, shmreg_source want)
{
    assert_int_equal(gt_exporter_send_begin(&exporter, id, offset, len), 0);
    shmreg_cuda_region_request q;
    assert_ok(shmreg_recv_cuda_region(exporter.sock, &q));
    assert_int_equal(q.source, want);
    char uuid[41];
    gt_device_uuid(0, uuid);
    assert_string_equal(q.device_uuid, uuid);
    shmreg_registration r;
    shmreg_registration_init(&r);
    shmreg_cuda_region_registration(&q, &r);
    shmreg_err err = shmreg_register(f->reg, &r);
    assert_ok(shmreg_answer_region(exporter.sock, err, err == SHMREG_OK ? "" : shmreg_last_error()));
    shmreg_cuda_region_request_close(&q);
    assert_ok(err);
    assert_int_equal(gt_exporter_send_end(&exporter), 0);
    /* The window's offset in what was sent: within the first chunk of a
     * range (offset < one chunk here), within the allocation otherwise. */
    read_write_window(f->reg, "sent", id, offset, len);
    assert_ok(shmreg_unregister(f->reg, "sent", SHMREG_KIND_CUDA));
}

static void test_client_sends_each_kind(void **state)
{
    struct fixture *f = *state;
    struct gt_export ex;
    assert_int_equal(gt_exporter_alloc_chunks(&exporter, CHUNKS, (size_t)2 << 20, SEED, &ex), 0);
    sent_by_the_client(f, ex.id, ex.chunk_size / 2 + 4099, 2 * ex.chunk_size + ex.chunk_size / 4,
                       SHMREG_SOURCE_CUDA_VMM_RANGE);
    gt_export_close(&ex);
    assert_int_equal(gt_exporter_free(&exporter, ex.id), 0);

    assert_int_equal(gt_exporter_alloc(&exporter, GT_KIND_POOL, (size_t)3 << 20, SEED, &ex), 0);
    sent_by_the_client(f, ex.id, 4096 + 7, (size_t)1 << 20, SHMREG_SOURCE_CUDA_POOL);
    gt_export_close(&ex);
    assert_int_equal(gt_exporter_free(&exporter, ex.id), 0);

    assert_int_equal(gt_exporter_alloc(&exporter, GT_KIND_IPC, (size_t)8 << 20, SEED, &ex), 0);
    sent_by_the_client(f, ex.id, ((size_t)3 << 20) + 5, (size_t)1 << 20, SHMREG_SOURCE_CUDA_IPC);
    assert_int_equal(gt_exporter_free(&exporter, ex.id), 0);
}

/* What CUDA sets up once per process (contexts, IPC and pool bookkeeping)
 * is not counted against one test. */
static int group_setup(void **state)
{
    shmreg_registry *reg = ut_new_registry(SHMREG_PIN_NEVER, SHMREG_POLICY_DEFER);
    struct gt_export ex;
    const enum gt_kind kinds[] = {GT_KIND_IPC, GT_KIND_POOL, GT_KIND_VMM_CHUNKS};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        shmreg_err err;
        if (kinds[k] == GT_KIND_VMM_CHUNKS) {
            assert_int_equal(gt_exporter_alloc_chunks(&exporter, 3, (size_t)2 << 20, SEED, &ex), 0);
            size_t sizes[3] = {ex.chunk_size, ex.chunk_size, ex.chunk_size};
            err = shmreg_register_cuda_vmm_range(reg, "warmup", ex.fds, sizes, 3, 0, ex.size, 0, 0);
        } else {
            assert_int_equal(gt_exporter_alloc(&exporter, kinds[k], (size_t)2 << 20, SEED, &ex), 0);
            err = kinds[k] == GT_KIND_IPC
                      ? shmreg_register_cuda_ipc(reg, "warmup", ex.ipc, sizeof ex.ipc, 0, ex.size, 0)
                      : shmreg_register_cuda_pool(reg, "warmup", ex.fd, ex.ipc, sizeof ex.ipc, 0, ex.size, 0, 0);
        }
        assert_ok(err);
        shmreg_region *ref = NULL;
        shmreg_view view;
        assert_ok(shmreg_acquire(reg, "warmup", 0, 4096, &ref, &view));
        gt_assert_device_pattern(view.addr, 4096, SEED, 0);
        shmreg_release(ref);
        assert_ok(shmreg_unregister(reg, "warmup", SHMREG_KIND_CUDA));
        gt_export_close(&ex);
        assert_int_equal(gt_exporter_free(&exporter, ex.id), 0);
    }
    shmreg_registry_destroy(reg);
    return 0;
}

#define TEST(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    /* Before any CUDA call in this process: see exporter.h. */
    if (gt_exporter_start(&exporter) != 0) {
        perror("exporter");
        return 1;
    }
    unsigned need = SHMREG_CUDA_BUILT | SHMREG_CUDA_DRIVER | SHMREG_CUDA_DEVICE | SHMREG_CUDA_VMM_FD;
    unsigned caps = shmreg_cuda_available();
    if ((caps & need) != need || gt_load_driver() != 0) {
        printf("skipped: shmreg_cuda_available() = 0x%x, this test needs 0x%x\n", caps, need);
        gt_exporter_stop(&exporter);
        return 77;
    }
    const struct CMUnitTest tests[] = {
        TEST(test_vmm_range_spans_chunks),
        TEST(test_vmm_range_wrong_sizes),
        TEST(test_vmm_fd_window),
        TEST(test_pool_allocation),
        TEST(test_pool_refusals),
        TEST(test_ipc_offset_into_block),
        TEST(test_register_by_uuid),
        TEST(test_client_sends_each_kind),
    };
    int failed = cmocka_run_group_tests_name("cuda_frameworks", tests, group_setup, NULL);
    gt_exporter_stop(&exporter);
    return failed ? 1 : 0;
}
