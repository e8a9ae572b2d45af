/* Region lifecycle: creation, references, and the deleter that runs once. */
#include <stddef.h>
#include <string.h>

#include "base/err.h"
#include "base/sys.h"
#include "core/region.h"

#ifdef SHMREG_TSAN
char shmreg__rcu_tsan_token;
#endif

static void region_reclaim(struct shmreg__reclaim_node *n);

shmreg_err shmreg__region_new(struct shmreg__table *t, const struct shmreg__region_args *a,
                              struct shmreg__mapping *m, size_t window_offset, size_t byte_size,
                              struct shmreg_region **out)
{
    /* The tag lives after the name, in the region's own allocation: lookups
     * read it beside the name, so it is freed with it, a grace period after
     * the unlink. Both are at most 255 bytes (checked by register). */
    size_t name_len = strlen(a->name), tag_size = a->tag ? strlen(a->tag) + 1 : 0;
    struct shmreg_region *r = shmreg__calloc(1, sizeof *r + name_len + 1 + tag_size);
    char *key = a->key ? shmreg__strdup(a->key) : NULL;
    if (!r || (a->key && !key)) {
        shmreg__free(r);
        shmreg__free(key);
        return shmreg__fail(SHMREG_ERR_NO_MEMORY, "out of memory registering shared memory region '%s'",
                            a->name);
    }
    memcpy(r->name, a->name, name_len + 1);
    if (a->tag)
        r->tag = memcpy(r->name + name_len + 1, a->tag, tag_size);
    shmreg__entry_init(t, &r->entry, r->name, name_len, r->tag);
    r->key = key;
    r->offset = a->offset;
    r->flags = a->flags;
    r->charged = a->charged;
    r->mapping = m;
    r->win = (struct shmreg__window){
        .backend = m->opened.backend,
        /* NULL for memory with no address here (a remote region). */
        .addr = m->opened.base ? (char *)m->opened.base + (window_offset - m->opened.object_offset) : NULL,
        .byte_size = byte_size,
        .device_id = m->opened.device_id,
        .pinned = m->opened.pinned,
    };
    r->reclaim.run = region_reclaim;
    r->reclaim.bytes = a->charged.mapped_bytes;
    r->table = t;
    /* The registry's reference; the insert under the lock publishes it. */
    shmreg__ref_init(&r->entry.refs, 1);
    atomic_init(&r->registry_ref, true);
    *out = r;
    return SHMREG_OK;
}

void shmreg__region_own_locked(struct shmreg__table *t, struct shmreg_region *r)
{
    /* Hand-off: this region now keeps the table (its lock, hash table and
     * counters) alive until its own deleter has run. */
    shmreg__table_get(t);
    t->regions_alive++;
}

void shmreg__region_discard(struct shmreg_region *r)
{
    shmreg__free(r->key);
    shmreg__free(r);
}

static void region_free_rcu(struct rcu_head *head)
{
    struct shmreg_region *r = caa_container_of(head, struct shmreg_region, rcu);
    SHMREG_TSAN_ACQUIRE();
    SHMREG_TSAN_SUBSCRIBE(r); /* the deleter's hand-off through call_rcu */
    shmreg__free(r);
}

/* Take the name out of the table if it is still there (a DEFER-pending
 * region leaves it on its last release) and leave the mapping, which gives
 * back what the region counted against the limits, or keeps it counting
 * while the mapping waits for its close. Removal is of this entry only, so
 * a region re-registered under the same name is never touched. Returns the
 * mappings to close. */
static struct shmreg__mapping *region_retire(struct shmreg_region *r)
{
    struct shmreg__table *t = r->table;
    shmreg__table_lock(t);
    if (r->entry.linked)
        shmreg__table_unlink_locked(t, &r->entry);
    size_t waiting = shmreg__reclaim_take_waiting(&r->reclaim);
    struct shmreg__mapping *close = shmreg__mapping_leave_locked(t, r->mapping, &r->charged);
    shmreg__quota_give_back_locked(&t->quotas, r->tag, &r->charged);
    /* Bytes handed to the reclaim thread stop waiting where they stop being
     * this region's, in this lock section (so shmreg_registry_stats never
     * sees more waiting than mapped): now, when the charge goes (other
     * regions stay on the mapping, or the cache keeps it); or, when the
     * mapping closes and carries the charge until then, with the close. */
    if (close == r->mapping)
        close->reclaim_waiting_bytes = waiting;
    else
        shmreg__reclaim_bytes_done(&t->reclaim, waiting);
    t->regions_alive--;
    shmreg__table_unlock(t);
    return close;
}

/* The deleter: the count is dead, so no caller holds the region and no
 * lookup can take a new reference. The mapping is closed here, once, unless
 * other regions are on it or the cache keeps it. */
static void region_destroy(struct shmreg_region *r)
{
    struct shmreg__table *t = r->table;
    shmreg__mapping_close_list(t, region_retire(r));
    shmreg__free(r->key);
    r->key = NULL;
    /* Lookups that found this entry before the unlink may still be reading
     * its name and count: free the memory only after a grace period. */
    SHMREG_TSAN_PUBLISH(r);
    urcu_bp_call_rcu(&r->rcu, region_free_rcu);
    shmreg__table_put(t);
}

/* The reclaim thread's half of a hand-off. */
static void region_reclaim(struct shmreg__reclaim_node *n)
{
    region_destroy(caa_container_of(n, struct shmreg_region, reclaim));
}

void shmreg__region_disown(struct shmreg_region *r)
{
    /* Relaxed: the registry's put that follows is the release that hands
     * this store to the last dropper (see shmreg__ref_dec). */
    atomic_store_explicit(&r->registry_ref, false, memory_order_relaxed);
}

/* Whether the registry still holds its own reference to r. Read
 * without the table's lock, so that a last release under background
 * reclaim takes no lock that register or unregister hold: the flag is
 * cleared before the registry's put, and the dropper's decrement, which
 * found no other holder, is acquire (shmreg__ref_dec), so a registry's put
 * that came before it is seen. Relaxed: that decrement carries the order. */
static bool registry_holds(struct shmreg_region *r)
{
    return atomic_load_explicit(&r->registry_ref, memory_order_relaxed);
}

/* The rest of a drop whose decrement found no other holder (old <= 0),
 * inside the drop's read-side section, which it leaves; true when the
 * deleter is the caller's to run. Out of line: the common drop does not
 * carry it. */
static __attribute__((noinline)) bool region_drop_last(struct shmreg_region *r, long old)
{
    const char *past_zero = NULL;
    bool last = false;
    if (old == 0 && registry_holds(r)) {
        shmreg__ref_undo_dec(&r->entry.refs);
        past_zero = "its last reference is the registry's own";
    } else if (old == 0) {
        last = shmreg__ref_kill(&r->entry.refs);
    } else if (old == SHMREG__REF_NOREF) {
        shmreg__ref_undo_dec(&r->entry.refs);
    }
    shmreg__rcu_read_unlock();
    if (past_zero)
        shmreg__table_log(r->table, SHMREG_LOG_ERROR,
                          "shmreg_release of shared memory region '%s' past zero (%s): a reference released "
                          "twice, or never acquired; ignored, the region stays mapped",
                          r->name, past_zero);
    return last;
}

/* Drop one reference; true when it was the last (the deleter is ours). */
static bool region_drop(struct shmreg_region *r)
{
    /* Between this drop's decrement and its swap to DEAD, a lookup may
     * revive the count, and the reviver's own last drop may then run the
     * deleter, which frees the region after a grace period. The read-side
     * section, entered before the decrement, holds that free back until
     * this drop's swap is done. (ThreadSanitizer found the use-after-free
     * without it.)
     *
     * A release past zero (a caller releasing a reference it does
     * not hold) is caught in two cases, and dropped without effect:
     *  - the count had no reference left (NOREF or DEAD): the decrement is
     *    given back, unless the count is dead, where it changes nothing.
     *    Not logged: the region is being torn down, and its table (the log
     *    sink) may already be freed;
     *  - it would drop the last reference while the registry still holds
     *    one: that reference is the registry's, which only unregister and
     *    destroy drop, and only after disowning the region. The decrement
     *    is given back, and the region stays mapped.
     * Any other extra release takes another holder's reference and cannot
     * be told from a right one (docs/security.md). The common drop (others
     * still hold it) is the one fetch_sub it was. */
    shmreg__rcu_read_lock();
    long old = shmreg__ref_dec(&r->entry.refs);
    if (old > 0) {
        shmreg__rcu_read_unlock();
        return false;
    }
    return region_drop_last(r, old);
}

void shmreg__region_put(struct shmreg_region *r)
{
    if (region_drop(r))
        region_destroy(r);
}

void shmreg__region_release(struct shmreg_region *r)
{
    /* Hand-off: the dead region, and the duty to tear it down, go to the
     * reclaim thread; without one, the deleter runs here. */
    if (region_drop(r) && !shmreg__reclaim_hand_off(&r->table->reclaim, &r->reclaim))
        region_destroy(r);
}

void shmreg__region_put_batch(struct shmreg_region *batch)
{
    while (batch) {
        struct shmreg_region *next = batch->next_batch;
        shmreg__region_put(batch);
        batch = next;
    }
}

unsigned long shmreg__region_in_use(struct shmreg_region *r)
{
    unsigned long refs = shmreg__ref_count(&r->entry.refs);
    bool registry_holds = r->entry.linked && !r->pending;
    if (registry_holds)
        return refs > 0 ? refs - 1 : 0;
    return refs;
}

bool shmreg__region_matches(const struct shmreg_region *r, shmreg_kind kind, const char *tag)
{
    bool kind_ok = kind == SHMREG_KIND_ANY || shmreg__region_kind(r) == kind;
    bool tag_ok = !tag || (r->tag && strcmp(r->tag, tag) == 0);
    return kind_ok && tag_ok;
}

/* ---- the public reference API */

void shmreg_release(shmreg_region *ref)
{
    if (ref)
        shmreg__region_release(ref);
}

shmreg_region *shmreg_retain(shmreg_region *ref)
{
    /* Hand-off: the caller holds ref, so the count is not zero; the new
     * reference belongs to whoever the caller gives it to. */
    if (ref)
        shmreg__ref_get(&ref->entry.refs);
    return ref;
}
