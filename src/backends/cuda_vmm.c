/* GPU memory allocated by another process with cuMemCreate and exported as
 * POSIX file descriptors (cuMemExportToShareableHandle): one allocation
 * (SHMREG_SOURCE_CUDA_FD) or a range of several mapped back to back
 * (SHMREG_SOURCE_CUDA_VMM_RANGE, such as a tensor of PyTorch's expandable
 * segments). Each chunk is imported and mapped, in order, at one virtual
 * range reserved here, which is made accessible from the region's device.
 * The last release unmaps every chunk, frees the range and releases every
 * imported handle.
 *
 * The descriptors stay the caller's: the import does not consume them, and
 * nothing here closes them. The registry keeps a duplicate of each of its
 * own while the region is mapped, as it does for a descriptor region
 * (system_fd.c): an import cannot be handed to another process, its
 * descriptor can (a handover, handover/). */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>

#include "backends/backend.h"
#include "backends/cuda_calls.h"
#include "base/err.h"
#include "base/sys.h"

static shmreg_err cuda_vmm_open(const struct shmreg__open_args *a, struct shmreg__opened *out);
static shmreg_err cuda_vmm_close(struct shmreg__opened *m, const char *region_name);
static void cuda_vmm_carried(const struct shmreg__opened *m, struct shmreg__carried *out);

const struct shmreg__backend shmreg__backend_cuda_fd = {
    .name = "cuda_vmm",
    .kind = SHMREG_KIND_CUDA,
    .prepare = shmreg__cuda_fd_prepare,
    .open = cuda_vmm_open,
    .close = cuda_vmm_close,
    .carried = cuda_vmm_carried,
};

const struct shmreg__backend shmreg__backend_cuda_vmm_range = {
    .name = "cuda_vmm_range",
    .kind = SHMREG_KIND_CUDA,
    .prepare = shmreg__cuda_vmm_range_prepare,
    .open = cuda_vmm_open,
    .close = cuda_vmm_close,
    .carried = cuda_vmm_carried,
};

/* One imported chunk. */
struct vmm_chunk {
    CUmemGenericAllocationHandle handle;
    size_t size; /* bytes mapped: the allocation's size */
    int imported, mapped;
    int kept_fd; /* the registry's duplicate of the chunk's descriptor, or -1 */
};

/* What a registration holds, kept by the mapping (priv[0]) until its close;
 * also what a failed open unwinds. */
struct vmm_range {
    CUdeviceptr va;
    size_t length; /* bytes reserved: the chunks' sizes, summed */
    int reserved;
    size_t count;
    struct vmm_chunk chunk[];
};

/* Undo in reverse order, everything even past a failure (what is left
 * would keep the exporter's memory alive for good). Returns the first
 * failure, naming its call in *call. Frees r. */
static CUresult vmm_range_undo(struct vmm_range *r, const char **call)
{
    CUresult first = CUDA_SUCCESS;
    CUdeviceptr at = r->va;
    for (size_t i = 0; i < r->count; i++) {
        if (r->chunk[i].mapped) {
            CUresult e = shmreg__cuda.cuMemUnmap(at, r->chunk[i].size);
            if (e != CUDA_SUCCESS && first == CUDA_SUCCESS)
                first = e, *call = "cuMemUnmap";
        }
        at += r->chunk[i].size;
    }
    if (r->reserved) {
        CUresult e = shmreg__cuda.cuMemAddressFree(r->va, r->length);
        if (e != CUDA_SUCCESS && first == CUDA_SUCCESS)
            first = e, *call = "cuMemAddressFree";
    }
    for (size_t i = 0; i < r->count; i++) {
        if (!r->chunk[i].imported)
            continue;
        CUresult e = shmreg__cuda.cuMemRelease(r->chunk[i].handle);
        if (e != CUDA_SUCCESS && first == CUDA_SUCCESS)
            first = e, *call = "cuMemRelease";
    }
    /* A failing close has still released the descriptor (Linux). */
    for (size_t i = 0; i < r->count; i++)
        if (r->chunk[i].kept_fd >= 0)
            (void)shmreg__sys.close(r->chunk[i].kept_fd);
    shmreg__free(r);
    return first;
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

/* The registration as a list of chunks: its own for a range; for one
 * descriptor, one chunk of the window's end rounded up to the granularity
 * (its size is known once imported: see import_chunk). */
struct vmm_request {
    const char *what, *name;
    const shmreg_registration *r;
    int device_id;
    const char *uuid;
};

static int chunk_fd(const struct vmm_request *q, size_t i)
{
    return q->r->source == SHMREG_SOURCE_CUDA_VMM_RANGE ? q->r->fds[i] : q->r->fd;
}

/* Import chunk i, check it lives on the device, and take its size: given
 * for a range (a multiple of the granularity, since cuMemMap maps whole
 * granules), else the window's end rounded up. *granularity: its own. */
static shmreg_err import_chunk(const struct vmm_request *q, struct vmm_range *r, size_t i, size_t *granularity)
{
    struct vmm_chunk *c = &r->chunk[i];
    int fd = chunk_fd(q, i);
    CUresult err = shmreg__cuda.cuMemImportFromShareableHandle(
        &c->handle, (void *)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    if (err != CUDA_SUCCESS)
        return shmreg__cu_fail(err,
                               "%s: descriptor %d (chunk %zu) is not a CUDA VMM shareable handle "
                               "(cuMemImportFromShareableHandle)", q->what, fd, i);
    c->imported = 1;
    /* Kept once the driver took it, so that a descriptor that is no CUDA
     * handle (closed, a pipe) is the driver's error, as it always was. */
    if ((c->kept_fd = shmreg__sys.fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0)
        return shmreg__fail_errno(SHMREG_ERR_SYSTEM, errno, "%s: keeping a descriptor of chunk %zu (descriptor %d)",
                                  q->what, i, fd);
    CUmemAllocationProp prop = {0};
    err = shmreg__cuda.cuMemGetAllocationPropertiesFromHandle(&prop, c->handle);
    if (err == CUDA_SUCCESS)
        err = shmreg__cuda.cuMemGetAllocationGranularity(granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (err != CUDA_SUCCESS)
        return shmreg__cu_fail(err, "%s: allocation granularity of chunk %zu", q->what, i);
    /* A client that names the GPU by UUID names the one that holds its
     * memory: another one means the two processes disagree on which GPU
     * that is. By ordinal, mapping a chunk for another device (peer
     * access) stays what it was in 1.2. */
    if (q->r->device_uuid != NULL && prop.location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
        prop.location.id != q->device_id)
        return shmreg__cuda_wrong_device(q->what, q->device_id, q->uuid, prop.location.id);
    size_t g = *granularity;
    if (q->r->source == SHMREG_SOURCE_CUDA_VMM_RANGE) {
        c->size = q->r->chunk_sizes[i];
        if (g == 0 || c->size % g != 0)
            return shmreg__fail(SHMREG_ERR_OUT_OF_BOUNDS,
                                "%s: invalid args: chunk %zu's size %zu is not a multiple of its granularity %zu, so "
                                "it is not its allocation's size", q->what, i, c->size, g);
        return SHMREG_OK;
    }
    size_t end = q->r->offset + q->r->byte_size; /* checked in prepare */
    if (g == 0 || end > SIZE_MAX - (g - 1))
        return shmreg__fail(SHMREG_ERR_OUT_OF_BOUNDS, "%s: byte_size %zu overflows", q->what, q->r->byte_size);
    c->size = (end + g - 1) / g * g;
    return SHMREG_OK;
}

/* cuMemMap maps a whole allocation: on an H200 with driver 580 it refused,
 * with CUDA_ERROR_NOT_SUPPORTED, every length but the allocation's own (half
 * of it, a granule of it, or more than it), and no call tells an importer the
 * allocation's size. So the size the caller gave must be that size; a
 * refused length is the caller's bounds error. */
static shmreg_err map_failure(const struct vmm_request *q, size_t i, size_t size, CUresult err)
{
    if (err != CUDA_ERROR_NOT_SUPPORTED && err != CUDA_ERROR_INVALID_VALUE)
        return shmreg__cu_fail(err, "%s: cuMemMap(%zu) of chunk %zu", q->what, size, i);
    /* Keep the driver's error name and string in the message, not its code. */
    if (q->r->source == SHMREG_SOURCE_CUDA_VMM_RANGE)
        (void)shmreg__cu_fail(err,
                              "failed to register shared memory region '%s': invalid args: chunk %zu's size %zu is "
                              "not the size of its allocation, and a CUDA VMM chunk is mapped whole; cuMemMap",
                              q->name, i, size);
    else
        (void)shmreg__cu_fail(err,
                              "failed to register shared memory region '%s': invalid args: offset + byte_size %zu "
                              "rounds up to %zu bytes, not the size of the allocation, and a CUDA VMM "
                              "region maps its whole allocation; cuMemMap",
                              q->name, q->r->offset + q->r->byte_size, size);
    return SHMREG_ERR_OUT_OF_BOUNDS;
}

/* Reserve one range for every chunk (aligned to the largest granularity),
 * map each in order and grant the device access to all of it. */
static shmreg_err map_range(const struct vmm_request *q, struct vmm_range *r, size_t alignment)
{
    CUresult err = shmreg__cuda.cuMemAddressReserve(&r->va, r->length, alignment, 0, 0);
    if (err != CUDA_SUCCESS)
        return shmreg__cu_fail(err, "%s: cuMemAddressReserve(%zu)", q->what, r->length);
    r->reserved = 1;
    CUdeviceptr at = r->va;
    for (size_t i = 0; i < r->count; i++) {
        err = shmreg__cuda.cuMemMap(at, r->chunk[i].size, 0, r->chunk[i].handle, 0);
        if (err != CUDA_SUCCESS)
            return map_failure(q, i, r->chunk[i].size, err);
        r->chunk[i].mapped = 1;
        at += r->chunk[i].size;
    }
    CUmemAccessDesc access = {
        .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = q->device_id},
        .flags = (q->r->flags & SHMREG_READONLY) ? CU_MEM_ACCESS_FLAGS_PROT_READ
                                                 : CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
    };
    /* One call for the whole range: access may span several mappings. */
    err = shmreg__cuda.cuMemSetAccess(r->va, r->length, &access, 1);
    if (err != CUDA_SUCCESS)
        return shmreg__cu_fail(err, "%s: cuMemSetAccess", q->what);
    return SHMREG_OK;
}

/* Everything after the checks, with the device current; on failure all of
 * it undone. */
static shmreg_err import_and_map(const struct vmm_request *q, struct vmm_range *r)
{
    size_t alignment = 0;
    shmreg_err rc = SHMREG_OK;
    for (size_t i = 0; i < r->count && rc == SHMREG_OK; i++) {
        size_t g = 0;
        rc = import_chunk(q, r, i, &g);
        if (rc == SHMREG_OK && r->chunk[i].size > SIZE_MAX - r->length)
            rc = shmreg__fail(SHMREG_ERR_OUT_OF_BOUNDS, "%s: the chunks' sizes overflow", q->what);
        if (rc == SHMREG_OK) {
            r->length += r->chunk[i].size;
            alignment = g > alignment ? g : alignment;
        }
    }
    if (rc == SHMREG_OK)
        rc = map_range(q, r, alignment);
    return rc;
}

static shmreg_err cuda_vmm_open(const struct shmreg__open_args *a, struct shmreg__opened *out)
{
    const shmreg_registration *reg = a->r;
    bool range = reg->source == SHMREG_SOURCE_CUDA_VMM_RANGE;
    char what[320], uuid[SHMREG__CUDA_UUID_TEXT];
    snprintf(what, sizeof what, "failed to register CUDA VMM %s '%s'", range ? "range" : "region", reg->name);
    struct vmm_request q = {.what = what, .name = reg->name, .r = reg, .uuid = uuid};
    shmreg_err rc = shmreg__cuda_device_of(what, reg, &q.device_id, uuid);
    if (rc == SHMREG_OK)
        rc = require_vmm_fd(what, q.device_id);
    if (rc != SHMREG_OK)
        return rc;
    size_t count = range ? reg->chunk_count : 1;
    struct vmm_range *r = shmreg__calloc(1, sizeof *r + count * sizeof r->chunk[0]);
    if (!r)
        return shmreg__fail(SHMREG_ERR_NO_MEMORY, "%s: out of memory for %zu chunks", what, count);
    r->count = count;
    for (size_t i = 0; i < count; i++)
        r->chunk[i].kept_fd = -1; /* none kept yet: the undo closes only what was */

    struct shmreg__cuda_device_guard guard;
    rc = shmreg__cuda_device_enter(&guard, q.device_id, what);
    if (rc == SHMREG_OK) {
        rc = import_and_map(&q, r);
        if (rc != SHMREG_OK) {
            const char *ignored;
            (void)vmm_range_undo(r, &ignored); /* the failure above is the one to report */
        }
        shmreg__cuda_device_leave(&guard);
    } else {
        shmreg__free(r);
    }
    if (rc != SHMREG_OK)
        return rc;

    *out = (struct shmreg__opened){
        .backend = range ? &shmreg__backend_cuda_vmm_range : &shmreg__backend_cuda_fd,
        .addr = (void *)(uintptr_t)(r->va + reg->offset),
        .byte_size = reg->byte_size,
        .device_id = q.device_id,
        .pinned = 0,
        .base = (void *)(uintptr_t)r->va,
        .length = r->length,
        .priv = {(uint64_t)(uintptr_t)r},
    };
    snprintf(out->device_uuid, sizeof out->device_uuid, "%s", uuid);
    return SHMREG_OK;
}

static shmreg_err cuda_vmm_close(struct shmreg__opened *m, const char *region_name)
{
    char what[320];
    snprintf(what, sizeof what, "failed to close CUDA VMM region '%s'", region_name);
    /* Unmap, free and release everything even if one call fails, so that a
     * failure leaks as little as possible; report the first. */
    struct shmreg__cuda_device_guard guard;
    shmreg_err rc = shmreg__cuda_device_enter(&guard, m->device_id, what);
    const char *call = NULL;
    CUresult err = vmm_range_undo((struct vmm_range *)(uintptr_t)m->priv[0], &call);
    shmreg__cuda_device_leave(&guard);
    if (err != CUDA_SUCCESS)
        return shmreg__cu_fail(err, "%s: %s", what, call);
    return rc;
}

static void cuda_vmm_carried(const struct shmreg__opened *m, struct shmreg__carried *out)
{
    const struct vmm_range *r = (const struct vmm_range *)(uintptr_t)m->priv[0];
    out->fd_count = r->count;
    for (size_t i = 0; i < r->count; i++) {
        out->fds[i] = r->chunk[i].kept_fd;
        out->chunk_sizes[i] = r->chunk[i].size;
    }
    out->device_id = m->device_id;
    out->device_uuid = m->device_uuid;
}
