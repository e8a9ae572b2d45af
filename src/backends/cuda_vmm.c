/* GPU memory allocated by another process with cuMemCreate and exported as a
 * POSIX file descriptor (cuMemExportToShareableHandle): imported, mapped at a
 * virtual range reserved here, and made accessible from the region's device.
 * The last release unmaps, frees the range and releases the imported handle.
 *
 * The descriptor stays the caller's: the import does not consume it, and
 * nothing here closes it. */
#include <stdint.h>
#include <stdio.h>

#include "backends/backend.h"
#include "backends/cuda_calls.h"
#include "base/err.h"

static shmreg_err cuda_vmm_open(const struct shmreg__open_args *a, struct shmreg__opened *out);
static shmreg_err cuda_vmm_close(struct shmreg__opened *m, const char *region_name);

const struct shmreg__backend shmreg__backend_cuda_fd = {
    .name = "cuda_vmm",
    .kind = SHMREG_KIND_CUDA,
    .prepare = shmreg__cuda_fd_prepare,
    .open = cuda_vmm_open,
    .close = cuda_vmm_close,
};

/* What one import holds while it is being built, for the unwinding. */
struct vmm_import {
    CUmemGenericAllocationHandle handle;
    CUdeviceptr va;
    size_t granularity; /* the allocation's minimum mapping granularity */
    size_t length;      /* bytes reserved and mapped: byte_size rounded up to granularity */
    int reserved, mapped;
};

static void vmm_import_undo(struct vmm_import *imp)
{
    /* Best effort in reverse order; the caller reports the first failure. */
    if (imp->mapped)
        (void)shmreg__cuda.cuMemUnmap(imp->va, imp->length);
    if (imp->reserved)
        (void)shmreg__cuda.cuMemAddressFree(imp->va, imp->length);
    (void)shmreg__cuda.cuMemRelease(imp->handle);
}

static shmreg_err require_vmm_fd(const char *what, int device_id)
{
    CUdevice dev;
    int vmm = 0, posix_fd = 0;
    CUresult err = shmreg__cuda.cuDeviceGet(&dev, device_id);
    if (err == CUDA_SUCCESS)
        err = shmreg__cuda.cuDeviceGetAttribute(
            &vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev);
    if (err == CUDA_SUCCESS)
        err = shmreg__cuda.cuDeviceGetAttribute(
            &posix_fd, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, dev);
    if (err != CUDA_SUCCESS)
        return shmreg__cu_fail(err, "%s: cuDeviceGetAttribute", what);
    if (!vmm || !posix_fd)
        return shmreg__fail(SHMREG_ERR_UNSUPPORTED,
                            "%s: CUDA device %d cannot import VMM POSIX file descriptors", what,
                            device_id);
    return SHMREG_OK;
}

/* The mapping length: byte_size rounded up to the allocation's granularity,
 * since cuMemMap works in whole granules. */
static shmreg_err mapping_length(const char *what, struct vmm_import *imp, size_t byte_size)
{
    CUmemAllocationProp prop = {0};
    size_t granularity = 0;
    CUresult err = shmreg__cuda.cuMemGetAllocationPropertiesFromHandle(&prop, imp->handle);
    if (err == CUDA_SUCCESS)
        err = shmreg__cuda.cuMemGetAllocationGranularity(&granularity, &prop,
                                                         CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (err != CUDA_SUCCESS)
        return shmreg__cu_fail(err, "%s: allocation granularity", what);
    if (granularity == 0 || byte_size > SIZE_MAX - (granularity - 1))
        return shmreg__fail(SHMREG_ERR_OUT_OF_BOUNDS, "%s: byte_size %zu overflows", what,
                            byte_size);
    imp->granularity = granularity;
    imp->length = (byte_size + granularity - 1) / granularity * granularity;
    return SHMREG_OK;
}

/* cuMemMap maps a whole allocation: on an H200 with driver 580 it refused,
 * with CUDA_ERROR_NOT_SUPPORTED, every length but the allocation's own (half
 * of it, a granule of it, or more than it), and no call tells an importer the
 * allocation's size. So byte_size, rounded up to the granularity, must be
 * that size; a refused length is the caller's bounds error. */
static shmreg_err map_failure(const char *what, const char *name, struct vmm_import *imp,
                              size_t byte_size, CUresult err)
{
    if (err != CUDA_ERROR_NOT_SUPPORTED && err != CUDA_ERROR_INVALID_VALUE)
        return shmreg__cu_fail(err, "%s: cuMemMap(%zu)", what, imp->length);
    /* Keep the driver's error name and string in the message, not its code. */
    (void)shmreg__cu_fail(err,
                          "failed to register shared memory region '%s': invalid args: byte_size %zu "
                          "rounds up to %zu bytes, not the size of the allocation, and a CUDA VMM "
                          "region maps its whole allocation; cuMemMap",
                          name, byte_size, imp->length);
    return SHMREG_ERR_OUT_OF_BOUNDS;
}

/* Reserve a range, map the allocation into it and grant device_id access. */
static shmreg_err map_import(const char *what, const char *name, struct vmm_import *imp,
                             size_t byte_size, int device_id, unsigned flags)
{
    CUresult err = shmreg__cuda.cuMemAddressReserve(&imp->va, imp->length, 0, 0, 0);
    if (err != CUDA_SUCCESS)
        return shmreg__cu_fail(err, "%s: cuMemAddressReserve(%zu)", what, imp->length);
    imp->reserved = 1;
    err = shmreg__cuda.cuMemMap(imp->va, imp->length, 0, imp->handle, 0);
    if (err != CUDA_SUCCESS)
        return map_failure(what, name, imp, byte_size, err);
    imp->mapped = 1;
    CUmemAccessDesc access = {
        .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = device_id},
        .flags = (flags & SHMREG_READONLY) ? CU_MEM_ACCESS_FLAGS_PROT_READ
                                           : CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
    };
    err = shmreg__cuda.cuMemSetAccess(imp->va, imp->length, &access, 1);
    if (err != CUDA_SUCCESS)
        return shmreg__cu_fail(err, "%s: cuMemSetAccess", what);
    return SHMREG_OK;
}

/* Everything after the checks, with the device current. */
static shmreg_err import_and_map(const char *what, const char *name, int fd, int device_id,
                                 size_t byte_size, unsigned flags, struct vmm_import *imp)
{
    CUresult err = shmreg__cuda.cuMemImportFromShareableHandle(
        &imp->handle, (void *)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    if (err != CUDA_SUCCESS)
        return shmreg__cu_fail(err,
                               "%s: descriptor %d is not a CUDA VMM shareable handle "
                               "(cuMemImportFromShareableHandle)",
                               what, fd);
    shmreg_err rc = mapping_length(what, imp, byte_size);
    if (rc == SHMREG_OK)
        rc = map_import(what, name, imp, byte_size, device_id, flags);
    if (rc != SHMREG_OK)
        vmm_import_undo(imp);
    return rc;
}

static shmreg_err cuda_vmm_open(const struct shmreg__open_args *a, struct shmreg__opened *out)
{
    const char *name = a->r->name;
    int fd = a->r->fd, device_id = a->r->device_id;
    size_t byte_size = a->r->byte_size;
    unsigned flags = a->r->flags;
    char what[320];
    snprintf(what, sizeof what, "failed to register CUDA VMM region '%s'", name);
    shmreg_err rc = shmreg__cuda_require_device(what, device_id);
    if (rc == SHMREG_OK)
        rc = require_vmm_fd(what, device_id);
    if (rc != SHMREG_OK)
        return rc;

    struct shmreg__cuda_device_guard guard;
    rc = shmreg__cuda_device_enter(&guard, device_id, what);
    if (rc != SHMREG_OK)
        return rc;
    struct vmm_import imp = {0};
    rc = import_and_map(what, name, fd, device_id, byte_size, flags, &imp);
    shmreg__cuda_device_leave(&guard);
    if (rc != SHMREG_OK)
        return rc;

    *out = (struct shmreg__opened){
        .backend = &shmreg__backend_cuda_fd,
        .addr = (void *)(uintptr_t)imp.va,
        .byte_size = byte_size,
        .device_id = device_id,
        .pinned = 0,
        .base = (void *)(uintptr_t)imp.va,
        .length = imp.length,
        .priv = {imp.handle},
    };
    return SHMREG_OK;
}

static shmreg_err cuda_vmm_close(struct shmreg__opened *m, const char *region_name)
{
    char what[320];
    snprintf(what, sizeof what, "failed to close CUDA VMM region '%s'", region_name);
    CUdeviceptr va = (CUdeviceptr)(uintptr_t)m->base;
    /* Unmap, free and release all three even if one fails, so that a failure
     * leaks as little as possible; report the first. */
    struct shmreg__cuda_device_guard guard;
    shmreg_err rc = shmreg__cuda_device_enter(&guard, m->device_id, what);
    CUresult unmap = shmreg__cuda.cuMemUnmap(va, m->length);
    CUresult free_va = shmreg__cuda.cuMemAddressFree(va, m->length);
    CUresult release = shmreg__cuda.cuMemRelease((CUmemGenericAllocationHandle)m->priv[0]);
    shmreg__cuda_device_leave(&guard);
    if (unmap != CUDA_SUCCESS)
        return shmreg__cu_fail(unmap, "%s: cuMemUnmap", what);
    if (free_va != CUDA_SUCCESS)
        return shmreg__cu_fail(free_va, "%s: cuMemAddressFree", what);
    if (release != CUDA_SUCCESS)
        return shmreg__cu_fail(release, "%s: cuMemRelease", what);
    return rc;
}
