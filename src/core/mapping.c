/* Mappings shared by regions, their index and the cache (see mapping.h). */
#include <string.h>

#include "base/err.h"
#include "base/sys.h"
#include "core/mapping.h"

struct shmreg__mapping *shmreg__mapping_new(const struct shmreg__opened *opened, const struct shmreg__identity *id,
                                            const struct shmreg__usage *cost, const char *label)
{
    size_t len = strlen(label);
    struct shmreg__mapping *m = shmreg__calloc(1, sizeof *m + len + 1);
    if (!m)
        return NULL;
    m->opened = *opened;
    m->id = *id;
    m->cost = *cost;
    m->cost.regions = 0;
    memcpy(m->label, label, len + 1);
    return m;
}

static bool shareable(const struct shmreg__cache *c, const struct shmreg__mapping *m)
{
    return m->id.valid && c->limit > 0;
}

void shmreg__mapping_attach_locked(struct shmreg__cache *c, struct shmreg__mapping *m)
{
    m->regions = 1;
    if (!shareable(c, m)) {
        m->id.valid = false;
        return;
    }
    m->prev = NULL;
    m->next = c->mappings;
    if (c->mappings)
        c->mappings->prev = m;
    c->mappings = m;
}

static void index_remove_locked(struct shmreg__cache *c, struct shmreg__mapping *m)
{
    if (!m->id.valid)
        return;
    if (m->prev)
        m->prev->next = m->next;
    else
        c->mappings = m->next;
    if (m->next)
        m->next->prev = m->prev;
    m->prev = m->next = NULL;
    m->id.valid = false;
}

static void lru_remove_locked(struct shmreg__cache *c, struct shmreg__mapping *m)
{
    if (m->lru_prev)
        m->lru_prev->lru_next = m->lru_next;
    else
        c->lru_head = m->lru_next;
    if (m->lru_next)
        m->lru_next->lru_prev = m->lru_prev;
    else
        c->lru_tail = m->lru_prev;
    m->lru_prev = m->lru_next = NULL;
    m->cached = false;
    c->cached_bytes -= m->cost.mapped_bytes;
    c->cached_mappings--;
}

static void lru_append_locked(struct shmreg__cache *c, struct shmreg__mapping *m)
{
    m->lru_next = NULL;
    m->lru_prev = c->lru_tail;
    if (c->lru_tail)
        c->lru_tail->lru_next = m;
    else
        c->lru_head = m;
    c->lru_tail = m;
    m->cached = true;
    c->cached_bytes += m->cost.mapped_bytes;
    c->cached_mappings++;
}

static bool covers(const struct shmreg__mapping *m, size_t offset, size_t byte_size)
{
    size_t start = m->opened.object_offset;
    return offset >= start && offset - start <= m->opened.length &&
           byte_size <= m->opened.length - (offset - start);
}

struct shmreg__mapping *shmreg__mapping_reuse_locked(struct shmreg__table *t, const struct shmreg__backend *b,
                                                     const struct shmreg__identity *id, size_t offset,
                                                     size_t byte_size)
{
    for (struct shmreg__mapping *m = t->cache.mappings; m; m = m->next) {
        if (m->opened.backend != b || memcmp(m->id.words, id->words, sizeof id->words) != 0 ||
            !covers(m, offset, byte_size))
            continue;
        if (m->cached) {
            /* Its own charge goes: the new region has taken its own. */
            lru_remove_locked(&t->cache, m);
            shmreg__usage_give_back_locked(t, &m->charge);
            memset(&m->charge, 0, sizeof m->charge);
        }
        m->regions++;
        t->cache.hits++;
        return m;
    }
    t->cache.misses++;
    return NULL;
}

/* Whether the cache may keep m: the cache is on and m fits in it, and its
 * own charge fits the limits now that its last region gave its back. */
static bool may_cache_locked(struct shmreg__table *t, const struct shmreg__mapping *m)
{
    if (!shareable(&t->cache, m) || m->cost.mapped_bytes > t->cache.limit)
        return false;
    const struct shmreg__usage *u = &t->usage, *lim = &t->limits;
    return (lim->mapped_bytes == 0 || (u->mapped_bytes <= lim->mapped_bytes &&
                                       m->cost.mapped_bytes <= lim->mapped_bytes - u->mapped_bytes)) &&
           (lim->pinned_bytes == 0 || (u->pinned_bytes <= lim->pinned_bytes &&
                                       m->cost.pinned_bytes <= lim->pinned_bytes - u->pinned_bytes));
}

struct shmreg__mapping *shmreg__mapping_leave_locked(struct shmreg__table *t, struct shmreg__mapping *m,
                                                     const struct shmreg__usage *region_charge)
{
    if (--m->regions > 0) {
        shmreg__usage_give_back_locked(t, region_charge);
        return NULL;
    }
    struct shmreg__mapping *close = NULL;
    shmreg__usage_give_back_locked(t, region_charge);
    if (may_cache_locked(t, m)) {
        t->usage.mapped_bytes += m->cost.mapped_bytes;
        t->usage.pinned_bytes += m->cost.pinned_bytes;
        m->charge = m->cost;
        lru_append_locked(&t->cache, m);
        while (t->cache.cached_bytes > t->cache.limit) {
            struct shmreg__mapping *old = shmreg__mapping_evict_one_locked(&t->cache);
            old->next_close = close;
            close = old;
        }
        return close;
    }
    /* Closed now: it keeps counting what its last region counted until the
     * close is done. */
    index_remove_locked(&t->cache, m);
    t->usage.mapped_bytes += region_charge->mapped_bytes;
    t->usage.pinned_bytes += region_charge->pinned_bytes;
    m->charge = *region_charge;
    m->charge.regions = 0;
    m->next_close = NULL;
    return m;
}

struct shmreg__mapping *shmreg__mapping_evict_one_locked(struct shmreg__cache *c)
{
    struct shmreg__mapping *m = c->lru_head;
    if (!m)
        return NULL;
    lru_remove_locked(c, m);
    index_remove_locked(c, m);
    c->evictions++;
    m->next_close = NULL;
    return m;
}

struct shmreg__mapping *shmreg__mapping_evict_all_locked(struct shmreg__cache *c)
{
    struct shmreg__mapping *list = NULL, *m;
    while ((m = shmreg__mapping_evict_one_locked(c)) != NULL) {
        m->next_close = list;
        list = m;
    }
    return list;
}

void shmreg__mapping_close_list(struct shmreg__table *t, struct shmreg__mapping *list)
{
    while (list) {
        struct shmreg__mapping *m = list;
        list = m->next_close;
        shmreg_err err = m->opened.backend->close(&m->opened, m->label);
        if (err != SHMREG_OK)
            shmreg__table_log(t, SHMREG_LOG_ERROR, "closing the %s mapping of shared memory region '%s' (%s): %s",
                              m->opened.backend->name, m->label, shmreg_err_name(err), shmreg_last_error());
        shmreg__table_lock(t);
        shmreg__usage_give_back_locked(t, &m->charge);
        shmreg__reclaim_bytes_done(&t->reclaim, m->reclaim_waiting_bytes);
        shmreg__table_unlock(t);
        shmreg__free(m);
    }
}
