/*
 * device_copy.h with the CUDA runtime, linked statically (CUDA::cudart_static)
 * so that the server starts on a machine with no libcudart and no driver:
 * cudart loads the driver itself on first use, and only a request that names
 * a CUDA region ever gets that far.
 *
 * The region's pointer was opened by libshmreg (which carries its own copy
 * of cudart) in the device's primary context. Every runtime in a process
 * shares that context, so the pointer is valid for this runtime's copies.
 */
#include "models/device_copy.h"

#include <pthread.h>
#include <stdio.h>

#include <cuda_runtime_api.h>

/* Whether any device can be reached, asked once per process: a machine
 * without a driver answers the same to every request, and asking again
 * would only repeat cudart's failed load. */
static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static cudaError_t probe_err = cudaSuccess;
static int probe_count;

static void probe(void)
{
    probe_err = cudaGetDeviceCount(&probe_count);
}

static server_status unavailable(int device_id, char *err, size_t errlen)
{
    pthread_once(&probe_once, probe);
    if (probe_err != cudaSuccess) {
        snprintf(err, errlen, "no device copy on this machine: cudaGetDeviceCount failed: %s (%s)",
                 cudaGetErrorName(probe_err), cudaGetErrorString(probe_err));
        return STATUS_UNSUPPORTED;
    }
    if (device_id < 0 || device_id >= probe_count) {
        snprintf(err, errlen, "no device copy to device %d: this machine has %d device(s)",
                 device_id, probe_count);
        return STATUS_UNSUPPORTED;
    }
    return STATUS_OK;
}

/* The copy on this thread's own stream, waited for. The own stream keeps
 * concurrent requests from waiting for each other's copies; the wait matters
 * for host-to-device, where cudaMemcpy* from pageable memory may return
 * before the bytes have reached the device. */
static cudaError_t copy_and_wait(void *dst, const void *src, size_t n, enum cudaMemcpyKind dir,
                                 const char **what)
{
    *what = "cudaMemcpyAsync";
    cudaError_t e = cudaMemcpyAsync(dst, src, n, dir, cudaStreamPerThread);
    if (e != cudaSuccess)
        return e;
    *what = "cudaStreamSynchronize";
    return cudaStreamSynchronize(cudaStreamPerThread);
}

/* Copy on device_id, then put the thread's current device back: worker
 * threads serve every request, and the next one may be on another device. */
static server_status copy_on(int device_id, void *dst, const void *src, size_t n,
                             enum cudaMemcpyKind dir, char *err, size_t errlen)
{
    server_status st = unavailable(device_id, err, errlen);
    if (st || n == 0)
        return st;
    int previous;
    const char *what = "cudaGetDevice";
    cudaError_t e = cudaGetDevice(&previous);
    if (e == cudaSuccess) {
        what = "cudaSetDevice";
        e = cudaSetDevice(device_id);
    }
    if (e == cudaSuccess) {
        e = copy_and_wait(dst, src, n, dir, &what);
        cudaError_t restore = cudaSetDevice(previous);
        if (e == cudaSuccess && restore != cudaSuccess) {
            what = "cudaSetDevice (restoring the thread's device)";
            e = restore;
        }
    }
    if (e == cudaSuccess)
        return STATUS_OK;
    snprintf(err, errlen, "copy of %zu bytes %s device %d failed in %s: %s (%s)", n,
             dir == cudaMemcpyDeviceToHost ? "from" : "to", device_id, what,
             cudaGetErrorName(e), cudaGetErrorString(e));
    return STATUS_INTERNAL;
}

server_status device_copy_to_host(void *host, const void *device_ptr, size_t n, int device_id,
                                  char *err, size_t errlen)
{
    return copy_on(device_id, host, device_ptr, n, cudaMemcpyDeviceToHost, err, errlen);
}

server_status device_copy_to_device(void *device_ptr, const void *host, size_t n, int device_id,
                                    char *err, size_t errlen)
{
    return copy_on(device_id, device_ptr, host, n, cudaMemcpyHostToDevice, err, errlen);
}
