/*
 * Copies between a model's host buffers and CUDA regions.
 *
 * The built-in models run on the CPU, so a tensor in a CUDA region is staged:
 * an input is copied device-to-host into a buffer the model reads, an output
 * is computed into a host buffer and copied host-to-device afterwards. Both
 * copies finish before the call returns, so by the time the response is
 * queued (and the region's reference can be released) the device memory
 * holds what the response promises.
 *
 * Built without CUDA (device_copy_none.c) or run where no device can be
 * reached, every call answers UNSUPPORTED with the reason; nothing crashes. The
 * calling thread's current device is the same after a call as before it.
 */
#ifndef SERVER_DEVICE_COPY_H
#define SERVER_DEVICE_COPY_H

#include <stddef.h>

#include "common/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Each returns STATUS_OK, or the failure's status (UNSUPPORTED: no device
 * copy in this build or on this machine; INTERNAL: the copy itself failed)
 * with a message in err. */
server_status device_copy_to_host(void *host, const void *device_ptr, size_t n, int device_id,
                                  char *err, size_t errlen);
server_status device_copy_to_device(void *device_ptr, const void *host, size_t n, int device_id,
                                    char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
