/* shmreg-bench-gpu: what the CUDA side of libshmreg costs and buys, on a
 * machine with a GPU.
 *
 *  1. Host<->device copy bandwidth through an acquired view of a pinned
 *     system region, of an unpinned one, and from cudaMallocHost memory (the
 *     limit), at seed 003's tensor sizes and two larger ones.
 *  2. Register and unregister cost against the bare calls they wrap: a system
 *     region with and without pinning, a legacy CUDA IPC handle, a VMM fd.
 *  3. Acquire+release throughput from 1 to 16 threads over CUDA regions.
 *  4. Background reclaim and the registration cache (issue 10): the last
 *     release of a pinned region on the releasing thread, INLINE against
 *     BACKGROUND; registering the same pinned key or IPC handle again with
 *     the cache on and off; register/acquire/release/unregister cycles per
 *     second on one pinned key, cache on against off.
 *
 * Prints markdown tables (median of the repetitions) for docs/performance.md.
 * Exits 77 where no GPU is usable. */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "cuda_driver.h"
#include "exporter.h"
#include "shmreg/shmreg.h"

#define REPS 10
#define REG_REPS 20
#define MAX_REPS 20

static struct gt_exporter exporter;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void check_cuda(cudaError_t e, const char *what)
{
    if (e != cudaSuccess) {
        fprintf(stderr, "shmreg-bench-gpu: %s: %s\n", what, cudaGetErrorName(e));
        exit(1);
    }
}

static void check_shmreg(shmreg_err e, const char *what)
{
    if (e != SHMREG_OK) {
        fprintf(stderr, "shmreg-bench-gpu: %s: %s: %s\n", what, shmreg_err_name(e),
                shmreg_last_error());
        exit(1);
    }
}

/* ------------------------------------------------------- shm objects */

/* Whether /dev/shm has room for `size` more bytes: touching pages past its
 * limit would kill the process with SIGBUS. */
static int shm_has_room(size_t size)
{
    struct statvfs st;
    if (statvfs("/dev/shm", &st) != 0)
        return 0;
    return (unsigned long long)st.f_bavail * st.f_frsize > size + ((size_t)64 << 20);
}

static void shm_create(const char *key, size_t size)
{
    int fd = shm_open(key, O_CREAT | O_RDWR | O_TRUNC, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)size) != 0) {
        perror("shm object");
        exit(1);
    }
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    memset(p, 0x5a, size); /* fault every page in: copies then measure DMA, not faults */
    munmap(p, size);
    close(fd);
}

/* ------------------------------------------------------- 1. bandwidth */

/* GB/s of the median of REPS copies of size bytes. */
static double copy_rate(void *dst, const void *src, size_t size, enum cudaMemcpyKind kind)
{
    double t[REPS];
    for (int i = 0; i < 2; i++)
        check_cuda(cudaMemcpy(dst, src, size, kind), "warm-up copy");
    for (int i = 0; i < REPS; i++) {
        double t0 = now_s();
        check_cuda(cudaMemcpy(dst, src, size, kind), "copy");
        check_cuda(cudaDeviceSynchronize(), "synchronize");
        t[i] = now_s() - t0;
    }
    return (double)size / median(t, REPS) / 1e9;
}

struct rates {
    double h2d, d2h;
};

static struct rates both_ways(void *host, void *dev, size_t size)
{
    struct rates r = {copy_rate(dev, host, size, cudaMemcpyHostToDevice),
                      copy_rate(host, dev, size, cudaMemcpyDeviceToHost)};
    return r;
}

/* A system region of the object `key` registered with `flags`, acquired. */
static struct rates through_region(shmreg_registry *reg, const char *key, size_t size,
                                   unsigned flags, void *dev, int *pinned)
{
    check_shmreg(shmreg_register_system(reg, "bw", key, 0, size, flags), "register");
    shmreg_region *ref = NULL;
    shmreg_view view;
    check_shmreg(shmreg_acquire(reg, "bw", 0, size, &ref, &view), "acquire");
    *pinned = view.pinned;
    struct rates r = both_ways(view.addr, dev, size);
    shmreg_release(ref);
    check_shmreg(shmreg_unregister(reg, "bw", SHMREG_KIND_SYSTEM), "unregister");
    return r;
}

static void bench_bandwidth(void)
{
    static const size_t sizes[] = {846720, 1474560, (size_t)16 << 20, (size_t)256 << 20};
    shmreg_registry *reg = NULL;
    check_shmreg(shmreg_registry_create(NULL, &reg), "registry");
    char key[64];
    snprintf(key, sizeof key, "/shmreg-bench-gpu-%ld", (long)getpid());
    printf("\n### Host<->device bandwidth, GB/s (H2D / D2H), cudaMemcpy, median of %d\n\n",
           REPS);
    printf("| size (bytes) | pinned region view | unpinned region view | cudaMallocHost "
           "(limit) | pinned / limit |\n| --- | --- | --- | --- | --- |\n");
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t size = sizes[i];
        if (!shm_has_room(size)) {
            printf("| %zu | (skipped: /dev/shm too small) | | | |\n", size);
            continue;
        }
        shm_create(key, size);
        void *dev = NULL, *host = NULL;
        check_cuda(cudaMalloc(&dev, size), "cudaMalloc");
        check_cuda(cudaMallocHost(&host, size), "cudaMallocHost");
        memset(host, 0x5a, size);
        int pinned = 0, unpinned = 0;
        struct rates p = through_region(reg, key, size, SHMREG_PIN, dev, &pinned);
        struct rates u = through_region(reg, key, size, SHMREG_NO_PIN, dev, &unpinned);
        struct rates m = both_ways(host, dev, size);
        printf("| %zu | %.1f / %.1f%s | %.1f / %.1f%s | %.1f / %.1f | %.0f%% / %.0f%% |\n", size,
               p.h2d, p.d2h, pinned ? "" : " (NOT pinned)", u.h2d, u.d2h,
               unpinned ? " (pinned?)" : "", m.h2d, m.d2h, 100 * p.h2d / m.h2d,
               100 * p.d2h / m.d2h);
        fflush(stdout);
        cudaFree(dev);
        cudaFreeHost(host);
        shm_unlink(key);
    }
    shmreg_registry_destroy(reg);
}

/* ------------------------------------------------------- 2. register cost */

struct cost {
    double reg_us, unreg_us;
};

/* Driver entry points for the bare VMM import the library is compared with. */
static struct {
    CUresult (*import)(CUmemGenericAllocationHandle *, void *, CUmemAllocationHandleType);
    CUresult (*reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
    CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                    unsigned long long);
    CUresult (*set_access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
    CUresult (*unmap)(CUdeviceptr, size_t);
    CUresult (*free_va)(CUdeviceptr, size_t);
    CUresult (*release)(CUmemGenericAllocationHandle);
} cu;

static void resolve(const char *name, void **slot)
{
    if (gt_driver_entry(name, slot) != 0) {
        fprintf(stderr, "shmreg-bench-gpu: no driver entry point %s\n", name);
        exit(1);
    }
}

static void check_cu(CUresult e, const char *what)
{
    if (e != CUDA_SUCCESS) {
        fprintf(stderr, "shmreg-bench-gpu: %s: CUresult %d\n", what, (int)e);
        exit(1);
    }
}

/* The operations timed: one registration and its undoing, either through
 * the library or bare. */
struct subject {
    const char *key;
    size_t size;
    unsigned flags;
    const struct gt_export *ex;
    shmreg_registry *reg;
    void *state[3]; /* what the bare variant opened */
};

typedef void (*step_fn)(struct subject *s);

static struct cost time_pair(struct subject *s, step_fn open, step_fn close)
{
    double r[MAX_REPS], u[MAX_REPS];
    open(s); /* warm-up */
    close(s);
    for (int i = 0; i < REG_REPS; i++) {
        double t0 = now_s();
        open(s);
        double t1 = now_s();
        close(s);
        double t2 = now_s();
        r[i] = (t1 - t0) * 1e6;
        u[i] = (t2 - t1) * 1e6;
    }
    struct cost c = {median(r, REG_REPS), median(u, REG_REPS)};
    return c;
}

static void lib_system_open(struct subject *s)
{
    check_shmreg(shmreg_register_system(s->reg, "c", s->key, 0, s->size, s->flags), "register");
}
static void lib_unregister(struct subject *s)
{
    check_shmreg(shmreg_unregister(s->reg, "c", SHMREG_KIND_ANY), "unregister");
}
static void bare_system_open(struct subject *s)
{
    int fd = shm_open(s->key, O_RDWR, 0);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0)
        exit(1);
    void *p = mmap(NULL, s->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        exit(1);
    if (s->flags & SHMREG_PIN)
        check_cuda(cudaHostRegister(p, s->size, cudaHostRegisterPortable), "cudaHostRegister");
    s->state[0] = p;
}
static void bare_system_close(struct subject *s)
{
    if (s->flags & SHMREG_PIN)
        check_cuda(cudaHostUnregister(s->state[0]), "cudaHostUnregister");
    munmap(s->state[0], s->size);
}
static void lib_ipc_open(struct subject *s)
{
    check_shmreg(shmreg_register_cuda_ipc(s->reg, "c", s->ex->ipc, 64, 0, s->size, 0),
                 "register_cuda_ipc");
}
static void bare_ipc_open(struct subject *s)
{
    cudaIpcMemHandle_t h;
    memcpy(&h, s->ex->ipc, sizeof h);
    check_cuda(cudaIpcOpenMemHandle(&s->state[0], h, cudaIpcMemLazyEnablePeerAccess),
               "cudaIpcOpenMemHandle");
}
static void bare_ipc_close(struct subject *s)
{
    check_cuda(cudaIpcCloseMemHandle(s->state[0]), "cudaIpcCloseMemHandle");
}
static void lib_vmm_open(struct subject *s)
{
    check_shmreg(shmreg_register_cuda_fd(s->reg, "c", s->ex->fd, 0, s->size, 0),
                 "register_cuda_fd");
}
static void bare_vmm_open(struct subject *s)
{
    CUmemGenericAllocationHandle h;
    CUdeviceptr va;
    CUmemAccessDesc access = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0},
                              .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    check_cu(cu.import(&h, (void *)(uintptr_t)s->ex->fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
             "import");
    check_cu(cu.reserve(&va, s->size, 0, 0, 0), "reserve");
    check_cu(cu.map(va, s->size, 0, h, 0), "map");
    check_cu(cu.set_access(va, s->size, &access, 1), "set access");
    s->state[0] = (void *)(uintptr_t)va;
    s->state[1] = (void *)(uintptr_t)h;
}
static void bare_vmm_close(struct subject *s)
{
    CUdeviceptr va = (CUdeviceptr)(uintptr_t)s->state[0];
    check_cu(cu.unmap(va, s->size), "unmap");
    check_cu(cu.free_va(va, s->size), "free va");
    check_cu(cu.release((CUmemGenericAllocationHandle)(uintptr_t)s->state[1]), "release");
}

static void print_cost(const char *what, struct cost lib, struct cost bare)
{
    printf("| %s | %.1f | %.1f | %+.0f%% | %.1f | %.1f | %+.0f%% |\n", what, lib.reg_us,
           bare.reg_us, 100 * (lib.reg_us - bare.reg_us) / bare.reg_us, lib.unreg_us,
           bare.unreg_us, 100 * (lib.unreg_us - bare.unreg_us) / bare.unreg_us);
    fflush(stdout);
}

static void bench_register_cost(void)
{
    resolve("cuMemImportFromShareableHandle", (void **)&cu.import);
    resolve("cuMemAddressReserve", (void **)&cu.reserve);
    resolve("cuMemMap", (void **)&cu.map);
    resolve("cuMemSetAccess", (void **)&cu.set_access);
    resolve("cuMemUnmap", (void **)&cu.unmap);
    resolve("cuMemAddressFree", (void **)&cu.free_va);
    resolve("cuMemRelease", (void **)&cu.release);

    shmreg_registry *reg = NULL;
    check_shmreg(shmreg_registry_create(NULL, &reg), "registry");
    printf("\n### Register / unregister cost, microseconds, median of %d\n\n", REG_REPS);
    printf("| what | register | bare calls | overhead | unregister | bare calls | overhead "
           "|\n| --- | --- | --- | --- | --- | --- | --- |\n");

    char key[64];
    snprintf(key, sizeof key, "/shmreg-bench-gpu-%ld", (long)getpid());
    static const size_t sys_sizes[] = {(size_t)1 << 20, (size_t)16 << 20, (size_t)256 << 20};
    for (size_t i = 0; i < sizeof sys_sizes / sizeof sys_sizes[0]; i++) {
        if (!shm_has_room(sys_sizes[i]))
            continue;
        shm_create(key, sys_sizes[i]);
        for (int pin = 0; pin <= 1; pin++) {
            struct subject s = {.key = key, .size = sys_sizes[i], .reg = reg,
                                .flags = pin ? SHMREG_PIN : SHMREG_NO_PIN};
            char what[96];
            snprintf(what, sizeof what, "system %zu MiB, %s (bare: shm_open+mmap%s)",
                     sys_sizes[i] >> 20, pin ? "pinned" : "unpinned",
                     pin ? "+cudaHostRegister" : "");
            print_cost(what, time_pair(&s, lib_system_open, lib_unregister),
                       time_pair(&s, bare_system_open, bare_system_close));
        }
        shm_unlink(key);
    }

    const size_t gpu_size = (size_t)64 << 20;
    struct gt_export ipc, vmm;
    if (gt_exporter_alloc(&exporter, GT_KIND_IPC, gpu_size, 1, &ipc) != 0)
        exit(1);
    struct subject s = {.size = gpu_size, .reg = reg, .ex = &ipc};
    print_cost("CUDA IPC 64 MiB (bare: cudaIpcOpenMemHandle)",
               time_pair(&s, lib_ipc_open, lib_unregister),
               time_pair(&s, bare_ipc_open, bare_ipc_close));
    gt_exporter_free(&exporter, ipc.id);
    if (shmreg_cuda_available() & SHMREG_CUDA_VMM_FD) {
        if (gt_exporter_alloc(&exporter, GT_KIND_VMM, gpu_size, 1, &vmm) != 0)
            exit(1);
        s.ex = &vmm;
        print_cost("CUDA VMM fd 64 MiB (bare: import+reserve+map+set access)",
                   time_pair(&s, lib_vmm_open, lib_unregister),
                   time_pair(&s, bare_vmm_open, bare_vmm_close));
        close(vmm.fd);
        gt_exporter_free(&exporter, vmm.id);
    }
    shmreg_registry_destroy(reg);
}

/* ------------------------------------------------------- 3. throughput */

#define NAMES 64

struct worker {
    shmreg_registry *reg;
    atomic_int *go, *stop;
    unsigned seed;
    long ops;
};

static void *acquire_loop(void *arg)
{
    struct worker *w = arg;
    char names[NAMES][16];
    for (int i = 0; i < NAMES; i++)
        snprintf(names[i], sizeof names[i], "gpu%d", i);
    while (!atomic_load_explicit(w->go, memory_order_acquire))
        ;
    /* The generator's state stays in this thread: the workers sit side by
     * side in one array, and a store to w->seed per pair bounced their
     * shared cache line between the threads (16 threads ran at half the rate
     * they reach without it). */
    unsigned seed = w->seed;
    long ops = 0;
    while (!atomic_load_explicit(w->stop, memory_order_relaxed)) {
        seed = seed * 1103515245u + 12345u;
        shmreg_region *ref = NULL;
        shmreg_view view;
        if (shmreg_acquire(w->reg, names[(seed >> 16) % NAMES], 0, 64, &ref, &view) ==
            SHMREG_OK) {
            shmreg_release(ref);
            ops++;
        }
    }
    w->ops = ops;
    return NULL;
}

static double run_threads(shmreg_registry *reg, int threads, double seconds)
{
    atomic_int go = 0, stop = 0;
    struct worker w[16];
    pthread_t t[16];
    for (int i = 0; i < threads; i++) {
        w[i] = (struct worker){.reg = reg, .go = &go, .stop = &stop, .seed = (unsigned)i + 1};
        pthread_create(&t[i], NULL, acquire_loop, &w[i]);
    }
    double t0 = now_s();
    atomic_store_explicit(&go, 1, memory_order_release);
    while (now_s() - t0 < seconds)
        usleep(1000);
    atomic_store(&stop, 1);
    double elapsed = now_s() - t0;
    long ops = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(t[i], NULL);
        ops += w[i].ops;
    }
    return (double)ops / elapsed / 1e6;
}

static void bench_throughput(void)
{
    struct gt_export ex;
    if (gt_exporter_alloc(&exporter, GT_KIND_IPC, (size_t)2 << 20, 1, &ex) != 0)
        exit(1);
    shmreg_registry *reg = NULL;
    check_shmreg(shmreg_registry_create(NULL, &reg), "registry");
    for (int i = 0; i < NAMES; i++) {
        char name[16];
        snprintf(name, sizeof name, "gpu%d", i);
        check_shmreg(shmreg_register_cuda_ipc(reg, name, ex.ipc, 64, 0, (size_t)2 << 20, 0),
                     "register");
    }
    printf("\n### Acquire+release, Mops/s, %d CUDA IPC regions, random names, median of 3 "
           "runs of 0.3 s\n\n| threads | 1 | 2 | 4 | 8 | 16 |\n| --- | --- | --- | --- | --- "
           "| --- |\n| shmreg |",
           NAMES);
    static const int threads[] = {1, 2, 4, 8, 16};
    for (size_t i = 0; i < sizeof threads / sizeof threads[0]; i++) {
        double r[3];
        for (int k = 0; k < 3; k++)
            r[k] = run_threads(reg, threads[i], 0.3);
        printf(" %.1f |", median(r, 3));
        fflush(stdout);
    }
    printf("\n");
    shmreg_registry_destroy(reg);
    gt_exporter_free(&exporter, ex.id);
}

/* ------------------------------------------------------- 4. reclaim, cache */

static shmreg_registry *registry_with(shmreg_reclaim reclaim, size_t cache_bytes)
{
    shmreg_config cfg;
    shmreg_config_init(&cfg);
    cfg.reclaim = reclaim;
    cfg.cache_bytes = cache_bytes;
    shmreg_registry *reg = NULL;
    check_shmreg(shmreg_registry_create(&cfg, &reg), "registry");
    return reg;
}

static double pct(double *v, int n, double p)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[(int)(p * (n - 1) + 0.5)];
}

/* The last release of an unregistered (pending) pinned region, timed on the
 * releasing thread. */
static void last_release(const char *key, size_t size, shmreg_reclaim mode, const char *label)
{
    shmreg_registry *reg = registry_with(mode, 0);
    double us[MAX_REPS];
    for (int i = 0; i < REG_REPS; i++) {
        shmreg_region *ref;
        shmreg_view v;
        check_shmreg(shmreg_register_system(reg, "r", key, 0, size, SHMREG_PIN), "register");
        check_shmreg(shmreg_acquire(reg, "r", 0, size, &ref, &v), "acquire");
        check_shmreg(shmreg_unregister(reg, "r", SHMREG_KIND_SYSTEM), "unregister");
        double t0 = now_s();
        shmreg_release(ref);
        us[i] = (now_s() - t0) * 1e6;
        check_shmreg(shmreg_registry_trim(reg), "trim");
    }
    printf("| last release, pinned %zu MiB, %s | %.1f | %.1f |\n", size >> 20, label, pct(us, REG_REPS, 0.5),
           pct(us, REG_REPS, 0.99));
    shmreg_registry_destroy(reg);
}

/* Registering again right after unregistering, median microseconds. */
static double reregister_us(shmreg_registry *reg, const char *key, const struct gt_export *ipc, size_t size)
{
    double us[MAX_REPS];
    for (int i = -1; i < REG_REPS; i++) {
        double t0 = now_s();
        if (key)
            check_shmreg(shmreg_register_system(reg, "r", key, 0, size, SHMREG_PIN), "register");
        else
            check_shmreg(shmreg_register_cuda_ipc(reg, "r", ipc->ipc, sizeof ipc->ipc, 0, size, 0), "register");
        double t1 = now_s();
        check_shmreg(shmreg_unregister(reg, "r", SHMREG_KIND_ANY), "unregister");
        if (i >= 0)
            us[i] = (t1 - t0) * 1e6;
    }
    return median(us, REG_REPS);
}

static double loop_per_s(const char *key, size_t size, size_t cache_bytes, double seconds)
{
    shmreg_registry *reg = registry_with(SHMREG_RECLAIM_BACKGROUND, cache_bytes);
    double t0 = now_s(), end = t0 + seconds;
    long cycles = 0;
    while (now_s() < end) {
        shmreg_region *ref;
        shmreg_view v;
        check_shmreg(shmreg_register_system(reg, "r", key, 0, size, SHMREG_PIN), "register");
        check_shmreg(shmreg_acquire(reg, "r", 0, size, &ref, &v), "acquire");
        shmreg_release(ref);
        check_shmreg(shmreg_unregister(reg, "r", SHMREG_KIND_SYSTEM), "unregister");
        cycles++;
    }
    double rate = (double)cycles / (now_s() - t0);
    shmreg_registry_destroy(reg);
    return rate;
}

static void bench_reclaim_cache(void)
{
    char key[64];
    snprintf(key, sizeof key, "/shmreg-bench-gpu-rc-%ld", (long)getpid());
    const size_t big = (size_t)256 << 20, small = (size_t)16 << 20;
    if (!shm_has_room(big))
        return;
    shm_create(key, big);
    printf("\n### Background reclaim and the registration cache, microseconds, %d runs\n\n", REG_REPS);
    printf("| what | median | p99 |\n| --- | --- | --- |\n");
    last_release(key, big, SHMREG_RECLAIM_INLINE, "INLINE");
    last_release(key, big, SHMREG_RECLAIM_BACKGROUND, "BACKGROUND");
    last_release(key, small, SHMREG_RECLAIM_INLINE, "INLINE");
    last_release(key, small, SHMREG_RECLAIM_BACKGROUND, "BACKGROUND");

    shmreg_registry *off = registry_with(SHMREG_RECLAIM_BACKGROUND, 0);
    shmreg_registry *on = registry_with(SHMREG_RECLAIM_BACKGROUND, (size_t)1 << 30);
    printf("\n| register again right after unregister | cache off | cache on | ratio |\n| --- | --- | --- | --- |\n");
    double a = reregister_us(off, key, NULL, big), b = reregister_us(on, key, NULL, big);
    printf("| pinned 256 MiB system region | %.1f | %.1f | %.0fx |\n", a, b, a / b);
    struct gt_export ipc;
    if (gt_exporter_alloc(&exporter, GT_KIND_IPC, (size_t)64 << 20, 1, &ipc) != 0)
        exit(1);
    a = reregister_us(off, NULL, &ipc, (size_t)64 << 20);
    b = reregister_us(on, NULL, &ipc, (size_t)64 << 20);
    printf("| CUDA IPC 64 MiB | %.1f | %.1f | %.0fx |\n", a, b, a / b);
    shmreg_registry_destroy(on);
    shmreg_registry_destroy(off);
    gt_exporter_free(&exporter, ipc.id);

    double loop_off = loop_per_s(key, small, 0, 2.0), loop_on = loop_per_s(key, small, (size_t)1 << 30, 2.0);
    printf("\n| register, acquire, release, unregister, pinned 16 MiB | cycles/s |\n| --- | --- |\n");
    printf("| cache off | %.0f |\n| cache on | %.0f (%.0fx) |\n", loop_off, loop_on, loop_on / loop_off);
    shm_unlink(key);
    fflush(stdout);
}

int main(void)
{
    /* Before any CUDA call here: the exporter must initialise CUDA itself. */
    if (gt_exporter_start(&exporter) != 0) {
        perror("exporter");
        return 1;
    }
    unsigned need = SHMREG_CUDA_BUILT | SHMREG_CUDA_DRIVER | SHMREG_CUDA_DEVICE;
    unsigned caps = shmreg_cuda_available();
    if ((caps & need) != need) {
        printf("shmreg-bench-gpu: no usable GPU (shmreg_cuda_available() = 0x%x)\n", caps);
        gt_exporter_stop(&exporter);
        return 77;
    }
    struct cudaDeviceProp prop;
    check_cuda(cudaGetDeviceProperties(&prop, 0), "device properties");
    int driver = 0;
    cudaDriverGetVersion(&driver);
    printf("## shmreg-bench-gpu: %s, driver API %d, libshmreg %s\n", prop.name, driver,
           shmreg_version());
    bench_bandwidth();
    bench_register_cost();
    bench_throughput();
    bench_reclaim_cache();
    gt_exporter_stop(&exporter);
    return 0;
}
