/* The build without CUDA: the same backend entries and CUDA capabilities as
 * the CUDA build, each answering SHMREG_ERR_UNSUPPORTED, so the core, the
 * exported symbols and the ABI are the same in both builds. */
#include "backends/backend.h"
#include "base/err.h"

#define SHMREG_NO_CUDA_ "libshmreg was built without CUDA support (SHMREG_WITH_CUDA=OFF)"

static shmreg_err cuda_ipc_open(const struct shmreg__open_args *a, struct shmreg__opened *out)
{
    return shmreg__fail(SHMREG_ERR_UNSUPPORTED, "failed to register CUDA IPC region '%s': %s", a->r->name,
                        SHMREG_NO_CUDA_);
}

static shmreg_err cuda_vmm_open(const struct shmreg__open_args *a, struct shmreg__opened *out)
{
    return shmreg__fail(SHMREG_ERR_UNSUPPORTED, "failed to register CUDA VMM region '%s': %s", a->r->name,
                        SHMREG_NO_CUDA_);
}

static shmreg_err cuda_vmm_range_open(const struct shmreg__open_args *a, struct shmreg__opened *out)
{
    return shmreg__fail(SHMREG_ERR_UNSUPPORTED, "failed to register CUDA VMM range '%s': %s", a->r->name,
                        SHMREG_NO_CUDA_);
}

static shmreg_err cuda_pool_open(const struct shmreg__open_args *a, struct shmreg__opened *out)
{
    return shmreg__fail(SHMREG_ERR_UNSUPPORTED, "failed to register CUDA pool region '%s': %s", a->r->name,
                        SHMREG_NO_CUDA_);
}

static shmreg_err nothing_to_close(struct shmreg__opened *m, const char *region_name)
{
    /* Nothing can have been opened in this build. */
    return shmreg__fail(SHMREG_ERR_UNSUPPORTED, "cannot close CUDA region '%s': %s", region_name,
                        SHMREG_NO_CUDA_);
}

const struct shmreg__backend shmreg__backend_cuda_ipc = {
    .name = "cuda_ipc",
    .kind = SHMREG_KIND_CUDA,
    .prepare = shmreg__cuda_ipc_prepare,
    .open = cuda_ipc_open,
    .close = nothing_to_close,
};

const struct shmreg__backend shmreg__backend_cuda_fd = {
    .name = "cuda_vmm",
    .kind = SHMREG_KIND_CUDA,
    .prepare = shmreg__cuda_fd_prepare,
    .open = cuda_vmm_open,
    .close = nothing_to_close,
};

const struct shmreg__backend shmreg__backend_cuda_vmm_range = {
    .name = "cuda_vmm_range",
    .kind = SHMREG_KIND_CUDA,
    .prepare = shmreg__cuda_vmm_range_prepare,
    .open = cuda_vmm_range_open,
    .close = nothing_to_close,
};

const struct shmreg__backend shmreg__backend_cuda_pool = {
    .name = "cuda_pool",
    .kind = SHMREG_KIND_CUDA,
    .prepare = shmreg__cuda_pool_prepare,
    .open = cuda_pool_open,
    .close = nothing_to_close,
};

static bool pinning_usable(void)
{
    return false;
}

static shmreg_err pin(const char *name, void *addr, size_t len, bool read_only)
{
    return shmreg__fail(SHMREG_ERR_UNSUPPORTED, "cannot pin system shared memory region '%s': %s", name,
                        SHMREG_NO_CUDA_);
}

static shmreg_err unpin(const char *name, void *addr)
{
    /* Nothing can have been pinned in this build. */
    return shmreg__fail(SHMREG_ERR_UNSUPPORTED, "cannot unpin system shared memory region '%s': %s", name,
                        SHMREG_NO_CUDA_);
}

struct shmreg__host_pinning shmreg__host_pinning = {
    .usable = pinning_usable,
    .pin = pin,
    .unpin = unpin,
};

SHMREG_API unsigned shmreg_cuda_available(void)
{
    return 0;
}

SHMREG_API shmreg_err shmreg_send_cuda_region(int sock, const char *name, const void *ptr, size_t byte_size,
                                              unsigned flags)
{
    shmreg_err err = shmreg__cuda_send_args(sock, name, ptr, byte_size, flags);
    if (err != SHMREG_OK)
        return err;
    return shmreg__fail(SHMREG_ERR_UNSUPPORTED, "shmreg_send_cuda_region '%s': %s", name, SHMREG_NO_CUDA_);
}
