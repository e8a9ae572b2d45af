/* Backends: one per memory kind (system shm, CUDA IPC, CUDA VMM fd).
 *
 * The core never knows which kind it holds. A backend's open function fills a
 * shmreg__mapping; its ops table knows how to undo that. Open functions run
 * outside every registry lock (they may take milliseconds: mmap, pinning,
 * cudaIpcOpenMemHandle) and leave nothing behind on failure. */
#ifndef SHMREG_BACKEND_H
#define SHMREG_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "shmreg/shmreg.h"

struct shmreg__mapping;

struct shmreg__backend {
    const char *name; /* "system", "cuda_ipc", "cuda_vmm": used in messages */
    shmreg_kind kind;
    /* Undo everything open did. Runs once, in the last releaser's thread,
     * outside every lock. On failure it still releases all it can, sets the
     * thread's error message and returns the code; the caller logs it. */
    shmreg_err (*close)(struct shmreg__mapping *m, const char *region_name);
};

/* What a backend opened; owned by the region that holds it. */
struct shmreg__mapping {
    const struct shmreg__backend *backend;
    void *addr;       /* byte 0 of the registered window (host or device pointer) */
    size_t byte_size; /* bytes usable at addr */
    int device_id;    /* CUDA device, -1 for system memory */
    int pinned;       /* system memory page-locked with cudaHostRegister */
    void *base;       /* backend bookkeeping: start of what it mapped/reserved */
    size_t length;    /* backend bookkeeping: length of that */
    uint64_t priv[4]; /* backend bookkeeping: handles (CUDA allocation handle...) */
};

/* ---- system shared memory: backend_system.c */

struct shmreg__system_args {
    const char *name; /* region name, for messages */
    const char *key;  /* as the caller gave it; already validated */
    size_t offset, byte_size;
    unsigned flags; /* SHMREG_READONLY honoured here */
    bool pin;       /* page-lock the mapping (the registry decided, see register.c) */
    const uid_t *allowed_uids; /* the object's owner must be one of these, */
    size_t allowed_uid_count;  /* unless the count is 0 */
};
shmreg_err shmreg__system_open(const struct shmreg__system_args *args, struct shmreg__mapping *out);

/* ---- CUDA: backend_cuda_*.c when built with CUDA, backend_cuda_stub.c otherwise.
 * Every function here returns SHMREG_ERR_UNSUPPORTED, with a message that says
 * why, where the build has no CUDA or the process has no driver or device. */

shmreg_err shmreg__cuda_ipc_open(const char *name, const void *raw_handle, size_t raw_handle_size,
                                 int device_id, size_t byte_size, unsigned flags,
                                 struct shmreg__mapping *out);
shmreg_err shmreg__cuda_vmm_open(const char *name, int fd, int device_id, size_t byte_size,
                                 unsigned flags, struct shmreg__mapping *out);

/* Page-lock [addr, addr+len) of host memory for DMA from every device
 * (cudaHostRegister, portable; read-only for a PROT_READ mapping). Undo with
 * shmreg__cuda_unpin before munmap. */
shmreg_err shmreg__cuda_pin(const char *name, void *addr, size_t len, bool read_only);
shmreg_err shmreg__cuda_unpin(const char *name, void *addr);

/* The SHMREG_CUDA_* bits of shmreg_cuda_available(). */
unsigned shmreg__cuda_caps(void);

#endif
