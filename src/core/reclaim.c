/* The reclaim thread and its queue (see reclaim.h). */
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/reclaim.h"

/* How the thread waits for work. While hand-offs keep coming it polls the
 * stack every POLL_MS, so that a release makes no system call at all (a
 * futex wake costs 10-40 us on a virtual machine, and the scheduler may
 * even run the woken thread's munmap on the waker's CPU first). After
 * DEEP_AFTER_POLLS empty polls it sleeps until woken, and the next hand-off
 * pays one futex wake. */
#define POLL_MS 2
#define DEEP_AFTER_POLLS 500

enum { AWAKE, POLLING, DEEP };

/* Private futexes: the word is never shared with another process. */
static void futex_wait(atomic_uint *word, unsigned expected, const struct timespec *timeout)
{
    (void)syscall(SYS_futex, (unsigned *)word, FUTEX_WAIT_PRIVATE, expected, timeout, NULL, 0);
}

static void futex_wake(atomic_uint *word)
{
    (void)syscall(SYS_futex, (unsigned *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

void shmreg__reclaim_init(struct shmreg__reclaim *q, bool background)
{
    q->background = background;
    atomic_init(&q->head, NULL);
    atomic_init(&q->wake, 0);
    atomic_init(&q->sleeping, AWAKE);
    atomic_init(&q->state, SHMREG__RECLAIM_OFF);
    atomic_init(&q->stop, false);
    atomic_init(&q->waiting, 0);
    atomic_init(&q->waiting_bytes, 0);
    pthread_mutex_init(&q->idle_lock, NULL);
    pthread_cond_init(&q->idle, NULL);
    q->orphaned = false;
}

void shmreg__reclaim_fini(struct shmreg__reclaim *q)
{
    pthread_cond_destroy(&q->idle);
    pthread_mutex_destroy(&q->idle_lock);
}

/* Seq_cst on the wake word and the sleeping flag, on both sides: the
 * hand-off bumps wake then reads sleeping, the thread sets sleeping then
 * reads wake (and the stack). In the single order of those four, either the
 * hand-off sees the thread sleeping and wakes it, or the thread sees the
 * bump, and with it the push that came before, and does not sleep. */
bool shmreg__reclaim_hand_off(struct shmreg__reclaim *q, struct shmreg__reclaim_node *n)
{
    /* Acquire: pairs with the release store of RUNNING, after which the
     * thread is there to take what is pushed. */
    if (atomic_load_explicit(&q->state, memory_order_acquire) != SHMREG__RECLAIM_RUNNING)
        return false;
    atomic_fetch_add_explicit(&q->waiting, 1, memory_order_relaxed);
    /* Relaxed: the bytes are still mapped (the region keeps its charge until
     * its teardown), so a snapshot that does not see them yet is right too;
     * the push below orders this before the teardown's subtraction. */
    n->waiting_bytes = n->bytes;
    atomic_fetch_add_explicit(&q->waiting_bytes, n->bytes, memory_order_relaxed);
    struct shmreg__reclaim_node *old = atomic_load_explicit(&q->head, memory_order_relaxed);
    do
        n->next = old;
    /* Release: the thread's exchange acquires the node and everything the
     * releaser did before (the dead count's own ordering covers the other
     * holders). */
    while (!atomic_compare_exchange_weak_explicit(&q->head, &old, n, memory_order_release,
                                                  memory_order_relaxed));
    atomic_fetch_add(&q->wake, 1);
    if (atomic_load(&q->sleeping) == DEEP)
        futex_wake(&q->wake);
    return true;
}

size_t shmreg__reclaim_take_waiting(struct shmreg__reclaim_node *n)
{
    size_t bytes = n->waiting_bytes;
    n->waiting_bytes = 0;
    return bytes;
}

void shmreg__reclaim_bytes_done(struct shmreg__reclaim *q, size_t bytes)
{
    /* Relaxed: the caller's lock orders it against the snapshots. */
    if (bytes > 0)
        atomic_fetch_sub_explicit(&q->waiting_bytes, bytes, memory_order_relaxed);
}

/* Wake the thread whatever it does (the slow paths that wait for it). */
static void kick(struct shmreg__reclaim *q)
{
    atomic_fetch_add(&q->wake, 1);
    futex_wake(&q->wake);
}

/* Tear down one batch, oldest first; false when the thread is orphaned. */
static bool run_batch(struct shmreg__reclaim *q, struct shmreg__reclaim_node *batch)
{
    struct shmreg__reclaim_node *fifo = NULL;
    while (batch) {
        struct shmreg__reclaim_node *next = batch->next;
        batch->next = fifo;
        fifo = batch;
        batch = next;
    }
    while (fifo) {
        struct shmreg__reclaim_node *next = fifo->next;
        /* The teardown takes the bytes off waiting_bytes itself, under its
         * lock (shmreg__reclaim_take_waiting). */
        fifo->run(fifo); /* fifo may be freed from here on */
        /* Release: a waiter that reads 0 sees the teardown done. */
        if (atomic_fetch_sub_explicit(&q->waiting, 1, memory_order_release) == 1) {
            pthread_mutex_lock(&q->idle_lock);
            pthread_cond_broadcast(&q->idle);
            pthread_mutex_unlock(&q->idle_lock);
        }
        /* Only the last region's teardown can orphan the thread, so nothing
         * is left in the batch or the stack. */
        if (q->orphaned)
            return false;
        fifo = next;
    }
    return true;
}

static void *reclaim_main(void *p)
{
    struct shmreg__reclaim *q = p;
    /* Background work: the lowest priority a thread can set for itself, so
     * that its munmap yields to the server's request threads (per thread on
     * Linux). Not SCHED_IDLE: under full load it must still progress, since
     * registrations may wait for it. */
    (void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19);
    const struct timespec poll = {0, POLL_MS * 1000000L};
    unsigned empty_polls = 0;
    for (;;) {
        struct shmreg__reclaim_node *batch = atomic_exchange_explicit(&q->head, NULL, memory_order_acquire);
        if (batch) {
            if (!run_batch(q, batch)) {
                q->orphan(q->orphan_arg); /* frees q */
                return NULL;
            }
            empty_polls = 0;
            continue;
        }
        if (atomic_load_explicit(&q->stop, memory_order_acquire))
            return NULL;
        bool deep = empty_polls >= DEEP_AFTER_POLLS;
        atomic_store(&q->sleeping, deep ? DEEP : POLLING);
        unsigned seen = atomic_load(&q->wake);
        if (atomic_load(&q->head) == NULL && !atomic_load(&q->stop))
            futex_wait(&q->wake, seen, deep ? NULL : &poll);
        atomic_store(&q->sleeping, AWAKE);
        empty_polls += !deep;
    }
}

bool shmreg__reclaim_wanted(struct shmreg__reclaim *q)
{
    return q->background && atomic_load_explicit(&q->state, memory_order_acquire) == SHMREG__RECLAIM_OFF;
}

bool shmreg__reclaim_start(struct shmreg__reclaim *q, void (*orphan)(void *), void *arg)
{
    if (!q->background || atomic_load_explicit(&q->state, memory_order_acquire) != SHMREG__RECLAIM_OFF)
        return true;
    bool started = true;
    pthread_mutex_lock(&q->idle_lock);
    if (atomic_load_explicit(&q->state, memory_order_relaxed) == SHMREG__RECLAIM_OFF) {
        q->orphan = orphan;
        q->orphan_arg = arg;
        /* The thread takes no signal meant for the server's own threads. */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        started = pthread_create(&q->thread, NULL, reclaim_main, q) == 0;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (started)
            pthread_setname_np(q->thread, "shmreg-reclaim");
        /* Release: a hand-off that reads RUNNING finds the thread's fields. */
        atomic_store_explicit(&q->state, started ? SHMREG__RECLAIM_RUNNING : SHMREG__RECLAIM_FAILED,
                              memory_order_release);
    }
    pthread_mutex_unlock(&q->idle_lock);
    return started;
}

void shmreg__reclaim_wait_idle(struct shmreg__reclaim *q)
{
    /* Acquire: pairs with the thread's release decrement, so the caller sees
     * the teardowns done. */
    if (atomic_load_explicit(&q->waiting, memory_order_acquire) == 0)
        return;
    kick(q); /* a polling thread would otherwise finish its nap first */
    pthread_mutex_lock(&q->idle_lock);
    while (atomic_load_explicit(&q->waiting, memory_order_acquire) != 0)
        pthread_cond_wait(&q->idle, &q->idle_lock);
    pthread_mutex_unlock(&q->idle_lock);
}

bool shmreg__reclaim_busy(struct shmreg__reclaim *q)
{
    return atomic_load_explicit(&q->waiting, memory_order_acquire) != 0;
}

void shmreg__reclaim_wait_idle_for(struct shmreg__reclaim *q, unsigned ms)
{
    if (!shmreg__reclaim_busy(q))
        return;
    kick(q);
    /* The condition variable's clock is the default, CLOCK_REALTIME. */
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += ms / 1000;
    deadline.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&q->idle_lock);
    while (shmreg__reclaim_busy(q) && pthread_cond_timedwait(&q->idle, &q->idle_lock, &deadline) == 0)
        ;
    pthread_mutex_unlock(&q->idle_lock);
}

bool shmreg__reclaim_stop(struct shmreg__reclaim *q)
{
    if (atomic_load_explicit(&q->state, memory_order_acquire) != SHMREG__RECLAIM_RUNNING)
        return true;
    if (pthread_equal(pthread_self(), q->thread)) {
        pthread_detach(q->thread);
        q->orphaned = true;
        return false;
    }
    atomic_store_explicit(&q->stop, true, memory_order_release);
    kick(q);
    pthread_join(q->thread, NULL);
    return true;
}
