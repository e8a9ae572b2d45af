/* A fixed set of threads that run queued items in arrival order. Inference
 * runs here, so that a slow model never stalls the HTTP thread that serves
 * status, register and unregister. */
#ifndef FRONTEND_WORKER_POOL_H
#define FRONTEND_WORKER_POOL_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct worker_pool worker_pool;
typedef void (*worker_fn)(void *ctx, void *item);

/* n threads calling run(ctx, item) for each submitted item. NULL on failure. */
worker_pool *worker_pool_start(unsigned n, worker_fn run, void *ctx);
/* Queue item; -1 when out of memory or stopping (the item is not run). */
int worker_pool_submit(worker_pool *p, void *item);
/* Join the threads and free p. Items still queued go to cancel(ctx, item)
 * on the calling thread, while the workers finish the items they hold; with
 * cancel NULL the workers run them all first. NULL p is a no-op. */
void worker_pool_stop(worker_pool *p, worker_fn cancel);

#ifdef __cplusplus
}
#endif

#endif
