/* Read-copy-update through liburcu's bulletproof flavour, which registers
 * reader threads by itself: right for a library whose callers' threads it
 * never sees. Lookups run inside a read-side section and share no lock; a
 * removed region's memory is freed only after a grace period, when no lookup
 * can still be looking at it.
 *
 * ThreadSanitizer cannot see liburcu's synchronisation (inline assembly in an
 * uninstrumented library), so under TSan two edges are annotated by hand:
 *  - publication: inserting a node releases it, and a lookup that matches the
 *    node acquires it (rcu_assign_pointer / rcu_dereference);
 *  - reclamation: the end of each read-side section releases, and each
 *    deferred free acquires, one token ("every reader finished before the
 *    free").
 * Races elsewhere in libshmreg's code are still reported. */
#ifndef SHMREG_RCU_H
#define SHMREG_RCU_H

#include <urcu/urcu-bp.h>
#include <urcu/rculfhash.h>

#if defined(__SANITIZE_THREAD__)
#define SHMREG_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SHMREG_TSAN 1
#endif
#endif

#ifdef SHMREG_TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
extern char shmreg__rcu_tsan_token;
#define SHMREG_TSAN_RELEASE() __tsan_release(&shmreg__rcu_tsan_token)
#define SHMREG_TSAN_ACQUIRE() __tsan_acquire(&shmreg__rcu_tsan_token)
#define SHMREG_TSAN_PUBLISH(obj) __tsan_release(obj)
#define SHMREG_TSAN_SUBSCRIBE(obj) __tsan_acquire(obj)
#else
#define SHMREG_TSAN_RELEASE() ((void)0)
#define SHMREG_TSAN_ACQUIRE() ((void)0)
#define SHMREG_TSAN_PUBLISH(obj) ((void)(obj))
#define SHMREG_TSAN_SUBSCRIBE(obj) ((void)(obj))
#endif

static inline void shmreg__rcu_read_lock(void)
{
    urcu_bp_read_lock();
}

static inline void shmreg__rcu_read_unlock(void)
{
    SHMREG_TSAN_RELEASE();
    urcu_bp_read_unlock();
}

#endif
