/* Backends: one per source of memory (shmreg_source), behind one table.
 *
 * The core never knows which kind of memory it holds. register.c checks the
 * arguments every source shares (name, flags, tag, byte_size) once, then
 * hands the same shmreg__open_args to the source's backend: `prepare`
 * checks the source's own arguments and says what the registration will
 * count against the limits, `open` fills a shmreg__opened, and `close`
 * undoes it. A new source needs a backend file and one entry in backend.c's
 * table, nothing else.
 *
 * A source whose memory the registration cache can recognise also has
 * `inspect`, run before the limits are reserved (so that the memory's own
 * checks answer first) and before open: it opens what identifies
 * the memory and runs every check that needs it (for a shm key: shm_open,
 * fstat, owner, the window against the object's current size), and says
 * who the memory is (struct shmreg__identity). The core then either reuses
 * a mapping of the same identity that covers the window, or calls open,
 * which carries on from what inspect opened; `forget` closes that in both
 * cases. A reuse thus passes every check a new mapping passes, in the same
 * order, with the same errors.
 * A source whose mappings are never shared may have an inspect that only
 * checks (the remote source: the window against the one its client
 * announced), leaving id.valid false, so that its checks too answer
 * before the limits.
 *
 * prepare is cheap and does no I/O, but for the remote source's, which
 * first sweeps the registry's remote regions whose client is gone
 * (remote/backend.c says why there); it runs outside every registry lock.
 * inspect and open run outside every registry lock (open may take
 * milliseconds: mmap, pinning, cudaIpcOpenMemHandle) and leave nothing
 * behind on failure. */
#ifndef SHMREG_BACKEND_H
#define SHMREG_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "shmreg/shmreg.h"

struct shmreg__opened;

/* A file's identity as fstat gives it. */
struct shmreg__object_id {
    uint64_t device, inode;
};

/* What a saved registry state (handover/) needs to open a region's memory
 * again in another process, filled by a backend's `carried`. Every pointer
 * points into the mapping's own state and lives as long as it. */
struct shmreg__carried {
    /* The registry's own descriptors of the memory, in the order its
     * registration takes them (a VMM range's chunks in address order); the
     * saver duplicates them, never closes them. */
    size_t fd_count;
    int fds[SHMREG_CUDA_CHUNKS_MAX];
    bool object_known;            /* object holds the shm object's identity */
    struct shmreg__object_id object;
    /* CUDA: the device the region is on, in the saver's numbering, and its
     * UUID's text (m's device_uuid); a VMM range's chunk sizes; the 64
     * bytes of a legacy IPC handle or of a pool allocation's export data
     * (NULL for the others). */
    int device_id;
    const char *device_uuid;
    uint64_t chunk_sizes[SHMREG_CUDA_CHUNKS_MAX];
    const unsigned char *handle;
};

/* Who a registration's memory is, for the registration cache: equal
 * identities (of the same backend) name the same memory, mapped the same
 * way. */
struct shmreg__identity {
    bool valid;         /* false: this registration shares no mapping */
    uint64_t words[10]; /* the backend's: (device, inode, access, pinned) or
                           (handle bytes, device, access) */
};

/* One registration as a backend sees it. */
struct shmreg__open_args {
    const shmreg_registration *r; /* name, byte_size > 0, flags and tag already checked */
    /* From the registry's configuration. */
    shmreg_pin_policy pin_policy;
    const char *const *reserved_key_prefixes;
    const uid_t *allowed_uids; /* a system object's owner must be one of these, */
    size_t allowed_uid_count;  /* unless the count is 0 */
    bool accept_unsealed_fds; /* SHMREG_SOURCE_FD: F_SEAL_SHRINK not required */
    /* The registry's settings for this source, which only its backend reads
     * (SHMREG_SOURCE_REMOTE: struct shmreg__remote_settings,
     * remote/settings.h); NULL for a source that has none. */
    const void *source_settings;
    /* Set by prepare: page-lock the mapping, and the bytes that pins.
     * pin_optional: the pin is AUTO's choice, not demanded, so register.c
     * drops it when it would pass the pin budget (table.h); the region is
     * then unpinned. holes (set by prepare or inspect, system_window.h): a
     * demanded pin whose window has pages the client never populated, which
     * pinning allocates on the server; register.c refuses it past the
     * budget. Once register.c has reserved, open pins exactly when pin. */
    bool pin;
    bool pin_optional;
    bool holes;
    size_t pinned_bytes;
    /* Set by inspect: who the memory is, where the window starts in it, and
     * what open carries on from (a descriptor, or -1), for forget to close. */
    struct shmreg__identity id;
    size_t object_offset;
    int fd;
    /* A restore (handover/) re-opening a shm key: the object must still be
     * the one saved, fstat's device and inode, or inspect refuses it (it was
     * unlinked and created again in between). NULL: any object. */
    const struct shmreg__object_id *expect_object;
};

struct shmreg__backend {
    const char *name; /* "system", "system_fd", "cuda_ipc", "cuda_vmm": names the
                         mapping in the log line of a close that failed */
    shmreg_kind kind;
    shmreg_err (*prepare)(struct shmreg__open_args *a);
    /* Optional (NULL: the source's mappings are never shared or cached).
     * On failure it has closed what it opened. */
    shmreg_err (*inspect)(struct shmreg__open_args *a);
    void (*forget)(struct shmreg__open_args *a);
    shmreg_err (*open)(const struct shmreg__open_args *a, struct shmreg__opened *out);
    /* Undo everything open did. Runs once, in the last releaser's thread,
     * outside every lock. On failure it still releases all it can, sets the
     * thread's error message and returns the code; the caller logs it. */
    shmreg_err (*close)(struct shmreg__opened *m, const char *region_name);
    /* 1.2, for memory the server cannot dereference (a remote region; NULL
     * for the others, whose views point at their bytes). copy moves n bytes
     * between buf and [offset, offset + n) of the window, bounds already
     * checked; to_memory: into the region. gone: the memory is unreachable
     * for good (its client died), so the region may be swept. */
    shmreg_err (*copy)(const struct shmreg__opened *m, const char *region_name, size_t offset, void *buf,
                       size_t n, bool to_memory);
    bool (*gone)(const struct shmreg__opened *m);
    /* Optional: what the memory is reached through, for status (a remote
     * region: its connection's UCX transports); NULL or a string that lives
     * as long as m. */
    const char *(*transports)(const struct shmreg__opened *m);
    /* Optional, for a handover (handover/): what another process needs to
     * open this memory again. Called under the table's lock: it makes no
     * system call and, for CUDA memory, no CUDA call (what it reports was
     * kept at open). The saver zeroes *out first. NULL: the source is not
     * carried by a saved state. */
    void (*carried)(const struct shmreg__opened *m, struct shmreg__carried *out);
};

/* The backend of a source, or NULL for a value no backend serves. */
const struct shmreg__backend *shmreg__backend_of(shmreg_source source);

/* The entries of the table: backends/system.c, backends/system_fd.c, and backends/cuda_*.c or, in a
 * build without CUDA, backends/cuda_stub.c. */
extern const struct shmreg__backend shmreg__backend_system;
extern const struct shmreg__backend shmreg__backend_cuda_ipc;
extern const struct shmreg__backend shmreg__backend_cuda_fd;
extern const struct shmreg__backend shmreg__backend_cuda_vmm_range; /* SHMREG_SOURCE_CUDA_VMM_RANGE */
extern const struct shmreg__backend shmreg__backend_cuda_pool;      /* SHMREG_SOURCE_CUDA_POOL */
extern const struct shmreg__backend shmreg__backend_system_fd; /* SHMREG_SOURCE_FD */
/* SHMREG_SOURCE_REMOTE: remote/backend.c, or remote/stub.c in a
 * build without UCX. */
extern const struct shmreg__backend shmreg__backend_remote;

/* The remote source's prepare, the same in every build (remote/args.c). */
shmreg_err shmreg__remote_prepare(struct shmreg__open_args *a);

/* The CUDA sources' prepare, the same in every build (cuda_args.c). */
shmreg_err shmreg__cuda_ipc_prepare(struct shmreg__open_args *a);
shmreg_err shmreg__cuda_fd_prepare(struct shmreg__open_args *a);
shmreg_err shmreg__cuda_vmm_range_prepare(struct shmreg__open_args *a);
shmreg_err shmreg__cuda_pool_prepare(struct shmreg__open_args *a);

/* shmreg_send_cuda_region's arguments, checked in every build. */
shmreg_err shmreg__cuda_send_args(int sock, const char *name, const void *ptr, size_t byte_size, unsigned flags);

/* A GPU's UUID as text: "GPU-" or "MIG-", then 8-4-4-4-12 hex digits. */
#define SHMREG__CUDA_UUID_TEXT 41 /* with its NUL */
/* The 16 bytes of a UUID in that form; *mig: its prefix is "MIG-". -1 when
 * the text is not one (cuda_args.c). */
int shmreg__cuda_parse_uuid(const char *text, unsigned char bytes[16], bool *mig);
/* The text of 16 bytes, with the prefix "MIG-" when mig, else "GPU-". */
void shmreg__cuda_format_uuid(const unsigned char bytes[16], bool mig, char out[SHMREG__CUDA_UUID_TEXT]);

/* What a backend opened; owned by the mapping (mapping.h) that holds it. */
struct shmreg__opened {
    const struct shmreg__backend *backend;
    void *addr;       /* byte 0 of the registered window (host or device pointer) */
    size_t object_offset; /* where base lies in the object (the cache's coverage test) */
    size_t byte_size; /* bytes usable at addr */
    int device_id;    /* CUDA device, -1 for system memory */
    int pinned;       /* system memory page-locked with cudaHostRegister */
    void *base;       /* backend bookkeeping: start of what it mapped/reserved */
    size_t length;    /* backend bookkeeping: length of that */
    uint64_t priv[4]; /* backend bookkeeping: handles (CUDA allocation handle...) */
    char device_uuid[SHMREG__CUDA_UUID_TEXT]; /* CUDA: the device's UUID; else "" */
};

/* ---- capabilities of the CUDA layer (cuda_calls.c, or backends/cuda_stub.c
 * where every answer is UNSUPPORTED) */

/* Page-locking host memory for DMA from every device. Like shmreg__sys
 * (sys.h), a live table that tests built against the static copy may swap
 * (a pin that is slow, fails, or works without a GPU) and restore;
 * production code never changes it. */
struct shmreg__host_pinning {
    /* Whether pinning can work in this process (a driver and a device). */
    bool (*usable)(void);
    /* Page-lock [addr, addr+len) (read-only for a PROT_READ mapping); undo
     * with unpin before munmap. name is the region's, for messages. */
    shmreg_err (*pin)(const char *name, void *addr, size_t len, bool read_only);
    shmreg_err (*unpin)(const char *name, void *addr);
};
extern struct shmreg__host_pinning shmreg__host_pinning;

#endif
