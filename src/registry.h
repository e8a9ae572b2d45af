/* The registry: names -> regions. Internal to the library: registry.c (the
 * table, create/destroy, acquire), register.c, unregister.c and status.c,
 * and region.c (a region's teardown retires it from its registry). */
#ifndef SHMREG_REGISTRY_H
#define SHMREG_REGISTRY_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "atomics.h"
#include "rcu.h"
#include "shmreg/shmreg.h"

struct shmreg_region;

/* What the registry's limits count; under lock. */
struct shmreg__usage {
    size_t regions;
    size_t mapped_bytes;
    size_t pinned_bytes;
};

/* Slots of the registry's front, a power of two ("the front" in registry.c). */
#define SHMREG__FRONT_SLOTS 1024u

struct shmreg_registry {
    /* Lookups traverse the table under RCU only. Every change to it, to the
     * usage counters, and every read of the regions' linked/pending flags,
     * holds `lock`; no code holding it calls shm_open, mmap, munmap, any
     * CUDA function or a log callback, so acquire never waits behind them. */
    struct cds_lfht *table;
    pthread_mutex_t lock;
    /* One reference for the handle, one per region not yet torn down: the
     * lock and table outlive every region, even after destroy. */
    shmreg__refcount refs;
    /* A direct-mapped front for the table: slot hash % SLOTS holds the first
     * live region registered with a hash there, so that acquire usually
     * finds its region without a call into liburcu. Written under lock,
     * read under RCU; a region leaves its slot when it leaves the table. */
    _Atomic(struct shmreg_region *) front[SHMREG__FRONT_SLOTS];
    uint64_t next_generation; /* under lock */
    uint64_t hash_seed;       /* random per registry: names come from clients */
    struct shmreg__usage usage; /* under lock: every region still mapped */

    /* The configuration, copied at create. */
    shmreg_policy busy_policy;
    shmreg_pin_policy pin_policy;
    shmreg_log_fn log_fn;
    void *log_user;
    char **reserved_prefixes; /* owned, NULL-terminated, or NULL */
    uid_t *allowed_uids;      /* owned, or NULL */
    size_t allowed_uid_count;
    struct shmreg__usage limits; /* 0 = unlimited */
};

/* Drop a registry reference; the last frees it (returns true). Never call it
 * holding lock or inside an RCU read-side section. */
bool shmreg__registry_put(struct shmreg_registry *reg);

/* Whether shmreg_registry_destroy, when it frees the registry, waits for the
 * RCU-deferred frees of its regions (true). Harnesses that destroy a registry
 * per input turn it off and wait once at exit (urcu_bp_barrier). */
extern bool shmreg__destroy_waits;

/* Hand a message to the configured log callback (or drop it). Never call it
 * holding lock. */
void shmreg__log(struct shmreg_registry *reg, shmreg_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- shared by the API files; all "_locked" ones need reg->lock held and an
 * RCU read-side section. */

unsigned long shmreg__name_hash(const struct shmreg_registry *reg, const char *name, size_t len);
int shmreg__match_name(struct cds_lfht_node *node, const void *name);
bool shmreg__kind_valid(shmreg_kind kind);
const char *shmreg__kind_word(shmreg_kind kind); /* "system ", "cuda " or "" for ANY */

/* A region counts until its count is dead: a dead node is being torn down
 * and is about to leave the table. */
bool shmreg__region_alive(struct shmreg_region *r);

/* Whether r passes the kind and tag filters (ANY and NULL pass everything). */
bool shmreg__region_matches(struct shmreg_region *r, shmreg_kind kind, const char *tag);

/* The live region called name, or NULL. */
struct shmreg_region *shmreg__find_locked(struct shmreg_registry *reg, const char *name);

/* The live region called name that passes kind and tag, or NOT_FOUND with
 * the message that says why (absent, or registered as the other kind). */
shmreg_err shmreg__lookup_locked(struct shmreg_registry *reg, const char *name, shmreg_kind kind,
                                 const char *tag, struct shmreg_region **out);

/* Publish r in the table (and in the front, when its slot is free). */
void shmreg__link_locked(struct shmreg_registry *reg, struct shmreg_region *r);

/* Take r out of the table and the front (this node only). */
void shmreg__unlink_locked(struct shmreg_registry *reg, struct shmreg_region *r);

/* Drop, outside the lock, the references of a list chained by next_batch. */
void shmreg__put_batch(struct shmreg_region *batch);

/* Give back what a registration reserved against the limits (its region's
 * charge, once that region is gone). Caller holds reg->lock. */
void shmreg__usage_release_locked(struct shmreg_registry *reg, const struct shmreg__usage *u);

/* Validate an optional owner tag (NULL is fine). */
shmreg_err shmreg__check_tag(const char *tag);

#endif
