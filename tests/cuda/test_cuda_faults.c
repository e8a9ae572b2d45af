/* Failure injection for the CUDA side, on a GPU machine: every CUDA call the
 * library makes goes through the shmreg__cuda table (src/backends/cuda_calls.h), so
 * this test, built against the static copy of the library, fails the N-th
 * call of a registration for every N and checks that each failure is clean.
 * Clean is counted, not guessed: the wrappers keep a balance of what the
 * driver really opened and closed (IPC opens, pinned ranges, imported
 * handles, reserved ranges, maps), which must be back to zero after each
 * failed registration, and after each successful one once it is undone. */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "backends/cuda_calls.h"
#include "cuda_driver.h"
#include "exporter.h"
#include "gpu_test.h"

#define SIZE ((size_t)8 << 20)

static struct gt_exporter exporter;
static struct shmreg__cuda real;
static int calls, fail_at;
static const char *failed_call;

enum { B_IPC, B_PIN, B_IMPORT, B_VA, B_MAP, B_POOL, B_POOL_PTR, B_COUNT };
static long balance[B_COUNT];

static int inject(const char *name)
{
    if (++calls != fail_at)
        return 0;
    failed_call = name;
    return 1;
}

/* A wrapper per table entry: fail when its turn comes, else call the real
 * function and count what it opened or closed. */
#define WRAP(ret, fn, failure, params, args, counted)                                       \
    static ret wrap_##fn params                                                              \
    {                                                                                        \
        if (inject(#fn))                                                                     \
            return failure;                                                                  \
        ret r = real.fn args;                                                                \
        if (r == 0)                                                                          \
            counted;                                                                         \
        return r;                                                                            \
    }
#define NOTHING (void)0

WRAP(cudaError_t, GetDevice, cudaErrorUnknown, (int *d), (d), NOTHING)
WRAP(cudaError_t, SetDevice, cudaErrorUnknown, (int d), (d), NOTHING)
WRAP(cudaError_t, IpcOpenMemHandle, cudaErrorUnknown,
     (void **p, cudaIpcMemHandle_t h, unsigned f), (p, h, f), balance[B_IPC]++)
WRAP(cudaError_t, IpcCloseMemHandle, cudaErrorUnknown, (void *p), (p), balance[B_IPC]--)
WRAP(cudaError_t, HostRegister, cudaErrorUnknown, (void *p, size_t n, unsigned f), (p, n, f),
     balance[B_PIN]++)
WRAP(cudaError_t, HostUnregister, cudaErrorUnknown, (void *p), (p), balance[B_PIN]--)
WRAP(CUresult, cuDeviceGet, CUDA_ERROR_UNKNOWN, (CUdevice *d, int o), (d, o), NOTHING)
WRAP(CUresult, cuDeviceGetAttribute, CUDA_ERROR_UNKNOWN,
     (int *v, CUdevice_attribute a, CUdevice d), (v, a, d), NOTHING)
WRAP(CUresult, cuMemGetAddressRange, CUDA_ERROR_UNKNOWN,
     (CUdeviceptr *b, size_t *s, CUdeviceptr p), (b, s, p), NOTHING)
WRAP(CUresult, cuMemImportFromShareableHandle, CUDA_ERROR_UNKNOWN,
     (CUmemGenericAllocationHandle *h, void *os, CUmemAllocationHandleType t), (h, os, t),
     balance[B_IMPORT]++)
WRAP(CUresult, cuMemGetAllocationPropertiesFromHandle, CUDA_ERROR_UNKNOWN,
     (CUmemAllocationProp *p, CUmemGenericAllocationHandle h), (p, h), NOTHING)
WRAP(CUresult, cuMemGetAllocationGranularity, CUDA_ERROR_UNKNOWN,
     (size_t *g, const CUmemAllocationProp *p, CUmemAllocationGranularity_flags o), (g, p, o),
     NOTHING)
WRAP(CUresult, cuMemAddressReserve, CUDA_ERROR_UNKNOWN,
     (CUdeviceptr *p, size_t s, size_t al, CUdeviceptr a, unsigned long long f),
     (p, s, al, a, f), balance[B_VA]++)
WRAP(CUresult, cuMemAddressFree, CUDA_ERROR_UNKNOWN, (CUdeviceptr p, size_t s), (p, s),
     balance[B_VA]--)
WRAP(CUresult, cuMemMap, CUDA_ERROR_UNKNOWN,
     (CUdeviceptr p, size_t s, size_t o, CUmemGenericAllocationHandle h, unsigned long long f),
     (p, s, o, h, f), balance[B_MAP]++)
WRAP(CUresult, cuMemUnmap, CUDA_ERROR_UNKNOWN, (CUdeviceptr p, size_t s), (p, s),
     balance[B_MAP]--)
WRAP(CUresult, cuMemSetAccess, CUDA_ERROR_UNKNOWN,
     (CUdeviceptr p, size_t s, const CUmemAccessDesc *d, size_t n), (p, s, d, n), NOTHING)
WRAP(CUresult, cuMemRelease, CUDA_ERROR_UNKNOWN, (CUmemGenericAllocationHandle h), (h),
     balance[B_IMPORT]--)
WRAP(CUresult, cuDeviceGetUuid, CUDA_ERROR_UNKNOWN, (CUuuid *u, CUdevice d), (u, d), NOTHING)
WRAP(CUresult, cuMemPoolImportFromShareableHandle, CUDA_ERROR_UNKNOWN,
     (CUmemoryPool *p, void *os, CUmemAllocationHandleType t, unsigned long long f), (p, os, t, f),
     balance[B_POOL]++)
WRAP(CUresult, cuMemPoolImportPointer, CUDA_ERROR_UNKNOWN,
     (CUdeviceptr *p, CUmemoryPool pool, CUmemPoolPtrExportData *d), (p, pool, d), balance[B_POOL_PTR]++)
WRAP(CUresult, cuMemFree, CUDA_ERROR_UNKNOWN, (CUdeviceptr p), (p), balance[B_POOL_PTR]--)
WRAP(CUresult, cuMemPoolDestroy, CUDA_ERROR_UNKNOWN, (CUmemoryPool p), (p), balance[B_POOL]--)
WRAP(CUresult, cuPointerGetAttribute, CUDA_ERROR_UNKNOWN, (void *d, CUpointer_attribute a, CUdeviceptr p),
     (d, a, p), NOTHING)
/* The client half's exports: each retain is an imported handle's worth of
 * reference, released by cuMemRelease; the descriptors are counted by the
 * host baseline. */
WRAP(CUresult, cuMemRetainAllocationHandle, CUDA_ERROR_UNKNOWN, (CUmemGenericAllocationHandle *h, void *a),
     (h, a), balance[B_IMPORT]++)
WRAP(CUresult, cuMemExportToShareableHandle, CUDA_ERROR_UNKNOWN,
     (void *os, CUmemGenericAllocationHandle h, CUmemAllocationHandleType t, unsigned long long f), (os, h, t, f),
     NOTHING)
WRAP(CUresult, cuMemPoolExportToShareableHandle, CUDA_ERROR_UNKNOWN,
     (void *os, CUmemoryPool p, CUmemAllocationHandleType t, unsigned long long f), (os, p, t, f), NOTHING)
WRAP(CUresult, cuMemPoolExportPointer, CUDA_ERROR_UNKNOWN, (CUmemPoolPtrExportData *d, CUdeviceptr p), (d, p),
     NOTHING)
WRAP(CUresult, cuIpcGetMemHandle, CUDA_ERROR_UNKNOWN, (CUipcMemHandle *h, CUdeviceptr p), (h, p), NOTHING)

static void install_wrappers(void)
{
    real = shmreg__cuda;
#define SET(fn) shmreg__cuda.fn = wrap_##fn
    SET(GetDevice);
    SET(SetDevice);
    SET(IpcOpenMemHandle);
    SET(IpcCloseMemHandle);
    SET(HostRegister);
    SET(HostUnregister);
    SET(cuDeviceGet);
    SET(cuDeviceGetAttribute);
    SET(cuMemGetAddressRange);
    SET(cuMemImportFromShareableHandle);
    SET(cuMemGetAllocationPropertiesFromHandle);
    SET(cuMemGetAllocationGranularity);
    SET(cuMemAddressReserve);
    SET(cuMemAddressFree);
    SET(cuMemMap);
    SET(cuMemUnmap);
    SET(cuMemSetAccess);
    SET(cuMemRelease);
    SET(cuDeviceGetUuid);
    SET(cuMemPoolImportFromShareableHandle);
    SET(cuMemPoolImportPointer);
    SET(cuMemFree);
    SET(cuMemPoolDestroy);
    SET(cuPointerGetAttribute);
    SET(cuMemRetainAllocationHandle);
    SET(cuMemExportToShareableHandle);
    SET(cuMemPoolExportToShareableHandle);
    SET(cuMemPoolExportPointer);
    SET(cuIpcGetMemHandle);
#undef SET
}

static void assert_balanced(const char *what, int n)
{
    static const char *names[B_COUNT] = {"IPC opens", "pinned ranges", "imported handles",
                                         "reserved ranges", "maps", "imported pools",
                                         "imported pool allocations"};
    for (int i = 0; i < B_COUNT; i++)
        if (balance[i] != 0)
            fail_msg("%s, CUDA call %d (%s) failed: %ld %s left behind", what, n,
                     failed_call ? failed_call : "none", balance[i], names[i]);
}

static char logged[1024];
static void capture_log(void *user, shmreg_log_level level, const char *msg)
{
    snprintf(logged, sizeof logged, "%s", msg);
}

static shmreg_registry *new_registry(void)
{
    shmreg_config cfg;
    shmreg_config_init(&cfg);
    cfg.log_fn = capture_log;
    /* Deleters in the injecting thread, whose CUDA calls are counted. */
    cfg.reclaim = SHMREG_RECLAIM_INLINE;
    shmreg_registry *reg = NULL;
    assert_ok(shmreg_registry_create(&cfg, &reg));
    return reg;
}

typedef shmreg_err (*register_fn)(shmreg_registry *reg, const void *arg);

/* Fail the N-th CUDA call of `op` for N = 1, 2, ... until op makes fewer
 * than N calls (the injection no longer reaches it). */
static void fail_every_call(const char *what, register_fn op, const void *arg)
{
    shmreg_registry *reg = new_registry();
    /* One clean registration first: the process's first IPC open or VMM
     * import opens descriptors of the driver's own that stay open. */
    assert_ok(op(reg, arg));
    assert_ok(shmreg_unregister(reg, "f", SHMREG_KIND_ANY));
    struct tu_baseline base = tu_take_baseline();
    int n;
    for (n = 1;; n++) {
        calls = 0;
        fail_at = n;
        failed_call = NULL;
        shmreg_err err = op(reg, arg);
        int made = calls;
        fail_at = 0;
        if (err == SHMREG_OK) {
            assert_ok(shmreg_unregister(reg, "f", SHMREG_KIND_ANY));
        } else if (shmreg_last_error()[0] == '\0') {
            fail_msg("%s: call %d failed without a message", what, n);
        }
        assert_balanced(what, n);
        shmreg_region_status *st = NULL;
        size_t count = 0;
        assert_ok(shmreg_status(reg, NULL, SHMREG_KIND_ANY, &st, &count));
        shmreg_status_free(st, count);
        assert_int_equal(count, 0);
        if (made < n) {
            assert_int_equal(err, SHMREG_OK);
            break;
        }
    }
    tu_check_baseline(base);
    shmreg_registry_destroy(reg);
    print_message("%s: each of its %d CUDA calls failed in turn, all clean\n", what, n - 1);
}

static shmreg_err register_ipc(shmreg_registry *reg, const void *arg)
{
    const struct gt_export *ex = arg;
    return shmreg_register_cuda_ipc(reg, "f", ex->ipc, sizeof ex->ipc, 0, SIZE, 0);
}

static shmreg_err register_vmm(shmreg_registry *reg, const void *arg)
{
    const struct gt_export *ex = arg;
    return shmreg_register_cuda_fd(reg, "f", ex->fd, 0, SIZE, SHMREG_READONLY);
}

/* A window at an offset of a cudaMalloc block. */
static shmreg_err register_ipc_window(shmreg_registry *reg, const void *arg)
{
    const struct gt_export *ex = arg;
    shmreg_registration r;
    shmreg_registration_init(&r);
    r.source = SHMREG_SOURCE_CUDA_IPC;
    r.name = "f";
    r.raw_handle = ex->ipc;
    r.raw_handle_size = sizeof ex->ipc;
    r.offset = SIZE / 2 + 3;
    r.byte_size = SIZE / 4;
    return shmreg_register(reg, &r);
}

/* Three chunks or more, a window from the middle of the first to the
 * middle of the last, the GPU named by its UUID (which adds the lookup's
 * calls to the ones failed in turn). */
static char uuid0[41];
static shmreg_err register_vmm_range(shmreg_registry *reg, const void *arg)
{
    const struct gt_export *ex = arg;
    size_t sizes[GT_CHUNKS_MAX];
    for (size_t i = 0; i < ex->chunk_count; i++)
        sizes[i] = ex->chunk_size;
    shmreg_registration r;
    shmreg_registration_init(&r);
    r.source = SHMREG_SOURCE_CUDA_VMM_RANGE;
    r.name = "f";
    r.fds = ex->fds;
    r.chunk_sizes = sizes;
    r.chunk_count = ex->chunk_count;
    r.offset = ex->chunk_size / 2;
    r.byte_size = ex->size - ex->chunk_size;
    r.device_uuid = uuid0;
    return shmreg_register(reg, &r);
}

static shmreg_err register_pool(shmreg_registry *reg, const void *arg)
{
    const struct gt_export *ex = arg;
    return shmreg_register_cuda_pool(reg, "f", ex->fd, ex->ipc, sizeof ex->ipc, 4096, SIZE / 2, 0, 0);
}

static shmreg_err register_pinned(shmreg_registry *reg, const void *arg)
{
    return shmreg_register_system(reg, "f", arg, 0, SIZE, SHMREG_PIN);
}

/* fail_every_call on a fresh export of `kind` (a VMM range: 4 chunks). */
static void fail_every_call_on(enum gt_kind kind, const char *what, register_fn op)
{
    struct gt_export ex;
    int rc = kind == GT_KIND_VMM_CHUNKS ? gt_exporter_alloc_chunks(&exporter, 4, (size_t)2 << 20, 3, &ex)
                                        : gt_exporter_alloc(&exporter, kind, SIZE, 3, &ex);
    assert_int_equal(rc, 0);
    fail_every_call(what, op, &ex);
    gt_export_close(&ex);
    assert_int_equal(gt_exporter_free(&exporter, ex.id), 0);
}

static void test_ipc_register_failures(void **state)
{
    fail_every_call_on(GT_KIND_IPC, "register_cuda_ipc", register_ipc);
    fail_every_call_on(GT_KIND_IPC, "register_cuda_ipc at an offset", register_ipc_window);
}

static void test_vmm_register_failures(void **state)
{
    if (!(shmreg_cuda_available() & SHMREG_CUDA_VMM_FD))
        skip();
    fail_every_call_on(GT_KIND_VMM, "register_cuda_fd", register_vmm);
    fail_every_call_on(GT_KIND_VMM_CHUNKS, "register a VMM range of 4 chunks by UUID", register_vmm_range);
}

static void test_pool_register_failures(void **state)
{
    fail_every_call_on(GT_KIND_POOL, "register_cuda_pool", register_pool);
}

/* The deleters of a VMM range and of a pool allocation: a failing driver
 * call is logged with its CUDA error, and every other call still runs
 * (what the failed call kept is the driver's, not counted here). */
static void close_failures_are_logged(const char *what, register_fn op, const void *arg)
{
    shmreg_registry *reg = new_registry();
    for (int n = 1;; n++) {
        assert_ok(op(reg, arg));
        shmreg_region *ref = NULL;
        shmreg_view view;
        assert_ok(shmreg_acquire(reg, "f", 0, 1, &ref, &view));
        shmreg_release(ref);
        logged[0] = '\0';
        calls = 0;
        fail_at = n;
        failed_call = NULL;
        assert_ok(shmreg_unregister(reg, "f", SHMREG_KIND_CUDA)); /* the deleter runs here */
        int made = calls;
        fail_at = 0;
        if (made < n)
            break;
        if (strstr(logged, "CUDA_ERROR_UNKNOWN") == NULL && strstr(logged, "cudaErrorUnknown") == NULL)
            fail_msg("%s: call %d (%s) failed in the deleter, log says '%s'", what, n, failed_call, logged);
        /* A pool allocation whose free failed stays imported: free it here,
         * so that the next registration imports it afresh (register_pool's
         * window starts 4096 bytes in). */
        if (strcmp(failed_call, "cuMemFree") == 0)
            (void)real.cuMemFree((CUdeviceptr)(uintptr_t)view.addr - 4096);
        /* Every other release ran: whatever is left is what the failed call
         * itself would have undone. */
        for (int i = 0; i < B_COUNT; i++)
            balance[i] = 0;
        print_message("%s: deleter call %d (%s) failed: logged\n", what, n, failed_call);
    }
    shmreg_registry_destroy(reg);
}

static void test_vmm_range_and_pool_close_failures_are_logged(void **state)
{
    struct gt_export chunks, pool;
    assert_int_equal(gt_exporter_alloc_chunks(&exporter, 3, (size_t)2 << 20, 3, &chunks), 0);
    assert_int_equal(gt_exporter_alloc(&exporter, GT_KIND_POOL, SIZE, 3, &pool), 0);
    if (shmreg_cuda_available() & SHMREG_CUDA_VMM_FD)
        close_failures_are_logged("deleter of a VMM range", register_vmm_range, &chunks);
    close_failures_are_logged("deleter of a pool allocation", register_pool, &pool);
    gt_export_close(&chunks);
    gt_export_close(&pool);
    assert_int_equal(gt_exporter_free(&exporter, chunks.id), 0);
    assert_int_equal(gt_exporter_free(&exporter, pool.id), 0);
}

/* The client half (shmreg_send_cuda_region) on memory this process owns:
 * a cudaMalloc block, a POSIX-descriptor pool's allocation, and three VMM
 * chunks mapped back to back, each sent to a socketpair whose answer is
 * queued first. Every driver call failed in turn leaves no descriptor and
 * no retained handle behind; a send that got through is received and its
 * descriptors closed. */
static void send_every_call_failed(const char *what, int sv[2], const void *ptr, size_t len)
{
    /* One send that works first: the driver may open descriptors of its
     * own at a pool's or an allocation's first export and keep them; a
     * descriptor the library leaked on a failure path would still add up
     * below, one per failed call. */
    assert_ok(shmreg_answer_region(sv[1], SHMREG_OK, ""));
    assert_ok(shmreg_send_cuda_region(sv[0], "c", ptr, len, 0));
    shmreg_cuda_region_request first;
    assert_ok(shmreg_recv_cuda_region(sv[1], &first));
    shmreg_cuda_region_request_close(&first);
    struct tu_baseline base = tu_take_baseline();
    int n;
    for (n = 1;; n++) {
        assert_ok(shmreg_answer_region(sv[1], SHMREG_OK, ""));
        calls = 0;
        fail_at = n;
        failed_call = NULL;
        shmreg_err err = shmreg_send_cuda_region(sv[0], "c", ptr, len, 0);
        int made = calls;
        fail_at = 0;
        if (err == SHMREG_OK) {
            shmreg_cuda_region_request q;
            assert_ok(shmreg_recv_cuda_region(sv[1], &q));
            shmreg_cuda_region_request_close(&q);
        } else {
            char answer[64];
            if (shmreg_last_error()[0] == '\0')
                fail_msg("%s: call %d failed without a message", what, n);
            assert_true(recv(sv[0], answer, sizeof answer, MSG_DONTWAIT) > 0); /* the unread answer */
        }
        /* A release that fails keeps the retain's reference in the driver:
         * nothing a caller can do about it, and not the library's leak. */
        if (failed_call != NULL && strcmp(failed_call, "cuMemRelease") == 0)
            balance[B_IMPORT]--;
        assert_balanced(what, n);
        tu_check_baseline(base);
        if (made < n) {
            assert_int_equal(err, SHMREG_OK);
            break;
        }
    }
    print_message("%s: each of its %d CUDA calls failed in turn, all clean\n", what, n - 1);
}

static void test_client_send_failures(void **state)
{
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
    void *block = NULL;
    gt_cuda_ok(cudaMalloc(&block, SIZE));
    send_every_call_failed("send a cudaMalloc block's window", sv, (char *)block + 4096, SIZE / 2);
    gt_cuda_ok(cudaFree(block));

    struct cudaMemPoolProps props = {0};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.handleTypes = cudaMemHandleTypePosixFileDescriptor;
    cudaMemPool_t pool;
    void *p = NULL;
    gt_cuda_ok(cudaMemPoolCreate(&pool, &props));
    gt_cuda_ok(cudaMallocFromPoolAsync(&p, SIZE, pool, 0));
    gt_cuda_ok(cudaStreamSynchronize(0));
    send_every_call_failed("send a pool allocation's window", sv, (char *)p + 4096, SIZE / 2);
    gt_cuda_ok(cudaFreeAsync(p, 0));
    gt_cuda_ok(cudaStreamSynchronize(0));
    gt_cuda_ok(cudaMemPoolDestroy(pool));

    if (shmreg_cuda_available() & SHMREG_CUDA_VMM_FD) {
        CUresult (*create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
        assert_int_equal(gt_driver_entry("cuMemCreate", (void **)&create), 0);
        CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                    .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0},
                                    .requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR};
        size_t gran = 0;
        assert_int_equal(real.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), 0);
        CUmemGenericAllocationHandle h[3];
        CUdeviceptr va = 0;
        assert_int_equal(real.cuMemAddressReserve(&va, 3 * gran, gran, 0, 0), 0);
        for (int i = 0; i < 3; i++) {
            assert_int_equal(create(&h[i], gran, &prop, 0), 0);
            assert_int_equal(real.cuMemMap(va + i * gran, gran, 0, h[i], 0), 0);
        }
        CUmemAccessDesc access = {.location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
        assert_int_equal(real.cuMemSetAccess(va, 3 * gran, &access, 1), 0);
        send_every_call_failed("send a window of 3 VMM chunks", sv, (void *)(uintptr_t)(va + gran / 2), 2 * gran);
        for (int i = 0; i < 3; i++) {
            assert_int_equal(real.cuMemUnmap(va + i * gran, gran), 0);
            assert_int_equal(real.cuMemRelease(h[i]), 0);
        }
        assert_int_equal(real.cuMemAddressFree(va, 3 * gran), 0);
    }
    close(sv[0]);
    close(sv[1]);
}

static void test_pinned_register_failures(void **state)
{
    char key[64];
    tu_shm_create(SIZE, 5, key);
    fail_every_call("register_system pinned", register_pinned, key);
    tu_shm_unlink(key);
}

/* The deleter's side: a CUDA call failing inside the last release is
 * logged with its CUDA error, and the IPC handle is still closed unless the
 * close itself was the call that failed. */
static void test_ipc_close_failures_are_logged(void **state)
{
    struct gt_export ex;
    assert_int_equal(gt_exporter_alloc(&exporter, GT_KIND_IPC, SIZE, 3, &ex), 0);
    shmreg_registry *reg = new_registry();
    for (int n = 1;; n++) {
        assert_ok(register_ipc(reg, &ex));
        shmreg_region *ref = NULL;
        shmreg_view view;
        assert_ok(shmreg_acquire(reg, "f", 0, 16, &ref, &view));
        shmreg_release(ref);
        logged[0] = '\0';
        calls = 0;
        fail_at = n;
        failed_call = NULL;
        assert_ok(shmreg_unregister(reg, "f", SHMREG_KIND_CUDA)); /* the deleter runs here */
        int made = calls;
        fail_at = 0;
        if (made < n)
            break;
        if (strstr(logged, "cudaErrorUnknown") == NULL)
            fail_msg("call %d (%s) failed in the deleter, log says '%s'", n, failed_call,
                     logged);
        if (strcmp(failed_call, "IpcCloseMemHandle") == 0) {
            assert_int_equal(balance[B_IPC], 1); /* the driver kept it: close it here */
            gt_cuda_ok(real.IpcCloseMemHandle(view.addr));
            balance[B_IPC]--;
        }
        assert_balanced("deleter of a CUDA IPC region", n);
    }
    shmreg_registry_destroy(reg);
    assert_int_equal(gt_exporter_free(&exporter, ex.id), 0);
}

int main(void)
{
    if (gt_exporter_start(&exporter) != 0) {
        perror("exporter");
        return 1;
    }
    unsigned need = SHMREG_CUDA_BUILT | SHMREG_CUDA_DRIVER | SHMREG_CUDA_DEVICE;
    if ((shmreg_cuda_available() & need) != need) {
        printf("skipped: no usable GPU (shmreg_cuda_available() = 0x%x)\n",
               shmreg_cuda_available());
        gt_exporter_stop(&exporter);
        return 77;
    }
    gt_device_uuid(0, uuid0);
    install_wrappers();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ipc_register_failures),
        cmocka_unit_test(test_vmm_register_failures),
        cmocka_unit_test(test_pinned_register_failures),
        cmocka_unit_test(test_ipc_close_failures_are_logged),
        cmocka_unit_test(test_pool_register_failures),
        cmocka_unit_test(test_vmm_range_and_pool_close_failures_are_logged),
        cmocka_unit_test(test_client_send_failures),
    };
    int failed = cmocka_run_group_tests_name("cuda_faults", tests, NULL, NULL);
    shmreg__cuda = real;
    gt_exporter_stop(&exporter);
    return failed ? 1 : 0;
}
