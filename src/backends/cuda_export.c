/* The client half of the CUDA-region wire format (shmreg_send_cuda_region):
 * ask the driver which kind of allocation holds a device pointer, export
 * what another process needs to open it, and send it with
 * wire/cuda_region_socket.c. A pool allocation, then a VMM allocation (a
 * range of chunks, as PyTorch's expandable segments make), else legacy
 * IPC: the order in which the driver can tell them apart (a pool's memory
 * is VMM memory underneath, and legacy IPC opens anything cudaMalloc
 * made). Every descriptor exported here is closed before the call returns:
 * the server holds its own once the message is sent. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "backends/backend.h"
#include "backends/cuda_calls.h"
#include "base/err.h"
#include "base/sys.h"
#include "wire/cuda_region_socket.h"

static void close_fds(shmreg_cuda_region_request *q)
{
    for (size_t i = 0; i < q->fd_count; i++)
        close(q->fds[i]);
    q->fd_count = 0;
}

/* The allocation of a stream-ordered pool: the pool's descriptor and the
 * allocation's export data. */
static shmreg_err export_pool(const char *what, CUmemoryPool pool, CUdeviceptr ptr, shmreg_cuda_region_request *q)
{
    CUdeviceptr base = 0;
    size_t size = 0;
    CUresult err = shmreg__cuda.cuMemGetAddressRange(&base, &size, ptr);
    if (err != CUDA_SUCCESS)
        return shmreg__cu_fail(err, "%s: cuMemGetAddressRange", what);
    int fd = -1;
    err = shmreg__cuda.cuMemPoolExportToShareableHandle(&fd, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    if (err != CUDA_SUCCESS)
        return shmreg__fail(SHMREG_ERR_UNSUPPORTED,
                            "%s: the pointer is in a stream-ordered pool that cannot be exported as a POSIX "
                            "descriptor (a device's default pool, which plain cudaMallocAsync uses, cannot; create "
                            "the pool with cudaMemPoolCreate and handleTypes = cudaMemHandleTypePosixFileDescriptor)",
                            what);
    q->fds[q->fd_count++] = fd;
    CUmemPoolPtrExportData data;
    err = shmreg__cuda.cuMemPoolExportPointer(&data, base);
    if (err != CUDA_SUCCESS)
        return shmreg__cu_fail(err, "%s: cuMemPoolExportPointer", what);
    memcpy(q->handle, &data, sizeof data);
    q->source = SHMREG_SOURCE_CUDA_POOL;
    q->offset = (size_t)(ptr - base);
    return SHMREG_OK;
}

/* One chunk's descriptor from its retained handle. */
static shmreg_err export_chunk(const char *what, CUdeviceptr at, int *fd)
{
    CUmemGenericAllocationHandle h;
    CUresult err = shmreg__cuda.cuMemRetainAllocationHandle(&h, (void *)(uintptr_t)at);
    if (err != CUDA_SUCCESS)
        return shmreg__cu_fail(err, "%s: the window runs past the VMM chunks mapped after the pointer "
                                    "(cuMemRetainAllocationHandle)", what);
    err = shmreg__cuda.cuMemExportToShareableHandle(fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    (void)shmreg__cuda.cuMemRelease(h); /* the retain's own reference; the export holds its own */
    if (err != CUDA_SUCCESS)
        return shmreg__fail(SHMREG_ERR_UNSUPPORTED,
                            "%s: a VMM chunk of the window was created without a POSIX-descriptor handle type "
                            "(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) and cannot be exported", what);
    return SHMREG_OK;
}

/* The VMM chunks the window touches, in address order: each address range
 * the driver reports from the pointer's on is one chunk. */
static shmreg_err export_range(const char *what, CUdeviceptr ptr, size_t byte_size, shmreg_cuda_region_request *q)
{
    CUdeviceptr at = ptr, end = ptr + byte_size, first = 0;
    while (at < end) {
        if (q->fd_count == SHMREG_CUDA_CHUNKS_MAX)
            return shmreg__fail(SHMREG_ERR_OUT_OF_BOUNDS, "%s: the window spans more than %d VMM chunks", what,
                                SHMREG_CUDA_CHUNKS_MAX);
        CUdeviceptr base = 0;
        size_t size = 0;
        CUresult err = shmreg__cuda.cuMemGetAddressRange(&base, &size, at);
        if (err != CUDA_SUCCESS)
            return shmreg__cu_fail(err, "%s: cuMemGetAddressRange at chunk %zu", what, q->fd_count);
        if (q->fd_count == 0)
            first = base;
        shmreg_err rc = export_chunk(what, base, &q->fds[q->fd_count]);
        if (rc != SHMREG_OK)
            return rc;
        q->chunk_sizes[q->fd_count++] = size;
        at = base + size;
    }
    q->source = SHMREG_SOURCE_CUDA_VMM_RANGE;
    q->offset = (size_t)(ptr - first);
    return SHMREG_OK;
}

static shmreg_err export_ipc(const char *what, CUdeviceptr ptr, shmreg_cuda_region_request *q)
{
    CUdeviceptr base = 0;
    size_t size = 0;
    CUipcMemHandle h;
    CUresult err = shmreg__cuda.cuMemGetAddressRange(&base, &size, ptr);
    if (err == CUDA_SUCCESS)
        err = shmreg__cuda.cuIpcGetMemHandle(&h, base);
    if (err != CUDA_SUCCESS)
        return shmreg__cu_fail(err, "%s: legacy IPC (cuIpcGetMemHandle of the allocation's start)", what);
    memcpy(q->handle, &h, sizeof h);
    q->source = SHMREG_SOURCE_CUDA_IPC;
    q->offset = (size_t)(ptr - base);
    return SHMREG_OK;
}

/* Which kind holds ptr, and its export, with ptr's device current. */
static shmreg_err export_memory(const char *what, CUdeviceptr ptr, size_t byte_size, shmreg_cuda_region_request *q)
{
    /* NULL for memory of no pool; a failure is the driver's, not an answer
     * to guess the kind from. */
    CUmemoryPool pool = NULL;
    CUresult err = shmreg__cuda.cuPointerGetAttribute(&pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, ptr);
    if (err != CUDA_SUCCESS)
        return shmreg__cu_fail(err, "%s: cuPointerGetAttribute(MEMPOOL_HANDLE)", what);
    if (pool != NULL)
        return export_pool(what, pool, ptr, q);
    /* Memory that is not VMM's makes the retain fail: that is the answer. */
    CUmemGenericAllocationHandle h;
    if (shmreg__cuda.cuMemRetainAllocationHandle(&h, (void *)(uintptr_t)ptr) == CUDA_SUCCESS) {
        (void)shmreg__cuda.cuMemRelease(h); /* only asked whether it is VMM memory */
        return export_range(what, ptr, byte_size, q);
    }
    return export_ipc(what, ptr, q);
}

SHMREG_API shmreg_err shmreg_send_cuda_region(int sock, const char *name, const void *ptr, size_t byte_size,
                                              unsigned flags)
{
    shmreg_err rc = shmreg__cuda_send_args(sock, name, ptr, byte_size, flags);
    if (rc != SHMREG_OK)
        return rc;
    char what[320];
    snprintf(what, sizeof what, "shmreg_send_cuda_region '%s'", name);
    if ((rc = shmreg__cuda_require_device(what, 0)) != SHMREG_OK)
        return rc;
    CUdeviceptr dptr = (CUdeviceptr)(uintptr_t)ptr;
    if (byte_size > UINT64_MAX - dptr)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "%s: %p + %zu bytes overflows", what, ptr, byte_size);
    int ordinal = -1;
    CUresult err = shmreg__cuda.cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, dptr);
    if (err != CUDA_SUCCESS || ordinal < 0)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "%s: %p is not device memory the CUDA driver knows", what, ptr);
    shmreg_cuda_region_request *q = shmreg__calloc(1, sizeof *q);
    if (!q)
        return shmreg__fail(SHMREG_ERR_NO_MEMORY, "%s: out of memory", what);
    snprintf(q->name, sizeof q->name, "%s", name);
    q->flags = flags;
    q->byte_size = byte_size;
    rc = shmreg__cuda_device_uuid(what, ordinal, q->device_uuid);
    struct shmreg__cuda_device_guard guard;
    if (rc == SHMREG_OK && (rc = shmreg__cuda_device_enter(&guard, ordinal, what)) == SHMREG_OK) {
        rc = export_memory(what, dptr, byte_size, q);
        shmreg__cuda_device_leave(&guard);
    }
    if (rc == SHMREG_OK)
        rc = shmreg__send_cuda_request(sock, q);
    close_fds(q);
    shmreg__free(q);
    return rc;
}
