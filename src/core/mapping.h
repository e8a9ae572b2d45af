/* A mapping: what one backend open made (a shm window mapped and maybe
 * pinned, a CUDA IPC open, a VMM import), and the regions on it.
 *
 * A region is a name on a window of a mapping. Without the cache every
 * region has its own mapping, as in 1.0. With it (shmreg_config.cache_bytes
 * > 0) a mapping whose backend can say who its memory is (an identity:
 * device and inode of a shm object, the bytes of a CUDA IPC handle) is
 * indexed by that identity in the table, so that a registration of the same
 * memory under another name reuses it, and when its last region goes it may
 * stay, cached, until the cache needs the room or the table goes away.
 *
 * Everything here changes under the table's lock, which no acquire takes:
 * the hot path reads the region's own copy of its window (region.h), never
 * the mapping. A mapping is closed exactly once, outside every lock, by the
 * thread that takes it off the index (a region's deleter, an eviction, trim
 * or destroy), and until then it keeps counting against the limits. */
#ifndef SHMREG_MAPPING_H
#define SHMREG_MAPPING_H

#include "backends/backend.h"
#include "core/table.h"

struct shmreg__mapping {
    struct shmreg__opened opened;  /* closed once, by shmreg__mapping_close_list */
    struct shmreg__identity id;    /* id.valid: in the table's index */
    struct shmreg__usage cost;     /* what it counts while cached: the opening
                                      registration's bytes, no region */
    /* Under the table's lock. */
    size_t regions;                /* regions on it */
    bool cached;                   /* no region, on the LRU list */
    struct shmreg__usage charge;   /* while cached or closing: given back after the close */
    size_t reclaim_waiting_bytes;  /* closing for the reclaim thread: its bytes stop
                                      waiting with the charge's give-back */
    struct shmreg__mapping *prev, *next;         /* the index */
    struct shmreg__mapping *lru_prev, *lru_next; /* cached, least recent first */
    struct shmreg__mapping *next_close;          /* a list to close */
    char label[]; /* the name of the region that opened it, for messages */
};

/* A new mapping for what a backend opened, indexed by id when the table's
 * cache is on, on the name `label`; NULL when out of memory (nothing taken). */
struct shmreg__mapping *shmreg__mapping_new(const struct shmreg__opened *opened, const struct shmreg__identity *id,
                                            const struct shmreg__usage *cost, const char *label);

/* ---- under the table's lock */

/* Put a new mapping in the index (when it has an identity and the cache is
 * on) with its first region. */
void shmreg__mapping_attach_locked(struct shmreg__cache *c, struct shmreg__mapping *m);

/* A mapping of backend b with identity id whose object range covers
 * [offset, offset + byte_size), with one more region counted on it; NULL on
 * a miss. Counts the hit or the miss. */
struct shmreg__mapping *shmreg__mapping_reuse_locked(struct shmreg__table *t, const struct shmreg__backend *b,
                                                     const struct shmreg__identity *id, size_t offset,
                                                     size_t byte_size);

/* One region leaves m; its charge against the limits is `region_charge`.
 * Returns the mappings to close outside the lock (m itself when it has no
 * region left and is not cached, and what the cache evicts to stay within
 * its limit), chained by next_close; each carries its charge until then. */
struct shmreg__mapping *shmreg__mapping_leave_locked(struct shmreg__table *t, struct shmreg__mapping *m,
                                                     const struct shmreg__usage *region_charge);

/* Take the least recently used cached mapping out of the cache (NULL when
 * none) for closing; or every one, chained. */
struct shmreg__mapping *shmreg__mapping_evict_one_locked(struct shmreg__cache *c);
struct shmreg__mapping *shmreg__mapping_evict_all_locked(struct shmreg__cache *c);

/* ---- outside every lock */

/* Close each mapping of the list (backend close; a failure is logged),
 * give back its charge and free it. */
void shmreg__mapping_close_list(struct shmreg__table *t, struct shmreg__mapping *list);

#endif
