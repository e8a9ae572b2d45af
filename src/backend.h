/* Backends: one per source of memory (shmreg_source), behind one table.
 *
 * The core never knows which kind of memory it holds. register.c checks the
 * arguments every source shares (name, flags, tag, byte_size) once, then
 * hands the same shmreg__open_args to the source's backend: `prepare`
 * checks the source's own arguments and says what the registration will
 * count against the limits, `open` fills a shmreg__mapping, and `close`
 * undoes it. A new source needs a backend file and one entry in backend.c's
 * table, nothing else.
 *
 * prepare is cheap and does no I/O. open runs outside every registry lock
 * (it may take milliseconds: mmap, pinning, cudaIpcOpenMemHandle) and leaves
 * nothing behind on failure. */
#ifndef SHMREG_BACKEND_H
#define SHMREG_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "shmreg/shmreg.h"

struct shmreg__mapping;

/* One registration as a backend sees it. */
struct shmreg__open_args {
    const shmreg_registration *r; /* name, byte_size > 0, flags and tag already checked */
    /* From the registry's configuration. */
    shmreg_pin_policy pin_policy;
    const char *const *reserved_key_prefixes;
    const uid_t *allowed_uids; /* a system object's owner must be one of these, */
    size_t allowed_uid_count;  /* unless the count is 0 */
    bool accept_unsealed_fds; /* SHMREG_SOURCE_FD: F_SEAL_SHRINK not required */
    /* Set by prepare: page-lock the mapping, and the bytes that pins.
     * pin_optional: the pin is AUTO's choice, not demanded, so register.c
     * drops it when it would pass the AUTO budget, and open drops it for a
     * window with holes (system_window.h); then the region is unpinned. */
    bool pin;
    bool pin_optional;
    size_t pinned_bytes;
};

struct shmreg__backend {
    const char *name; /* "system", "cuda_ipc", "cuda_vmm": used in messages */
    shmreg_kind kind;
    shmreg_err (*prepare)(struct shmreg__open_args *a);
    shmreg_err (*open)(const struct shmreg__open_args *a, struct shmreg__mapping *out);
    /* Undo everything open did. Runs once, in the last releaser's thread,
     * outside every lock. On failure it still releases all it can, sets the
     * thread's error message and returns the code; the caller logs it. */
    shmreg_err (*close)(struct shmreg__mapping *m, const char *region_name);
};

/* The backend of a source, or NULL for a value no backend serves. */
const struct shmreg__backend *shmreg__backend_of(shmreg_source source);

/* The entries of the table: backend_system.c, backend_system_fd.c, and backend_cuda_*.c or, in a
 * build without CUDA, backend_cuda_stub.c. */
extern const struct shmreg__backend shmreg__backend_system;
extern const struct shmreg__backend shmreg__backend_cuda_ipc;
extern const struct shmreg__backend shmreg__backend_cuda_fd;
extern const struct shmreg__backend shmreg__backend_system_fd; /* SHMREG_SOURCE_FD */

/* The CUDA sources' prepare, the same in every build (cuda_args.c). */
shmreg_err shmreg__cuda_ipc_prepare(struct shmreg__open_args *a);
shmreg_err shmreg__cuda_fd_prepare(struct shmreg__open_args *a);

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

/* ---- capabilities of the CUDA layer (cuda_calls.c, or backend_cuda_stub.c
 * where every answer is UNSUPPORTED) */

/* Page-locking host memory for DMA from every device. */
struct shmreg__host_pinning {
    /* Whether pinning can work in this process (a driver and a device). */
    bool (*usable)(void);
    /* Page-lock [addr, addr+len) (read-only for a PROT_READ mapping); undo
     * with unpin before munmap. name is the region's, for messages. */
    shmreg_err (*pin)(const char *name, void *addr, size_t len, bool read_only);
    shmreg_err (*unpin)(const char *name, void *addr);
};
extern const struct shmreg__host_pinning shmreg__host_pinning;

#endif
