/* Status: a snapshot of the registered regions, owned by the caller. */
#include <stdint.h>

#include "err.h"
#include "names.h"
#include "region.h"
#include "registry.h"
#include "sys.h"

static shmreg_err fill_status(struct shmreg_region *r, shmreg_region_status *st)
{
    st->name = shmreg__strdup(r->name);
    st->key = r->key ? shmreg__strdup(r->key) : NULL;
    st->tag = r->tag ? shmreg__strdup(r->tag) : NULL;
    if (!st->name || (r->key && !st->key) || (r->tag && !st->tag))
        return shmreg__fail(SHMREG_ERR_NO_MEMORY, "out of memory reporting the status of region '%s'", r->name);
    st->kind = r->map.backend->kind;
    st->offset = r->offset;
    st->byte_size = r->map.byte_size;
    st->device_id = r->map.device_id;
    unsigned long in_use = shmreg__region_in_use(r);
    st->in_use = in_use > UINT32_MAX ? UINT32_MAX : (unsigned)in_use;
    st->pending_unregister = r->pending;
    st->generation = r->generation;
    st->pinned = r->map.pinned;
    st->flags = r->flags;
    return SHMREG_OK;
}

static bool wanted(struct shmreg_region *r, shmreg_kind kind, const char *tag)
{
    return shmreg__region_alive(r) && shmreg__region_matches(r, kind, tag);
}

/* Under reg->lock and RCU: every region passing the filters, in a new array. */
static shmreg_err status_all_locked(struct shmreg_registry *reg, shmreg_kind kind, const char *tag,
                                    shmreg_region_status **out, size_t *count)
{
    struct cds_lfht_iter iter;
    struct shmreg_region *r;
    size_t n = 0;
    shmreg__for_each_region(reg, &iter, r) {
        if (wanted(r, kind, tag))
            n++;
    }
    if (n == 0)
        return SHMREG_OK;
    shmreg_region_status *st = shmreg__calloc(n, sizeof *st);
    if (!st)
        return shmreg__fail(SHMREG_ERR_NO_MEMORY, "out of memory reporting the status of %zu regions", n);
    size_t i = 0;
    shmreg_err err = SHMREG_OK;
    shmreg__for_each_region(reg, &iter, r) {
        if (wanted(r, kind, tag) && (err = fill_status(r, &st[i++])) != SHMREG_OK)
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

static shmreg_err status_one_locked(struct shmreg_registry *reg, const char *name, shmreg_kind kind,
                                    const char *tag, shmreg_region_status **out, size_t *count)
{
    struct shmreg_region *r;
    shmreg_err err = shmreg__lookup_locked(reg, name, kind, tag, &r);
    if (err != SHMREG_OK)
        return err;
    shmreg_region_status *st = shmreg__calloc(1, sizeof *st);
    if (!st)
        return shmreg__fail(SHMREG_ERR_NO_MEMORY, "out of memory reporting the status of region '%s'", name);
    if ((err = fill_status(r, st)) != SHMREG_OK) {
        shmreg_status_free(st, 1);
        return err;
    }
    *out = st;
    *count = 1;
    return SHMREG_OK;
}

shmreg_err shmreg_status_tagged(shmreg_registry *reg, const char *name, shmreg_kind kind, const char *tag,
                                shmreg_region_status **out, size_t *count)
{
    if (!reg || !out || !count)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "status: %s is NULL",
                            !reg ? "registry" : !out ? "out" : "count");
    *out = NULL;
    *count = 0;
    if (!shmreg__kind_valid(kind))
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "invalid region kind %d", (int)kind);
    shmreg_err err = shmreg__check_tag(tag);
    if (err == SHMREG_OK && name)
        err = shmreg__check_name(name);
    if (err != SHMREG_OK)
        return err;
    pthread_mutex_lock(&reg->lock);
    shmreg__rcu_read_lock();
    err = name ? status_one_locked(reg, name, kind, tag, out, count)
               : status_all_locked(reg, kind, tag, out, count);
    shmreg__rcu_read_unlock();
    pthread_mutex_unlock(&reg->lock);
    return err;
}

shmreg_err shmreg_status(shmreg_registry *reg, const char *name, shmreg_kind kind,
                         shmreg_region_status **out, size_t *count)
{
    return shmreg_status_tagged(reg, name, kind, NULL, out, count);
}

void shmreg_status_free(shmreg_region_status *st, size_t count)
{
    if (!st)
        return;
    for (size_t i = 0; i < count; i++) {
        shmreg__free((char *)st[i].name);
        shmreg__free((char *)st[i].key);
        shmreg__free((char *)st[i].tag);
    }
    shmreg__free(st);
}
