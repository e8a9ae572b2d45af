/* device_copy.h for a server built without CUDA (SERVER_WITH_CUDA OFF, or
 * AUTO without a toolkit): a tensor in a CUDA region is a clean UNSUPPORTED. */
#include "models/device_copy.h"

#include <stdio.h>

static server_status no_device_copy(int device_id, char *err, size_t errlen)
{
    snprintf(err, errlen, "this server runs its models on the CPU and was built without CUDA, "
                          "so it cannot copy a tensor to or from device %d", device_id);
    return STATUS_UNSUPPORTED;
}

server_status device_copy_to_host(void *host, const void *device_ptr, size_t n, int device_id,
                                  char *err, size_t errlen)
{
    return no_device_copy(device_id, err, errlen);
}

server_status device_copy_to_device(void *device_ptr, const void *host, size_t n, int device_id,
                                    char *err, size_t errlen)
{
    return no_device_copy(device_id, err, errlen);
}
