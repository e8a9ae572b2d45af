/* CUDA for the library: the call table, finding the driver and devices once
 * per process, error messages with the CUDA error name and string, and
 * pinning of system memory (cudaHostRegister).
 *
 * cudart is linked statically, so libshmreg.so needs no libcudart at run
 * time; cudart itself dlopens the driver (libcuda.so.1) on first use and
 * reports cudaErrorInsufficientDriver where there is none. The driver's own
 * entry points come from cudaGetDriverEntryPointByVersion, never from
 * linking libcuda. */
#include "backends/cuda_calls.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "backends/backend.h"
#include "base/err.h"

/* The driver ABI the entry points below are declared for (cuda.h 12.x/13.x
 * signatures of cuMemGetAddressRange_v2 and the cuMem VMM calls). */
#define SHMREG_CUDA_DRIVER_ABI 12000

/* Runtime entries point at cudart itself; the driver's are resolved later. */
struct shmreg__cuda shmreg__cuda = {
    .GetDeviceCount = cudaGetDeviceCount,
    .DriverGetVersion = cudaDriverGetVersion,
    .GetDevice = cudaGetDevice,
    .SetDevice = cudaSetDevice,
    .GetLastError = cudaGetLastError,
    .IpcOpenMemHandle = cudaIpcOpenMemHandle,
    .IpcCloseMemHandle = cudaIpcCloseMemHandle,
    .HostRegister = cudaHostRegister,
    .HostUnregister = cudaHostUnregister,
};

/* What shmreg__cuda_load found, written once under load_once. */
static struct {
    unsigned caps;
    int device_count;
    char reason[256]; /* why CUDA regions are unsupported, when they are */
} probe;
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static int resolve_driver_symbol(const char *symbol, void **slot)
{
    enum cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
    void *fn = NULL;
    cudaError_t err = cudaGetDriverEntryPointByVersion(symbol, &fn, SHMREG_CUDA_DRIVER_ABI,
                                                       cudaEnableDefault, &status);
    if (err != cudaSuccess || status != cudaDriverEntryPointSuccess || fn == NULL) {
        snprintf(probe.reason, sizeof probe.reason,
                 "the CUDA driver has no entry point %s (%s, query status %d)", symbol,
                 cudaGetErrorName(err), (int)status);
        return -1;
    }
    *slot = fn;
    return 0;
}

/* Every driver entry point the backends use; all or nothing. */
static int resolve_driver(void)
{
    static const struct {
        const char *symbol;
        size_t offset;
    } entries[] = {
#define SHMREG_CU_ENTRY_(fn) {#fn, offsetof(struct shmreg__cuda, fn)}
        SHMREG_CU_ENTRY_(cuDeviceGet),
        SHMREG_CU_ENTRY_(cuDeviceGetAttribute),
        SHMREG_CU_ENTRY_(cuMemGetAddressRange),
        SHMREG_CU_ENTRY_(cuMemImportFromShareableHandle),
        SHMREG_CU_ENTRY_(cuMemGetAllocationPropertiesFromHandle),
        SHMREG_CU_ENTRY_(cuMemGetAllocationGranularity),
        SHMREG_CU_ENTRY_(cuMemAddressReserve),
        SHMREG_CU_ENTRY_(cuMemAddressFree),
        SHMREG_CU_ENTRY_(cuMemMap),
        SHMREG_CU_ENTRY_(cuMemUnmap),
        SHMREG_CU_ENTRY_(cuMemSetAccess),
        SHMREG_CU_ENTRY_(cuMemRelease),
        SHMREG_CU_ENTRY_(cuDeviceGetUuid),
        SHMREG_CU_ENTRY_(cuMemPoolImportFromShareableHandle),
        SHMREG_CU_ENTRY_(cuMemPoolImportPointer),
        SHMREG_CU_ENTRY_(cuMemFree),
        SHMREG_CU_ENTRY_(cuMemPoolDestroy),
        SHMREG_CU_ENTRY_(cuPointerGetAttribute),
        SHMREG_CU_ENTRY_(cuMemRetainAllocationHandle),
        SHMREG_CU_ENTRY_(cuMemExportToShareableHandle),
        SHMREG_CU_ENTRY_(cuMemPoolExportToShareableHandle),
        SHMREG_CU_ENTRY_(cuMemPoolExportPointer),
        SHMREG_CU_ENTRY_(cuIpcGetMemHandle),
        SHMREG_CU_ENTRY_(cuGetErrorName),
        SHMREG_CU_ENTRY_(cuGetErrorString),
#undef SHMREG_CU_ENTRY_
    };
    struct shmreg__cuda resolved = shmreg__cuda;
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
        void **slot = (void **)((char *)&resolved + entries[i].offset);
        if (resolve_driver_symbol(entries[i].symbol, slot) != 0)
            return -1;
    }
    shmreg__cuda = resolved;
    return 0;
}

/* Device 0 can import VMM allocations exported as POSIX descriptors. */
static int probe_vmm_fd(void)
{
    CUdevice dev;
    int vmm = 0, posix_fd = 0;
    if (shmreg__cuda.cuDeviceGet(&dev, 0) != CUDA_SUCCESS)
        return 0;
    if (shmreg__cuda.cuDeviceGetAttribute(
            &vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev) != CUDA_SUCCESS ||
        shmreg__cuda.cuDeviceGetAttribute(
            &posix_fd, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, dev) !=
            CUDA_SUCCESS)
        return 0;
    return vmm && posix_fd;
}

static void load(void)
{
    int version = 0, count = 0;
    probe.caps = SHMREG_CUDA_BUILT;
    cudaError_t err = shmreg__cuda.DriverGetVersion(&version);
    if (err != cudaSuccess || version == 0) {
        snprintf(probe.reason, sizeof probe.reason,
                 "no CUDA driver could be loaded in this process (%s: %s)",
                 cudaGetErrorName(err == cudaSuccess ? cudaErrorInsufficientDriver : err),
                 cudaGetErrorString(err == cudaSuccess ? cudaErrorInsufficientDriver : err));
        return;
    }
    err = shmreg__cuda.GetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
        if (err == cudaSuccess)
            err = cudaErrorNoDevice;
        snprintf(probe.reason, sizeof probe.reason,
                 "no CUDA device is usable in this process (%s: %s)", cudaGetErrorName(err),
                 cudaGetErrorString(err));
        /* The runtime also says "insufficient driver" when the driver is
         * older than the runtime: then there is a driver, but no use of it. */
        if (err != cudaErrorInsufficientDriver)
            probe.caps |= SHMREG_CUDA_DRIVER;
        return;
    }
    if (resolve_driver() != 0)
        return; /* reason set by resolve_driver_symbol */
    probe.device_count = count;
    probe.caps |= SHMREG_CUDA_DRIVER | SHMREG_CUDA_DEVICE;
    if (probe_vmm_fd())
        probe.caps |= SHMREG_CUDA_VMM_FD;
}

unsigned shmreg__cuda_load(void)
{
    pthread_once(&load_once, load);
    return probe.caps;
}

SHMREG_API unsigned shmreg_cuda_available(void)
{
    return shmreg__cuda_load();
}

#define SHMREG_CUDA_USABLE_ (SHMREG_CUDA_BUILT | SHMREG_CUDA_DRIVER | SHMREG_CUDA_DEVICE)

shmreg_err shmreg__cuda_require_device(const char *what, int device_id)
{
    if ((shmreg__cuda_load() & SHMREG_CUDA_USABLE_) != SHMREG_CUDA_USABLE_)
        return shmreg__fail(SHMREG_ERR_UNSUPPORTED, "%s: %s", what, probe.reason);
    if (device_id < 0 || device_id >= probe.device_count)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG,
                            "%s: CUDA device %d does not exist (%d visible)", what, device_id,
                            probe.device_count);
    return SHMREG_OK;
}

static shmreg_err uuid_of(const char *what, int ordinal, unsigned char out[16])
{
    CUdevice dev;
    CUuuid uuid;
    CUresult err = shmreg__cuda.cuDeviceGet(&dev, ordinal);
    if (err == CUDA_SUCCESS)
        err = shmreg__cuda.cuDeviceGetUuid(&uuid, dev);
    if (err != CUDA_SUCCESS)
        return shmreg__cu_fail(err, "%s: the UUID of CUDA device %d (cuDeviceGetUuid)", what, ordinal);
    memcpy(out, uuid.bytes, 16);
    return SHMREG_OK;
}

/* The ordinal of the device with UUID `want`, or INVALID_ARG listing the
 * visible devices: the one place a client that counts GPUs differently
 * (another CUDA_VISIBLE_DEVICES) learns what this process sees. */
static shmreg_err find_uuid(const char *what, const char *text, const unsigned char want[16], int *out)
{
    char seen[400] = "";
    size_t used = 0;
    for (int i = 0; i < probe.device_count; i++) {
        unsigned char have[16];
        shmreg_err rc = uuid_of(what, i, have);
        if (rc != SHMREG_OK)
            return rc;
        if (memcmp(have, want, 16) == 0) {
            *out = i;
            return SHMREG_OK;
        }
        char t[SHMREG__CUDA_UUID_TEXT];
        shmreg__cuda_format_uuid(have, false, t);
        if (used < sizeof seen) {
            int n = snprintf(seen + used, sizeof seen - used, "%s%d: %s", i ? ", " : "", i, t);
            used += n > 0 ? (size_t)n : 0;
        }
    }
    return shmreg__fail(SHMREG_ERR_INVALID_ARG, "%s: no CUDA device of this process has UUID %s (visible: %s)",
                        what, text, seen);
}

shmreg_err shmreg__cuda_device_of(const char *what, const shmreg_registration *r, int *device_id,
                                  char uuid[SHMREG__CUDA_UUID_TEXT])
{
    unsigned char want[16], have[16];
    bool mig = false;
    int ordinal = r->device_id;
    /* The text was checked by prepare (cuda_args.c) in every build. */
    bool by_uuid = r->device_uuid != NULL && shmreg__cuda_parse_uuid(r->device_uuid, want, &mig) == 0;
    shmreg_err rc = shmreg__cuda_require_device(what, by_uuid ? 0 : ordinal);
    if (rc == SHMREG_OK && by_uuid)
        rc = find_uuid(what, r->device_uuid, want, &ordinal);
    if (rc == SHMREG_OK)
        rc = uuid_of(what, ordinal, have);
    if (rc != SHMREG_OK)
        return rc;
    shmreg__cuda_format_uuid(have, mig, uuid);
    *device_id = ordinal;
    return SHMREG_OK;
}

shmreg_err shmreg__cuda_device_uuid(const char *what, int ordinal, char uuid[SHMREG__CUDA_UUID_TEXT])
{
    unsigned char bytes[16];
    shmreg_err rc = uuid_of(what, ordinal, bytes);
    if (rc == SHMREG_OK)
        shmreg__cuda_format_uuid(bytes, false, uuid);
    return rc;
}

shmreg_err shmreg__cuda_wrong_device(const char *what, int device_id, const char *uuid, int actual)
{
    unsigned char bytes[16];
    char actual_uuid[SHMREG__CUDA_UUID_TEXT] = "unknown UUID";
    if (uuid_of(what, actual, bytes) == SHMREG_OK)
        shmreg__cuda_format_uuid(bytes, false, actual_uuid);
    return shmreg__fail(SHMREG_ERR_INVALID_ARG,
                        "%s: the memory lives on CUDA device %d (%s), not on device %d (%s) that the registration "
                        "names", what, actual, actual_uuid, device_id, uuid);
}

static shmreg_err fail_with(const char *err_name, const char *err_string, const char *fmt,
                            va_list ap) __attribute__((format(printf, 3, 0)));
static shmreg_err fail_with(const char *err_name, const char *err_string, const char *fmt,
                            va_list ap)
{
    char context[512];
    vsnprintf(context, sizeof context, fmt, ap);
    return shmreg__fail(SHMREG_ERR_CUDA, "%s: %s (%s)", context, err_name, err_string);
}

shmreg_err shmreg__cuda_fail(cudaError_t err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    shmreg_err code = fail_with(cudaGetErrorName(err), cudaGetErrorString(err), fmt, ap);
    va_end(ap);
    return code;
}

shmreg_err shmreg__cu_fail(CUresult err, const char *fmt, ...)
{
    const char *name = NULL, *str = NULL;
    if (shmreg__cuda.cuGetErrorName == NULL || shmreg__cuda.cuGetErrorName(err, &name) != CUDA_SUCCESS)
        name = NULL;
    if (shmreg__cuda.cuGetErrorString == NULL ||
        shmreg__cuda.cuGetErrorString(err, &str) != CUDA_SUCCESS)
        str = NULL;
    char unknown[32];
    if (name == NULL) {
        snprintf(unknown, sizeof unknown, "CUresult %d", (int)err);
        name = unknown;
    }
    va_list ap;
    va_start(ap, fmt);
    shmreg_err code = fail_with(name, str ? str : "unknown CUDA driver error", fmt, ap);
    va_end(ap);
    return code;
}

shmreg_err shmreg__cuda_device_enter(struct shmreg__cuda_device_guard *g, int device_id,
                                     const char *what)
{
    g->switched = 0;
    cudaError_t err = shmreg__cuda.GetDevice(&g->previous);
    if (err != cudaSuccess)
        return shmreg__cuda_fail(err, "%s: cudaGetDevice", what);
    /* cudaSetDevice also makes the device's primary context current on this
     * thread, which the driver's cuMem calls need; do it even when the
     * device is already the current one, since cudaGetDevice alone does not
     * create a context. */
    err = shmreg__cuda.SetDevice(device_id);
    if (err != cudaSuccess)
        return shmreg__cuda_fail(err, "%s: cudaSetDevice(%d)", what, device_id);
    g->switched = g->previous != device_id;
    return SHMREG_OK;
}

void shmreg__cuda_device_leave(struct shmreg__cuda_device_guard *g)
{
    /* Restoring a device that was current a moment ago cannot fail in a way
     * the caller could act on. */
    if (g->switched)
        (void)shmreg__cuda.SetDevice(g->previous);
}

/* ---- pinning of system memory: the CUDA layer's host_pinning capability */

static bool pinning_usable(void)
{
    return (shmreg__cuda_load() & SHMREG_CUDA_USABLE_) == SHMREG_CUDA_USABLE_;
}

/* Allocate the window's holes (pages the client never wrote) in the
 * object before the driver pins it, without changing a byte: a populate
 * fault allocates the page in the object's page cache, the page the client
 * maps too, so DMA and the client see the same memory (the GPU machine's
 * run of tests/cuda saw a window pinned over its holes read back as zeros
 * by DMA). It also moves the allocation, about 0.5 s per GiB, out of
 * cudaHostRegister, which holds the driver while it runs and so stalls
 * every other copy of the process. MADV_POPULATE_* came with Linux 5.14;
 * on an older kernel (EINVAL) the driver's own faults do the work, as
 * before. Other errors are left to cudaHostRegister to report. */
static void populate(void *addr, size_t len, bool read_only)
{
#if defined(MADV_POPULATE_READ) && defined(MADV_POPULATE_WRITE)
    (void)madvise(addr, len, read_only ? MADV_POPULATE_READ : MADV_POPULATE_WRITE);
#else
    (void)addr, (void)len, (void)read_only;
#endif
}

static shmreg_err pin(const char *name, void *addr, size_t len, bool read_only)
{
    if ((shmreg__cuda_load() & SHMREG_CUDA_USABLE_) != SHMREG_CUDA_USABLE_)
        return shmreg__fail(SHMREG_ERR_UNSUPPORTED,
                            "cannot pin system shared memory region '%s': %s", name,
                            probe.reason);
    populate(addr, len, read_only);
    /* Portable: pinned for every device and context, so any GPU copies from
     * the region at the pinned rate. */
    unsigned flags = cudaHostRegisterPortable;
    if (read_only)
        flags |= cudaHostRegisterReadOnly;
    cudaError_t err = shmreg__cuda.HostRegister(addr, len, flags);
    /* A failed cudaHostRegister also leaves its error pending in the runtime
     * (cudaGetLastError), where it would surface in an unrelated later call
     * of the server's own; clear it, after the fallback's attempt too. */
    if (err != cudaSuccess)
        (void)shmreg__cuda.GetLastError();
    /* A device without read-only registration may still lock the pages for
     * reading alone. */
    if (err != cudaSuccess && read_only) {
        cudaError_t retry = shmreg__cuda.HostRegister(addr, len, cudaHostRegisterPortable);
        if (retry == cudaSuccess)
            return SHMREG_OK;
        (void)shmreg__cuda.GetLastError();
    }
    if (err != cudaSuccess)
        return shmreg__cuda_fail(err, "cannot pin system shared memory region '%s' (%zu bytes%s)",
                                 name, len, read_only ? ", read-only" : "");
    return SHMREG_OK;
}

static shmreg_err unpin(const char *name, void *addr)
{
    cudaError_t err = shmreg__cuda.HostUnregister(addr);
    if (err != cudaSuccess)
        return shmreg__cuda_fail(err, "cannot unpin system shared memory region '%s'", name);
    return SHMREG_OK;
}

struct shmreg__host_pinning shmreg__host_pinning = {
    .usable = pinning_usable,
    .pin = pin,
    .unpin = unpin,
};
