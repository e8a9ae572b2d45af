/* The seam between the CUDA backends and CUDA itself (built with CUDA only).
 *
 * Every CUDA runtime call and every driver entry point the library uses goes
 * through the table below, like src/base/sys.h does for the operating system, so
 * that tests built against the static copy of the library can fail any of
 * them and prove each failure path releases what it took. Driver entry points
 * are reached through cudaGetDriverEntryPointByVersion: the library never
 * links libcuda, so it loads on a machine with no driver and answers
 * SHMREG_ERR_UNSUPPORTED there. */
#ifndef SHMREG_CUDA_CALLS_H
#define SHMREG_CUDA_CALLS_H

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdarg.h>

#include "backends/backend.h"
#include "shmreg/shmreg.h"

struct shmreg__cuda {
    /* runtime (cudart, linked statically) */
    cudaError_t (*GetDeviceCount)(int *count);
    cudaError_t (*DriverGetVersion)(int *version);
    cudaError_t (*GetDevice)(int *device);
    cudaError_t (*SetDevice)(int device);
    cudaError_t (*GetLastError)(void);
    cudaError_t (*IpcOpenMemHandle)(void **ptr, cudaIpcMemHandle_t handle, unsigned flags);
    cudaError_t (*IpcCloseMemHandle)(void *ptr);
    cudaError_t (*HostRegister)(void *ptr, size_t size, unsigned flags);
    cudaError_t (*HostUnregister)(void *ptr);
    /* driver, filled by shmreg__cuda_load() */
    CUresult (*cuDeviceGet)(CUdevice *dev, int ordinal);
    CUresult (*cuDeviceGetAttribute)(int *value, CUdevice_attribute attr, CUdevice dev);
    CUresult (*cuMemGetAddressRange)(CUdeviceptr *base, size_t *size, CUdeviceptr ptr);
    CUresult (*cuMemImportFromShareableHandle)(CUmemGenericAllocationHandle *handle,
                                               void *os_handle, CUmemAllocationHandleType type);
    CUresult (*cuMemGetAllocationPropertiesFromHandle)(CUmemAllocationProp *prop,
                                                       CUmemGenericAllocationHandle handle);
    CUresult (*cuMemGetAllocationGranularity)(size_t *granularity, const CUmemAllocationProp *prop,
                                              CUmemAllocationGranularity_flags option);
    CUresult (*cuMemAddressReserve)(CUdeviceptr *ptr, size_t size, size_t alignment,
                                    CUdeviceptr addr, unsigned long long flags);
    CUresult (*cuMemAddressFree)(CUdeviceptr ptr, size_t size);
    CUresult (*cuMemMap)(CUdeviceptr ptr, size_t size, size_t offset,
                         CUmemGenericAllocationHandle handle, unsigned long long flags);
    CUresult (*cuMemUnmap)(CUdeviceptr ptr, size_t size);
    CUresult (*cuMemSetAccess)(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                               size_t count);
    CUresult (*cuMemRelease)(CUmemGenericAllocationHandle handle);
    /* 1.3: devices by UUID, stream-ordered pool imports */
    CUresult (*cuDeviceGetUuid)(CUuuid *uuid, CUdevice dev);
    CUresult (*cuMemPoolImportFromShareableHandle)(CUmemoryPool *pool, void *os_handle,
                                                   CUmemAllocationHandleType type, unsigned long long flags);
    CUresult (*cuMemPoolImportPointer)(CUdeviceptr *ptr, CUmemoryPool pool, CUmemPoolPtrExportData *data);
    CUresult (*cuMemFree)(CUdeviceptr ptr);
    CUresult (*cuMemPoolDestroy)(CUmemoryPool pool);
    CUresult (*cuPointerGetAttribute)(void *data, CUpointer_attribute attr, CUdeviceptr ptr);
    /* 1.3, the client half (shmreg_send_cuda_region): exporting what holds a pointer */
    CUresult (*cuMemRetainAllocationHandle)(CUmemGenericAllocationHandle *handle, void *addr);
    CUresult (*cuMemExportToShareableHandle)(void *os_handle, CUmemGenericAllocationHandle handle,
                                             CUmemAllocationHandleType type, unsigned long long flags);
    CUresult (*cuMemPoolExportToShareableHandle)(void *os_handle, CUmemoryPool pool, CUmemAllocationHandleType type,
                                                 unsigned long long flags);
    CUresult (*cuMemPoolExportPointer)(CUmemPoolPtrExportData *data, CUdeviceptr ptr);
    CUresult (*cuIpcGetMemHandle)(CUipcMemHandle *handle, CUdeviceptr ptr);
    CUresult (*cuGetErrorName)(CUresult err, const char **name);
    CUresult (*cuGetErrorString)(CUresult err, const char **str);
};

/* The live table. Runtime entries default to cudart; driver entries are NULL
 * until shmreg__cuda_load() resolves them. Tests swap entries after loading
 * and restore them. */
extern struct shmreg__cuda shmreg__cuda;

/* Resolve the driver entry points and probe devices, once per process
 * (later calls return at once). Returns the SHMREG_CUDA_* bits. */
unsigned shmreg__cuda_load(void);

/* Fail with UNSUPPORTED, saying why, unless this process has a driver and
 * `device_id` names a visible device (INVALID_ARG when it names none). `what`
 * starts the message, e.g. "failed to register shared memory region 'x'". */
shmreg_err shmreg__cuda_require_device(const char *what, int device_id);

/* The device a CUDA registration names, in this process's numbering: by
 * r->device_uuid when set (INVALID_ARG naming the UUID and the visible
 * devices when none has it), else r->device_id (shmreg__cuda_require_device's
 * rules); its UUID's text in uuid (prefix "MIG-" when the registration gave
 * one). UNSUPPORTED without a usable driver and device. */
shmreg_err shmreg__cuda_device_of(const char *what, const shmreg_registration *r, int *device_id,
                                  char uuid[SHMREG__CUDA_UUID_TEXT]);

/* The text of device `ordinal`'s UUID ("GPU-..."). */
shmreg_err shmreg__cuda_device_uuid(const char *what, int ordinal, char uuid[SHMREG__CUDA_UUID_TEXT]);

/* INVALID_ARG for memory that lives on device `actual` where the
 * registration named device_id (uuid its text), naming both. */
shmreg_err shmreg__cuda_wrong_device(const char *what, int device_id, const char *uuid, int actual);

/* SHMREG_ERR_CUDA with "<context>: <cudaErrorX> (<string>)" as the message. */
shmreg_err shmreg__cuda_fail(cudaError_t err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The same for a driver CUresult. */
shmreg_err shmreg__cu_fail(CUresult err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Make device_id current on this thread and remember the one that was, so
 * the caller's current device is left as it found it. */
struct shmreg__cuda_device_guard {
    int previous;
    int switched;
};
shmreg_err shmreg__cuda_device_enter(struct shmreg__cuda_device_guard *g, int device_id,
                                     const char *what);
void shmreg__cuda_device_leave(struct shmreg__cuda_device_guard *g);

#endif
