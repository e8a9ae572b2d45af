/* The table: what outlives the registry handle.
 *
 * A region may be released long after shmreg_registry_destroy (a request
 * still holds it), and its deleter must still unlink its name, give back
 * what it counted against the limits and log a failure. So everything that
 * deleter needs lives here, below the handle, reference-counted: the hash
 * table of names and its direct-mapped front, the lock, the usage counters
 * beside their limits, the log sink, the mappings regions share and cache
 * (mapping.h), and the reclaim thread with its queue (reclaim.h). The handle
 * (registry.h) holds one reference, every region not yet torn down holds
 * one.
 *
 * The table knows regions only by the entry embedded in each (its count,
 * name, owner tag and hash), never by the rest of struct shmreg_region.
 *
 * Names are per owner tag (since 1.2): a tag is a namespace, so two tags
 * may each hold a region "in0", and the table may hold several live entries
 * of one name (one per tag, and at most one untagged). The hash is of the
 * name alone, so the entries of one name sit together in the hash table. A
 * caller with a tag finds only (tag, name). A caller without one keeps 1.1's
 * view of one namespace: a name means the untagged region of that name, or
 * else the only region of that name (see shmreg__table_resolve). */
#ifndef SHMREG_TABLE_H
#define SHMREG_TABLE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "base/atomics.h"
#include "base/rcu.h"
#include "core/quota.h"
#include "core/reclaim.h"
#include "core/usage.h"
#include "shmreg/shmreg.h"

/* The mappings (mapping.h), under the table's lock: the index of those with
 * an identity, live or cached, and the cached ones, least recent first.
 * limit is shmreg_config.cache_bytes (0: off; destroy sets it to 0 so that
 * nothing is cached after it). */
struct shmreg__cache {
    struct shmreg__mapping *mappings;
    struct shmreg__mapping *lru_head, *lru_tail;
    size_t limit, cached_bytes, cached_mappings;
    uint64_t hits, misses, evictions;
};

/* What the table knows of a region; embedded first in struct shmreg_region. */
struct shmreg__entry {
    shmreg__refcount refs; /* the region's count (atomics.h) */
    unsigned long hash;    /* of name, with the table's seed */
    size_t name_len;
    const char *name;      /* immutable; lives in the region's own allocation */
    const char *tag;       /* owner tag or NULL; immutable, in the same allocation */
    bool linked;           /* in the table; under the lock */
    struct cds_lfht_node node;
};

/* Slots of the front, a power of two (see "the front" in table.c). */
#define SHMREG__FRONT_SLOTS 1024u

struct shmreg__table {
    /* Lookups traverse the hash table under RCU only. Every change to it,
     * to the counters below, and every read of the entries' linked flags
     * holds `lock`; no code holding it calls shm_open, mmap, munmap, any CUDA
     * function or the log sink, so acquire never waits behind them. */
    struct cds_lfht *lfht;
    pthread_mutex_t lock;
    /* One reference for the handle, one per region not yet torn down. */
    shmreg__refcount refs;
    /* The direct-mapped front: slot hash % SLOTS holds the first live entry
     * linked with a hash there. Written under lock, read under RCU. */
    _Atomic(struct shmreg__entry *) front[SHMREG__FRONT_SLOTS];
    uint64_t hash_seed; /* random per table: names come from clients */

    /* Under lock. */
    uint64_t next_generation;
    struct shmreg__usage usage;  /* every region still mapped, and reservations */
    struct shmreg__usage limits; /* 0 = unlimited */
    size_t linked;               /* entries in the table */
    size_t regions_alive;        /* regions made and not yet torn down */
    uint64_t registrations, refusals;
    struct shmreg__quotas quotas; /* per owner tag (quota.h) */
    struct shmreg__cache cache;   /* the mappings' index and cache (mapping.h) */

    /* Background reclaim (reclaim.h): lock-free hand-offs; its own lock. */
    struct shmreg__reclaim reclaim;

    shmreg_log_fn log_fn;
    void *log_user;
};

/* How the table is made: limits, cache, reclaim mode, log sink. */
struct shmreg__table_config {
    struct shmreg__usage limits; /* 0 = unlimited */
    struct shmreg__usage tag_limits; /* every tag's default share; 0 = unlimited */
    size_t cache_bytes;
    bool background_reclaim;
    shmreg_log_fn log_fn;
    void *log_user;
};

/* A new table holding one reference (the handle's). */
shmreg_err shmreg__table_new(const struct shmreg__table_config *cfg, struct shmreg__table **out);

/* Start the reclaim thread if the table runs one and it has not started
 * (register calls it before its first region exists). */
void shmreg__table_start_reclaim(struct shmreg__table *t);

/* Another reference, for a new region; the caller already holds one. */
void shmreg__table_get(struct shmreg__table *t);

/* Drop a reference; the last frees the table (returns true), joining the
 * reclaim thread; when that last reference goes on the reclaim thread, the
 * thread frees the table as it ends. Never call it holding the lock or
 * inside a read-side section. */
bool shmreg__table_put(struct shmreg__table *t);

/* Take the lock and enter a read-side section (every locked walk of the
 * table needs both), and leave them. */
void shmreg__table_lock(struct shmreg__table *t);
void shmreg__table_unlock(struct shmreg__table *t);

/* Hand a message to the log sink (or drop it). Never call it holding the
 * lock. */
void shmreg__table_log(struct shmreg__table *t, shmreg_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static inline unsigned long shmreg__table_hash(const struct shmreg__table *t, const char *name, size_t len)
{
    return (unsigned long)XXH3_64bits_withSeed(name, len, t->hash_seed);
}

/* An entry counts until its count is dead: a dead entry is being torn down
 * and is about to leave the table. */
static inline bool shmreg__entry_alive(struct shmreg__entry *e)
{
    return !shmreg__ref_dead(&e->refs);
}

/* Fill e's naming part (before it is linked); tag may be NULL. */
void shmreg__entry_init(struct shmreg__table *t, struct shmreg__entry *e, const char *name, size_t len,
                        const char *tag);

/* Whether e is (tag, ...): the same tag, or both untagged. */
static inline bool shmreg__entry_tag_is(const struct shmreg__entry *e, const char *tag)
{
    return e->tag == tag || (e->tag && tag && strcmp(e->tag, tag) == 0);
}

/* ---- under the lock (shmreg__table_lock) */

/* The live entry (tag, name), tag NULL meaning the untagged one, or NULL. */
struct shmreg__entry *shmreg__table_find_locked(struct shmreg__table *t, const char *name, const char *tag);

/* Some live entry called name, whatever its tag, or NULL. */
struct shmreg__entry *shmreg__table_find_any_locked(struct shmreg__table *t, const char *name);

/* The live entry an untagged caller means by name: the untagged one, else
 * the only one; NULL when none, or when several tags hold the name and no
 * untagged entry does (*several is then true). Lock or read-side section
 * held; the entry may die as soon as the caller lets go of both. */
struct shmreg__entry *shmreg__table_resolve(struct shmreg__table *t, unsigned long hash, const char *name,
                                            bool *several);

/* Publish e in the table (and in the front, when its slot is free). */
void shmreg__table_link_locked(struct shmreg__table *t, struct shmreg__entry *e);

/* Take e out of the table and the front (this entry only). */
void shmreg__table_unlink_locked(struct shmreg__table *t, struct shmreg__entry *e);

/* Take `want` against the limits, or fail with NO_MEMORY naming the limit
 * and the region `name` (for the message) and take nothing. The message
 * quotes the registry's usage to an untagged caller only: to a tagged one
 * (a tenant) that is what other tenants hold. */
shmreg_err shmreg__usage_take_locked(struct shmreg__table *t, const char *name, const char *tag,
                                     const struct shmreg__usage *want);

/* The pin budget bounds every pin the server answers for: AUTO's
 * (its choice) and any pin of a window with holes (pinning allocates those
 * pages on the server). It is max_pinned_bytes, or SHMREG_AUTO_PIN_BUDGET
 * when that is 0 (unlimited). It reads the table's counters only, so a
 * 32 GiB sparse window is answered before a page of it is touched. */
size_t shmreg__usage_pin_budget(const struct shmreg__table *t);

/* Whether `bytes` more pinned bytes stay within the pin budget. */
bool shmreg__usage_pin_fits_budget_locked(const struct shmreg__table *t, size_t bytes);

/* Fail with NO_MEMORY: a demanded pin of `bytes` of a window with holes
 * would pass the pin budget; the message names the region and the budget,
 * and says "limit of" as every limit's refusal does (a server maps those
 * to 429). */
shmreg_err shmreg__usage_refuse_pin_locked(const struct shmreg__table *t, const char *name, const char *tag,
                                           size_t bytes);

/* Give back what shmreg__usage_take_locked took. */
void shmreg__usage_give_back_locked(struct shmreg__table *t, const struct shmreg__usage *u);

/* Walk every entry (lock or read-side section held). liburcu's own
 * cds_lfht_for_each_entry takes container_of the NULL that ends the walk,
 * which is undefined behaviour (UBSan reports it). */
static inline struct shmreg__entry *shmreg__entry_of(struct cds_lfht_node *node)
{
    return node ? caa_container_of(node, struct shmreg__entry, node) : NULL;
}
#define shmreg__table_for_each(t, iter, e)                                               \
    for (cds_lfht_first((t)->lfht, (iter)), (e) = shmreg__entry_of(cds_lfht_iter_get_node(iter)); \
         (e) != NULL;                                                                    \
         cds_lfht_next((t)->lfht, (iter)), (e) = shmreg__entry_of(cds_lfht_iter_get_node(iter)))

/* ---- the hot path: no lock */

/* The slow half of shmreg__table_acquire: the hash table itself. */
struct shmreg__entry *shmreg__table_acquire_slow(struct shmreg__table *t, unsigned long hash, const char *name,
                                                 const char *tag);

/* The live entry (tag, name) (len bytes, already bounded), or with tag NULL
 * the one an untagged caller means (shmreg__table_resolve), with a reference
 * taken, or NULL. One read-side section, one fetch_add on the entry's
 * count; the front first, inline, the hash table when it misses. An
 * untagged caller takes the front's entry only when it is untagged: a
 * tagged one there may not be the only one of its name. */
static inline struct shmreg__entry *shmreg__table_acquire(struct shmreg__table *t, const char *name, size_t len,
                                                          const char *tag)
{
    unsigned long hash = shmreg__table_hash(t, name, len);
    shmreg__rcu_read_lock();
    struct shmreg__entry *e =
        atomic_load_explicit(&t->front[hash & (SHMREG__FRONT_SLOTS - 1)], memory_order_acquire);
    if (!(e && e->hash == hash && e->name_len == len && memcmp(e->name, name, len) == 0 &&
          shmreg__entry_tag_is(e, tag) && shmreg__ref_get_unless_dead(&e->refs)))
        e = shmreg__table_acquire_slow(t, hash, name, tag);
    shmreg__rcu_read_unlock();
    return e;
}

#endif
