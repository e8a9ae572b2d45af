/* GPU memory exported by another process as a legacy CUDA IPC handle
 * (cudaIpcGetMemHandle): opened with cudaIpcOpenMemHandle on the region's
 * device, closed with cudaIpcCloseMemHandle by the last release.
 *
 * The driver counts opens of one handle within a process, so the same handle
 * registered under several names gets the same pointer each time and each
 * registration closes only its own open. The handle's bytes are kept while
 * the region is mapped, for a handover (handover/) to carry: a process that
 * receives them opens the handle itself. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "backends/backend.h"
#include "backends/cuda_calls.h"
#include "base/err.h"
#include "base/sys.h"

#define SHMREG_CUDA_IPC_HANDLE_SIZE 64

static shmreg_err cuda_ipc_inspect(struct shmreg__open_args *a);
static void cuda_ipc_forget(struct shmreg__open_args *a);
static shmreg_err cuda_ipc_open(const struct shmreg__open_args *a, struct shmreg__opened *out);
static shmreg_err cuda_ipc_close(struct shmreg__opened *m, const char *region_name);
static void cuda_ipc_carried(const struct shmreg__opened *m, struct shmreg__carried *out);

const struct shmreg__backend shmreg__backend_cuda_ipc = {
    .name = "cuda_ipc",
    .kind = SHMREG_KIND_CUDA,
    .prepare = shmreg__cuda_ipc_prepare,
    .inspect = cuda_ipc_inspect,
    .forget = cuda_ipc_forget,
    .open = cuda_ipc_open,
    .close = cuda_ipc_close,
    .carried = cuda_ipc_carried,
};

_Static_assert(sizeof(cudaIpcMemHandle_t) == SHMREG_CUDA_IPC_HANDLE_SIZE,
               "the public API documents a 64-byte CUDA IPC handle (cuda_args.c checks that size)");

/* The memory is who the handle bytes and the device say; nothing to open
 * before the cache looks (the bounds against the allocation are checked
 * against the mapping's length on a reuse, by open on a miss: the same
 * message either way). A device named by UUID is resolved here, so that a
 * registration by UUID and one by ordinal of the same device share. */
static shmreg_err cuda_ipc_inspect(struct shmreg__open_args *a)
{
    int device_id = a->r->device_id;
    if (a->r->device_uuid != NULL) {
        char what[320], uuid[SHMREG__CUDA_UUID_TEXT];
        snprintf(what, sizeof what, "failed to register CUDA IPC region '%s'", a->r->name);
        shmreg_err rc = shmreg__cuda_device_of(what, a->r, &device_id, uuid);
        if (rc != SHMREG_OK)
            return rc;
    }
    a->fd = -1;
    a->object_offset = a->r->offset;
    a->id = (struct shmreg__identity){.valid = true};
    memcpy(a->id.words, a->r->raw_handle, SHMREG_CUDA_IPC_HANDLE_SIZE);
    a->id.words[8] = (uint64_t)(int64_t)device_id;
    a->id.words[9] = (a->r->flags & SHMREG_READONLY) != 0;
    return SHMREG_OK;
}

static void cuda_ipc_forget(struct shmreg__open_args *a)
{
}

/* How many bytes of the allocation lie at and after ptr. */
static shmreg_err bytes_after(const char *what, void *ptr, size_t *out)
{
    CUdeviceptr base = 0;
    size_t size = 0;
    CUresult err = shmreg__cuda.cuMemGetAddressRange(&base, &size, (CUdeviceptr)(uintptr_t)ptr);
    if (err != CUDA_SUCCESS)
        return shmreg__cu_fail(err, "%s: cuMemGetAddressRange", what);
    *out = size - (size_t)((CUdeviceptr)(uintptr_t)ptr - base);
    return SHMREG_OK;
}

/* Open the handle with the device already current, and check the window fits
 * the allocation; on any failure the handle is closed again. */
static shmreg_err open_and_check(const char *what, const char *name, cudaIpcMemHandle_t handle,
                                 size_t offset, size_t byte_size, void **out_ptr, size_t *out_available)
{
    void *ptr = NULL;
    /* Lazy peer access: the mapping is usable from other devices only if the
     * caller enables peer access, and opening costs nothing extra when not. */
    cudaError_t err = shmreg__cuda.IpcOpenMemHandle(&ptr, handle, cudaIpcMemLazyEnablePeerAccess);
    if (err != cudaSuccess)
        return shmreg__cuda_fail(err, "%s: cudaIpcOpenMemHandle", what);
    size_t available = 0;
    shmreg_err rc = bytes_after(what, ptr, &available);
    /* The handle names the allocation's start: the window is an offset
     * into it (a caching allocator's block holds many tensors). */
    if (rc == SHMREG_OK && offset == 0 && byte_size > available)
        rc = shmreg__fail(SHMREG_ERR_OUT_OF_BOUNDS,
                          "failed to register shared memory region '%s': invalid args "
                          "(byte_size %zu is larger than the %zu-byte allocation)",
                          name, byte_size, available);
    else if (rc == SHMREG_OK && (offset > available || byte_size > available - offset))
        rc = shmreg__fail(SHMREG_ERR_OUT_OF_BOUNDS,
                          "failed to register shared memory region '%s': invalid args "
                          "(window [%zu, +%zu) is past the end of the %zu-byte allocation)",
                          name, offset, byte_size, available);
    if (rc != SHMREG_OK) {
        (void)shmreg__cuda.IpcCloseMemHandle(ptr); /* the error above is the one to report */
        return rc;
    }
    *out_ptr = ptr;
    *out_available = available;
    return SHMREG_OK;
}

static shmreg_err cuda_ipc_open(const struct shmreg__open_args *a, struct shmreg__opened *out)
{
    const char *name = a->r->name;
    int device_id = 0;
    size_t byte_size = a->r->byte_size;
    char what[320], uuid[SHMREG__CUDA_UUID_TEXT];
    snprintf(what, sizeof what, "failed to register CUDA IPC region '%s'", name);
    shmreg_err rc = shmreg__cuda_device_of(what, a->r, &device_id, uuid);
    if (rc != SHMREG_OK)
        return rc;

    cudaIpcMemHandle_t handle;
    memcpy(&handle, a->r->raw_handle, sizeof handle);
    unsigned char *kept = shmreg__malloc(sizeof handle);
    if (!kept)
        return shmreg__fail(SHMREG_ERR_NO_MEMORY, "%s: out of memory", what);
    memcpy(kept, &handle, sizeof handle);
    struct shmreg__cuda_device_guard guard;
    rc = shmreg__cuda_device_enter(&guard, device_id, what);
    void *ptr = NULL;
    size_t available = 0;
    if (rc == SHMREG_OK) {
        rc = open_and_check(what, name, handle, a->r->offset, byte_size, &ptr, &available);
        shmreg__cuda_device_leave(&guard);
    }
    if (rc != SHMREG_OK) {
        shmreg__free(kept);
        return rc;
    }

    /* Legacy IPC has no read-only mapping: SHMREG_READONLY is recorded in
     * the region's flags and is the caller's promise, not enforced here. */
    *out = (struct shmreg__opened){
        .backend = &shmreg__backend_cuda_ipc,
        .addr = (char *)ptr + a->r->offset,
        .byte_size = byte_size,
        .device_id = device_id,
        .pinned = 0,
        .base = ptr,
        .length = available,
        .priv = {(uint64_t)(uintptr_t)kept},
    };
    snprintf(out->device_uuid, sizeof out->device_uuid, "%s", uuid);
    return SHMREG_OK;
}

static shmreg_err cuda_ipc_close(struct shmreg__opened *m, const char *region_name)
{
    char what[320];
    snprintf(what, sizeof what, "failed to close CUDA IPC region '%s'", region_name);
    /* Close on the device it was opened on, whatever this thread's current
     * device is: the deleter runs in whichever thread released last. */
    struct shmreg__cuda_device_guard guard;
    shmreg_err rc = shmreg__cuda_device_enter(&guard, m->device_id, what);
    /* Close even when the device could not be made current: a handle left
     * open would keep the exporter's memory alive for good. */
    cudaError_t err = shmreg__cuda.IpcCloseMemHandle(m->base);
    shmreg__cuda_device_leave(&guard);
    shmreg__free((void *)(uintptr_t)m->priv[0]);
    if (err != cudaSuccess)
        return shmreg__cuda_fail(err, "%s: cudaIpcCloseMemHandle", what);
    return rc;
}

static void cuda_ipc_carried(const struct shmreg__opened *m, struct shmreg__carried *out)
{
    out->handle = (const unsigned char *)(uintptr_t)m->priv[0];
    out->device_id = m->device_id;
    out->device_uuid = m->device_uuid;
}
