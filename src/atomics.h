/* The few atomic patterns the library uses, over C11 <stdatomic.h>, each with
 * its memory order chosen and explained once here. Modelled on the kernel's
 * kref and liburcu's urcu_ref. */
#ifndef SHMREG_ATOMICS_H
#define SHMREG_ATOMICS_H

#include <stdatomic.h>
#include <stdbool.h>

typedef atomic_ulong shmreg__refcount;

static inline void shmreg__ref_init(shmreg__refcount *r, unsigned long v)
{
    /* Relaxed: the object is not yet published; publication (the hash-table
     * insert) carries the release ordering. */
    atomic_store_explicit(r, v, memory_order_relaxed);
}

/* Take a reference unless the count already reached zero: an object whose
 * count hit zero is being torn down and must never be resurrected. Acquire on
 * success so the caller sees everything written before the object was
 * published or last handed on. */
static inline bool shmreg__ref_get_unless_zero(shmreg__refcount *r)
{
    unsigned long old = atomic_load_explicit(r, memory_order_relaxed);
    do {
        if (old == 0)
            return false;
    } while (!atomic_compare_exchange_weak_explicit(r, &old, old + 1, memory_order_acquire,
                                                    memory_order_relaxed));
    return true;
}

/* Take another reference when the caller already holds one: the count cannot
 * be zero, and no ordering is needed because no data is handed over. */
static inline void shmreg__ref_get(shmreg__refcount *r)
{
    atomic_fetch_add_explicit(r, 1, memory_order_relaxed);
}

/* Drop a reference; true when it was the last. Release so this holder's
 * accesses to the object happen before the teardown; acquire so the last
 * dropper (the deleter) sees every other holder's accesses. acq_rel on the
 * operation rather than kref's release plus an acquire fence on the last
 * drop: the same single locked instruction on x86, and ThreadSanitizer does
 * not model stand-alone fences. */
static inline bool shmreg__ref_put(shmreg__refcount *r)
{
    return atomic_fetch_sub_explicit(r, 1, memory_order_acq_rel) == 1;
}

/* A racy snapshot for status reporting only. */
static inline unsigned long shmreg__ref_read(shmreg__refcount *r)
{
    return atomic_load_explicit(r, memory_order_relaxed);
}

#endif
