/* An allocation of another process's stream-ordered pool (cudaMallocAsync
 * from a pool created with a POSIX-descriptor handle type): the pool is
 * imported from its descriptor (cuMemPoolImportFromShareableHandle), then
 * the allocation from its 64 bytes of export data (cuMemPoolImportPointer).
 * The last release frees the import (cuMemFree) and destroys the imported
 * pool, so that the exporter may free the allocation afterwards: the
 * importer's free must come first (the header's exporter's contract).
 *
 * The pool's descriptor stays the caller's: nothing here closes it. The
 * registry keeps a duplicate of its own and the export data while the
 * region is mapped, for a handover (handover/) to carry. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "backends/backend.h"
#include "backends/cuda_calls.h"
#include "base/err.h"
#include "base/sys.h"

static shmreg_err cuda_pool_open(const struct shmreg__open_args *a, struct shmreg__opened *out);
static shmreg_err cuda_pool_close(struct shmreg__opened *m, const char *region_name);
static void cuda_pool_carried(const struct shmreg__opened *m, struct shmreg__carried *out);

const struct shmreg__backend shmreg__backend_cuda_pool = {
    .name = "cuda_pool",
    .kind = SHMREG_KIND_CUDA,
    .prepare = shmreg__cuda_pool_prepare,
    .open = cuda_pool_open,
    .close = cuda_pool_close,
    .carried = cuda_pool_carried,
};

_Static_assert(sizeof(CUmemPoolPtrExportData) == SHMREG_CUDA_POOL_EXPORT_SIZE,
               "the public API documents 64 bytes of pool export data (cuda_args.c checks that size)");

/* What an import holds while it is being built, for the unwinding. */
struct pool_import {
    CUmemoryPool pool;
    CUdeviceptr ptr;
    int pool_imported, ptr_imported;
};

/* What a handover carries of a pool region, kept by the mapping (priv[2]):
 * the registry's duplicate of the pool's descriptor and the export data. */
struct pool_kept {
    int fd;
    unsigned char data[SHMREG_CUDA_POOL_EXPORT_SIZE];
};

static shmreg_err pool_keep(const char *what, const shmreg_registration *r, struct pool_kept **out)
{
    struct pool_kept *k = shmreg__malloc(sizeof *k);
    if (!k)
        return shmreg__fail(SHMREG_ERR_NO_MEMORY, "%s: out of memory", what);
    if ((k->fd = shmreg__sys.fcntl(r->fd, F_DUPFD_CLOEXEC, 0)) < 0) {
        int errnum = errno;
        shmreg__free(k);
        return shmreg__fail_errno(SHMREG_ERR_SYSTEM, errnum, "%s: keeping a descriptor of the pool (descriptor %d)",
                                  what, r->fd);
    }
    memcpy(k->data, r->raw_handle, sizeof k->data);
    *out = k;
    return SHMREG_OK;
}

static void pool_kept_free(struct pool_kept *k)
{
    /* A failing close has still released the descriptor (Linux). */
    (void)shmreg__sys.close(k->fd);
    shmreg__free(k);
}

/* Free the pointer, then the pool, each even when the other fails; the
 * first failure, naming its call in *call. */
static CUresult pool_import_undo(const struct pool_import *imp, const char **call)
{
    CUresult first = CUDA_SUCCESS;
    if (imp->ptr_imported && (first = shmreg__cuda.cuMemFree(imp->ptr)) != CUDA_SUCCESS)
        *call = "cuMemFree";
    if (imp->pool_imported) {
        CUresult e = shmreg__cuda.cuMemPoolDestroy(imp->pool);
        if (e != CUDA_SUCCESS && first == CUDA_SUCCESS)
            first = e, *call = "cuMemPoolDestroy";
    }
    return first;
}

/* The window against the allocation, and the allocation against the
 * device the registration names. */
static shmreg_err check_import(const char *what, const struct shmreg__open_args *a, const struct pool_import *imp,
                               int device_id, const char *uuid, size_t *available)
{
    CUdeviceptr base = 0;
    size_t size = 0;
    int ordinal = -1;
    CUresult err = shmreg__cuda.cuMemGetAddressRange(&base, &size, imp->ptr);
    if (err != CUDA_SUCCESS)
        return shmreg__cu_fail(err, "%s: cuMemGetAddressRange", what);
    err = shmreg__cuda.cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, imp->ptr);
    if (err != CUDA_SUCCESS)
        return shmreg__cu_fail(err, "%s: cuPointerGetAttribute(DEVICE_ORDINAL)", what);
    if (ordinal != device_id)
        return shmreg__cuda_wrong_device(what, device_id, uuid, ordinal);
    *available = size - (size_t)(imp->ptr - base);
    const shmreg_registration *r = a->r;
    if (r->offset > *available || r->byte_size > *available - r->offset)
        return shmreg__fail(SHMREG_ERR_OUT_OF_BOUNDS,
                            "failed to register shared memory region '%s': invalid args (window [%zu, +%zu) is past "
                            "the end of the %zu-byte pool allocation)",
                            r->name, r->offset, r->byte_size, *available);
    return SHMREG_OK;
}

static shmreg_err import_pool(const char *what, const struct shmreg__open_args *a, struct pool_import *imp,
                              int device_id, const char *uuid, size_t *available)
{
    const shmreg_registration *r = a->r;
    CUresult err = shmreg__cuda.cuMemPoolImportFromShareableHandle(
        &imp->pool, (void *)(uintptr_t)r->fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    if (err != CUDA_SUCCESS)
        return shmreg__cu_fail(err,
                               "%s: descriptor %d is not a CUDA memory pool exported as a POSIX descriptor (a pool "
                               "needs handleTypes = cudaMemHandleTypePosixFileDescriptor at cudaMemPoolCreate; a "
                               "device's default pool, which plain cudaMallocAsync uses, cannot be exported); "
                               "cuMemPoolImportFromShareableHandle",
                               what, r->fd);
    imp->pool_imported = 1;
    CUmemPoolPtrExportData data;
    memcpy(&data, r->raw_handle, sizeof data);
    err = shmreg__cuda.cuMemPoolImportPointer(&imp->ptr, imp->pool, &data);
    if (err != CUDA_SUCCESS)
        return shmreg__cu_fail(err,
                               "%s: the export data names no live allocation of this pool "
                               "(cuMemPoolImportPointer)", what);
    imp->ptr_imported = 1;
    return check_import(what, a, imp, device_id, uuid, available);
}

static shmreg_err cuda_pool_open(const struct shmreg__open_args *a, struct shmreg__opened *out)
{
    char what[320], uuid[SHMREG__CUDA_UUID_TEXT];
    snprintf(what, sizeof what, "failed to register CUDA pool region '%s'", a->r->name);
    int device_id = 0;
    struct pool_kept *kept = NULL;
    shmreg_err rc = shmreg__cuda_device_of(what, a->r, &device_id, uuid);
    struct shmreg__cuda_device_guard guard;
    if (rc == SHMREG_OK)
        rc = shmreg__cuda_device_enter(&guard, device_id, what);
    if (rc != SHMREG_OK)
        return rc;
    struct pool_import imp = {0};
    size_t available = 0;
    rc = import_pool(what, a, &imp, device_id, uuid, &available);
    /* Kept once the driver took it, so that a descriptor that is no pool
     * (closed, a pipe) is the driver's error, as it always was. */
    if (rc == SHMREG_OK)
        rc = pool_keep(what, a->r, &kept);
    if (rc != SHMREG_OK) {
        const char *ignored;
        (void)pool_import_undo(&imp, &ignored); /* the failure above is the one to report */
    }
    shmreg__cuda_device_leave(&guard);
    if (rc != SHMREG_OK)
        return rc;
    /* An imported pool allocation has no read-only mapping: SHMREG_READONLY
     * is recorded in the region's flags, as for legacy IPC. */
    *out = (struct shmreg__opened){
        .backend = &shmreg__backend_cuda_pool,
        .addr = (void *)(uintptr_t)(imp.ptr + a->r->offset),
        .byte_size = a->r->byte_size,
        .device_id = device_id,
        .base = (void *)(uintptr_t)imp.ptr,
        .length = available,
        .priv = {(uint64_t)(uintptr_t)imp.pool, (uint64_t)imp.ptr, (uint64_t)(uintptr_t)kept},
    };
    snprintf(out->device_uuid, sizeof out->device_uuid, "%s", uuid);
    return SHMREG_OK;
}

static shmreg_err cuda_pool_close(struct shmreg__opened *m, const char *region_name)
{
    char what[320];
    snprintf(what, sizeof what, "failed to close CUDA pool region '%s'", region_name);
    struct shmreg__cuda_device_guard guard;
    shmreg_err rc = shmreg__cuda_device_enter(&guard, m->device_id, what);
    struct pool_import imp = {.pool = (CUmemoryPool)(uintptr_t)m->priv[0], .ptr = (CUdeviceptr)m->priv[1],
                              .pool_imported = 1, .ptr_imported = 1};
    const char *call = NULL;
    CUresult err = pool_import_undo(&imp, &call);
    shmreg__cuda_device_leave(&guard);
    pool_kept_free((struct pool_kept *)(uintptr_t)m->priv[2]);
    if (err != CUDA_SUCCESS)
        return shmreg__cu_fail(err, "%s: %s", what, call);
    return rc;
}

static void cuda_pool_carried(const struct shmreg__opened *m, struct shmreg__carried *out)
{
    const struct pool_kept *k = (const struct pool_kept *)(uintptr_t)m->priv[2];
    out->fd_count = 1;
    out->fds[0] = k->fd;
    out->handle = k->data;
    out->device_id = m->device_id;
    out->device_uuid = m->device_uuid;
}
