/* A fixed set of threads that run queued items in arrival order. Inference
 * runs here, so that a slow model never stalls the HTTP thread that serves
 * status, register and unregister.
 *
 * At most n items run at once, except that an item which waits on something
 * other than the CPU (a GPU run) can say so: between worker_pool_wait_begin
 * and worker_pool_wait_end it does not count, and one of the pool's spare
 * threads may take the next item meanwhile. So n bounds the threads at work,
 * not the requests a GPU can have in flight. */
#ifndef SERVER_WORKER_POOL_H
#define SERVER_WORKER_POOL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct worker_pool worker_pool;
typedef void (*worker_fn)(void *ctx, void *item);

/* How a pool is shaped (its adapter's config says, from the flags). */
typedef struct worker_pool_config {
    unsigned working; /* threads at work at once (--threads) */
    unsigned spare;   /* more that take items only while others wait */
    /* A thread that finished an item polls its queue for up to this long
     * before it sleeps (--spin-us; 0: sleeps at once). Trades CPU at low
     * load for the wake-up a lone request would wait for. */
    uint64_t spin_ns;
} worker_pool_config;

/* cfg->working threads at work calling run(ctx, item) for each submitted
 * item, and cfg->spare threads more that take items only while others wait
 * (working + spare threads in all). NULL on failure. */
worker_pool *worker_pool_start(const worker_pool_config *cfg, worker_fn run, void *ctx);
/* Queue item; -1 when out of memory or stopping (the item is not run). */
int worker_pool_submit(worker_pool *p, void *item);
/* Join the threads and free p. Items still queued go to cancel(ctx, item)
 * on the calling thread, while the workers finish the items they hold; with
 * cancel NULL the workers run them all first. NULL p is a no-op. */
void worker_pool_stop(worker_pool *p, worker_fn cancel);

/* Around a wait that needs no CPU, on a pool's thread: the calling thread
 * stops counting against n until worker_pool_wait_end. Pairs; no-ops on a
 * thread that is not a pool's (the UDS server's, a test's). */
void worker_pool_wait_begin(void);
void worker_pool_wait_end(void);

/* Items every pool of the process has taken from its queue, and the time
 * they waited there, from worker_pool_submit until a thread took them
 * (monotonic nanoseconds). Process-wide rather than per pool: /metrics,
 * served by the HTTP adapter, reports the gRPC pool's queue too. */
void worker_pool_queue_totals(uint64_t *items, uint64_t *wait_ns);

#ifdef __cplusplus
}
#endif

#endif
