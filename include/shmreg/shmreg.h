/*
 * libshmreg: a registry of named shared-memory regions for inference servers.
 *
 * A client places a tensor in POSIX shared memory or in GPU memory and
 * registers it with the server under a name; every request then names the
 * region, an offset and a size. This library maps each region once, finds it
 * without a shared lock on every request, and hands out counted references
 * so that a region is never unmapped while a request still reads or writes it.
 *
 * This header is the whole public API. Everything else under src/ is private.
 *
 * Conventions used throughout:
 *  - Every call returns a shmreg_err; SHMREG_OK is 0. On failure the calling
 *    thread's message (shmreg_last_error) names the region and the cause, and
 *    the registry is left exactly as it was: no descriptor, mapping, pinned
 *    range or CUDA handle is kept.
 *  - Every call is safe from any thread at any time, unless it says otherwise.
 *  - Functions that free or drop something accept NULL and then do nothing.
 *  - A child of fork() must not use a registry created before the fork.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef SHMREG_SHMREG_H
#define SHMREG_SHMREG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(SHMREG_STATIC)
#define SHMREG_API
#elif defined(SHMREG_BUILDING)
#define SHMREG_API __attribute__((visibility("default")))
#else
#define SHMREG_API
#endif

/* ---------------------------------------------------------------- version */

/* The one place the version is written: CMakeLists.txt reads these three
 * numbers for project(), the SOVERSION (MAJOR) and the packages. */
#define SHMREG_VERSION_MAJOR 1
#define SHMREG_VERSION_MINOR 0
#define SHMREG_VERSION_PATCH 0
#define SHMREG_VERSION_STR_(x) #x
#define SHMREG_VERSION_XSTR_(x) SHMREG_VERSION_STR_(x)
/* "MAJOR.MINOR.PATCH", made from the three numbers so it cannot disagree. */
#define SHMREG_VERSION_STRING                                                          \
    SHMREG_VERSION_XSTR_(SHMREG_VERSION_MAJOR) "."                                     \
    SHMREG_VERSION_XSTR_(SHMREG_VERSION_MINOR) "."                                     \
    SHMREG_VERSION_XSTR_(SHMREG_VERSION_PATCH)

/* The version of the library loaded at run time, "MAJOR.MINOR.PATCH".
 * Static storage; never NULL. */
SHMREG_API const char *shmreg_version(void);

/* ----------------------------------------------------------------- errors */

/*
 * X-macro list of every error code: X(name, value, description). The enum
 * and the name/description tables inside the library are generated from this
 * one list, so they cannot drift apart.
 */
#define SHMREG_ERR_MAP(X)                                                              \
    X(OK, 0, "success")                                                                \
    X(ERR_INVALID_ARG, 1, "invalid argument: a NULL pointer, bad name, key or flags")  \
    X(ERR_NOT_FOUND, 2, "no region of that name (and kind) is registered")             \
    X(ERR_ALREADY_EXISTS, 3, "a region of that name is already registered")            \
    X(ERR_OUT_OF_BOUNDS, 4, "offset or size outside the region or the object")         \
    X(ERR_BUSY, 5, "the region is in use and the busy policy refuses")                  \
    X(ERR_SYSTEM, 6, "an operating-system call failed (errno in the message)")         \
    X(ERR_CUDA, 7, "a CUDA call failed (CUDA error name and string in the message)")   \
    X(ERR_UNSUPPORTED, 8, "not available in this build or on this machine")            \
    X(ERR_NO_MEMORY, 9, "out of memory, or a configured limit was reached")

typedef enum shmreg_err {
#define SHMREG_ERR_ENUM_(name, value, desc) SHMREG_##name = value,
    SHMREG_ERR_MAP(SHMREG_ERR_ENUM_)
#undef SHMREG_ERR_ENUM_
} shmreg_err;

/* "SHMREG_ERR_BUSY" for SHMREG_ERR_BUSY; "SHMREG_ERR_UNKNOWN" for a value
 * outside the enum. Static storage. */
SHMREG_API const char *shmreg_err_name(shmreg_err err);

/* One sentence describing the code in general (not the last failure).
 * Static storage. */
SHMREG_API const char *shmreg_err_description(shmreg_err err);

/* The calling thread's message for its most recent failed call, e.g.
 * "Unable to find shared memory region: 'input0'". "" if this thread has had
 * no failure. The string is thread-local and stays valid until this thread's
 * next failing call into the library. Successful calls do not clear it. */
SHMREG_API const char *shmreg_last_error(void);

/* ------------------------------------------------------------ basic types */

/* The memory a region lives in. ANY is accepted where a call filters by kind. */
typedef enum shmreg_kind {
    SHMREG_KIND_ANY = 0,
    SHMREG_KIND_SYSTEM = 1, /* POSIX shared memory object, mapped into this process */
    SHMREG_KIND_CUDA = 2    /* GPU memory: a CUDA IPC handle or a VMM descriptor */
} shmreg_kind;

/* What shmreg_unregister does to a region that requests still reference. */
typedef enum shmreg_policy {
    /* Return OK and keep the region listed (pending_unregister = 1), still
     * acquirable under its name; it is removed and unmapped when its last
     * reference is released. This is what Triton users observe. */
    SHMREG_POLICY_DEFER = 0,
    /* Free the name at once (new acquires fail, the name can be registered
     * again); the old mapping lives until its last reference is released. */
    SHMREG_POLICY_DETACH = 1,
    /* Fail with SHMREG_ERR_BUSY and change nothing. */
    SHMREG_POLICY_REFUSE = 2
} shmreg_policy;

/* Whether system regions are page-locked for DMA (cudaHostRegister) at
 * register time, so host<->device copies run at the pinned rate. */
typedef enum shmreg_pin_policy {
    SHMREG_PIN_AUTO = 0,  /* pin when CUDA is usable in this process; else don't */
    SHMREG_PIN_NEVER = 1, /* never pin (SHMREG_PIN in flags still demands it) */
    SHMREG_PIN_ALWAYS = 2 /* every system region must be pinned, or register fails */
} shmreg_pin_policy;

typedef enum shmreg_log_level {
    SHMREG_LOG_ERROR = 0,
    SHMREG_LOG_WARNING = 1,
    SHMREG_LOG_INFO = 2
} shmreg_log_level;

/* Receives messages the library cannot return to a caller, such as a munmap
 * or cudaIpcCloseMemHandle that fails inside the deleter of a last release.
 * Called from whichever thread runs that code, never with a registry lock
 * held; it must not call back into the registry that logs. */
typedef void (*shmreg_log_fn)(void *user, shmreg_log_level level, const char *msg);

/* Registration flags, OR-ed together. Unknown bits are SHMREG_ERR_INVALID_ARG. */
#define SHMREG_READONLY 0x1u /* map read-only (PROT_READ / CU_MEM_ACCESS_FLAGS_PROT_READ) */
#define SHMREG_PIN 0x2u      /* system regions: pinning is required; fail if impossible */
#define SHMREG_NO_PIN 0x4u   /* system regions: do not pin this one, whatever the policy */

/* ----------------------------------------------------------------- config */

/*
 * Registry settings. Always start from shmreg_config_init(), then set fields:
 * new fields are only ever carved out of the reserved tail, with zero meaning
 * "default", so the size of this struct is fixed within a major version and a
 * program built against an older header keeps working.
 */
typedef struct shmreg_config {
    shmreg_policy busy_policy;                /* default SHMREG_POLICY_DEFER */
    const char *const *reserved_key_prefixes; /* NULL-terminated deny-list, or NULL.
                                                 Copied by shmreg_registry_create. */
    shmreg_pin_policy pin_policy;             /* default SHMREG_PIN_AUTO */
    shmreg_log_fn log_fn;                     /* NULL: messages are dropped */
    void *log_user;                           /* passed to log_fn */
    /* Tenancy: when allowed_owner_uid_count > 0, a system region may only map
     * a shm object whose owner (fstat st_uid) is one of these uids; the array
     * is copied. This stops one client from registering, and then reading or
     * writing, shm objects that belong to another tenant or to the server. */
    const uid_t *allowed_owner_uids;
    size_t allowed_owner_uid_count;
    /* Limits, 0 = unlimited. They count every region still mapped, pending
     * and detached ones included; register fails with SHMREG_ERR_NO_MEMORY
     * when a registration would pass one. */
    size_t max_regions;
    size_t max_mapped_bytes; /* sum of byte_size over mapped regions, all kinds */
    size_t max_pinned_bytes; /* sum of pinned (page-locked) bytes */
    void *reserved_[11];     /* zero; room for later fields */
} shmreg_config;

/* Fill cfg with the defaults (all zero: DEFER, no reserved prefixes, AUTO
 * pinning, no log). cfg must not be NULL. */
SHMREG_API void shmreg_config_init(shmreg_config *cfg);

/* --------------------------------------------------------------- registry */

typedef struct shmreg_registry shmreg_registry; /* opaque */
typedef struct shmreg_region shmreg_region;     /* opaque: one counted reference */

/* Create an empty registry. cfg may be NULL (defaults); it is copied, so it
 * need not outlive the call. On success *out owns the registry; free it with
 * shmreg_registry_destroy. Errors: INVALID_ARG (out NULL, policy out of range,
 * empty reserved prefix), NO_MEMORY. */
SHMREG_API shmreg_err shmreg_registry_create(const shmreg_config *cfg, shmreg_registry **out);

/* Server shutdown: unregister every region whatever the busy policy, then free
 * the registry handle. References that requests still hold stay valid; each
 * region is unmapped by its own last shmreg_release, which may come after this
 * call returns. No other call may use reg after this one starts. When no
 * reference is outstanding it also waits (milliseconds) until the library
 * holds none of the registry's memory, so it must not be called inside a
 * liburcu-bp read-side section of the caller's own. NULL is a no-op. */
SHMREG_API void shmreg_registry_destroy(shmreg_registry *reg);

/*
 * Register the POSIX shared memory object `key` (opened read-write, or
 * read-only with SHMREG_READONLY; never created or unlinked) under `name`, as
 * the window [offset, offset + byte_size) of the object. Any offset works,
 * page-aligned or not. Several names may map the same key.
 *
 * name: 1..255 bytes, one namespace for all kinds. key: POSIX shm naming;
 * leading slashes are ignored as glibc ignores them. The object's descriptor
 * is closed before this returns, on every path. Pinning follows the config's
 * pin_policy and the SHMREG_PIN / SHMREG_NO_PIN flags.
 *
 * Errors: INVALID_ARG (NULL or bad name, invalid or reserved key, bad flags),
 * ALREADY_EXISTS (name taken), OUT_OF_BOUNDS (byte_size 0, offset + byte_size
 * overflows or ends past the object), SYSTEM (shm_open, fstat or mmap failed),
 * UNSUPPORTED (pinning demanded but CUDA unusable), CUDA (pinning failed),
 * NO_MEMORY.
 */
SHMREG_API shmreg_err shmreg_register_system(shmreg_registry *reg, const char *name,
                                             const char *key, size_t offset,
                                             size_t byte_size, unsigned flags);

/*
 * Register GPU memory exported by another process as a legacy CUDA IPC handle:
 * raw_handle is the 64 bytes of a cudaIpcMemHandle_t (raw_handle_size must be
 * 64). It is opened on device_id, leaving the calling thread's current device
 * as it was; byte_size must not exceed the allocation. The same handle may be
 * registered under several names; each registration holds its own open. The
 * exporting process must keep the allocation alive while it is registered.
 *
 * Errors: INVALID_ARG, ALREADY_EXISTS, OUT_OF_BOUNDS (byte_size 0 or larger
 * than the allocation), CUDA (the driver rejected the handle: its error name
 * and string are in the message), UNSUPPORTED (no CUDA in this build, no
 * driver or no device), NO_MEMORY.
 */
SHMREG_API shmreg_err shmreg_register_cuda_ipc(shmreg_registry *reg, const char *name,
                                               const void *raw_handle, size_t raw_handle_size,
                                               int device_id, size_t byte_size, unsigned flags);

/*
 * Register a CUDA VMM allocation (cuMemCreate) exported as a POSIX file
 * descriptor (CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR), typically received
 * over a Unix socket with shmreg_recv_fd. It is imported, mapped at a
 * reserved virtual range and made accessible from device_id (read-only with
 * SHMREG_READONLY). The caller keeps ownership of fd: the registry never
 * closes it, and the caller may close it as soon as this returns.
 * The whole allocation is mapped: byte_size, rounded up to the allocation
 * granularity, must be the allocation's size (the driver maps no other
 * length; OUT_OF_BOUNDS otherwise). The view covers byte_size bytes.
 *
 * Errors: as shmreg_register_cuda_ipc; a descriptor that is not a CUDA
 * shareable handle is CUDA (or INVALID_ARG when negative).
 */
SHMREG_API shmreg_err shmreg_register_cuda_fd(shmreg_registry *reg, const char *name, int fd,
                                              int device_id, size_t byte_size, unsigned flags);

/* What a registration may carry beyond the positional arguments. Zero it
 * (or use NULL) for none; later fields come out of the reserved tail. */
typedef struct shmreg_register_opts {
    /* Owner tag, 1..255 bytes without control characters, or NULL. Calls
     * given a tag (shmreg_unregister_tagged, shmreg_unregister_all_tagged,
     * shmreg_status_tagged) see only the regions registered with that tag,
     * so one client's cleanup cannot remove another client's regions. */
    const char *tag;
    void *reserved_[7];
} shmreg_register_opts;

/* The three registrations above, with options (opts may be NULL). */
SHMREG_API shmreg_err shmreg_register_system_opts(shmreg_registry *reg, const char *name,
                                                  const char *key, size_t offset, size_t byte_size,
                                                  unsigned flags, const shmreg_register_opts *opts);
SHMREG_API shmreg_err shmreg_register_cuda_ipc_opts(shmreg_registry *reg, const char *name,
                                                    const void *raw_handle, size_t raw_handle_size,
                                                    int device_id, size_t byte_size, unsigned flags,
                                                    const shmreg_register_opts *opts);
SHMREG_API shmreg_err shmreg_register_cuda_fd_opts(shmreg_registry *reg, const char *name, int fd,
                                                   int device_id, size_t byte_size, unsigned flags,
                                                   const shmreg_register_opts *opts);

/* Bits of shmreg_cuda_available()'s answer. */
#define SHMREG_CUDA_BUILT 0x1u   /* this library was built with the CUDA backends */
#define SHMREG_CUDA_DRIVER 0x2u  /* a CUDA driver could be loaded in this process */
#define SHMREG_CUDA_DEVICE 0x4u  /* at least one device is visible */
#define SHMREG_CUDA_VMM_FD 0x8u  /* device 0 can import VMM POSIX descriptors */

/* What this process can do with CUDA: an OR of SHMREG_CUDA_* bits. All of
 * BUILT|DRIVER|DEVICE are needed for CUDA regions and for pinning. The first
 * call may initialise the CUDA runtime; later calls are cheap. */
SHMREG_API unsigned shmreg_cuda_available(void);

/* ----------------------------------------------------------- per request */

/* What an acquired reference lets the caller touch: byte_size bytes at addr.
 * For SYSTEM, addr is a host pointer; for CUDA, a device pointer valid on
 * device_id (-1 for SYSTEM). pinned: a SYSTEM region page-locked for DMA. */
typedef struct shmreg_view {
    void *addr;
    size_t byte_size;
    shmreg_kind kind;
    int device_id;
    int pinned;
} shmreg_view;

/*
 * Look up `name` and take a counted reference to it, with a view of
 * [offset, offset + byte_size) of the region (byte_size may be 0). The
 * reference keeps the mapping alive whatever happens to the name: release it
 * with shmreg_release when the request or response is done with the memory.
 * Lookups share no lock with each other or with register/unregister.
 *
 * out and view must not be NULL. On failure *out is NULL and *view untouched.
 * Errors: INVALID_ARG, NOT_FOUND, OUT_OF_BOUNDS (offset past the end, offset +
 * byte_size overflowing or past the end).
 */
SHMREG_API shmreg_err shmreg_acquire(shmreg_registry *reg, const char *name, size_t offset,
                                     size_t byte_size, shmreg_region **out, shmreg_view *view);

/* Drop one reference. The last one (the registry's included) unmaps the
 * region, exactly once, in the calling thread, and may do so after the
 * registry was destroyed. NULL is a no-op. Any thread. */
SHMREG_API void shmreg_release(shmreg_region *ref);

/* Take another reference to the region ref refers to (for a second owner,
 * e.g. a response that outlives its request); returns ref. Each retain needs
 * its own shmreg_release. ref must be a reference the caller holds; NULL
 * returns NULL. */
SHMREG_API shmreg_region *shmreg_retain(shmreg_region *ref);

/* ----------------------------------------------------------- unregister */

/*
 * Unregister `name`. kind SYSTEM or CUDA must match the region's kind (a
 * mismatch is NOT_FOUND and says which kind it is); ANY matches either. An
 * idle region is unmapped before this returns; a region in use follows the
 * busy policy (see shmreg_policy). Unregistering a region already pending is
 * OK and changes nothing.
 * Errors: INVALID_ARG, NOT_FOUND, BUSY (REFUSE policy, region in use).
 */
SHMREG_API shmreg_err shmreg_unregister(shmreg_registry *reg, const char *name, shmreg_kind kind);

/* Unregister every region of `kind` (ANY: all). Under REFUSE, the idle ones
 * are unregistered and BUSY names the busy ones; other policies never fail on
 * busy regions. Errors: INVALID_ARG, BUSY. */
SHMREG_API shmreg_err shmreg_unregister_all(shmreg_registry *reg, shmreg_kind kind);

/* As shmreg_unregister and shmreg_unregister_all, restricted to regions
 * registered with owner tag `tag` (NULL: no restriction). A region of another
 * tag is NOT_FOUND for shmreg_unregister_tagged, as if absent. */
SHMREG_API shmreg_err shmreg_unregister_tagged(shmreg_registry *reg, const char *name,
                                               shmreg_kind kind, const char *tag);
SHMREG_API shmreg_err shmreg_unregister_all_tagged(shmreg_registry *reg, shmreg_kind kind,
                                                   const char *tag);

/* --------------------------------------------------------------- status */

typedef struct shmreg_region_status {
    const char *name;
    const char *key;        /* SYSTEM: the key as registered; CUDA: NULL */
    shmreg_kind kind;
    size_t offset, byte_size;
    int device_id;          /* -1 for SYSTEM */
    unsigned in_use;        /* references held by requests right now */
    int pending_unregister; /* DEFER: unregistered, waiting for in_use to reach 0 */
    uint64_t generation;    /* unique per registration in this registry */
    int pinned;             /* SYSTEM region page-locked for DMA */
    unsigned flags;         /* the flags it was registered with */
    const char *tag;        /* owner tag, or NULL */
} shmreg_region_status;

/*
 * A snapshot of the regions of `kind` (ANY: all), or only of `name` if not
 * NULL. Regions appear while registered or pending; a detached region does
 * not. On success *out is an array of *count entries (NULL when 0) that the
 * caller owns and frees with shmreg_status_free; strings live in it.
 * Errors: INVALID_ARG, NOT_FOUND ("Unable to find system shared memory
 * region: 'X'", or the kind-mismatch message), NO_MEMORY.
 */
SHMREG_API shmreg_err shmreg_status(shmreg_registry *reg, const char *name, shmreg_kind kind,
                                    shmreg_region_status **out, size_t *count);

/* As shmreg_status, restricted to regions registered with owner tag `tag`
 * (NULL: no restriction); a named region of another tag is NOT_FOUND. */
SHMREG_API shmreg_err shmreg_status_tagged(shmreg_registry *reg, const char *name, shmreg_kind kind,
                                           const char *tag, shmreg_region_status **out,
                                           size_t *count);

/* Free what shmreg_status returned. NULL is a no-op. */
SHMREG_API void shmreg_status_free(shmreg_region_status *st, size_t count);

/* ------------------------------------------- descriptor passing (VMM fds) */

/*
 * Send one descriptor and a payload (1..SHMREG_FD_PAYLOAD_MAX bytes, e.g. the
 * region name and size) over a connected AF_UNIX socket with SCM_RIGHTS.
 * The caller keeps fd. Errors: INVALID_ARG, SYSTEM.
 */
#define SHMREG_FD_PAYLOAD_MAX 4096
SHMREG_API shmreg_err shmreg_send_fd(int sock, int fd, const void *payload, size_t payload_size);

/*
 * Receive what shmreg_send_fd sent: *fd_out becomes a new descriptor the
 * caller owns, and up to cap payload bytes land in payload (*payload_size set).
 * Errors: INVALID_ARG, SYSTEM (recvmsg failed, the peer closed: "connection
 * closed", or a message that is not shmreg_send_fd's, whose descriptor is
 * closed), OUT_OF_BOUNDS (payload or control data truncated; any descriptor
 * received is closed), NOT_FOUND (a message carrying no descriptor).
 */
SHMREG_API shmreg_err shmreg_recv_fd(int sock, int *fd_out, void *payload, size_t cap,
                                     size_t *payload_size);

#ifdef __cplusplus
}
#endif

#endif /* SHMREG_SHMREG_H */
