/* Quotas per owner tag: accounts, limits, take and give back (quota.h). */
#include <stdio.h>
#include <string.h>

#include "base/err.h"
#include "base/sys.h"
#include "core/quota.h"

struct shmreg__tag_account {
    struct shmreg__tag_account *next;
    struct shmreg__usage used;
    struct shmreg__usage limits; /* when own_limits; else the default share */
    bool own_limits;
    char tag[]; /* immutable */
};

void shmreg__quotas_fini(struct shmreg__quotas *q)
{
    while (q->accounts) {
        struct shmreg__tag_account *a = q->accounts;
        q->accounts = a->next;
        shmreg__free(a);
    }
}

static struct shmreg__tag_account *find(struct shmreg__quotas *q, const char *tag)
{
    for (struct shmreg__tag_account *a = q->accounts; a; a = a->next)
        if (strcmp(a->tag, tag) == 0)
            return a;
    return NULL;
}

static struct shmreg__tag_account *find_or_add(struct shmreg__quotas *q, const char *tag)
{
    struct shmreg__tag_account *a = find(q, tag);
    if (a)
        return a;
    size_t len = strlen(tag);
    if (!(a = shmreg__calloc(1, sizeof *a + len + 1)))
        return NULL;
    memcpy(a->tag, tag, len + 1);
    a->next = q->accounts;
    q->accounts = a;
    return a;
}

/* An account that counts nothing and sets nothing goes, so that a server
 * whose connections each have a tag does not keep one per connection. */
static void drop_if_idle(struct shmreg__quotas *q, struct shmreg__tag_account *gone)
{
    if (gone->own_limits || gone->used.regions || gone->used.mapped_bytes || gone->used.pinned_bytes)
        return;
    for (struct shmreg__tag_account **p = &q->accounts; *p; p = &(*p)->next) {
        if (*p == gone) {
            *p = gone->next;
            shmreg__free(gone);
            return;
        }
    }
}

static struct shmreg__usage limits_of(const struct shmreg__quotas *q, const struct shmreg__tag_account *a)
{
    if (a && a->own_limits)
        return a->limits;
    return (struct shmreg__usage){q->default_regions, q->default_mapped_bytes, q->default_pinned_bytes};
}

static bool passes(size_t used, size_t want, size_t limit)
{
    return limit == 0 || (used <= limit && want <= limit - used);
}

/* The refusal quotes the tag's own usage and limit only: what other tags
 * hold is theirs. */
static shmreg_err refuse(const char *name, const char *what, size_t want, size_t limit, size_t used)
{
    return shmreg__fail(SHMREG_ERR_NO_MEMORY,
                        "cannot register shared memory region '%s': %zu more %s would pass the limit of %zu for "
                        "this owner tag (%zu in use by it)",
                        name, want, what, limit, used);
}

static shmreg_err check(const struct shmreg__usage *used, const struct shmreg__usage *lim, const char *name,
                        const struct shmreg__usage *want)
{
    if (!passes(used->regions, want->regions, lim->regions))
        return shmreg__fail(SHMREG_ERR_NO_MEMORY,
                            "cannot register shared memory region '%s': this owner tag holds its limit of %zu regions",
                            name, lim->regions);
    if (!passes(used->mapped_bytes, want->mapped_bytes, lim->mapped_bytes))
        return refuse(name, "mapped bytes", want->mapped_bytes, lim->mapped_bytes, used->mapped_bytes);
    if (!passes(used->pinned_bytes, want->pinned_bytes, lim->pinned_bytes))
        return refuse(name, "pinned bytes", want->pinned_bytes, lim->pinned_bytes, used->pinned_bytes);
    return SHMREG_OK;
}

shmreg_err shmreg__quota_check_locked(struct shmreg__quotas *q, const char *tag, const char *name,
                                      const struct shmreg__usage *want)
{
    if (!tag)
        return SHMREG_OK;
    const struct shmreg__usage none = {0, 0, 0};
    struct shmreg__tag_account *a = find(q, tag);
    struct shmreg__usage lim = limits_of(q, a);
    return check(a ? &a->used : &none, &lim, name, want);
}

shmreg_err shmreg__quota_take_locked(struct shmreg__quotas *q, const char *tag, const char *name,
                                     const struct shmreg__usage *want)
{
    shmreg_err err = shmreg__quota_check_locked(q, tag, name, want);
    if (err != SHMREG_OK || !tag)
        return err;
    struct shmreg__tag_account *a = find_or_add(q, tag);
    if (!a)
        return shmreg__fail(SHMREG_ERR_NO_MEMORY, "out of memory registering shared memory region '%s'", name);
    a->used.regions += want->regions;
    a->used.mapped_bytes += want->mapped_bytes;
    a->used.pinned_bytes += want->pinned_bytes;
    return SHMREG_OK;
}

void shmreg__quota_give_back_locked(struct shmreg__quotas *q, const char *tag, const struct shmreg__usage *u)
{
    if (!tag)
        return;
    struct shmreg__tag_account *a = find(q, tag);
    if (!a) /* cannot happen: what was taken has an account until given back */
        return;
    a->used.regions -= u->regions;
    a->used.mapped_bytes -= u->mapped_bytes;
    a->used.pinned_bytes -= u->pinned_bytes;
    drop_if_idle(q, a);
}

bool shmreg__quota_pin_fits_locked(struct shmreg__quotas *q, const char *tag, size_t bytes)
{
    if (!tag)
        return true;
    struct shmreg__tag_account *a = find(q, tag);
    struct shmreg__usage lim = limits_of(q, a);
    return passes(a ? a->used.pinned_bytes : 0, bytes, lim.pinned_bytes);
}

shmreg_err shmreg__quota_set_locked(struct shmreg__quotas *q, const char *tag, const shmreg_quota *lim)
{
    struct shmreg__tag_account *a = lim ? find_or_add(q, tag) : find(q, tag);
    if (lim && !a)
        return shmreg__fail(SHMREG_ERR_NO_MEMORY, "out of memory setting the quota of an owner tag");
    if (!a)
        return SHMREG_OK;
    a->own_limits = lim != NULL;
    if (lim)
        a->limits = (struct shmreg__usage){lim->max_regions, lim->max_mapped_bytes, lim->max_pinned_bytes};
    drop_if_idle(q, a);
    return SHMREG_OK;
}

void shmreg__quota_stats_locked(struct shmreg__quotas *q, const char *tag, shmreg_tag_stats *out)
{
    struct shmreg__tag_account *a = find(q, tag);
    struct shmreg__usage lim = limits_of(q, a);
    memset(out, 0, sizeof *out);
    if (a) {
        out->regions = a->used.regions;
        out->mapped_bytes = a->used.mapped_bytes;
        out->pinned_bytes = a->used.pinned_bytes;
    }
    out->max_regions = lim.regions;
    out->max_mapped_bytes = lim.mapped_bytes;
    out->max_pinned_bytes = lim.pinned_bytes;
}

/* ------------------------------------------------------------- the API */

void shmreg_quota_init(shmreg_quota *q)
{
    if (q)
        memset(q, 0, sizeof *q);
}
