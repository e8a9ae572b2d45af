/* Unregistering: what each busy policy does to a region still in use. */
#include <stdio.h>

#include "err.h"
#include "names.h"
#include "region.h"
#include "registry.h"

static shmreg_err check_filters(shmreg_registry *reg, shmreg_kind kind, const char *tag)
{
    if (!reg)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "registry is NULL");
    if (!shmreg__kind_valid(kind))
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "invalid region kind %d", (int)kind);
    return shmreg__check_tag(tag);
}

/* Apply the busy policy to one region, under reg->lock. Returns true when
 * the registry's reference must be dropped (after the lock); false when
 * REFUSE keeps a busy region, or when the region is already pending. */
static bool unregister_locked(struct shmreg_registry *reg, struct shmreg_region *r)
{
    if (r->pending)
        return false;
    switch (reg->busy_policy) {
    case SHMREG_POLICY_REFUSE:
        if (shmreg__region_in_use(r) > 0)
            return false;
        shmreg__unlink_locked(reg, r);
        return true;
    case SHMREG_POLICY_DETACH:
        shmreg__unlink_locked(reg, r);
        return true;
    case SHMREG_POLICY_DEFER:
        break;
    }
    /* DEFER: the name stays until the last reference goes. Dropping the
     * registry's reference makes that atomic: whichever release brings the
     * count to zero (ours, if idle, or the last caller's) runs the one
     * deleter, which unlinks this very node. No flag is re-checked later, so
     * no interleaving can strand a pending region or touch a re-registered
     * one. */
    r->pending = true;
    return true;
}

shmreg_err shmreg_unregister_tagged(shmreg_registry *reg, const char *name, shmreg_kind kind,
                                    const char *tag)
{
    shmreg_err err = check_filters(reg, kind, tag);
    if (err == SHMREG_OK)
        err = shmreg__check_name(name);
    if (err != SHMREG_OK)
        return err;

    struct shmreg_region *r = NULL;
    bool drop = false;
    unsigned long in_use = 0;
    pthread_mutex_lock(&reg->lock);
    shmreg__rcu_read_lock();
    err = shmreg__lookup_locked(reg, name, kind, tag, &r);
    if (err == SHMREG_OK) {
        in_use = shmreg__region_in_use(r);
        drop = unregister_locked(reg, r);
        if (!drop && !r->pending)
            err = SHMREG_ERR_BUSY;
    }
    shmreg__rcu_read_unlock();
    pthread_mutex_unlock(&reg->lock);
    if (err == SHMREG_ERR_BUSY)
        return shmreg__fail(SHMREG_ERR_BUSY,
                            "Cannot unregister shared memory region '%s', it is currently in use by %lu requests.",
                            name, in_use);
    if (drop)
        shmreg__region_put(r); /* unmaps now if idle */
    return err;
}

shmreg_err shmreg_unregister(shmreg_registry *reg, const char *name, shmreg_kind kind)
{
    return shmreg_unregister_tagged(reg, name, kind, NULL);
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

shmreg_err shmreg_unregister_all_tagged(shmreg_registry *reg, shmreg_kind kind, const char *tag)
{
    shmreg_err err = check_filters(reg, kind, tag);
    if (err != SHMREG_OK)
        return err;

    char busy[2048] = "";
    size_t busy_len = 0;
    struct shmreg_region *batch = NULL;
    struct cds_lfht_iter iter;
    struct shmreg_region *r;
    pthread_mutex_lock(&reg->lock);
    shmreg__rcu_read_lock();
    shmreg__for_each_region(reg, &iter, r) {
        if (!shmreg__region_alive(r) || !shmreg__region_matches(r, kind, tag))
            continue;
        if (unregister_locked(reg, r)) {
            r->next_batch = batch;
            batch = r;
        } else if (!r->pending) {
            append_name(busy, sizeof busy, &busy_len, r->name);
        }
    }
    shmreg__rcu_read_unlock();
    pthread_mutex_unlock(&reg->lock);
    shmreg__put_batch(batch);
    if (busy_len > 0)
        return shmreg__fail(SHMREG_ERR_BUSY, "Failed to unregister the following %sshared memory regions: %s",
                            shmreg__kind_word(kind), busy);
    return SHMREG_OK;
}

shmreg_err shmreg_unregister_all(shmreg_registry *reg, shmreg_kind kind)
{
    return shmreg_unregister_all_tagged(reg, kind, NULL);
}
