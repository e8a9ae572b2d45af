/* Background reclaim: the thread that unmaps what shmreg_release let go.
 *
 * Under SHMREG_RECLAIM_BACKGROUND a last release must not pay for munmap,
 * unpinning or a CUDA close (milliseconds for a large pinned region), nor
 * wait for a lock that register or unregister hold. So it only pushes the
 * dead object on a lock-free stack; the thread, polling while hand-offs
 * come and asleep after a second without (then the hand-off wakes it with
 * one futex call), runs the object's deleter at the lowest priority.
 *
 * The queue knows nothing of what it reclaims: a node carries the function
 * that tears its object down and the bytes that wait meanwhile. It lives in
 * the table (table.h), because it must outlive the registry handle for as
 * long as regions do. Who joins the thread: whoever frees the table. That is
 * shmreg_registry_destroy when no caller holds a reference at that point;
 * otherwise the last region's teardown, which runs on the reclaim thread
 * itself, so the thread detaches, frees the table and ends. */
#ifndef SHMREG_RECLAIM_H
#define SHMREG_RECLAIM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

struct shmreg__reclaim_node {
    struct shmreg__reclaim_node *next;
    /* The deleter's slow half; runs once, on the reclaim thread. */
    void (*run)(struct shmreg__reclaim_node *n);
    size_t bytes; /* what waits, for shmreg_stats.reclaim_waiting_bytes */
    /* bytes while they count in waiting_bytes: set by the hand-off, taken
     * by the teardown (shmreg__reclaim_take_waiting). */
    size_t waiting_bytes;
};

enum shmreg__reclaim_state {
    SHMREG__RECLAIM_OFF,     /* INLINE, or not started yet */
    SHMREG__RECLAIM_RUNNING, /* the thread takes hand-offs */
    SHMREG__RECLAIM_FAILED   /* it could not be started: deleters run inline */
};

struct shmreg__reclaim {
    bool background; /* the configuration; immutable */
    /* Hand-offs not yet taken, newest first (a Treiber stack: the thread
     * takes the whole stack at once, so no ABA). */
    _Atomic(struct shmreg__reclaim_node *) head;
    atomic_uint wake;     /* futex word, bumped by every hand-off */
    atomic_int sleeping;  /* how the thread waits on wake (reclaim.c) */
    atomic_int state;     /* enum shmreg__reclaim_state; written under idle_lock */
    atomic_bool stop;
    atomic_size_t waiting;       /* handed off, not yet torn down */
    atomic_size_t waiting_bytes; /* their bytes */
    /* Guards the start, and lets destroy and trim wait until waiting is 0.
     * Never held across any teardown. */
    pthread_mutex_t idle_lock;
    pthread_cond_t idle;
    pthread_t thread;
    bool orphaned; /* the table's last reference went on the thread itself */
    void (*orphan)(void *); /* what the orphaned thread runs last: frees the table */
    void *orphan_arg;
};

void shmreg__reclaim_init(struct shmreg__reclaim *q, bool background);
void shmreg__reclaim_fini(struct shmreg__reclaim *q);

/* Start the thread if the mode wants it and it is not running. It runs
 * `orphan(arg)` when it finds itself orphaned (see shmreg__reclaim_stop).
 * A failure to start is not an error: deleters then run inline, as under
 * INLINE; it returns false once, the first time, for the caller to log. */
bool shmreg__reclaim_start(struct shmreg__reclaim *q, void (*orphan)(void *), void *arg);

/* Whether the mode wants the thread and it was never started. */
bool shmreg__reclaim_wanted(struct shmreg__reclaim *q);

/* Hand n to the thread: no lock, no system call unless the thread fell
 * asleep after a second without work (then one futex wake). False when there is no thread to take it: the
 * caller runs the deleter itself. */
bool shmreg__reclaim_hand_off(struct shmreg__reclaim *q, struct shmreg__reclaim_node *n);

/* The teardown's half of the byte count: n's bytes stop waiting. The
 * teardown calls this under the lock that guards the counters its bytes
 * leave (the table's), in the same section, so that a snapshot under that
 * lock never counts bytes as waiting that are no longer mapped. take
 * returns what n still has waiting (0 when n was never handed off) and
 * clears it; done subtracts it. */
size_t shmreg__reclaim_take_waiting(struct shmreg__reclaim_node *n);
void shmreg__reclaim_bytes_done(struct shmreg__reclaim *q, size_t bytes);

/* Wait until everything handed off so far is torn down. Never on the
 * reclaim thread (a log callback must not call into the registry). */
void shmreg__reclaim_wait_idle(struct shmreg__reclaim *q);

/* Whether anything handed off waits for its teardown. */
bool shmreg__reclaim_busy(struct shmreg__reclaim *q);

/* As shmreg__reclaim_wait_idle, for at most ms milliseconds. */
void shmreg__reclaim_wait_idle_for(struct shmreg__reclaim *q, unsigned ms);

/* The table is being freed: stop and join the thread, and return true; on
 * the reclaim thread itself, detach it, mark it orphaned (it frees the
 * table when the current teardown returns) and return false. */
bool shmreg__reclaim_stop(struct shmreg__reclaim *q);

#endif
