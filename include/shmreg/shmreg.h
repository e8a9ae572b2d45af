/*
 * libshmreg: a registry of named shared-memory regions for inference servers.
 *
 * A client places a tensor in POSIX shared memory or in GPU memory and
 * registers it with the server under a name; every request then names the
 * region, an offset and a size. This library maps each region once, finds it
 * without a shared lock on every request, and hands out counted references
 * so that a region is never unmapped while a request still reads or writes it.
 *
 * Start here: the calls a server of system shared memory needs.
 *
 *   shmreg_registry_create(NULL, &reg)             once, at start (NULL: defaults)
 *   shmreg_guard_install()                     once, before the first copy
 *   shmreg_register_system(reg, name, key, off, size, 0)      client's register
 *   shmreg_acquire(reg, name, off, size, &ref, &view)  per tensor of a request
 *   shmreg_copy_from_view(ref, &view, off, dst, n)     read an input tensor
 *   shmreg_copy_to_view(ref, &view, off, src, n)       write an output tensor
 *   shmreg_release(ref)                        when the response is sent
 *   shmreg_unregister(reg, name, SHMREG_KIND_SYSTEM)        client's unregister
 *   shmreg_unregister_all(reg, SHMREG_KIND_SYSTEM)    client's unregister-all
 *   shmreg_status(reg, name_or_NULL, kind, &st, &n) then shmreg_status_free(st, n)
 *   shmreg_last_error()                        the message of a failed call
 *   shmreg_registry_destroy(reg)               once, at shutdown
 *
 * Names, keys and tags are copied: the caller's strings need not outlive a
 * call. A view is valid from shmreg_acquire until its reference is
 * released; touching view.addr after shmreg_release is a use-after-unmap.
 * A client owns its shm object and may truncate it under the server's
 * mapping at any time: a plain read or write of view.addr then raises
 * SIGBUS in the server. The guarded copies return SHMREG_ERR_FAULT instead,
 * so use them for the memory of clients you do not trust; read view.addr in
 * place only where nothing can shrink the object (a sealed memfd,
 * shmreg_register_system_fd) or where only DMA touches it (view.pinned).
 * A view of a read-only region (SHMREG_READONLY) has writable == 0: a write
 * through it faults.
 *
 * This header, with the three it includes at its end, is the whole public
 * API: shmreg/region_socket.h (descriptor passing and the wire formats of
 * regions passed over a Unix socket), shmreg/remote.h (remote regions
 * through UCX) and shmreg/handover.h (a registry's state handed to another
 * process). Everything else under src/ is private.
 *
 * Conventions used throughout:
 *  - Every call returns a shmreg_err; SHMREG_OK is 0. On failure the calling
 *    thread's message (shmreg_last_error) names the region and the cause, and
 *    the registry is left exactly as it was: no descriptor, mapping, pinned
 *    range or CUDA handle is kept.
 *  - Every call is safe from any thread at any time, unless it says otherwise.
 *  - Functions that free or drop something accept NULL and then do nothing.
 *  - One extension idiom: where a verb takes more than its plain arguments,
 *    it takes a struct (shmreg_config, shmreg_registration, shmreg_filter)
 *    that the caller fills after calling the struct's _init function. New
 *    fields are only ever carved out of a struct's reserved tail, with the
 *    _init value meaning "as before", so a struct's size is fixed within a
 *    major version and a program built against an older header keeps
 *    working. Structs the library fills (shmreg_view, shmreg_region_status,
 *    shmreg_stats) keep a reserved tail for the same reason.
 *  - A child of fork() must not use a registry created before the fork
 *    (see shmreg_registry_create for what it may do).
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
#define SHMREG_VERSION_MINOR 3
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
    X(ERR_NOT_FOUND, 2, "no region of that name is registered (or visible to that tag)") \
    X(ERR_ALREADY_EXISTS, 3, "a region of that name is already registered")            \
    X(ERR_OUT_OF_BOUNDS, 4, "offset or size outside the region or the object")         \
    X(ERR_BUSY, 5, "the region is in use and the busy policy refuses")                  \
    X(ERR_SYSTEM, 6, "an operating-system call failed (errno in the message)")         \
    X(ERR_CUDA, 7, "a CUDA call failed (CUDA error name and string in the message)")   \
    X(ERR_UNSUPPORTED, 8, "not available in this build or on this machine")            \
    X(ERR_NO_MEMORY, 9, "out of memory, or a configured limit was reached")            \
    X(ERR_WRONG_KIND, 10, "the name is registered, but as the other kind of memory")         \
    X(ERR_FAULT, 11, "a guarded copy touched memory that is gone (the object was truncated)")

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
    SHMREG_KIND_SYSTEM = 1, /* host memory: a POSIX shared memory object, mapped */
    SHMREG_KIND_CUDA = 2,   /* GPU memory: a CUDA IPC handle or a VMM descriptor */
    /* 1.2: memory of another process, possibly on another host, reached
     * through UCX (SHMREG_SOURCE_REMOTE). A view of it has addr NULL: its
     * bytes move only through shmreg_copy_from_view / shmreg_copy_to_view. */
    SHMREG_KIND_REMOTE = 3
} shmreg_kind;

/* What shmreg_unregister does to a region that requests still reference. */
typedef enum shmreg_policy {
    /* Return OK and keep the region listed (pending_unregister = 1), still
     * acquirable under its name; it is removed and unmapped when its last
     * reference is released. This is what Triton users observe. */
    SHMREG_POLICY_DEFER = 0,
    /* Free the name at once (new acquires fail, the name can be registered
     * again); the old mapping lives until its last reference is released.
     * Status no longer lists it; shmreg_registry_stats counts it. */
    SHMREG_POLICY_DETACH = 1,
    /* Fail with SHMREG_ERR_BUSY and change nothing. */
    SHMREG_POLICY_REFUSE = 2
} shmreg_policy;

/* Whether system regions are page-locked for DMA (cudaHostRegister) at
 * register time, so host<->device copies run at the pinned rate. Pinning a
 * window with holes (pages the client never wrote, as in an output region)
 * allocates those pages on the server, so such a pin is bounded by the pin
 * budget (see SHMREG_AUTO_PIN_BUDGET). The pin runs in the registering
 * call, outside every lock of the registry: it delays that call only. */
typedef enum shmreg_pin_policy {
    SHMREG_PIN_AUTO = 0,  /* pin when CUDA is usable in this process and within
                             the pin budget; else register unpinned */
    SHMREG_PIN_NEVER = 1, /* never pin (SHMREG_PIN in flags still demands it) */
    SHMREG_PIN_ALWAYS = 2 /* every system region must be pinned, or register fails */
} shmreg_pin_policy;

/* The levels the library logs at. ERROR: something could not be undone
 * (a munmap, unpin or CUDA close failed in a deleter). WARNING: the
 * server's own use looks wrong but nothing was lost (a registry destroyed
 * while callers still held references to its regions). */
typedef enum shmreg_log_level {
    SHMREG_LOG_ERROR = 0,
    SHMREG_LOG_WARNING = 1
} shmreg_log_level;

/* Receives messages the library cannot return to a caller, such as a munmap
 * or cudaIpcCloseMemHandle that fails inside the deleter of a last release.
 * Called from whichever thread runs that code, never with a registry lock
 * held; it must not call back into the registry that logs. */
typedef void (*shmreg_log_fn)(void *user, shmreg_log_level level, const char *msg);

/* Who unmaps a region whose last reference shmreg_release drops. */
typedef enum shmreg_reclaim {
    /* The release only hands the region to the registry's reclaim thread
     * (started with the first registration, named "shmreg-reclaim"), which
     * unpins, unmaps and closes it: the releasing thread makes no system
     * call and takes no lock that register or unregister hold. Until the
     * thread has done so, the region's bytes still count against the limits
     * (shmreg_stats.reclaim_waiting_bytes). Unregister, destroy and
     * shmreg_registry_trim still unmap idle regions before they return. */
    SHMREG_RECLAIM_BACKGROUND = 0,
    /* The last release unmaps in the releasing thread (1.0's behaviour). */
    SHMREG_RECLAIM_INLINE = 1
} shmreg_reclaim;

/* Registration flags, OR-ed together. Unknown bits are SHMREG_ERR_INVALID_ARG. */
#define SHMREG_READONLY 0x1u /* map read-only (PROT_READ / CU_MEM_ACCESS_FLAGS_PROT_READ) */
#define SHMREG_PIN 0x2u      /* system regions: pinning is required; fail if impossible */
#define SHMREG_NO_PIN 0x4u   /* system regions: do not pin this one, whatever the policy */

/* ----------------------------------------------------------------- config */

/*
 * Registry settings. Always start from shmreg_config_init(), then set fields
 * (see "One extension idiom" above).
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
    /* 1.1 (carved from reserved_; pointer-sized, so no offset moves on any
     * ABI): nonzero lets SHMREG_SOURCE_FD register a descriptor that does not
     * carry F_SEAL_SHRINK. Its owner can then shrink the object under the
     * mapping, and a plain read of the lost pages raises SIGBUS in the
     * server: use the guarded copies (shmreg_copy_from_view) for such regions.
     * 0 (default, and what a 1.0 program passes): refused. */
    size_t accept_unsealed_fds;
    /* Since 1.1. Default SHMREG_RECLAIM_BACKGROUND. An enum in a slot of its
     * own: the size_t after it keeps the slot pointer-aligned on every ABI. */
    shmreg_reclaim reclaim;
    /* Since 1.1. The registration cache, 0 (default): off. When the last
     * region on a mapping is unmapped, the mapping (with its pin, or its
     * CUDA IPC open) may stay cached, up to this many bytes in all, least
     * recently used evicted first. A registration of memory that is already
     * mapped, cached or by a live region under another name, reuses the
     * mapping: a system region when the freshly opened key is the same
     * object (fstat's device and inode), mapped with the same access and
     * pinning, and the mapping covers the window; a CUDA IPC region when the
     * handle bytes, the device and the access are the same. A reuse passes
     * every check a new mapping passes, in the same order and with the same
     * errors (the object's current size, its type, its owner and the pinning
     * rules included); an object unlinked and created again under the same
     * key is another object. A descriptor registration (SHMREG_SOURCE_FD)
     * neither reuses nor leaves a cached mapping. Cached bytes count
     * against max_mapped_bytes and max_pinned_bytes, and are evicted before
     * a registration is refused for lack of room. */
    size_t cache_bytes;
    /* Since 1.2 (carved from reserved_, pointer-sized slots). Quotas per
     * owner tag, 0 (default) = unlimited: every tag's default share of
     * regions, mapped bytes and pinned bytes, beside the global limits
     * above. A tag is a tenant's namespace (see shmreg_registration.tag); a
     * registration with a tag is refused (NO_MEMORY) when it would pass its
     * tag's quota, whatever other tags hold, and its message quotes that
     * tag's usage only. shmreg_tag_quota_set gives one tag limits of its
     * own. What a tag counts: its regions from registration until they are
     * unmapped (pending and detached ones included, as the global limits
     * count them); a cached mapping counts against no tag. Untagged
     * registrations count against the global limits only. To make sure no
     * tenant can make another's registration fail, size the global limits
     * to hold the sum of the quotas (or leave them unlimited). An AUTO pin
     * past the tag's pinned quota is dropped (registered unpinned), as past
     * SHMREG_AUTO_PIN_BUDGET. */
    size_t max_regions_per_tag;
    size_t max_mapped_bytes_per_tag;
    size_t max_pinned_bytes_per_tag;
    /* Since 1.2. How long one remote copy (SHMREG_KIND_REMOTE) may take
     * before it fails with SHMREG_ERR_FAULT and its client's endpoint is
     * closed, in milliseconds; 0 (default): SHMREG_REMOTE_TIMEOUT_MS. */
    size_t remote_timeout_ms;
    void *reserved_[4];      /* zero; room for later fields */
} shmreg_config;

/* The pin budget: max_pinned_bytes, or this when max_pinned_bytes is 0. It
 * is checked against the registry's pinned bytes, whole window counted,
 * before any page is pinned, so a sparse 32 GiB object is answered at once.
 * SHMREG_PIN_AUTO is opportunistic and bounded by it: past it the region is
 * registered unpinned; the registration does not fail. SHMREG_PIN and
 * SHMREG_PIN_ALWAYS are bounded by it only for a window with holes (pages
 * the client never populated, which pinning allocates on the server): past
 * it such a registration fails with SHMREG_ERR_NO_MEMORY naming the budget.
 * A demanded pin of a populated window is bounded by max_pinned_bytes
 * alone. */
#define SHMREG_AUTO_PIN_BUDGET ((size_t)1 << 30)

/* Fill cfg with the defaults (all zero: DEFER, no reserved prefixes, AUTO
 * pinning within SHMREG_AUTO_PIN_BUDGET, no log, no limits, sealed
 * descriptors only, background reclaim, no cache, no quotas). NULL is a
 * no-op. */
SHMREG_API void shmreg_config_init(shmreg_config *cfg);

/* --------------------------------------------------------------- registry */

typedef struct shmreg_registry shmreg_registry; /* opaque */
typedef struct shmreg_region shmreg_region;     /* opaque: one counted reference */

/* Create an empty registry. cfg may be NULL (defaults); it is copied, so it
 * need not outlive the call. On success *out owns the registry; free it with
 * shmreg_registry_destroy. Errors: INVALID_ARG (out NULL, policy or reclaim
 * mode out of range, empty reserved prefix), NO_MEMORY.
 *
 * fork(): the child gets the parent's mappings (MAP_SHARED, so they stay
 * valid and shared) but not its threads, the reclaim thread and liburcu's
 * call_rcu worker included, nor its page-locking or CUDA contexts. The child
 * may read and write through views it acquired before the fork, and must
 * then leave the registry alone: no call on it or its references, not even
 * shmreg_registry_destroy or shmreg_release; it should exec or _exit. A
 * child that needs a registry creates its own. */
SHMREG_API shmreg_err shmreg_registry_create(const shmreg_config *cfg, shmreg_registry **out);

/* Server shutdown: unregister every region whatever the busy policy, then free
 * the registry handle. Idle regions, regions already released to the reclaim
 * thread and cached mappings are unmapped, unpinned and closed before it
 * returns. References that requests still hold stay valid; each
 * region is unmapped by its own last shmreg_release, which may come after this
 * call returns (the log callback, if any, gets a WARNING naming how many);
 * the reclaim thread then lives until that last region is unmapped, and
 * ends by itself. Otherwise the thread is joined here.
 * No other call may use reg after this one starts. When no reference is
 * outstanding it also waits (milliseconds) until the library holds none of
 * the registry's memory, so it must not be called inside a liburcu-bp
 * read-side section of the caller's own. NULL is a no-op. */
SHMREG_API void shmreg_registry_destroy(shmreg_registry *reg);

/* Counters of a whole registry, filled by shmreg_registry_stats. */
typedef struct shmreg_stats {
    size_t regions;          /* listed by status: registered or pending */
    size_t pending_regions;  /* of those, DEFER-unregistered and still referenced */
    size_t detached_regions; /* DETACH-unregistered (or destroyed) and still mapped
                                for references callers hold: listed nowhere else */
    size_t references;       /* references callers hold on listed regions */
    size_t mapped_regions;   /* every region still mapped: listed + detached */
    size_t mapped_bytes;     /* what max_mapped_bytes counts */
    size_t pinned_bytes;     /* what max_pinned_bytes counts */
    uint64_t registrations;  /* successful registrations since create */
    uint64_t refusals;       /* registrations refused for any reason since create */
    /* Since 1.1. */
    uint64_t reclaim_waiting_bytes; /* released regions' bytes the reclaim thread has
                                       yet to unmap; still in mapped_bytes */
    uint64_t cached_bytes;    /* bytes of mappings kept by the cache, no region on
                                 them; in mapped_bytes (and pinned_bytes) */
    uint64_t cached_mappings; /* how many such mappings */
    uint64_t cache_hits;      /* registrations that reused a cached or live mapping */
    uint64_t cache_misses;    /* registrations of a cacheable source that opened a
                                 new mapping */
    uint64_t cache_evictions; /* cached mappings unmapped to stay within cache_bytes,
                                 to make room for a registration, or by trim */
    uint64_t reserved_[10];   /* zero; room for later counters */
} shmreg_stats;

/* A snapshot of reg's counters, taken under the registry's lock. Exact
 * together: mapped_regions, detached_regions, mapped_bytes, pinned_bytes,
 * reclaim_waiting_bytes, cached_bytes, cached_mappings and the counters
 * since create; every snapshot has reclaim_waiting_bytes + cached_bytes <=
 * mapped_bytes and pinned_bytes <= mapped_bytes. regions, pending_regions
 * and references are read from the regions' reference counts, which
 * acquire and release change without that lock: they are each region's
 * count at some moment during the call, and a region whose last reference
 * was just released is no longer in regions while it is still in
 * mapped_regions (regions + detached_regions <= mapped_regions, equal when
 * no teardown is pending). Errors: INVALID_ARG. */
SHMREG_API shmreg_err shmreg_registry_stats(shmreg_registry *reg, shmreg_stats *out);

/* 1.2. The limits of one owner tag (shmreg_tag_quota_set); 0 = unlimited.
 * Always start from shmreg_quota_init(). */
typedef struct shmreg_quota {
    size_t max_regions;
    size_t max_mapped_bytes;
    size_t max_pinned_bytes;
    void *reserved_[5]; /* zero; room for later fields */
} shmreg_quota;

/* Fill q with the defaults (all zero: unlimited). NULL is a no-op. */
SHMREG_API void shmreg_quota_init(shmreg_quota *q);

/* 1.2. Give `tag` limits of its own instead of the config's default share
 * (max_*_per_tag), or, with q NULL, take them away again. It applies to the
 * tag's next registrations: regions it holds already stay, even past new
 * lower limits. The quota is kept (and copied) until set again or the
 * registry is destroyed, whether or not the tag holds regions. Any thread.
 * Errors: INVALID_ARG (reg NULL, tag NULL or not a valid tag),
 * NO_MEMORY. */
SHMREG_API shmreg_err shmreg_tag_quota_set(shmreg_registry *reg, const char *tag, const shmreg_quota *q);

/* What one owner tag holds, and the limits in force for it: its own
 * (shmreg_tag_quota_set) or the config's default share. */
typedef struct shmreg_tag_stats {
    size_t regions;      /* regions of the tag still mapped: listed, pending and detached */
    size_t mapped_bytes; /* their bytes, as max_mapped_bytes counts them */
    size_t pinned_bytes; /* their pinned bytes */
    size_t max_regions, max_mapped_bytes, max_pinned_bytes; /* 0 = unlimited */
    void *reserved_[6]; /* zero; room for later counters */
} shmreg_tag_stats;

/* 1.2. A snapshot of tag's usage and limits, taken under the registry's
 * lock (a tag with no region reads zero usage). For a server that reports
 * each tenant its own figures. Errors: INVALID_ARG (NULL arguments, a tag
 * that is not valid). */
SHMREG_API shmreg_err shmreg_tag_stats_get(shmreg_registry *reg, const char *tag, shmreg_tag_stats *out);

/* Since 1.1. Give back what no caller holds: wait until every region
 * released before this call is unmapped by the reclaim thread, then unmap
 * (unpin, close) every cached mapping, in the calling thread. For a server
 * that wants its memory back now (before a checkpoint, under memory
 * pressure) and for tests. Returns SHMREG_OK, or INVALID_ARG for NULL.
 * Must not be called from the log callback. */
SHMREG_API shmreg_err shmreg_registry_trim(shmreg_registry *reg);

/* -------------------------------------------------------------- register */

/* Where a registration's memory comes from. */
typedef enum shmreg_source {
    /* A POSIX shared memory object, by key: the window [offset, offset +
     * byte_size) of it, mapped MAP_SHARED. Kind SYSTEM. */
    SHMREG_SOURCE_SHM = 0,
    /* GPU memory exported by another process as a legacy CUDA IPC handle
     * (the 64 bytes of a cudaIpcMemHandle_t). Kind CUDA. */
    SHMREG_SOURCE_CUDA_IPC = 1,
    /* A CUDA VMM allocation (cuMemCreate) exported as a POSIX file
     * descriptor. Kind CUDA. */
    SHMREG_SOURCE_CUDA_FD = 2,
    /* 1.1: a window of a file descriptor the caller holds, typically a memfd
     * received over a Unix socket with shmreg_recv_fd: [offset, offset +
     * byte_size) of it, mapped MAP_SHARED. Kind SYSTEM. See
     * shmreg_register_system_fd. */
    SHMREG_SOURCE_FD = 3,
    /* 1.2: a window of another process's memory that it exported with
     * shmreg_remote_export: raw_handle and raw_handle_size carry the
     * descriptor, offset and byte_size the window of the exported range.
     * Kind REMOTE. See shmreg_register_remote. */
    SHMREG_SOURCE_REMOTE = 4,
    /* 1.3: one contiguous window of several CUDA VMM allocations
     * (cuMemCreate, each exported as a POSIX file descriptor), such as a
     * tensor of PyTorch's expandable segments spanning several chunks:
     * fds, chunk_sizes and chunk_count describe the chunks in address
     * order, offset and byte_size the window in their concatenation. Kind
     * CUDA. See shmreg_register_cuda_vmm_range. */
    SHMREG_SOURCE_CUDA_VMM_RANGE = 5,
    /* 1.3: an allocation of a stream-ordered pool (cudaMallocAsync /
     * cudaMallocFromPoolAsync) of another process: fd is the pool's POSIX
     * descriptor (cudaMemPoolExportToShareableHandle), raw_handle the 64
     * bytes of the allocation's cudaMemPoolPtrExportData
     * (cudaMemPoolExportPointer), offset and byte_size the window in the
     * allocation. Kind CUDA. See shmreg_register_cuda_pool. */
    SHMREG_SOURCE_CUDA_POOL = 6
} shmreg_source;

/*
 * One registration, whatever its source: what shmreg_register takes. Always
 * start from shmreg_registration_init(), then set the fields the source
 * needs (see the three plain verbs below for what each field means).
 */
typedef struct shmreg_registration {
    shmreg_source source;  /* default SHMREG_SOURCE_SHM */
    const char *name;      /* 1..255 bytes, no control characters; copied */
    size_t byte_size;      /* > 0 */
    unsigned flags;        /* SHMREG_READONLY, SHMREG_PIN, SHMREG_NO_PIN */
    /* Owner tag, 1..255 bytes without control characters, or NULL (default).
     * A filter with a tag (shmreg_unregister_matching, shmreg_status_matching)
     * sees only the regions registered with that tag, so one client's cleanup
     * cannot remove another client's regions. Copied.
     * Since 1.2 a tag is also a namespace: names are per tag, so two tags may
     * each register a region "in0", and a call with a tag finds only its
     * own. A tagged registration is refused as ALREADY_EXISTS only when its
     * tag holds the name, or an untagged region does (an untagged caller
     * would find that one instead). Untagged calls keep 1.1's one
     * namespace: an untagged registration needs the name free under every
     * tag, and an untagged call that names a region (shmreg_acquire, and a
     * filter without a tag) means the untagged region of that name, or else
     * the only region of that name; when several tags hold the name and no
     * untagged region does, it answers NOT_FOUND saying so. (1.1: a tagged
     * registration of a name any other tag held was ALREADY_EXISTS.) */
    const char *tag;
    /* SHMREG_SOURCE_SHM */
    const char *key;       /* POSIX shm key; copied. Must be NULL for _FD */
    size_t offset;         /* _SHM and _FD: of the window in the object; any value.
                              Since 1.3 every CUDA source too: where the window
                              starts in the allocation (or range), checked
                              against its size (OUT_OF_BOUNDS); 0 (default):
                              at its start, as in 1.2 */
    /* SHMREG_SOURCE_CUDA_IPC and _CUDA_FD */
    int device_id;         /* default 0 */
    const void *raw_handle;   /* _CUDA_IPC: the handle's bytes; _REMOTE: the descriptor */
    size_t raw_handle_size;   /* _CUDA_IPC: must be 64; _REMOTE: the descriptor's size */
    int fd;                /* _CUDA_FD, _FD and _CUDA_POOL: the caller keeps it; default -1 */
    /* Since 1.3, each a pointer-sized slot carved from reserved_, so no 1.2
     * offset moves on any ABI; NULL or 0 (what older programs pass) keeps
     * 1.2's behaviour.
     * _CUDA_VMM_RANGE: the chunks' descriptors (the caller keeps them) and
     * their sizes, chunk_count of each (1..SHMREG_CUDA_CHUNKS_MAX). */
    const int *fds;
    const size_t *chunk_sizes;
    size_t chunk_count;
    /* Every CUDA source: the GPU that holds the memory, by its UUID, "GPU-"
     * or "MIG-" followed by the 36 characters of the UUID (as nvidia-smi -L
     * prints it), instead of device_id, which is then ignored. Resolved to
     * this process's own numbering, so CUDA_VISIBLE_DEVICES may differ
     * between the client and the server; VMM chunks and pool allocations
     * found on another GPU are refused naming both. NULL (default):
     * device_id. Read during the call only. */
    const char *device_uuid;
    void *reserved_[4];    /* zero; room for later fields */
} shmreg_registration;

/* Fill r with the defaults (SHM source, device 0, fd -1, everything else
 * zero or NULL). NULL is a no-op. */
SHMREG_API void shmreg_registration_init(shmreg_registration *r);

/*
 * Register r->name as the memory r describes. What is checked, in order:
 * the name, the flags and the tag; the source's own arguments (key, handle,
 * descriptor); that the name is free and the configured limits leave room;
 * then the memory is opened (outside every lock) and the region published.
 *
 * Errors: INVALID_ARG (NULL or bad name, tag, key or flags, a reserved key,
 * an unknown source, an object owned by a uid the allow-list refuses),
 * ALREADY_EXISTS (the name is taken in the registration's namespace, or
 * pending unregister: the message says which, except to a registration with
 * a tag that is not the holder's, which hears only that the name is taken;
 * see shmreg_registration.tag), OUT_OF_BOUNDS (byte_size 0, or a window past the end of the object
 * or allocation: the message gives the sizes), SYSTEM, CUDA, UNSUPPORTED,
 * NO_MEMORY (out of memory, over a configured limit, or over the tag's
 * quota; to a tagged registration the message quotes no other tag's usage).
 */
SHMREG_API shmreg_err shmreg_register(shmreg_registry *reg, const shmreg_registration *r);

/*
 * Register the POSIX shared memory object `key` (opened read-write, or
 * read-only with SHMREG_READONLY; never created or unlinked) under `name`, as
 * the window [offset, offset + byte_size) of the object. Any offset works,
 * page-aligned or not. Several names may map the same key. The same as
 * shmreg_register with SHMREG_SOURCE_SHM and no tag.
 *
 * key: POSIX shm naming; leading slashes are ignored as glibc ignores them.
 * The object's descriptor is closed before this returns, on every path.
 * Pinning follows the config's pin_policy and the SHMREG_PIN / SHMREG_NO_PIN
 * flags.
 *
 * Errors: as shmreg_register; SYSTEM when shm_open, fstat or mmap failed,
 * UNSUPPORTED when pinning is demanded but CUDA is unusable, CUDA when
 * pinning failed.
 */
SHMREG_API shmreg_err shmreg_register_system(shmreg_registry *reg, const char *name,
                                             const char *key, size_t offset,
                                             size_t byte_size, unsigned flags);

/*
 * 1.1. Register the window [offset, offset + byte_size) of the file
 * descriptor fd under `name`: a memfd (memfd_create) that a client sent over
 * a Unix socket (shmreg_recv_fd), or any regular file the caller opened.
 * Unlike a POSIX shm key, a memfd can be sealed, needs no /dev/shm space nor
 * a shared IPC namespace, and leaves nothing behind when its client dies.
 * The same as shmreg_register with SHMREG_SOURCE_FD and no tag.
 *
 * Ownership: the caller keeps fd. The registry maps the window itself and
 * never closes fd; the caller may close it as soon as this returns (the
 * mapping keeps the memory alive). Since 1.4 the registry keeps a duplicate
 * of its own (close-on-exec) while the region is mapped, so that a handover
 * (shmreg/handover.h) can carry the region to another process: one
 * descriptor per descriptor region, closed with its mapping.
 * What is checked, before anything is mapped: fd is a regular file (fstat
 * S_ISREG: a memfd is one; a pipe, socket or device is INVALID_ARG); its
 * owner (st_uid) passes the config's owner allow-list; it carries
 * F_SEAL_SHRINK, so that its owner can never shrink it under the mapping
 * (INVALID_ARG otherwise, unless the config sets accept_unsealed_fds); the
 * window lies inside its size. fd must be open read-write, or read-only with
 * SHMREG_READONLY. Pinning follows the same rules as shmreg_register_system.
 * Status reports the region as kind SYSTEM with key NULL: a descriptor has no
 * name outside the process that holds it, so the registration cache
 * (cache_bytes) never reuses a mapping for it nor keeps its mapping cached;
 * its last release is unmapped like any region's (by the reclaim thread
 * under SHMREG_RECLAIM_BACKGROUND).
 *
 * Errors: as shmreg_register; INVALID_ARG (fd negative, not a regular file,
 * unsealed, an owner the allow-list refuses), SYSTEM (fstat, fcntl or mmap
 * failed: e.g. a read-only fd without SHMREG_READONLY, or a write-sealed
 * memfd mapped writable).
 */
SHMREG_API shmreg_err shmreg_register_system_fd(shmreg_registry *reg, const char *name, int fd,
                                                size_t offset, size_t byte_size, unsigned flags);

/*
 * Register GPU memory exported by another process as a legacy CUDA IPC handle:
 * raw_handle is the 64 bytes of a cudaIpcMemHandle_t (raw_handle_size must be
 * 64). It is opened on device_id, leaving the calling thread's current device
 * as it was; byte_size must not exceed the allocation. The same handle may be
 * registered under several names; each registration holds its own open. The
 * exporting process must keep the allocation alive while it is registered.
 * The same as shmreg_register with SHMREG_SOURCE_CUDA_IPC and no tag; with
 * shmreg_register (1.3) the window may start at an offset of the
 * allocation (a tensor inside a caching allocator's block: the handle
 * names the block's start), offset + byte_size within its size, and the
 * GPU may be named by UUID.
 *
 * Errors: as shmreg_register; CUDA when the driver rejected the handle (its
 * error name and string are in the message), UNSUPPORTED with no CUDA in this
 * build, no driver or no device.
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
 * closes it, and the caller may close it as soon as this returns. Since 1.4
 * the registry keeps a duplicate of its own (close-on-exec) while the
 * region is mapped, so that a handover (shmreg/handover.h) can carry it.
 * The whole allocation is mapped: byte_size, rounded up to the allocation
 * granularity, must be the allocation's size (the driver maps no other
 * length; OUT_OF_BOUNDS otherwise). The view covers byte_size bytes.
 * The same as shmreg_register with SHMREG_SOURCE_CUDA_FD and no tag; with
 * shmreg_register (1.3) the window may start at an offset (offset +
 * byte_size then rounds up to the allocation's size; for any window of an
 * allocation, register it as a range of one chunk:
 * shmreg_register_cuda_vmm_range), and the GPU may be named by UUID.
 *
 * Errors: as shmreg_register_cuda_ipc; a descriptor that is not a CUDA
 * shareable handle is CUDA (or INVALID_ARG when negative).
 */
SHMREG_API shmreg_err shmreg_register_cuda_fd(shmreg_registry *reg, const char *name, int fd,
                                              int device_id, size_t byte_size, unsigned flags);

/* 1.3. The most chunks one VMM range may have: what one message of
 * descriptors can carry (the kernel's SCM_MAX_FD). */
#define SHMREG_CUDA_CHUNKS_MAX 253

/*
 * 1.3. Register a window of a range of CUDA VMM allocations: chunk_count
 * allocations (cuMemCreate, each exported with
 * cuMemExportToShareableHandle as a POSIX descriptor, fds[i]) of
 * chunk_sizes[i] bytes each, which the exporter mapped back to back (as
 * PyTorch's expandable segments do, in 2 MiB or 20 MiB chunks), and of
 * their concatenation the window [offset, offset + byte_size). Every chunk
 * is imported and mapped, in order, into one virtual range reserved here,
 * made accessible from the device (read-only with SHMREG_READONLY): the
 * view is one device pointer to byte `offset` of the range, so a tensor
 * that spans chunks and starts in the middle of one reads as one buffer.
 * One registration holds one reference to every chunk: each chunk, the
 * mappings and the reservation are released on every error path and by
 * the last release. The same as shmreg_register with
 * SHMREG_SOURCE_CUDA_VMM_RANGE and no tag (use shmreg_register to name the
 * GPU by UUID, or for a tag).
 *
 * Sizes: each chunk_sizes[i] must be the size of its allocation, a
 * multiple of its granularity (the driver maps whole allocations only:
 * OUT_OF_BOUNDS when it refuses one); the window must lie inside their
 * sum, computed without overflow. Named by UUID (shmreg_register), the
 * registration names the GPU that holds the chunks: a chunk on another one
 * is INVALID_ARG naming both; by ordinal, a chunk on another device is
 * mapped for device_id through peer access, as shmreg_register_cuda_fd
 * does.
 * Ownership: the caller keeps every fd, as for shmreg_register_cuda_fd
 * (the registry keeps a duplicate of each since 1.4, one descriptor per
 * chunk); the arrays are read during the call only. The chunks travel from the
 * client in one message: shmreg_send_fds / shmreg_recv_fds.
 *
 * Errors: as shmreg_register; INVALID_ARG (fds or chunk_sizes NULL,
 * chunk_count 0 or past SHMREG_CUDA_CHUNKS_MAX, a negative descriptor, a
 * chunk of size 0, a chunk on another GPU than its UUID), OUT_OF_BOUNDS (sizes that
 * overflow, a window past their sum, a size the driver will not map),
 * CUDA (a descriptor that is not a VMM shareable handle: the message says
 * which chunk), UNSUPPORTED (no CUDA in this build, no driver or device, a
 * device that cannot import POSIX descriptors).
 */
SHMREG_API shmreg_err shmreg_register_cuda_vmm_range(shmreg_registry *reg, const char *name, const int *fds,
                                                     const size_t *chunk_sizes, size_t chunk_count,
                                                     size_t offset, size_t byte_size, int device_id,
                                                     unsigned flags);

/* 1.3. The size of a cudaMemPoolPtrExportData. */
#define SHMREG_CUDA_POOL_EXPORT_SIZE 64

/*
 * 1.3. Register a window [offset, offset + byte_size) of an allocation of
 * another process's stream-ordered pool: pool_fd is the pool's descriptor
 * and export_data the allocation's 64 bytes (export_size must be 64). The
 * pool is imported (cuMemPoolImportFromShareableHandle) and the allocation
 * with it (cuMemPoolImportPointer) on the device, and checked to live on
 * that device; the last release frees the import (cuMemFree) and the
 * imported pool (cuMemPoolDestroy). The caller keeps pool_fd (the registry
 * keeps a duplicate of its own since 1.4, as for shmreg_register_cuda_fd,
 * and the export data). The same as
 * shmreg_register with SHMREG_SOURCE_CUDA_POOL and no tag.
 *
 * The exporter's contract:
 *  - the pool is created with cudaMemPoolCreate and handleTypes =
 *    cudaMemHandleTypePosixFileDescriptor: a device's default pool (what
 *    plain cudaMallocAsync and PyTorch's backend:cudaMallocAsync allocate
 *    from) has no shareable handle and cannot be exported; neither can a
 *    pool of another handle type (this call then answers CUDA saying so);
 *  - the allocation is complete before it is sent (synchronize its stream
 *    or pass an IPC event): the server reads it at once;
 *  - it frees the allocation (cudaFreeAsync) only after the server has
 *    unregistered the region and its last reference is released (the
 *    importer's free must come before the exporter's), and keeps its
 *    process alive until then: an imported pool allocation is not kept
 *    alive by the import.
 * SHMREG_READONLY is recorded, not enforced: an imported pool allocation
 * is mapped read-write.
 *
 * Errors: as shmreg_register; INVALID_ARG (pool_fd negative, export_data
 * NULL or not 64 bytes, an allocation on another device, naming both),
 * OUT_OF_BOUNDS (the window past the allocation: the message gives the
 * sizes), CUDA (the pool or the pointer could not be imported: its error
 * in the message), UNSUPPORTED.
 */
SHMREG_API shmreg_err shmreg_register_cuda_pool(shmreg_registry *reg, const char *name, int pool_fd,
                                                const void *export_data, size_t export_size, size_t offset,
                                                size_t byte_size, int device_id, unsigned flags);

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
 * device_id (-1 for SYSTEM). Valid until the reference is released. */
typedef struct shmreg_view {
    void *addr;
    size_t byte_size;
    shmreg_kind kind;
    int device_id;
    int pinned;   /* a SYSTEM region page-locked for DMA */
    int writable; /* 0: registered SHMREG_READONLY, mapped without write access;
                     writing through addr faults (SIGSEGV for SYSTEM) */
    /* Since 1.2 (carved from reserved_): where the view starts in its
     * region, the offset given to acquire. A REMOTE view has addr NULL and
     * is reached through this offset by the copy calls. */
    size_t region_offset;
    void *reserved_[3]; /* not written by this version; room for later fields */
} shmreg_view;

/*
 * Look up `name` and take a counted reference to it, with a view of
 * [offset, offset + byte_size) of the region (byte_size may be 0). The
 * reference keeps the mapping alive whatever happens to the name: release it
 * with shmreg_release when the request or response is done with the memory.
 * Lookups share no lock with each other or with register/unregister.
 *
 * out and view must not be NULL. On failure *out is NULL and *view untouched.
 * It is an untagged call: name means the untagged region of that name, or
 * else the only region of that name, whatever its tag (see
 * shmreg_registration.tag). A frontend serving several tenants acquires
 * with shmreg_acquire_matching and the caller's tag.
 * Errors: INVALID_ARG, NOT_FOUND, OUT_OF_BOUNDS (offset past the end, offset +
 * byte_size overflowing or past the end).
 */
SHMREG_API shmreg_err shmreg_acquire(shmreg_registry *reg, const char *name, size_t offset,
                                     size_t byte_size, shmreg_region **out, shmreg_view *view);

/* Drop one reference. The last one (the registry's included) unmaps the
 * region exactly once: under SHMREG_RECLAIM_BACKGROUND it hands the region
 * to the reclaim thread (no system call, no lock), under INLINE it unmaps
 * in the calling thread; either may happen after the registry was
 * destroyed. The view it gave is invalid from this call on. NULL is a
 * no-op. Any thread.
 * 1.1: a release past zero that would drop the registry's own reference (a
 * reference released twice while the region is still registered) is caught:
 * logged at SHMREG_LOG_ERROR and ignored, so the region stays mapped for its
 * other users. Not every double release can be caught; docs/security.md
 * says which are. */
SHMREG_API void shmreg_release(shmreg_region *ref);

/* Take another reference to the region ref refers to (for a second owner,
 * e.g. a response that outlives its request); returns ref. Each retain needs
 * its own shmreg_release. ref must be a reference the caller holds; NULL
 * returns NULL. */
SHMREG_API shmreg_region *shmreg_retain(shmreg_region *ref);

/* ---------------------------------------------------- which regions: filter */

/* Which regions shmreg_unregister_matching and shmreg_status_matching act
 * on. Always start from shmreg_filter_init(), then set fields. */
typedef struct shmreg_filter {
    const char *name;  /* one region by name, or NULL (default): every region */
    shmreg_kind kind;  /* SYSTEM or CUDA; ANY (default) passes both */
    /* Only regions registered with this owner tag, or NULL (default): no
     * restriction. A region of another tag is treated exactly as an absent
     * one (NOT_FOUND when named), so a tenant learns nothing of others.
     * With a name: (tag, name), the tag's own namespace (1.2; see
     * shmreg_registration.tag); without a tag, the region an untagged call
     * means by that name. */
    const char *tag;
    void *reserved_[5]; /* zero; room for later fields */
} shmreg_filter;

/* Fill f with the defaults (every region of every kind and tag). NULL is a
 * no-op. */
SHMREG_API void shmreg_filter_init(shmreg_filter *f);

/*
 * 1.1. shmreg_acquire of the one region f selects: f->name is required; with
 * f->tag, the region (tag, name) (1.2: names are per tag), and a region
 * registered under another tag (or none) answers exactly as an absent one,
 * NOT_FOUND with the same message, before any bounds check, so a tenant
 * learns nothing of another's regions; with f->kind SYSTEM or
 * CUDA, a region of the other kind is WRONG_KIND (after the tag check).
 * A multi-tenant frontend acquires through this call with the caller's tag.
 * The lookup takes no lock, as shmreg_acquire's; the kind check comes after.
 * Errors: as shmreg_acquire; INVALID_ARG also for a NULL filter or name, a
 * bad tag or kind; WRONG_KIND.
 */
SHMREG_API shmreg_err shmreg_acquire_matching(shmreg_registry *reg, const shmreg_filter *f,
                                              size_t offset, size_t byte_size, shmreg_region **out,
                                              shmreg_view *view);

/* ----------------------------------------------------------- unregister */

/*
 * Unregister the regions f selects. With a name: that region, or NOT_FOUND
 * when no region of that name passes the tag, or WRONG_KIND when it is
 * registered as the other kind (the message says which kind it is). An idle
 * region is unmapped before this returns; a region in use follows the busy
 * policy (see shmreg_policy): under REFUSE, BUSY says how many references
 * callers hold. Unregistering a region already pending is OK and changes
 * nothing. Without a name: every region passing kind and tag; under REFUSE
 * the idle ones are unregistered and BUSY names the busy ones; other
 * policies never fail on busy regions.
 * f may be NULL (every region). Errors: INVALID_ARG, NOT_FOUND, WRONG_KIND,
 * BUSY.
 */
SHMREG_API shmreg_err shmreg_unregister_matching(shmreg_registry *reg, const shmreg_filter *f);

/* shmreg_unregister_matching for one name and kind (ANY matches either). */
SHMREG_API shmreg_err shmreg_unregister(shmreg_registry *reg, const char *name, shmreg_kind kind);

/* shmreg_unregister_matching for every region of `kind` (ANY: all). */
SHMREG_API shmreg_err shmreg_unregister_all(shmreg_registry *reg, shmreg_kind kind);

/* --------------------------------------------------------------- status */

typedef struct shmreg_region_status {
    const char *name;
    const char *key;        /* SYSTEM: the key as registered; CUDA: NULL */
    shmreg_kind kind;
    size_t offset, byte_size;
    int device_id;          /* -1 for SYSTEM */
    /* Counted references callers hold right now: one per shmreg_acquire or
     * shmreg_retain not yet released. Not a count of requests: a request
     * that reads an input and writes an output in the same region holds 2. */
    unsigned references;
    int pending_unregister; /* DEFER: unregistered, waiting for references to reach 0 */
    uint64_t generation;    /* unique per registration in this registry */
    int pinned;             /* SYSTEM region page-locked for DMA */
    unsigned flags;         /* the flags it was registered with */
    const char *tag;        /* owner tag, or NULL */
    /* Since 1.1, each in a pointer-sized slot carved from reserved_, so no
     * 1.0 offset moves on any ABI. Regions (this one included) on this
     * region's mapping; more than 1 when registrations of the same memory
     * share it. */
    size_t mapping_regions;
    /* 1 when the registration reused a mapping (from the cache or another
     * live region) instead of opening its own. */
    size_t mapping_reused;
    /* 1.3, REMOTE: the UCX transports its client's connection uses, as UCX
     * names them ("tcp", "posix,sysv"); NULL for every other kind. */
    const char *transports;
    /* Since 1.3 (carved from reserved_): a CUDA region's GPU by UUID,
     * "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" ("MIG-..." when it was
     * registered by a MIG UUID: CUDA does not say whether a device it
     * numbers is a MIG instance); NULL for other kinds. */
    const char *device_uuid;
    void *reserved_[2];     /* zero; room for later fields */
} shmreg_region_status;

/*
 * A snapshot of the regions f selects (f NULL: all). Regions appear while
 * registered or pending; a detached region does not (shmreg_registry_stats
 * counts those). With a name: that one region, or NOT_FOUND ("Unable to
 * find system shared memory region: 'X'") or WRONG_KIND. On success *out is
 * an array of *count entries (NULL when 0) that the caller owns and frees
 * with shmreg_status_free; strings live in it.
 * Errors: INVALID_ARG, NOT_FOUND, WRONG_KIND, NO_MEMORY.
 */
SHMREG_API shmreg_err shmreg_status_matching(shmreg_registry *reg, const shmreg_filter *f,
                                             shmreg_region_status **out, size_t *count);

/* shmreg_status_matching for one name (or every region when name is NULL)
 * of `kind` (ANY: both). */
SHMREG_API shmreg_err shmreg_status(shmreg_registry *reg, const char *name, shmreg_kind kind,
                                    shmreg_region_status **out, size_t *count);

/* Free what shmreg_status or shmreg_status_matching returned. NULL is a no-op. */
SHMREG_API void shmreg_status_free(shmreg_region_status *st, size_t count);

/* ------------------------------------------- guarded copies (1.1) */

/*
 * A client that registered POSIX shm (or an unsealed descriptor) can truncate
 * its object under the server's mapping; a read or write of the lost pages
 * then raises SIGBUS, which kills the server and every tenant's requests.
 * Guarded copies turn that fault into SHMREG_ERR_FAULT for the one request.
 *
 * shmreg_guard_install: opt-in, once per process (later calls do nothing
 * and return OK; thread-safe). Installs a SIGBUS handler (sigaction,
 * SA_SIGINFO | SA_ONSTACK | SA_RESTART) that handles only a fault whose
 * address lies inside the region a guarded copy of the faulting thread is
 * copying; every other SIGBUS goes to the handler that was installed before
 * (called as it asked: sa_sigaction or sa_handler), or, for SIG_DFL, ends
 * the process as it would have. The handler stays for the life of the
 * process. A host that installs its own SIGBUS handler afterwards must chain
 * to the previous one for guarded copies to keep working.
 * Errors: SYSTEM (sigaction failed).
 */
SHMREG_API shmreg_err shmreg_guard_install(void);

/*
 * Copy n bytes from [view->addr + offset, + n) into dst (from_view), or
 * from src into the view (to_view). ref is the reference that gave view
 * (shmreg_acquire); the view must be a SYSTEM one, and offset + n within
 * view->byte_size; to_view needs a writable view. n == 0 copies nothing.
 * Without shmreg_guard_install the copy is refused (UNSUPPORTED), never done
 * unguarded. When the object was truncated under the mapping the copy stops
 * at the fault and returns FAULT naming the region (some bytes of dst, or of
 * the view, may have been written). A copy that does not fault makes no
 * system call: its cost over memcpy is about 12 ns (docs/performance.md).
 * Errors: INVALID_ARG (NULL arguments, a CUDA view, a view that is not
 * ref's, a read-only view for to_view), OUT_OF_BOUNDS, UNSUPPORTED, FAULT.
 *
 * 1.2, a REMOTE view (SHMREG_KIND_REMOTE): the copy is a UCX get (from_view)
 * or put (to_view) of [view->region_offset + offset, + n) of the region,
 * waited for in the calling thread, and needs no shmreg_guard_install.
 * It returns when the bytes have arrived (get) or are in the client's
 * memory (put: flushed), or FAULT: the client is gone or unreachable, its
 * memory was unmapped, or the copy took longer than the configured
 * remote_timeout_ms; then the client's endpoint is closed (every later copy
 * of its regions fails at once, and shmreg_remote_sweep unregisters them)
 * and dst holds undefined bytes. Never a hang, never a crash of the server.
 * Any number of threads may copy at once, of one region or many.
 */
SHMREG_API shmreg_err shmreg_copy_from_view(shmreg_region *ref, const shmreg_view *view, size_t offset,
                                            void *dst, size_t n);
SHMREG_API shmreg_err shmreg_copy_to_view(shmreg_region *ref, const shmreg_view *view, size_t offset,
                                          const void *src, size_t n);

#ifdef __cplusplus
}
#endif

/* The supplements, by audience: the wire formats of regions passed over a
 * Unix socket, remote regions through UCX, and handing a registry to another
 * process (a restart). Each includes this header, so
 * either may be included alone; including this one declares them all. */
#include <shmreg/region_socket.h>
#include <shmreg/remote.h>
#include <shmreg/handover.h>

#endif /* SHMREG_SHMREG_H */
