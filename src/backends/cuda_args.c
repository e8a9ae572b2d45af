/* The CUDA sources' own arguments, checked in every build: a bad handle or
 * descriptor is INVALID_ARG whether or not this library or process can use
 * CUDA, so callers see one behaviour. The backends' prepare (backends/cuda_*.c,
 * or backends/cuda_stub.c) call these. */
#include "backends/backend.h"
#include "base/err.h"

/* The size of a cudaIpcMemHandle_t; backends/cuda_ipc.c checks it against
 * CUDA's own header. */
#define SHMREG_CUDA_IPC_HANDLE_SIZE 64

shmreg_err shmreg__cuda_ipc_prepare(struct shmreg__open_args *a)
{
    const shmreg_registration *r = a->r;
    if (r->raw_handle == NULL || r->raw_handle_size != SHMREG_CUDA_IPC_HANDLE_SIZE)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG,
                            "failed to register CUDA IPC region '%s': a CUDA IPC handle is %d bytes, got %zu%s",
                            r->name, SHMREG_CUDA_IPC_HANDLE_SIZE, r->raw_handle_size,
                            r->raw_handle == NULL ? " at NULL" : "");
    return SHMREG_OK;
}

shmreg_err shmreg__cuda_fd_prepare(struct shmreg__open_args *a)
{
    if (a->r->fd < 0)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG,
                            "failed to register CUDA VMM region '%s': descriptor %d is negative", a->r->name,
                            a->r->fd);
    return SHMREG_OK;
}
