/* Status: snapshots of the registered regions and of the registry's
 * counters, owned by the caller; each owner tag's usage, and its quota set
 * (quota.h). */
#include <stdint.h>
#include <string.h>

#include "base/err.h"
#include "base/names.h"
#include "base/sys.h"
#include "core/mapping.h"
#include "core/region.h"
#include "core/registry.h"

static shmreg_err fill_status(struct shmreg_region *r, shmreg_region_status *st)
{
    st->name = shmreg__strdup(r->name);
    st->key = r->key ? shmreg__strdup(r->key) : NULL;
    st->tag = r->tag ? shmreg__strdup(r->tag) : NULL;
    const struct shmreg__opened *o = &r->mapping->opened;
    const char *transports = o->backend->transports ? o->backend->transports(o) : NULL;
    st->transports = transports ? shmreg__strdup(transports) : NULL;
    const char *uuid = o->device_uuid;
    st->device_uuid = uuid[0] ? shmreg__strdup(uuid) : NULL;
    if (!st->name || (r->key && !st->key) || (r->tag && !st->tag) || (transports && !st->transports) ||
        (uuid[0] && !st->device_uuid))
        return shmreg__fail(SHMREG_ERR_NO_MEMORY, "out of memory reporting the status of region '%s'", r->name);
    st->kind = shmreg__region_kind(r);
    st->offset = r->offset;
    st->byte_size = r->win.byte_size;
    st->device_id = r->win.device_id;
    unsigned long refs = shmreg__region_in_use(r);
    st->references = refs > UINT32_MAX ? UINT32_MAX : (unsigned)refs;
    st->pending_unregister = r->pending;
    st->generation = r->generation;
    st->pinned = r->win.pinned;
    st->flags = r->flags;
    st->mapping_regions = r->mapping->regions;
    st->mapping_reused = r->reused;
    return SHMREG_OK;
}

static bool wanted(struct shmreg__entry *e, const shmreg_filter *f)
{
    return shmreg__entry_alive(e) && shmreg__region_matches(shmreg__region_of(e), f->kind, f->tag);
}

/* Under the lock: every region passing the filter, in a new array. */
static shmreg_err status_all_locked(struct shmreg__table *t, const shmreg_filter *f, shmreg_region_status **out,
                                    size_t *count)
{
    struct cds_lfht_iter iter;
    struct shmreg__entry *e;
    size_t n = 0;
    shmreg__table_for_each(t, &iter, e) {
        if (wanted(e, f))
            n++;
    }
    if (n == 0)
        return SHMREG_OK;
    shmreg_region_status *st = shmreg__calloc(n, sizeof *st);
    if (!st)
        return shmreg__fail(SHMREG_ERR_NO_MEMORY, "out of memory reporting the status of %zu regions", n);
    size_t i = 0;
    shmreg_err err = SHMREG_OK;
    shmreg__table_for_each(t, &iter, e) {
        if (wanted(e, f) && (err = fill_status(shmreg__region_of(e), &st[i++])) != SHMREG_OK)
            break;
    }
    if (err != SHMREG_OK) {
        shmreg_status_free(st, i);
        return err;
    }
    /* A region counted above may have died since: releases do not take the
     * lock. None can appear (inserts do), so i <= n. */
    *out = st;
    *count = i;
    return SHMREG_OK;
}

static shmreg_err status_one_locked(struct shmreg__table *t, const shmreg_filter *f, shmreg_region_status **out,
                                    size_t *count)
{
    struct shmreg_region *r;
    shmreg_err err = shmreg__lookup_locked(t, f->name, f->kind, f->tag, &r);
    if (err != SHMREG_OK)
        return err;
    shmreg_region_status *st = shmreg__calloc(1, sizeof *st);
    if (!st)
        return shmreg__fail(SHMREG_ERR_NO_MEMORY, "out of memory reporting the status of region '%s'", f->name);
    if ((err = fill_status(r, st)) != SHMREG_OK) {
        shmreg_status_free(st, 1);
        return err;
    }
    *out = st;
    *count = 1;
    return SHMREG_OK;
}

shmreg_err shmreg_status_matching(shmreg_registry *reg, const shmreg_filter *filter, shmreg_region_status **out,
                                  size_t *count)
{
    if (!reg || !out || !count)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "status: %s is NULL",
                            !reg ? "registry" : !out ? "out" : "count");
    *out = NULL;
    *count = 0;
    shmreg_filter f;
    shmreg_err err = shmreg__filter_check(filter, &f);
    if (err != SHMREG_OK)
        return err;
    shmreg__table_lock(reg->table);
    err = f.name ? status_one_locked(reg->table, &f, out, count) : status_all_locked(reg->table, &f, out, count);
    shmreg__table_unlock(reg->table);
    return err;
}

shmreg_err shmreg_status(shmreg_registry *reg, const char *name, shmreg_kind kind, shmreg_region_status **out,
                         size_t *count)
{
    shmreg_filter f;
    shmreg_filter_init(&f);
    f.name = name;
    f.kind = kind;
    return shmreg_status_matching(reg, &f, out, count);
}

void shmreg_status_free(shmreg_region_status *st, size_t count)
{
    if (!st)
        return;
    for (size_t i = 0; i < count; i++) {
        shmreg__free((char *)st[i].name);
        shmreg__free((char *)st[i].key);
        shmreg__free((char *)st[i].tag);
        shmreg__free((char *)st[i].transports);
        shmreg__free((char *)st[i].device_uuid);
    }
    shmreg__free(st);
}

shmreg_err shmreg_registry_stats(shmreg_registry *reg, shmreg_stats *out)
{
    if (!reg || !out)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "registry_stats: %s is NULL", !reg ? "registry" : "out");
    struct shmreg__table *t = reg->table;
    shmreg_stats s;
    memset(&s, 0, sizeof s);
    struct cds_lfht_iter iter;
    struct shmreg__entry *e;
    shmreg__table_lock(t);
    shmreg__table_for_each(t, &iter, e) {
        if (!shmreg__entry_alive(e))
            continue;
        struct shmreg_region *r = shmreg__region_of(e);
        s.regions++;
        s.pending_regions += r->pending;
        s.references += shmreg__region_in_use(r);
    }
    /* Every region made and not torn down is either listed or detached
     * (dead ones still listed are on their way out). */
    s.mapped_regions = t->regions_alive;
    s.detached_regions = t->regions_alive > t->linked ? t->regions_alive - t->linked : 0;
    s.mapped_bytes = t->usage.mapped_bytes;
    s.pinned_bytes = t->usage.pinned_bytes;
    s.registrations = t->registrations;
    s.refusals = t->refusals;
    s.reclaim_waiting_bytes = atomic_load_explicit(&t->reclaim.waiting_bytes, memory_order_relaxed);
    s.cached_bytes = t->cache.cached_bytes;
    s.cached_mappings = t->cache.cached_mappings;
    s.cache_hits = t->cache.hits;
    s.cache_misses = t->cache.misses;
    s.cache_evictions = t->cache.evictions;
    shmreg__table_unlock(t);
    *out = s;
    return SHMREG_OK;
}

/* ---- owner tags' quotas (quota.h) */

/* A tag the calls below accept: NULL is not one (untagged regions have no
 * quota of their own). */
static shmreg_err check_tag(const char *call, const char *tag)
{
    if (!tag)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "%s: tag is NULL", call);
    return shmreg__check_tag(tag);
}

shmreg_err shmreg_tag_quota_set(shmreg_registry *reg, const char *tag, const shmreg_quota *q)
{
    if (!reg)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "tag_quota_set: registry is NULL");
    shmreg_err err = check_tag("tag_quota_set", tag);
    if (err != SHMREG_OK)
        return err;
    shmreg__table_lock(reg->table);
    err = shmreg__quota_set_locked(&reg->table->quotas, tag, q);
    shmreg__table_unlock(reg->table);
    return err;
}

shmreg_err shmreg_tag_stats_get(shmreg_registry *reg, const char *tag, shmreg_tag_stats *out)
{
    if (!reg || !out)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "tag_stats_get: %s is NULL", !reg ? "registry" : "out");
    shmreg_err err = check_tag("tag_stats_get", tag);
    if (err != SHMREG_OK)
        return err;
    shmreg__table_lock(reg->table);
    shmreg__quota_stats_locked(&reg->table->quotas, tag, out);
    shmreg__table_unlock(reg->table);
    return SHMREG_OK;
}
