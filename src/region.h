/* A region: one registered mapping, its refcount and its lifecycle.
 *
 * refs counts the registry's reference (held while the region is registered
 * and not pending) plus one per reference handed to callers. The deleter runs
 * exactly once, when the last reference goes, in that releaser's thread, outside
 * every lock except the short one that unlinks the name. See docs/design.md. */
#ifndef SHMREG_REGION_H
#define SHMREG_REGION_H

#include <stdbool.h>
#include <stdint.h>

#include "atomics.h"
#include "backend.h"
#include "rcu.h"
#include "registry.h"

struct shmreg_registry;

struct shmreg_region {
    shmreg__refcount refs;
    struct cds_lfht_node node; /* in registry->table while linked */
    struct rcu_head rcu;       /* deferred free after the last lookup is done */
    struct shmreg_registry *reg; /* holds a registry reference */
    struct shmreg_region *next_batch; /* scratch list under reg->lock */
    bool linked;  /* in the table; under reg->lock */
    bool pending; /* DEFER-unregistered: registry's reference dropped; under reg->lock */
    uint64_t generation;
    size_t offset;
    unsigned flags;
    struct shmreg__mapping map;
    struct shmreg__usage charged; /* what this region counts against the limits */
    char *key;    /* SYSTEM: as registered; CUDA: NULL */
    char *tag;    /* owner tag, or NULL */
    unsigned long hash; /* of name, with the registry's seed */
    size_t name_len;
    char name[];  /* the lookup key, immutable */
};

/* The region a table node belongs to, or NULL for no node. */
static inline struct shmreg_region *shmreg__region_of(struct cds_lfht_node *node)
{
    return node ? caa_container_of(node, struct shmreg_region, node) : NULL;
}

/* Walk every region in reg's table (RCU read side held). liburcu's own
 * cds_lfht_for_each_entry takes container_of the NULL that ends the walk,
 * which is undefined behaviour (UBSan reports it). */
#define shmreg__for_each_region(reg, iter, r)                                            \
    for (cds_lfht_first((reg)->table, (iter)), (r) = shmreg__region_of(cds_lfht_iter_get_node(iter)); \
         (r) != NULL;                                                                    \
         cds_lfht_next((reg)->table, (iter)), (r) = shmreg__region_of(cds_lfht_iter_get_node(iter)))

/* What a new region is made of. */
struct shmreg__region_args {
    const char *name, *key, *tag; /* key and tag may be NULL */
    size_t offset;
    unsigned flags;
    struct shmreg__usage charged; /* already reserved against the limits */
};

/* A new region owning `map` and the usage reserved for it, holding the
 * registry's reference (refs = 1) and a reference to reg. On NO_MEMORY
 * neither the mapping nor the reservation is taken: the caller keeps both. */
shmreg_err shmreg__region_new(struct shmreg_registry *reg, const struct shmreg__region_args *args,
                              const struct shmreg__mapping *map, struct shmreg_region **out);

/* Drop one reference; the last one runs the deleter. */
void shmreg__region_put(struct shmreg_region *r);

/* Callers' references: refs minus the registry's own, read under reg->lock. */
unsigned long shmreg__region_in_use(struct shmreg_region *r);

#endif
