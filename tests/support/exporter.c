#include "exporter.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuda_driver.h"
#include "shmreg/shmreg.h"
#include "testutil.h"

enum op { OP_ALLOC = 1, OP_CHECK, OP_FREE, OP_QUIT, OP_SEND };

struct request {
    int op;
    int kind;
    int id;
    uint8_t seed;
    size_t size, offset, len;
    size_t chunks; /* GT_KIND_VMM_CHUNKS: how many chunks of `size` bytes */
};

struct reply {
    int status; /* 0 ok */
    int id;
    size_t size, chunk_size, chunks;
    unsigned char ipc[64];
    char msg[200];
};

/* ------------------------------------------------------------ the child */

#define MAX_ALLOCS 64

struct allocation {
    int used, kind;
    void *ptr; /* IPC: cudaMalloc'd; VMM: where the exporter mapped it; POOL: the pool's */
    size_t size;
    CUmemGenericAllocationHandle handle;
    /* GT_KIND_VMM_CHUNKS: the chunks, mapped back to back at ptr */
    CUmemGenericAllocationHandle chunk[GT_CHUNKS_MAX];
    size_t chunks, chunk_size;
    cudaMemPool_t pool;
};

static struct {
    CUresult (*cuMemCreate)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                            unsigned long long);
    CUresult (*cuMemExportToShareableHandle)(void *, CUmemGenericAllocationHandle,
                                             CUmemAllocationHandleType, unsigned long long);
    CUresult (*cuMemGetAllocationGranularity)(size_t *, const CUmemAllocationProp *,
                                              CUmemAllocationGranularity_flags);
    CUresult (*cuMemAddressReserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr,
                                    unsigned long long);
    CUresult (*cuMemAddressFree)(CUdeviceptr, size_t);
    CUresult (*cuMemMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                         unsigned long long);
    CUresult (*cuMemUnmap)(CUdeviceptr, size_t);
    CUresult (*cuMemSetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
    CUresult (*cuMemRelease)(CUmemGenericAllocationHandle);
} cu;

static struct allocation allocs[MAX_ALLOCS];

static int resolve_all(void)
{
    static const struct {
        const char *name;
        void **slot;
    } syms[] = {
        {"cuMemCreate", (void **)&cu.cuMemCreate},
        {"cuMemExportToShareableHandle", (void **)&cu.cuMemExportToShareableHandle},
        {"cuMemGetAllocationGranularity", (void **)&cu.cuMemGetAllocationGranularity},
        {"cuMemAddressReserve", (void **)&cu.cuMemAddressReserve},
        {"cuMemAddressFree", (void **)&cu.cuMemAddressFree},
        {"cuMemMap", (void **)&cu.cuMemMap},
        {"cuMemUnmap", (void **)&cu.cuMemUnmap},
        {"cuMemSetAccess", (void **)&cu.cuMemSetAccess},
        {"cuMemRelease", (void **)&cu.cuMemRelease},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++)
        if (gt_driver_entry(syms[i].name, syms[i].slot) != 0)
            return -1;
    return 0;
}

static int fill(void *dev, size_t size, uint8_t seed)
{
    uint8_t *host = malloc(size);
    if (!host)
        return -1;
    for (size_t i = 0; i < size; i++)
        host[i] = tu_pattern(seed, i);
    cudaError_t err = cudaMemcpy(dev, host, size, cudaMemcpyHostToDevice);
    free(host);
    return err == cudaSuccess ? 0 : -1;
}

static CUmemAllocationProp vmm_prop(void)
{
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    return prop;
}

/* cuMemCreate, then map it here too so the exporter can fill and check it. */
static int vmm_create(struct allocation *a, size_t size, struct reply *r)
{
    CUmemAllocationProp prop = vmm_prop();
    size_t gran = 0;
    CUresult e = cu.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (e == CUDA_SUCCESS) {
        a->size = (size + gran - 1) / gran * gran;
        e = cu.cuMemCreate(&a->handle, a->size, &prop, 0);
    }
    if (e != CUDA_SUCCESS) {
        snprintf(r->msg, sizeof r->msg, "cuMemCreate: CUresult %d", (int)e);
        return -1;
    }
    CUdeviceptr va = 0;
    CUmemAccessDesc access = {.location = prop.location,
                              .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    e = cu.cuMemAddressReserve(&va, a->size, 0, 0, 0);
    if (e == CUDA_SUCCESS && (e = cu.cuMemMap(va, a->size, 0, a->handle, 0)) == CUDA_SUCCESS)
        e = cu.cuMemSetAccess(va, a->size, &access, 1);
    if (e != CUDA_SUCCESS) {
        snprintf(r->msg, sizeof r->msg, "exporter map: CUresult %d", (int)e);
        return -1; /* the child exits on failure; the driver reclaims */
    }
    a->ptr = (void *)(uintptr_t)va;
    return 0;
}

/* count chunks of size bytes each, mapped back to back, readable and
 * writable here; on failure the child exits and the driver reclaims. */
static int chunks_create(struct allocation *a, size_t count, size_t size, struct reply *r)
{
    CUmemAllocationProp prop = vmm_prop();
    size_t gran = 0;
    CUresult e = cu.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (e != CUDA_SUCCESS || count == 0 || count > GT_CHUNKS_MAX) {
        snprintf(r->msg, sizeof r->msg, "chunks: granularity CUresult %d, count %zu", (int)e, count);
        return -1;
    }
    a->chunks = count;
    a->chunk_size = (size + gran - 1) / gran * gran;
    a->size = a->chunk_size * count;
    CUdeviceptr va = 0;
    e = cu.cuMemAddressReserve(&va, a->size, gran, 0, 0);
    for (size_t i = 0; i < count && e == CUDA_SUCCESS; i++) {
        e = cu.cuMemCreate(&a->chunk[i], a->chunk_size, &prop, 0);
        if (e == CUDA_SUCCESS)
            e = cu.cuMemMap(va + i * a->chunk_size, a->chunk_size, 0, a->chunk[i], 0);
    }
    CUmemAccessDesc access = {.location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    if (e == CUDA_SUCCESS)
        e = cu.cuMemSetAccess(va, a->size, &access, 1);
    if (e != CUDA_SUCCESS) {
        snprintf(r->msg, sizeof r->msg, "chunks: CUresult %d", (int)e);
        return -1;
    }
    a->ptr = (void *)(uintptr_t)va;
    return 0;
}

/* A pool that can be exported, and an allocation of it, complete before it
 * is sent (the importer reads it at once). */
static int pool_create(struct allocation *a, size_t size, struct reply *r, int *fd)
{
    struct cudaMemPoolProps props = {0};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    props.handleTypes = cudaMemHandleTypePosixFileDescriptor;
    cudaError_t e = cudaMemPoolCreate(&a->pool, &props);
    if (e == cudaSuccess)
        e = cudaMallocFromPoolAsync(&a->ptr, size, a->pool, 0);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(0);
    if (e == cudaSuccess)
        e = cudaMemPoolExportToShareableHandle(fd, a->pool, cudaMemHandleTypePosixFileDescriptor, 0);
    if (e == cudaSuccess)
        e = cudaMemPoolExportPointer((struct cudaMemPoolPtrExportData *)r->ipc, a->ptr);
    if (e != cudaSuccess) {
        snprintf(r->msg, sizeof r->msg, "pool: %s", cudaGetErrorName(e));
        return -1;
    }
    a->size = size;
    return 0;
}

static void release(struct allocation *a)
{
    if (a->kind == GT_KIND_IPC) {
        cudaFree(a->ptr);
    } else if (a->kind == GT_KIND_POOL) {
        cudaFreeAsync(a->ptr, 0);
        cudaStreamSynchronize(0);
        cudaMemPoolDestroy(a->pool);
    } else if (a->kind == GT_KIND_VMM_CHUNKS) {
        for (size_t i = 0; i < a->chunks; i++)
            cu.cuMemUnmap((CUdeviceptr)(uintptr_t)a->ptr + i * a->chunk_size, a->chunk_size);
        cu.cuMemAddressFree((CUdeviceptr)(uintptr_t)a->ptr, a->size);
        for (size_t i = 0; i < a->chunks; i++)
            cu.cuMemRelease(a->chunk[i]);
    } else {
        cu.cuMemUnmap((CUdeviceptr)(uintptr_t)a->ptr, a->size);
        cu.cuMemAddressFree((CUdeviceptr)(uintptr_t)a->ptr, a->size);
        cu.cuMemRelease(a->handle);
    }
    a->used = 0;
}

static int find_slot(void)
{
    for (int i = 0; i < MAX_ALLOCS; i++)
        if (!allocs[i].used)
            return i;
    return -1;
}

static void serve_alloc(int sock, const struct request *q)
{
    struct reply r = {.status = -1, .id = find_slot()};
    struct allocation *a = r.id >= 0 ? &allocs[r.id] : NULL;
    int fd = -1, fds[GT_CHUNKS_MAX];
    size_t nfds = 0;
    if (!a) {
        snprintf(r.msg, sizeof r.msg, "too many allocations");
    } else if (q->kind == GT_KIND_VMM_CHUNKS) {
        if (chunks_create(a, q->chunks, q->size, &r) == 0) {
            CUresult e = CUDA_SUCCESS;
            for (; nfds < a->chunks && e == CUDA_SUCCESS; nfds++)
                e = cu.cuMemExportToShareableHandle(&fds[nfds], a->chunk[nfds],
                                                    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
            if (e == CUDA_SUCCESS && fill(a->ptr, a->size, q->seed) == 0)
                r.status = 0;
            else
                snprintf(r.msg, sizeof r.msg, "chunks export: CUresult %d", (int)e);
            if (e != CUDA_SUCCESS)
                nfds--;
            r.chunk_size = a->chunk_size;
            r.chunks = a->chunks;
        }
    } else if (q->kind == GT_KIND_POOL) {
        if (pool_create(a, q->size, &r, &fd) == 0 && fill(a->ptr, q->size, q->seed) == 0)
            r.status = 0;
    } else if (q->kind == GT_KIND_IPC) {
        a->size = q->size;
        if (cudaMalloc(&a->ptr, q->size) == cudaSuccess && fill(a->ptr, q->size, q->seed) == 0 &&
            cudaIpcGetMemHandle((cudaIpcMemHandle_t *)r.ipc, a->ptr) == cudaSuccess)
            r.status = 0;
        else
            snprintf(r.msg, sizeof r.msg, "cudaMalloc/cudaIpcGetMemHandle failed");
    } else if (vmm_create(a, q->size, &r) == 0) {
        CUresult e = cu.cuMemExportToShareableHandle(&fd, a->handle,
                                                     CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
        if (e == CUDA_SUCCESS && fill(a->ptr, a->size, q->seed) == 0)
            r.status = 0;
        else
            snprintf(r.msg, sizeof r.msg, "cuMemExportToShareableHandle: CUresult %d", (int)e);
    }
    if (r.status == 0) {
        a->used = 1;
        a->kind = q->kind;
        r.size = a->size;
    }
    /* The reply first, then (VMM) the descriptor in a message of its own, so
     * a failure's message reaches the parent too. */
    send(sock, &r, sizeof r, 0);
    if (r.status == 0 && fd >= 0)
        shmreg_send_fd(sock, fd, &r.id, sizeof r.id);
    if (r.status == 0 && nfds > 0)
        shmreg_send_fds(sock, fds, nfds, &r.id, sizeof r.id);
    if (fd >= 0)
        close(fd); /* the receiver holds its own descriptor now */
    for (size_t i = 0; i < nfds; i++)
        close(fds[i]);
}

static void serve_check(int sock, const struct request *q)
{
    struct reply r = {.status = -1, .id = q->id};
    struct allocation *a = q->id >= 0 && q->id < MAX_ALLOCS ? &allocs[q->id] : NULL;
    uint8_t *host = a && a->used && q->offset + q->len <= a->size ? malloc(q->len) : NULL;
    if (host && cudaMemcpy(host, (char *)a->ptr + q->offset, q->len, cudaMemcpyDeviceToHost) ==
                    cudaSuccess) {
        r.status = 0;
        for (size_t i = 0; i < q->len && r.status == 0; i++)
            if (host[i] != tu_pattern(q->seed, q->offset + i)) {
                r.status = -1;
                snprintf(r.msg, sizeof r.msg, "byte %zu differs", q->offset + i);
            }
    } else {
        snprintf(r.msg, sizeof r.msg, "cannot read allocation %d", q->id);
    }
    free(host);
    send(sock, &r, sizeof r, 0);
}

static void serve(int sock)
{
    if (resolve_all() != 0 || cudaSetDevice(0) != cudaSuccess)
        _exit(2);
    struct request q;
    while (recv(sock, &q, sizeof q, 0) == (ssize_t)sizeof q && q.op != OP_QUIT) {
        if (q.op == OP_ALLOC) {
            serve_alloc(sock, &q);
        } else if (q.op == OP_CHECK) {
            serve_check(sock, &q);
        } else if (q.op == OP_SEND) {
            /* The client half under test: it finds the allocation's kind
             * itself, from the pointer alone. */
            struct reply r = {.status = -1, .id = q.id};
            if (q.id >= 0 && q.id < MAX_ALLOCS && allocs[q.id].used) {
                r.status = shmreg_send_cuda_region(sock, "sent", (char *)allocs[q.id].ptr + q.offset, q.len, 0);
                snprintf(r.msg, sizeof r.msg, "%s", r.status ? shmreg_last_error() : "");
            }
            send(sock, &r, sizeof r, 0);
        } else if (q.op == OP_FREE) {
            struct reply r = {.status = -1, .id = q.id};
            if (q.id >= 0 && q.id < MAX_ALLOCS && allocs[q.id].used) {
                release(&allocs[q.id]);
                r.status = 0;
            }
            send(sock, &r, sizeof r, 0);
        }
    }
    for (int i = 0; i < MAX_ALLOCS; i++)
        if (allocs[i].used)
            release(&allocs[i]);
    _exit(0);
}

/* ----------------------------------------------------------- the parent */

int gt_exporter_start(struct gt_exporter *ex)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(sv[0]);
        close(sv[1]);
        return -1;
    }
    if (pid == 0) {
        close(sv[0]);
        serve(sv[1]);
    }
    close(sv[1]);
    ex->pid = pid;
    ex->sock = sv[0];
    return 0;
}

static int request(struct gt_exporter *ex, const struct request *q, struct reply *r)
{
    if (send(ex->sock, q, sizeof *q, 0) != (ssize_t)sizeof *q)
        return -1;
    if (recv(ex->sock, r, sizeof *r, 0) != (ssize_t)sizeof *r)
        return -1;
    if (r->status != 0)
        fprintf(stderr, "exporter: %s\n", r->msg);
    return r->status;
}

static int alloc_any(struct gt_exporter *ex, const struct request *q, struct gt_export *out);

int gt_exporter_alloc(struct gt_exporter *ex, enum gt_kind kind, size_t size, uint8_t seed,
                      struct gt_export *out)
{
    struct request q = {.op = OP_ALLOC, .kind = kind, .seed = seed, .size = size};
    return alloc_any(ex, &q, out);
}

int gt_exporter_alloc_chunks(struct gt_exporter *ex, size_t count, size_t chunk_size, uint8_t seed,
                             struct gt_export *out)
{
    struct request q = {.op = OP_ALLOC, .kind = GT_KIND_VMM_CHUNKS, .seed = seed, .size = chunk_size,
                        .chunks = count};
    return alloc_any(ex, &q, out);
}

void gt_export_close(struct gt_export *out)
{
    if (out->fd >= 0)
        close(out->fd);
    out->fd = -1;
    for (size_t i = 0; i < out->chunk_count; i++)
        close(out->fds[i]);
    out->chunk_count = 0;
}

static int alloc_any(struct gt_exporter *ex, const struct request *q, struct gt_export *out)
{
    struct reply r;
    enum gt_kind kind = (enum gt_kind)q->kind;
    memset(out, 0, sizeof *out);
    out->fd = -1;
    if (send(ex->sock, q, sizeof *q, 0) != (ssize_t)sizeof *q)
        return -1;
    if (recv(ex->sock, &r, sizeof r, 0) != (ssize_t)sizeof r)
        return -1;
    if (r.status != 0) {
        fprintf(stderr, "exporter: %s\n", r.msg);
        return -1;
    }
    if (kind == GT_KIND_VMM_CHUNKS) {
        int id = -1;
        size_t got = 0, count = 0;
        if (shmreg_recv_fds(ex->sock, out->fds, GT_CHUNKS_MAX, &count, &id, sizeof id, &got) != SHMREG_OK ||
            count != r.chunks) {
            fprintf(stderr, "exporter: no descriptors: %s\n", shmreg_last_error());
            return -1;
        }
        out->chunk_count = count;
        out->chunk_size = r.chunk_size;
    }
    if (kind == GT_KIND_VMM || kind == GT_KIND_POOL) {
        int id = -1;
        size_t got = 0;
        if (shmreg_recv_fd(ex->sock, &out->fd, &id, sizeof id, &got) != SHMREG_OK) {
            fprintf(stderr, "exporter: no descriptor: %s\n", shmreg_last_error());
            return -1;
        }
    }
    out->id = r.id;
    out->size = r.size;
    memcpy(out->ipc, r.ipc, sizeof out->ipc);
    return 0;
}

int gt_exporter_check(struct gt_exporter *ex, int id, uint8_t seed, size_t offset, size_t len)
{
    struct request q = {.op = OP_CHECK, .id = id, .seed = seed, .offset = offset, .len = len};
    struct reply r;
    return request(ex, &q, &r);
}

int gt_exporter_free(struct gt_exporter *ex, int id)
{
    struct request q = {.op = OP_FREE, .id = id};
    struct reply r;
    return request(ex, &q, &r);
}

void gt_exporter_stop(struct gt_exporter *ex)
{
    struct request q = {.op = OP_QUIT};
    send(ex->sock, &q, sizeof q, 0);
    close(ex->sock);
    waitpid(ex->pid, NULL, 0);
}

int gt_exporter_send_begin(struct gt_exporter *ex, int id, size_t offset, size_t len)
{
    struct request q = {.op = OP_SEND, .id = id, .offset = offset, .len = len};
    return send(ex->sock, &q, sizeof q, 0) == (ssize_t)sizeof q ? 0 : -1;
}

int gt_exporter_send_end(struct gt_exporter *ex)
{
    struct reply r;
    if (recv(ex->sock, &r, sizeof r, 0) != (ssize_t)sizeof r)
        return -1;
    if (r.status != 0)
        fprintf(stderr, "exporter: shmreg_send_cuda_region: %s\n", r.msg);
    return r.status;
}
