/* A region: one registered mapping, its refcount and its lifecycle.
 *
 * The count (in the embedded table entry) holds the registry's reference
 * (while the region is registered and not pending) plus one per reference
 * handed to callers. The deleter runs exactly once, when the last reference
 * goes, in that releaser's thread, outside every lock except the short one
 * that unlinks the name. See docs/design.md.
 *
 * A region depends on the table (table.h) and its backend (backend.h) only:
 * never on the registry handle, which may be gone when its last reference
 * is released. */
#ifndef SHMREG_REGION_H
#define SHMREG_REGION_H

#include <stdbool.h>
#include <stdint.h>

#include "backend.h"
#include "table.h"

struct shmreg_region {
    struct shmreg__entry entry;   /* first: count, name, hash; what lookups read */
    struct shmreg__mapping map;   /* what acquire reads next */
    unsigned flags;
    bool pending; /* DEFER-unregistered: registry's reference dropped; under the table's lock */
    struct shmreg__table *table;  /* holds a table reference */
    struct shmreg_region *next_batch; /* scratch list under the table's lock */
    struct rcu_head rcu;          /* deferred free after the last lookup is done */
    uint64_t generation;
    size_t offset;
    struct shmreg__usage charged; /* what this region counts against the limits */
    char *key;    /* SYSTEM: as registered; CUDA: NULL */
    char *tag;    /* owner tag, or NULL */
    char name[];  /* the lookup key, immutable; entry.name points here */
};

/* The region an entry is embedded in. */
static inline struct shmreg_region *shmreg__region_of(struct shmreg__entry *e)
{
    return e ? caa_container_of(e, struct shmreg_region, entry) : NULL;
}

static inline shmreg_kind shmreg__region_kind(const struct shmreg_region *r)
{
    return r->map.backend->kind;
}

/* What a new region is made of. */
struct shmreg__region_args {
    const char *name, *key, *tag; /* key and tag may be NULL */
    size_t offset;
    unsigned flags;
    struct shmreg__usage charged; /* already taken against the limits */
};

/* A new region owning `map` and the usage taken for it, holding the
 * registry's reference (count 1) and a reference to the table. On NO_MEMORY
 * neither the mapping nor the usage is taken: the caller keeps both. */
shmreg_err shmreg__region_new(struct shmreg__table *t, const struct shmreg__region_args *args,
                              const struct shmreg__mapping *map, struct shmreg_region **out);

/* Drop one reference; the last one runs the deleter. */
void shmreg__region_put(struct shmreg_region *r);

/* Drop, outside the lock, one reference of each region of a list chained
 * by next_batch. */
void shmreg__region_put_batch(struct shmreg_region *batch);

/* Callers' references: the count minus the registry's own, read under the
 * table's lock. */
unsigned long shmreg__region_in_use(struct shmreg_region *r);

/* Whether r passes the kind and tag filters (ANY and NULL pass everything). */
bool shmreg__region_matches(const struct shmreg_region *r, shmreg_kind kind, const char *tag);

#endif
