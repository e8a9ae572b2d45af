/* Unregistering: what each busy policy does to a region still in use. */
#include <stdio.h>

#include "base/err.h"
#include "base/names.h"
#include "core/region.h"
#include "core/registry.h"

/* Apply the busy policy to one region, under the table's lock. Returns true
 * when the registry's reference must be dropped (after the lock); false when
 * REFUSE keeps a busy region, or when the region is already pending. */
static bool unregister_locked(shmreg_registry *reg, struct shmreg_region *r)
{
    if (r->pending)
        return false;
    switch (reg->busy_policy) {
    case SHMREG_POLICY_REFUSE:
        if (shmreg__region_in_use(r) > 0)
            return false;
        shmreg__table_unlink_locked(reg->table, &r->entry);
        break;
    case SHMREG_POLICY_DETACH:
        shmreg__table_unlink_locked(reg->table, &r->entry);
        break;
    case SHMREG_POLICY_DEFER:
        /* The name stays until the last reference goes. Dropping the
         * registry's reference makes that atomic: whichever release brings
         * the count to zero (ours, if idle, or the last caller's) runs the
         * one deleter, which unlinks this very entry. No flag is re-checked
         * later, so no interleaving can strand a pending region or touch a
         * re-registered one. */
        r->pending = true;
        break;
    }
    shmreg__region_disown(r);
    return true;
}

static shmreg_err unregister_one(shmreg_registry *reg, const shmreg_filter *f)
{
    struct shmreg_region *r = NULL;
    bool drop = false;
    unsigned long in_use = 0;
    shmreg__table_lock(reg->table);
    shmreg_err err = shmreg__lookup_locked(reg->table, f->name, f->kind, f->tag, &r);
    if (err == SHMREG_OK) {
        in_use = shmreg__region_in_use(r);
        drop = unregister_locked(reg, r);
        if (!drop && !r->pending)
            err = SHMREG_ERR_BUSY;
    }
    shmreg__table_unlock(reg->table);
    /* Triton's message, which its clients match up to "in use"; the count
     * is of references, which is what the policy looks at. */
    if (err == SHMREG_ERR_BUSY)
        return shmreg__fail(SHMREG_ERR_BUSY,
                            "Cannot unregister shared memory region '%s', it is currently in use by %lu "
                            "reference%s (views acquired and not yet released).",
                            f->name, in_use, in_use == 1 ? "" : "s");
    if (drop)
        shmreg__region_put(r); /* unmaps now if idle */
    return err;
}

/* "a, b, " as Triton lists them, bounded: a list too long ends in "...". */
static void append_name(char *buf, size_t cap, size_t *len, const char *name)
{
    if (*len >= cap)
        return;
    int n = snprintf(buf + *len, cap - *len, "%s, ", name);
    if (n < 0 || (size_t)n >= cap - *len) {
        snprintf(buf + cap - 4, 4, "...");
        *len = cap;
        return;
    }
    *len += (size_t)n;
}

/* Every live region passing f's kind and tag, and `select` when given;
 * *count (may be NULL): how many the policy let go. */
static shmreg_err unregister_every(shmreg_registry *reg, const shmreg_filter *f,
                                   bool (*select)(const struct shmreg_region *r), size_t *count)
{
    char busy[2048] = "";
    size_t busy_len = 0, dropped = 0;
    struct shmreg_region *batch = NULL;
    struct cds_lfht_iter iter;
    struct shmreg__entry *e;
    shmreg__table_lock(reg->table);
    shmreg__table_for_each(reg->table, &iter, e) {
        struct shmreg_region *r = shmreg__region_of(e);
        if (!shmreg__entry_alive(e) || !shmreg__region_matches(r, f->kind, f->tag) || (select && !select(r)))
            continue;
        if (unregister_locked(reg, r)) {
            r->next_batch = batch;
            batch = r;
            dropped++;
        } else if (!r->pending) {
            append_name(busy, sizeof busy, &busy_len, r->name);
        }
    }
    shmreg__table_unlock(reg->table);
    shmreg__region_put_batch(batch);
    if (count)
        *count = dropped;
    if (busy_len > 0)
        return shmreg__fail(SHMREG_ERR_BUSY, "Failed to unregister the following %sshared memory regions: %s",
                            shmreg__kind_word(f->kind), busy);
    return SHMREG_OK;
}

shmreg_err shmreg_unregister_matching(shmreg_registry *reg, const shmreg_filter *filter)
{
    if (!reg)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "registry is NULL");
    shmreg_filter f;
    shmreg_err err = shmreg__filter_check(filter, &f);
    if (err != SHMREG_OK)
        return err;
    return f.name ? unregister_one(reg, &f) : unregister_every(reg, &f, NULL, NULL);
}

shmreg_err shmreg_unregister(shmreg_registry *reg, const char *name, shmreg_kind kind)
{
    /* A NULL name would mean "every region" to the filter. */
    if (reg && !name)
        return shmreg__check_name(name);
    shmreg_filter f;
    shmreg_filter_init(&f);
    f.name = name;
    f.kind = kind;
    return shmreg_unregister_matching(reg, &f);
}

shmreg_err shmreg_unregister_all(shmreg_registry *reg, shmreg_kind kind)
{
    shmreg_filter f;
    shmreg_filter_init(&f);
    f.kind = kind;
    return shmreg_unregister_matching(reg, &f);
}

/* ---- remote regions whose client is gone (1.2) */

/* The mapping is the region's for as long as its entry is alive. */
static bool unreachable(const struct shmreg_region *r)
{
    const struct shmreg__backend *b = r->win.backend;
    return b->gone && b->gone(&r->mapping->opened);
}

shmreg_err shmreg_remote_sweep(shmreg_registry *reg, size_t *count)
{
    if (count)
        *count = 0;
    if (!reg)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "remote_sweep: registry is NULL");
    shmreg_filter f;
    shmreg_filter_init(&f);
    f.kind = SHMREG_KIND_REMOTE;
    /* REFUSE keeps the busy ones: a later sweep takes them, not an error. */
    shmreg_err err = unregister_every(reg, &f, unreachable, count);
    return err == SHMREG_ERR_BUSY ? SHMREG_OK : err;
}
