/* A UCX context, one worker on it, and the thread that progresses the
 * worker while nobody else does: what the server side (remote/backend.c,
 * one per process) and each client (remote/client.c) hold.
 *
 * Threading, decided once here: the worker is created with
 * UCS_THREAD_MODE_MULTI, so any thread may post a get or put on it and
 * progress it (UCX serialises inside). A thread waiting for its own request
 * progresses the worker itself, spinning (the latency of a 1 MiB get is
 * what a request pays); the progress thread sleeps in poll() on the
 * worker's event descriptor between events, so an idle worker costs no CPU
 * and a peer's disconnection, or a tcp client's share of a get, is still
 * handled at once. */
#ifndef SHMREG_REMOTE_WORKER_H
#define SHMREG_REMOTE_WORKER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "remote/transports.h"
#include "remote/ucx_calls.h"

struct shmreg__ucx_worker {
    const struct shmreg__ucx *ucx;
    ucp_context_h context;
    ucp_worker_h worker;
    int efd; /* the worker's event descriptor; -1: the thread polls every millisecond */
    bool spin_after_event; /* a client's: it serves the server's tcp gets */
    pthread_t thread;
    atomic_bool stop;
    /* Callers progressing the worker themselves while they wait for an
     * answer (shmreg__ucx_waiting): the thread stands aside meanwhile, so
     * that two threads do not spin on one worker's lock. */
    atomic_uint waiters;
};

struct shmreg__ucx_worker_params {
    const char *thread_name;
    const char *what; /* names the caller in messages */
    /* A client's worker: the thread keeps spinning a moment after each
     * event, since the server's requests come in bursts it must answer; a
     * server's thread only watches (its copies progress the worker
     * themselves) and sleeps at once. */
    bool serves_peers;
    /* What the context may open (remote/transports.h), checked already. */
    const struct shmreg__remote_transports *transports;
    bool reuse_address; /* the listener may bind a port in TIME_WAIT (the server's) */
    /* The one active-message handler: what this side receives. */
    unsigned am_id;
    ucp_am_recv_callback_t am_cb;
    void *am_arg;
};

/* Load UCX, create the context (active messages; wakeup where the
 * transports allow), the worker with its handler and the progress thread.
 * On failure nothing is left. */
shmreg_err shmreg__ucx_worker_start(struct shmreg__ucx_worker *w, const struct shmreg__ucx_worker_params *p);

/* Stop the thread, destroy the worker and the context. */
void shmreg__ucx_worker_stop(struct shmreg__ucx_worker *w);

/* Wait for what a *_nbx call returned: OK at once for NULL, the error for
 * an error pointer, else progress the worker until the request completes
 * (its status, request freed) or the clock passes deadline_ns
 * (CLOCK_MONOTONIC): UCS_ERR_TIMED_OUT, the request left in flight for the
 * caller to cancel by closing its endpoint, then wait_again. */
ucs_status_t shmreg__ucx_wait(struct shmreg__ucx_worker *w, ucs_status_ptr_t request, uint64_t deadline_ns);

/* A caller starts (+1) or stops (-1) progressing w itself while it waits. */
static inline void shmreg__ucx_waiting(struct shmreg__ucx_worker *w, int delta)
{
    /* Relaxed: only whether the thread spins depends on it. */
    if (delta > 0)
        atomic_fetch_add_explicit(&w->waiters, 1, memory_order_relaxed);
    else
        atomic_fetch_sub_explicit(&w->waiters, 1, memory_order_relaxed);
}

/* Now on CLOCK_MONOTONIC, in nanoseconds. */
uint64_t shmreg__ucx_now_ns(void);

#endif
