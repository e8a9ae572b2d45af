/* A region: a name on a window of a mapping (mapping.h), its refcount and
 * its lifecycle.
 *
 * The count (in the embedded table entry) holds the registry's reference
 * (while the region is registered and not pending) plus one per reference
 * handed to callers. The deleter runs exactly once, when the last reference
 * goes: on the reclaim thread when that was a shmreg_release under
 * background reclaim, else in the thread that dropped it; outside every
 * lock except the short one that unlinks the name. See docs/design.md.
 *
 * A region depends on the table (table.h), its mapping and backend only:
 * never on the registry handle, which may be gone when its last reference
 * is released. */
#ifndef SHMREG_REGION_H
#define SHMREG_REGION_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "backends/backend.h"
#include "core/mapping.h"
#include "core/table.h"

/* The region's window of its mapping: what acquire reads, copied here so
 * that the hot path never touches the shared mapping. */
struct shmreg__window {
    const struct shmreg__backend *backend;
    void *addr;
    size_t byte_size;
    int device_id;
    int pinned;
};

struct shmreg_region {
    struct shmreg__entry entry;   /* first: count, name, hash; what lookups read */
    struct shmreg__window win;    /* what acquire reads next */
    unsigned flags;
    bool pending; /* DEFER-unregistered: registry's reference dropped; under the table's lock */
    bool reused;  /* the registration found its mapping already there */
    /* The count includes the registry's reference: set at creation, cleared
     * by whoever is about to drop that reference (shmreg__region_disown).
     * Atomic: a release reads it without the table's lock. */
    atomic_bool registry_ref;
    struct shmreg__table *table;  /* holds a table reference */
    struct shmreg__mapping *mapping; /* counts this region among its regions */
    struct shmreg__reclaim_node reclaim; /* the hand-off to the reclaim thread */
    struct shmreg_region *next_batch; /* scratch list under the table's lock */
    struct rcu_head rcu;          /* deferred free after the last lookup is done */
    uint64_t generation;
    size_t offset;
    struct shmreg__usage charged; /* what this region counts against the limits */
    char *key;    /* SYSTEM: as registered; CUDA: NULL */
    char *tag;    /* owner tag, or NULL: after the name, in name[] */
    char name[];  /* the lookup key, immutable; entry.name points here */
};

/* The region an entry is embedded in. */
static inline struct shmreg_region *shmreg__region_of(struct shmreg__entry *e)
{
    return e ? caa_container_of(e, struct shmreg_region, entry) : NULL;
}

static inline shmreg_kind shmreg__region_kind(const struct shmreg_region *r)
{
    return r->win.backend->kind;
}

/* What a new region is made of. */
struct shmreg__region_args {
    const char *name, *key, *tag; /* key and tag may be NULL */
    size_t offset;
    unsigned flags;
    struct shmreg__usage charged; /* already taken against the limits */
};

/* A new region, not yet counted or published, on the window
 * [window_offset, +byte_size) of m's object (args->offset for a system
 * region, 0 for CUDA), holding the registry's reference (count 1). On
 * NO_MEMORY nothing is taken. shmreg__region_publish_locked counts it. */
shmreg_err shmreg__region_new(struct shmreg__table *t, const struct shmreg__region_args *args,
                              struct shmreg__mapping *m, size_t window_offset, size_t byte_size,
                              struct shmreg_region **out);

/* Under the lock: the region now holds its share of its mapping, the usage
 * taken for it, and a reference to the table; its deleter gives them back.
 * (Linking it under its name is the caller's.) */
void shmreg__region_own_locked(struct shmreg__table *t, struct shmreg_region *r);

/* Free a region that shmreg__region_own_locked never owned. */
void shmreg__region_discard(struct shmreg_region *r);

/* Before dropping the registry's reference (unregister, destroy, a failed
 * publish): from then on a release that finds no other holder is the last,
 * not one past zero. */
void shmreg__region_disown(struct shmreg_region *r);

/* Drop one reference; the last one runs the deleter in this thread. For
 * the verbs (unregister, destroy), whose callers expect idle regions gone
 * when they return. */
void shmreg__region_put(struct shmreg_region *r);

/* Drop one reference for a caller (shmreg_release, a failed acquire): the
 * last one hands the region to the reclaim thread when there is one. */
void shmreg__region_release(struct shmreg_region *r);

/* Drop, outside the lock, one reference of each region of a list chained
 * by next_batch. */
void shmreg__region_put_batch(struct shmreg_region *batch);

/* Callers' references: the count minus the registry's own, read under the
 * table's lock. */
unsigned long shmreg__region_in_use(struct shmreg_region *r);

/* Whether r passes the kind and tag filters (ANY and NULL pass everything). */
bool shmreg__region_matches(const struct shmreg_region *r, shmreg_kind kind, const char *tag);

#endif
