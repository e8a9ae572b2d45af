/* Mutex + condition variable queue; plain and sufficient for a few dozen
 * threads that each spend tens of microseconds or more per item. With a
 * spin set (worker_pool_config.spin_ns), a thread that has just finished an
 * item polls the queue's length for that long before it sleeps, and a
 * submitter that sees such a thread wakes nobody: on a virtual machine a
 * sleeping thread's wake-up costs tens of microseconds, which a request
 * arriving alone pays in full. */
#include "common/worker_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "common/clock.h"

typedef struct node {
    struct node *next;
    void *item;
    uint64_t queued_ns; /* when it was submitted (CLOCK_MONOTONIC) */
} node;

/* worker_pool_queue_totals; relaxed: counters, nothing is published
 * through them. */
static _Atomic uint64_t queue_items, queue_wait_ns;

struct worker_pool {
    pthread_mutex_t lock;
    pthread_cond_t ready;
    node *head, *tail;
    int stopping;
    worker_fn run;
    void *ctx;
    unsigned working;     /* threads running an item, less those waiting */
    unsigned max_working; /* cfg->working of worker_pool_start */
    uint64_t spin_ns;     /* cfg->spin_ns; 0 = sleep at once */
    unsigned n_threads;
    unsigned spinners;       /* threads polling `queued` instead of sleeping */
    _Atomic unsigned queued; /* items in the list; written under lock */
    pthread_t threads[];
};

/* The pool whose item this thread runs, for worker_pool_wait_*. */
static _Thread_local worker_pool *current;

/* In a polling loop: let the core's other hyperthread run. */
static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Under p->lock: wake a thread if an item is queued that no polling
 * thread will take, and one may start. */
static void hand_on(worker_pool *p)
{
    if (p->head && p->working < p->max_working &&
        atomic_load_explicit(&p->queued, memory_order_relaxed) > p->spinners)
        pthread_cond_signal(&p->ready);
}

/* Under p->lock, which it drops while it polls: a thread that finished an
 * item looks for the next one for up to spin_ns before it sleeps. One
 * thread of a pool polls at a time: one is all a lone request needs, and
 * under load, when the queue empties often, more would only burn cores. */
static void poll_for_work(worker_pool *p)
{
    uint64_t spin = p->spin_ns;
    if (!spin || p->stopping || p->spinners)
        return;
    p->spinners++;
    pthread_mutex_unlock(&p->lock);
    uint64_t until = monotonic_ns() + spin;
    while (!atomic_load_explicit(&p->queued, memory_order_relaxed) &&
           !__atomic_load_n(&p->stopping, __ATOMIC_RELAXED) && monotonic_ns() < until)
        cpu_relax();
    pthread_mutex_lock(&p->lock);
    p->spinners--;
}

static void *worker_main(void *arg)
{
    worker_pool *p = arg;
    current = p;
    pthread_mutex_lock(&p->lock);
    int finished_one = 0;
    for (;;) {
        if (finished_one && !p->head)
            poll_for_work(p);
        finished_one = 0;
        while ((!p->head && !p->stopping) || (p->head && p->working >= p->max_working))
            pthread_cond_wait(&p->ready, &p->lock);
        node *n = p->head;
        if (!n)
            break; /* stopping and drained */
        p->head = n->next;
        if (!p->head)
            p->tail = NULL;
        atomic_fetch_sub_explicit(&p->queued, 1, memory_order_relaxed);
        p->working++;
        pthread_mutex_unlock(&p->lock);
        atomic_fetch_add_explicit(&queue_items, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&queue_wait_ns, monotonic_ns() - n->queued_ns, memory_order_relaxed);
        p->run(p->ctx, n->item);
        free(n);
        pthread_mutex_lock(&p->lock);
        p->working--; /* this thread takes the next item itself */
        finished_one = 1;
    }
    pthread_cond_broadcast(&p->ready); /* the others may be waiting to stop too */
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

worker_pool *worker_pool_start(const worker_pool_config *cfg, worker_fn run, void *ctx)
{
    unsigned n = cfg->working, total = n + cfg->spare;
    worker_pool *p = calloc(1, sizeof *p + total * sizeof(pthread_t));
    if (!p)
        return NULL;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->ready, NULL);
    p->run = run;
    p->ctx = ctx;
    p->max_working = n;
    p->spin_ns = cfg->spin_ns;
    for (; p->n_threads < total; p->n_threads++) {
        if (pthread_create(&p->threads[p->n_threads], NULL, worker_main, p) != 0) {
            worker_pool_stop(p, NULL);
            return NULL;
        }
    }
    return p;
}

int worker_pool_submit(worker_pool *p, void *item)
{
    node *n = malloc(sizeof *n);
    if (!n)
        return -1;
    *n = (node){.item = item, .queued_ns = monotonic_ns()};
    pthread_mutex_lock(&p->lock);
    int stopping = p->stopping;
    if (!stopping) {
        if (p->tail)
            p->tail->next = n;
        else
            p->head = n;
        p->tail = n;
        atomic_fetch_add_explicit(&p->queued, 1, memory_order_relaxed);
        hand_on(p);
    }
    pthread_mutex_unlock(&p->lock);
    if (stopping)
        free(n);
    return stopping ? -1 : 0;
}

void worker_pool_wait_begin(void)
{
    worker_pool *p = current;
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->working--;
    hand_on(p);
    pthread_mutex_unlock(&p->lock);
}

void worker_pool_wait_end(void)
{
    worker_pool *p = current;
    if (!p)
        return;
    /* Back at work at once, even past n: the item it holds is started, and
     * the count falls back as items end. */
    pthread_mutex_lock(&p->lock);
    p->working++;
    pthread_mutex_unlock(&p->lock);
}

void worker_pool_queue_totals(uint64_t *items, uint64_t *wait_ns)
{
    *items = atomic_load_explicit(&queue_items, memory_order_relaxed);
    *wait_ns = atomic_load_explicit(&queue_wait_ns, memory_order_relaxed);
}

void worker_pool_stop(worker_pool *p, worker_fn cancel)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    __atomic_store_n(&p->stopping, 1, __ATOMIC_RELAXED); /* polling threads read it unlocked */
    node *queued = cancel ? p->head : NULL;
    if (cancel) {
        p->head = p->tail = NULL; /* the workers see an empty queue and exit */
        atomic_store_explicit(&p->queued, 0, memory_order_relaxed);
    }
    pthread_cond_broadcast(&p->ready);
    pthread_mutex_unlock(&p->lock);
    while (queued) {
        node *next = queued->next;
        cancel(p->ctx, queued->item);
        free(queued);
        queued = next;
    }
    for (unsigned i = 0; i < p->n_threads; i++)
        pthread_join(p->threads[i], NULL);
    pthread_cond_destroy(&p->ready);
    pthread_mutex_destroy(&p->lock);
    free(p);
}
