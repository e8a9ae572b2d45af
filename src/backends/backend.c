/* The backend table: one entry per shmreg_source. */
#include "backends/backend.h"

static const struct shmreg__backend *const backends[] = {
    [SHMREG_SOURCE_SHM] = &shmreg__backend_system,
    [SHMREG_SOURCE_CUDA_IPC] = &shmreg__backend_cuda_ipc,
    [SHMREG_SOURCE_CUDA_FD] = &shmreg__backend_cuda_fd,
    [SHMREG_SOURCE_FD] = &shmreg__backend_system_fd,
    [SHMREG_SOURCE_REMOTE] = &shmreg__backend_remote,
    [SHMREG_SOURCE_CUDA_VMM_RANGE] = &shmreg__backend_cuda_vmm_range,
    [SHMREG_SOURCE_CUDA_POOL] = &shmreg__backend_cuda_pool,
};

const struct shmreg__backend *shmreg__backend_of(shmreg_source source)
{
    /* The enum's value comes from the caller: compare as unsigned, so a
     * negative one is out of range too. */
    if ((unsigned)source >= sizeof backends / sizeof backends[0])
        return NULL;
    return backends[source];
}
