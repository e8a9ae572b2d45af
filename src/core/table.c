/* The table of names that outlives the registry handle: hash table, front,
 * lock, usage and limits, log sink (see table.h). */
#include <stdarg.h>
#include <stdio.h>
#include <sys/random.h>
#include <time.h>

#include "base/err.h"
#include "base/sys.h"
#include "core/table.h"

static uint64_t random_seed(void)
{
    uint64_t seed;
    if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) == (ssize_t)sizeof seed)
        return seed;
    /* No entropy yet (early boot): still differ per table and run. */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull ^ (uint64_t)(uintptr_t)&seed;
}

shmreg_err shmreg__table_new(const struct shmreg__table_config *cfg, struct shmreg__table **out)
{
    struct shmreg__table *t = shmreg__calloc(1, sizeof *t);
    if (!t)
        return shmreg__fail(SHMREG_ERR_NO_MEMORY, "out of memory creating a registry");
    t->lfht = cds_lfht_new_flavor(64, 64, 0, CDS_LFHT_AUTO_RESIZE | CDS_LFHT_ACCOUNTING, &urcu_bp_flavor,
                                  NULL);
    if (!t->lfht) {
        shmreg__free(t);
        return shmreg__fail(SHMREG_ERR_NO_MEMORY, "out of memory creating the registry's hash table");
    }
    pthread_mutex_init(&t->lock, NULL);
    for (size_t i = 0; i < SHMREG__FRONT_SLOTS; i++)
        atomic_init(&t->front[i], NULL);
    shmreg__ref_init(&t->refs, 1); /* the handle's reference */
    t->hash_seed = random_seed();
    t->limits = cfg->limits;
    t->quotas.default_regions = cfg->tag_limits.regions;
    t->quotas.default_mapped_bytes = cfg->tag_limits.mapped_bytes;
    t->quotas.default_pinned_bytes = cfg->tag_limits.pinned_bytes;
    t->cache.limit = cfg->cache_bytes;
    shmreg__reclaim_init(&t->reclaim, cfg->background_reclaim);
    t->log_fn = cfg->log_fn;
    t->log_user = cfg->log_user;
    *out = t;
    return SHMREG_OK;
}

void shmreg__table_get(struct shmreg__table *t)
{
    shmreg__ref_get(&t->refs);
}

/* Every region is gone and the handle was destroyed: no lookup can run, and
 * no mapping is left (the last region's teardown closed or cached its own,
 * and destroy emptied the cache and turned it off). */
static void table_free(void *arg)
{
    struct shmreg__table *t = arg;
    if (cds_lfht_destroy(t->lfht, NULL) != 0)
        shmreg__table_log(t, SHMREG_LOG_ERROR, "registry teardown: hash table not empty");
    shmreg__reclaim_fini(&t->reclaim);
    shmreg__quotas_fini(&t->quotas);
    pthread_mutex_destroy(&t->lock);
    shmreg__free(t);
}

bool shmreg__table_put(struct shmreg__table *t)
{
    if (!shmreg__ref_put(&t->refs))
        return false;
    /* On the reclaim thread itself, the thread frees the table as it ends
     * (table_free, handed to it at start). */
    if (shmreg__reclaim_stop(&t->reclaim))
        table_free(t);
    return true;
}

void shmreg__table_start_reclaim(struct shmreg__table *t)
{
    if (!shmreg__reclaim_wanted(&t->reclaim))
        return;
    /* liburcu starts its call_rcu worker on the first deferred free. Were
     * that on the reclaim thread, the worker would inherit its name, its
     * nice 19 and its blocked signals (Linux threads inherit them): make
     * sure it exists before, started from the application's thread. */
    (void)urcu_bp_get_default_call_rcu_data();
    if (!shmreg__reclaim_start(&t->reclaim, table_free, t))
        shmreg__table_log(t, SHMREG_LOG_WARNING,
                          "could not start the reclaim thread: last releases unmap in the releasing thread");
}

void shmreg__table_lock(struct shmreg__table *t)
{
    pthread_mutex_lock(&t->lock);
    shmreg__rcu_read_lock();
}

void shmreg__table_unlock(struct shmreg__table *t)
{
    shmreg__rcu_read_unlock();
    pthread_mutex_unlock(&t->lock);
}

void shmreg__table_log(struct shmreg__table *t, shmreg_log_level level, const char *fmt, ...)
{
    if (!t->log_fn)
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    t->log_fn(t->log_user, level, msg);
}

void shmreg__entry_init(struct shmreg__table *t, struct shmreg__entry *e, const char *name, size_t len,
                        const char *tag)
{
    e->name = name;
    e->tag = tag;
    e->name_len = len;
    e->hash = shmreg__table_hash(t, name, len);
    e->linked = false;
    cds_lfht_node_init(&e->node);
}

static int match_name(struct cds_lfht_node *node, const void *name)
{
    struct shmreg__entry *e = shmreg__entry_of(node);
    SHMREG_TSAN_SUBSCRIBE(e);
    return strcmp(e->name, (const char *)name) == 0;
}

/* Walk the entries called name (lock or read-side section held). Dead
 * ones are included: callers check. */
#define for_each_named(t, hash, name, iter, e)                                                  \
    for (cds_lfht_lookup((t)->lfht, (hash), match_name, (name), (iter)),                        \
         (e) = shmreg__entry_of(cds_lfht_iter_get_node(iter));                                  \
         (e) != NULL;                                                                           \
         cds_lfht_next_duplicate((t)->lfht, match_name, (name), (iter)),                        \
         (e) = shmreg__entry_of(cds_lfht_iter_get_node(iter)))

struct shmreg__entry *shmreg__table_find_locked(struct shmreg__table *t, const char *name, const char *tag)
{
    struct cds_lfht_iter iter;
    struct shmreg__entry *e;
    for_each_named(t, shmreg__table_hash(t, name, strlen(name)), name, &iter, e)
        if (shmreg__entry_alive(e) && shmreg__entry_tag_is(e, tag))
            return e;
    return NULL;
}

struct shmreg__entry *shmreg__table_find_any_locked(struct shmreg__table *t, const char *name)
{
    struct cds_lfht_iter iter;
    struct shmreg__entry *e;
    for_each_named(t, shmreg__table_hash(t, name, strlen(name)), name, &iter, e)
        if (shmreg__entry_alive(e))
            return e;
    return NULL;
}

struct shmreg__entry *shmreg__table_resolve(struct shmreg__table *t, unsigned long hash, const char *name,
                                            bool *several)
{
    struct cds_lfht_iter iter;
    struct shmreg__entry *e, *only = NULL;
    size_t tagged = 0;
    *several = false;
    for_each_named(t, hash, name, &iter, e) {
        if (!shmreg__entry_alive(e))
            continue;
        if (!e->tag)
            return e;
        only = e;
        tagged++;
    }
    *several = tagged > 1;
    return tagged == 1 ? only : NULL;
}

/* ---- the front
 *
 * Why a second index: an uncontended acquire+release is a few tens of
 * nanoseconds, and a lookup through cds_lfht_lookup (an out-of-line call, a
 * match callback through a function pointer, strcmp) was about a fifth of
 * it. The front is an array that acquire reads inline (table.h): one load,
 * then the entry's own hash, length and name.
 *
 * It is only an accelerator: the hash table stays the authority, and a
 * lookup that misses the front (an empty slot, another name, a dead entry)
 * walks the table. An entry takes its slot at link time if the slot is free
 * or holds a dead entry, and gives it up at unlink; both happen under the
 * lock. So a slot only ever holds an entry that is in the table, or was
 * until a moment ago, and a region's memory is freed a grace period after
 * its unlink: a reader inside a read-side section can always dereference
 * what it loads. The release store publishes the entry's fields (hash,
 * length, name) to the acquire load. */

static _Atomic(struct shmreg__entry *) *front_slot(struct shmreg__table *t, unsigned long hash)
{
    return &t->front[hash & (SHMREG__FRONT_SLOTS - 1)];
}

static void front_claim_locked(struct shmreg__table *t, struct shmreg__entry *e)
{
    _Atomic(struct shmreg__entry *) *slot = front_slot(t, e->hash);
    struct shmreg__entry *cur = atomic_load_explicit(slot, memory_order_relaxed);
    if (!cur || !shmreg__entry_alive(cur))
        atomic_store_explicit(slot, e, memory_order_release);
}

static void front_leave_locked(struct shmreg__table *t, struct shmreg__entry *e)
{
    _Atomic(struct shmreg__entry *) *slot = front_slot(t, e->hash);
    if (atomic_load_explicit(slot, memory_order_relaxed) == e)
        atomic_store_explicit(slot, NULL, memory_order_relaxed);
}

void shmreg__table_link_locked(struct shmreg__table *t, struct shmreg__entry *e)
{
    e->linked = true;
    t->linked++;
    SHMREG_TSAN_PUBLISH(e);
    cds_lfht_add(t->lfht, e->hash, &e->node);
    front_claim_locked(t, e);
}

void shmreg__table_unlink_locked(struct shmreg__table *t, struct shmreg__entry *e)
{
    front_leave_locked(t, e);
    cds_lfht_del(t->lfht, &e->node);
    e->linked = false;
    t->linked--;
}

/* Entries of one name: one per tag, and dead ones waiting to be unlinked,
 * which are skipped because their count is dead. */
struct shmreg__entry *shmreg__table_acquire_slow(struct shmreg__table *t, unsigned long hash, const char *name,
                                                 const char *tag)
{
    struct cds_lfht_iter iter;
    struct shmreg__entry *e;
    if (!tag) {
        bool several;
        e = shmreg__table_resolve(t, hash, name, &several);
        return e && shmreg__ref_get_unless_dead(&e->refs) ? e : NULL;
    }
    for_each_named(t, hash, name, &iter, e)
        if (shmreg__entry_tag_is(e, tag) && shmreg__ref_get_unless_dead(&e->refs))
            return e;
    return NULL;
}

/* ---- usage against the limits */

static bool passes(size_t used, size_t want, size_t limit)
{
    return limit == 0 || (used <= limit && want <= limit - used);
}

/* Bytes the reclaim thread has yet to unmap still count: say so, since
 * they free themselves in a moment. */
static shmreg_err over_limit(struct shmreg__table *t, const char *name, const char *tag, const char *what,
                             size_t want, size_t limit, size_t used)
{
    if (tag)
        return shmreg__fail(SHMREG_ERR_NO_MEMORY,
                            "cannot register shared memory region '%s': %zu more %s would pass this registry's "
                            "limit of %zu for all owners together",
                            name, want, what, limit);
    size_t waiting = atomic_load_explicit(&t->reclaim.waiting_bytes, memory_order_relaxed);
    char why[96] = "";
    if (waiting > 0)
        snprintf(why, sizeof why, ", %zu bytes waiting for reclaim", waiting);
    return shmreg__fail(SHMREG_ERR_NO_MEMORY,
                        "cannot register shared memory region '%s': %zu more %s would pass this registry's "
                        "limit of %zu (%zu in use%s)",
                        name, want, what, limit, used, why);
}

shmreg_err shmreg__usage_take_locked(struct shmreg__table *t, const char *name, const char *tag,
                                     const struct shmreg__usage *want)
{
    const struct shmreg__usage *used = &t->usage, *lim = &t->limits;
    if (!passes(used->regions, want->regions, lim->regions))
        return shmreg__fail(SHMREG_ERR_NO_MEMORY,
                            "cannot register shared memory region '%s': this registry holds its limit of %zu regions",
                            name, lim->regions);
    if (!passes(used->mapped_bytes, want->mapped_bytes, lim->mapped_bytes))
        return over_limit(t, name, tag, "mapped bytes", want->mapped_bytes, lim->mapped_bytes, used->mapped_bytes);
    if (!passes(used->pinned_bytes, want->pinned_bytes, lim->pinned_bytes))
        return over_limit(t, name, tag, "pinned bytes", want->pinned_bytes, lim->pinned_bytes, used->pinned_bytes);
    t->usage.regions += want->regions;
    t->usage.mapped_bytes += want->mapped_bytes;
    t->usage.pinned_bytes += want->pinned_bytes;
    return SHMREG_OK;
}

size_t shmreg__usage_pin_budget(const struct shmreg__table *t)
{
    return t->limits.pinned_bytes ? t->limits.pinned_bytes : SHMREG_AUTO_PIN_BUDGET;
}

bool shmreg__usage_pin_fits_budget_locked(const struct shmreg__table *t, size_t bytes)
{
    size_t budget = shmreg__usage_pin_budget(t);
    return bytes <= budget && t->usage.pinned_bytes <= budget - bytes;
}

shmreg_err shmreg__usage_refuse_pin_locked(const struct shmreg__table *t, const char *name, const char *tag,
                                           size_t bytes)
{
    size_t budget = shmreg__usage_pin_budget(t);
    /* The registry's pinned bytes are every owner's: not for a tag's ears. */
    char pinned[48] = "";
    if (!tag)
        snprintf(pinned, sizeof pinned, "; %zu pinned", t->usage.pinned_bytes);
    return shmreg__fail(SHMREG_ERR_NO_MEMORY,
                        "cannot pin shared memory region '%s': its window has pages the client never populated, "
                        "which pinning would allocate on the server, and %zu more pinned bytes would pass the pin "
                        "budget, a limit of %zu (%s%s). Write every page first, raise max_pinned_bytes, "
                        "or register without SHMREG_PIN",
                        name, bytes, budget, t->limits.pinned_bytes ? "max_pinned_bytes" : "SHMREG_AUTO_PIN_BUDGET",
                        pinned);
}

void shmreg__usage_give_back_locked(struct shmreg__table *t, const struct shmreg__usage *u)
{
    t->usage.regions -= u->regions;
    t->usage.mapped_bytes -= u->mapped_bytes;
    t->usage.pinned_bytes -= u->pinned_bytes;
}
