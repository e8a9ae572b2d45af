/* The build without CUDA: the same internal functions as the CUDA backends,
 * each answering SHMREG_ERR_UNSUPPORTED, so the core, the exported symbols
 * and the ABI are the same in both builds. */
#include "backend.h"
#include "err.h"

#define SHMREG_NO_CUDA_ "libshmreg was built without CUDA support (SHMREG_WITH_CUDA=OFF)"

shmreg_err shmreg__cuda_ipc_open(const char *name, const void *raw_handle, size_t raw_handle_size,
                                 int device_id, size_t byte_size, unsigned flags,
                                 struct shmreg__mapping *out)
{
    return shmreg__fail(SHMREG_ERR_UNSUPPORTED, "failed to register CUDA IPC region '%s': %s",
                        name, SHMREG_NO_CUDA_);
}

shmreg_err shmreg__cuda_vmm_open(const char *name, int fd, int device_id, size_t byte_size,
                                 unsigned flags, struct shmreg__mapping *out)
{
    return shmreg__fail(SHMREG_ERR_UNSUPPORTED, "failed to register CUDA VMM region '%s': %s",
                        name, SHMREG_NO_CUDA_);
}

shmreg_err shmreg__cuda_pin(const char *name, void *addr, size_t len, bool read_only)
{
    return shmreg__fail(SHMREG_ERR_UNSUPPORTED,
                        "cannot pin system shared memory region '%s': %s", name,
                        SHMREG_NO_CUDA_);
}

shmreg_err shmreg__cuda_unpin(const char *name, void *addr)
{
    /* Nothing can have been pinned in this build. */
    return shmreg__fail(SHMREG_ERR_UNSUPPORTED,
                        "cannot unpin system shared memory region '%s': %s", name,
                        SHMREG_NO_CUDA_);
}

unsigned shmreg__cuda_caps(void)
{
    return 0;
}

SHMREG_API unsigned shmreg_cuda_available(void)
{
    return 0;
}
