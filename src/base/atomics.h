/* The reference count, over C11 <stdatomic.h>, each memory order chosen and
 * explained once here.
 *
 * Modelled on the kernel's kref for its rules (an object starts with one
 * reference, a count that reached zero is never raised again, the last put
 * runs the deleter once) and on the kernel's rcuref for its encoding, which
 * lets a lookup take a reference with one fetch_add instead of a
 * compare-and-swap loop: under contention on a hot region a CAS loop retries,
 * a fetch_add never does.
 *
 * The stored value is the number of references minus one:
 *
 *      >= 0   that many references plus one: alive
 *        -1   NOREF: the last reference was just dropped; its dropper is about
 *             to mark the object dead, unless a lookup takes a reference
 *             first, which is allowed (see shmreg__ref_get_unless_dead)
 *   near DEAD the deleter was chosen; nothing raises it back above -1
 *
 * DEAD sits 2^62 below zero, so no number of lookups racing a teardown can
 * carry it back to a valid count. */
#ifndef SHMREG_ATOMICS_H
#define SHMREG_ATOMICS_H

#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>

typedef atomic_long shmreg__refcount;

#define SHMREG__REF_NOREF (-1L)
#define SHMREG__REF_DEAD (LONG_MIN / 2)

static inline void shmreg__ref_init(shmreg__refcount *r, long refs)
{
    /* Relaxed: the object is not yet published; publication (the hash-table
     * insert) carries the release ordering. */
    atomic_store_explicit(r, refs - 1, memory_order_relaxed);
}

/* A lookup's reference: fails once the object is dead. Acquire on success, so
 * the caller sees everything written before the object was published or last
 * handed on.
 *
 * Taking a reference at NOREF, between the last put's decrement and its
 * marking the object dead, succeeds and cancels the teardown (that put's
 * compare-and-swap then fails). The lookup found the object still in the
 * table, so this orders as if it had come just before the last put. */
static inline bool shmreg__ref_get_unless_dead(shmreg__refcount *r)
{
    long old = atomic_fetch_add_explicit(r, 1, memory_order_acquire);
    if (old >= SHMREG__REF_NOREF)
        return true;
    /* Dead: undo our increment's drift so racing lookups stay far below 0.
     * Relaxed: the value carries no data, and a dead count is final. */
    atomic_store_explicit(r, SHMREG__REF_DEAD, memory_order_relaxed);
    return false;
}

/* Another reference when the caller already holds one: the object is alive,
 * and no ordering is needed because no data is handed over. */
static inline void shmreg__ref_get(shmreg__refcount *r)
{
    atomic_fetch_add_explicit(r, 1, memory_order_relaxed);
}

/* Drop a reference; true for exactly one caller, the one that must run the
 * deleter. For an object that lookups can revive, call it inside an RCU
 * read-side section: after the decrement to NOREF, a reviver's own put may
 * win the swap and free the object while this one has yet to try its swap. Release so this holder's accesses happen before the teardown; the
 * compare-and-swap to DEAD is acquire, so the deleter sees every other
 * holder's accesses (all changes are read-modify-writes, one release
 * sequence). */
static inline bool shmreg__ref_put(shmreg__refcount *r)
{
    long old = atomic_fetch_sub_explicit(r, 1, memory_order_release);
    if (old != 0)
        return false; /* others still hold it (old > 0) */
    long expected = SHMREG__REF_NOREF;
    return atomic_compare_exchange_strong_explicit(r, &expected, SHMREG__REF_DEAD, memory_order_acq_rel,
                                                   memory_order_relaxed);
}

/* shmreg__ref_put in its two steps, for a put that checks what it drops
 * (region.c: a release past zero, which a
 * caller's double release must not turn into an unmap under others). dec returns the stored value
 * before the decrement: > 0 others still hold it, 0 this was the last
 * reference, < 0 there was none to drop (NOREF or DEAD). Acquire as well as
 * release: a dropper that finds no other holder then reads, without a lock,
 * whether the registry still holds its reference, and must see what the
 * registry wrote before its own drop, which came first (one release
 * sequence). The same one locked instruction as a release-only fetch_sub
 * on x86; TSan checks the order, which it could not through a fence. */
static inline long shmreg__ref_dec(shmreg__refcount *r)
{
    return atomic_fetch_sub_explicit(r, 1, memory_order_acq_rel);
}

/* After a dec that returned 0: whether this caller runs the deleter. */
static inline bool shmreg__ref_kill(shmreg__refcount *r)
{
    long expected = SHMREG__REF_NOREF;
    return atomic_compare_exchange_strong_explicit(r, &expected, SHMREG__REF_DEAD, memory_order_acq_rel,
                                                   memory_order_relaxed);
}

/* Give back a decrement that dropped a reference the caller did not hold.
 * Additions commute with every other change of the count, so whatever
 * lookups and puts ran meanwhile, the count ends where it would have been
 * without the wrong decrement, unless the count died in between (a dead
 * count stays dead). Relaxed: no data is handed over. */
static inline void shmreg__ref_undo_dec(shmreg__refcount *r)
{
    atomic_fetch_add_explicit(r, 1, memory_order_relaxed);
}

/* References held right now (0 once dropped or dead): a racy snapshot, for
 * status reporting and liveness checks under the registry lock. */
static inline unsigned long shmreg__ref_count(shmreg__refcount *r)
{
    long v = atomic_load_explicit(r, memory_order_relaxed);
    return v >= 0 ? (unsigned long)v + 1 : 0;
}

/* Whether the deleter has been chosen: a dead object never comes back. A
 * NOREF object is not dead yet: a lookup may still take it. */
static inline bool shmreg__ref_dead(shmreg__refcount *r)
{
    return atomic_load_explicit(r, memory_order_relaxed) < SHMREG__REF_NOREF;
}

#endif
