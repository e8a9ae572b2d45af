/* Remote regions through UCX: the server side (SHMREG_SOURCE_REMOTE).
 *
 * One process-wide engine: a UCX context, a worker (remote/worker.h for
 * the threading) and the endpoints to the clients, one per client worker
 * address, shared by that client's regions and counted by them. A region's
 * "mapping" (struct remote_map, in shmreg__opened.priv[0]) is its endpoint
 * share, the unpacked remote key and where its window lies in the client.
 * The engine starts at the first remote registration and lives as long as
 * the process: regions outlive their registry (a last release after
 * destroy), and a UCX worker is too costly to make per registry.
 *
 * Faults. An endpoint is created with peer error handling: when its client
 * dies or disconnects, UCX calls on_endpoint_error (inside some thread's
 * progress), which marks it failed; every copy in flight on it completes
 * with an error, every later copy fails at once, and shmreg_remote_sweep
 * unregisters its regions. A copy that takes longer than the registry's
 * remote_timeout_ms marks it failed too and closes it at once (force),
 * which completes the stuck request: no late reply can land in the
 * caller's buffer after the copy returned. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "base/err.h"
#include "remote/descriptor.h"
#include "remote/worker.h"
#include "base/sys.h"

/* A close waits this long for UCX to finish the endpoint's disconnection. */
#define SHMREG__REMOTE_CLOSE_MS 1000

struct remote_endpoint {
    struct remote_endpoint *next; /* the engine's list, under its lock */
    unsigned long regions;        /* maps on it, under the engine's lock */
    pthread_rwlock_t use;         /* read: posting on ep; write: closing it */
    ucp_ep_h ep;                  /* NULL once closed (under use, written) */
    atomic_bool failed;
    bool no_peer_failure; /* made without peer error handling (immutable) */
    atomic_flag why_set;
    char why[200];                /* written once, before failed is set */
    size_t address_size;
    unsigned char address[];
};

struct remote_map {
    struct remote_endpoint *endpoint; /* counts this map among its regions */
    ucp_rkey_h rkey;
    uint64_t remote_address; /* byte 0 of the window, in the client */
    uint64_t timeout_ns;
};

static struct {
    pthread_mutex_t lock;
    bool started;
    struct shmreg__ucx_worker w;
    struct remote_endpoint *endpoints;
} engine = {.lock = PTHREAD_MUTEX_INITIALIZER};

static shmreg_err engine_start(const char *name)
{
    shmreg_err err = SHMREG_OK;
    pthread_mutex_lock(&engine.lock);
    if (!engine.started) {
        char what[300];
        snprintf(what, sizeof what, "cannot register remote region '%s'", name);
        if ((err = shmreg__ucx_worker_start(&engine.w, "shmreg-ucx", what, false)) == SHMREG_OK)
            engine.started = true;
    }
    pthread_mutex_unlock(&engine.lock);
    return err;
}

static void mark_failed(struct remote_endpoint *e, const char *why)
{
    if (atomic_flag_test_and_set_explicit(&e->why_set, memory_order_relaxed)) {
        /* Another thread is writing its reason: failed is set only after
         * it, so that nobody reads a reason half written. Short. */
        while (!atomic_load_explicit(&e->failed, memory_order_acquire))
            sched_yield();
        return;
    }
    snprintf(e->why, sizeof e->why, "%s", why);
    /* Release: whoever sees failed reads the reason written before it. */
    atomic_store_explicit(&e->failed, true, memory_order_release);
}

static bool endpoint_failed(const struct remote_endpoint *e)
{
    return atomic_load_explicit(&e->failed, memory_order_acquire);
}

/* UCX's error callback, inside whichever thread progressed the worker. The
 * endpoint is closed by its last region or by a copy, never here. */
static void on_endpoint_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    char why[200];
    snprintf(why, sizeof why, "the client's endpoint failed: %s", engine.w.ucx->status_string(status));
    mark_failed(arg, why);
}

/* Close e's endpoint now if it is open; force when it failed (no goodbye to
 * a dead peer), which completes every request still on it with an error. */
static void endpoint_close(struct remote_endpoint *e, bool force)
{
    const struct shmreg__ucx *u = engine.w.ucx;
    pthread_rwlock_wrlock(&e->use);
    ucp_ep_h ep = e->ep;
    e->ep = NULL;
    pthread_rwlock_unlock(&e->use);
    if (!ep)
        return;
    ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0};
    ucs_status_ptr_t req = u->ep_close_nbx(ep, &p);
    uint64_t deadline = shmreg__ucx_now_ns() + (uint64_t)SHMREG__REMOTE_CLOSE_MS * 1000000u;
    if (shmreg__ucx_wait(&engine.w, req, deadline) == UCS_ERR_TIMED_OUT) {
        /* A flushing close to a peer that stopped answering: force it. */
        u->request_free(req);
        p.flags = UCP_EP_CLOSE_FLAG_FORCE;
        deadline = shmreg__ucx_now_ns() + (uint64_t)SHMREG__REMOTE_CLOSE_MS * 1000000u;
        if (shmreg__ucx_wait(&engine.w, req = u->ep_close_nbx(ep, &p), deadline) == UCS_ERR_TIMED_OUT)
            u->request_free(req);
    }
}

/* The endpoint to the worker at address, shared with the regions already
 * on it unless it failed, with one more region counted. */
static shmreg_err endpoint_get(const struct shmreg__remote_descriptor *d, const char *name,
                               struct remote_endpoint **out)
{
    pthread_mutex_lock(&engine.lock);
    for (struct remote_endpoint *e = engine.endpoints; e; e = e->next) {
        if (e->address_size == d->worker_address_size && !endpoint_failed(e) &&
            memcmp(e->address, d->worker_address, e->address_size) == 0) {
            e->regions++;
            pthread_mutex_unlock(&engine.lock);
            *out = e;
            return SHMREG_OK;
        }
    }
    struct remote_endpoint *e = shmreg__calloc(1, sizeof *e + d->worker_address_size);
    if (!e) {
        pthread_mutex_unlock(&engine.lock);
        return shmreg__fail(SHMREG_ERR_NO_MEMORY, "out of memory registering remote region '%s'", name);
    }
    pthread_rwlock_init(&e->use, NULL);
    atomic_flag_clear(&e->why_set);
    e->address_size = d->worker_address_size;
    memcpy(e->address, d->worker_address, d->worker_address_size);
    ucp_ep_params_t p = {
        .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER,
        .address = (const ucp_address_t *)e->address,
        .err_mode = UCP_ERR_HANDLING_MODE_PEER,
        .err_handler = {.cb = on_endpoint_error, .arg = e},
    };
    /* Under the engine's lock: a client's second region must find this one.
     * Peer error handling needs transports that detect a peer's failure;
     * UCX 1.13's posix and sysv do not, so where they are all there is
     * (UCX_TLS=posix,sysv,cma) the endpoint is made without it: then any
     * failed copy marks it failed (copy_failed), since UCX will not. */
    ucs_status_t st = engine.w.ucx->ep_create(engine.w.worker, &p, &e->ep);
    if (st == UCS_ERR_UNREACHABLE) {
        p.field_mask &= ~(uint64_t)UCP_EP_PARAM_FIELD_ERR_HANDLER;
        p.err_mode = UCP_ERR_HANDLING_MODE_NONE;
        e->no_peer_failure = true;
        st = engine.w.ucx->ep_create(engine.w.worker, &p, &e->ep);
    }
    if (st != UCS_OK) {
        pthread_mutex_unlock(&engine.lock);
        pthread_rwlock_destroy(&e->use);
        shmreg__free(e);
        return shmreg__ucx_fail(SHMREG_ERR_SYSTEM, st, "cannot register remote region '%s': UCX refused the "
                                "client's worker address (ucp_ep_create)", name);
    }
    e->regions = 1;
    e->next = engine.endpoints;
    engine.endpoints = e;
    pthread_mutex_unlock(&engine.lock);
    *out = e;
    return SHMREG_OK;
}

/* One region leaves e; the last one closes and frees it. */
static void endpoint_put(struct remote_endpoint *e)
{
    pthread_mutex_lock(&engine.lock);
    bool last = --e->regions == 0;
    if (last) {
        struct remote_endpoint **pp = &engine.endpoints;
        while (*pp != e)
            pp = &(*pp)->next;
        *pp = e->next;
    }
    pthread_mutex_unlock(&engine.lock);
    if (!last)
        return;
    endpoint_close(e, endpoint_failed(e));
    pthread_rwlock_destroy(&e->use);
    shmreg__free(e);
}

static shmreg_err remote_open(const struct shmreg__open_args *a, struct shmreg__opened *out)
{
    const shmreg_registration *r = a->r;
    struct shmreg__remote_descriptor d;
    shmreg_err err = shmreg__remote_descriptor_parse(r->raw_handle, r->raw_handle_size, r->name, &d);
    if (err == SHMREG_OK)
        err = engine_start(r->name);
    if (err != SHMREG_OK)
        return err;
    struct remote_map *m = shmreg__calloc(1, sizeof *m);
    if (!m)
        return shmreg__fail(SHMREG_ERR_NO_MEMORY, "out of memory registering remote region '%s'", r->name);
    if ((err = endpoint_get(&d, r->name, &m->endpoint)) != SHMREG_OK) {
        shmreg__free(m);
        return err;
    }
    pthread_rwlock_rdlock(&m->endpoint->use);
    ucs_status_t st = m->endpoint->ep ? engine.w.ucx->ep_rkey_unpack(m->endpoint->ep, d.rkey, &m->rkey)
                                      : UCS_ERR_CONNECTION_RESET;
    pthread_rwlock_unlock(&m->endpoint->use);
    if (st != UCS_OK) {
        endpoint_put(m->endpoint);
        shmreg__free(m);
        return shmreg__ucx_fail(SHMREG_ERR_SYSTEM, st, "cannot register remote region '%s': UCX refused the "
                                "remote key (ucp_ep_rkey_unpack)", r->name);
    }
    m->remote_address = d.address + r->offset;
    m->timeout_ns = (uint64_t)a->remote_timeout_ms * 1000000u;
    *out = (struct shmreg__opened){
        .backend = &shmreg__backend_remote,
        .addr = NULL,
        .byte_size = r->byte_size,
        .device_id = -1,
        .base = NULL,
        .length = r->byte_size,
        .priv = {(uint64_t)(uintptr_t)m},
    };
    return SHMREG_OK;
}

static struct remote_map *map_of(const struct shmreg__opened *o)
{
    return (struct remote_map *)(uintptr_t)o->priv[0];
}

static shmreg_err remote_close(struct shmreg__opened *o, const char *region_name)
{
    struct remote_map *m = map_of(o);
    /* The key before the endpoint it was unpacked on. */
    engine.w.ucx->rkey_destroy(m->rkey);
    endpoint_put(m->endpoint);
    shmreg__free(m);
    return SHMREG_OK;
}

static shmreg_err copy_failed(struct remote_endpoint *e, const char *name, bool to_memory, const char *detail)
{
    return shmreg__fail(SHMREG_ERR_FAULT, "remote region '%s': the %s failed: %s", name,
                        to_memory ? "write (ucp_put_nbx)" : "read (ucp_get_nbx)", detail);
}

/* Post the get or put under the endpoint's read lock (a close waits for it). */
static ucs_status_ptr_t post(struct remote_map *m, void *buf, size_t n, uint64_t at, bool to_memory, bool *closed)
{
    const struct shmreg__ucx *u = engine.w.ucx;
    ucp_request_param_t p = {.op_attr_mask = 0};
    ucs_status_ptr_t req = NULL;
    pthread_rwlock_rdlock(&m->endpoint->use);
    ucp_ep_h ep = m->endpoint->ep;
    *closed = ep == NULL;
    if (ep && to_memory) {
        req = u->put_nbx(ep, buf, n, at, m->rkey, &p);
        /* The put is done when it is in the client's memory: a flush after
         * it, so that the response the server sends next finds it there. */
        if (!UCS_PTR_IS_ERR(req)) {
            ucs_status_ptr_t flush = u->ep_flush_nbx(ep, &p);
            if (req != NULL)
                u->request_free(req); /* completes before the flush does */
            req = flush;
        }
    } else if (ep) {
        req = u->get_nbx(ep, buf, n, at, m->rkey, &p);
    }
    pthread_rwlock_unlock(&m->endpoint->use);
    return req;
}

static shmreg_err remote_copy(const struct shmreg__opened *o, const char *name, size_t offset, void *buf, size_t n,
                              bool to_memory)
{
    struct remote_map *m = map_of(o);
    struct remote_endpoint *e = m->endpoint;
    if (endpoint_failed(e))
        return copy_failed(e, name, to_memory, e->why);
    bool closed;
    uint64_t start = shmreg__ucx_now_ns();
    ucs_status_ptr_t req = post(m, buf, n, m->remote_address + offset, to_memory, &closed);
    if (closed)
        return copy_failed(e, name, to_memory, endpoint_failed(e) ? e->why : "the client's endpoint is closed");
    ucs_status_t st = shmreg__ucx_wait(&engine.w, req, start + m->timeout_ns);
    if (st == UCS_OK)
        return SHMREG_OK;
    char why[200];
    if (st == UCS_ERR_TIMED_OUT) {
        snprintf(why, sizeof why, "no answer from the client within %llu ms",
                 (unsigned long long)(m->timeout_ns / 1000000u));
        mark_failed(e, why);
        /* Closing completes the request (cancelled): nothing lands in buf
         * after this returns. */
        endpoint_close(e, true);
        uint64_t grace = shmreg__ucx_now_ns() + (uint64_t)SHMREG__REMOTE_CLOSE_MS * 1000000u;
        if (shmreg__ucx_wait(&engine.w, req, grace) == UCS_ERR_TIMED_OUT)
            engine.w.ucx->request_free(req);
        return copy_failed(e, name, to_memory, why);
    }
    snprintf(why, sizeof why, "%s", engine.w.ucx->status_string(st));
    /* An error on an endpoint UCX has failed is the client's death; an error
     * on a live one (the memory unexported) is this copy's alone, unless
     * UCX cannot tell us of a failure: then the endpoint is taken as failed. */
    if (e->no_peer_failure)
        mark_failed(e, why);
    return copy_failed(e, name, to_memory, endpoint_failed(e) ? e->why : why);
}

static bool remote_gone(const struct shmreg__opened *o)
{
    return endpoint_failed(map_of(o)->endpoint);
}

const struct shmreg__backend shmreg__backend_remote = {
    .name = "remote",
    .kind = SHMREG_KIND_REMOTE,
    .prepare = shmreg__remote_prepare,
    .open = remote_open,
    .close = remote_close,
    .copy = remote_copy,
    .gone = remote_gone,
};

shmreg_err shmreg_remote_available(void)
{
    const struct shmreg__ucx *u;
    return shmreg__ucx_load(&u);
}
