/* The server's engine for remote regions: copies, each waiting for the
 * client's answer, and abandoned past its time (remote/server_engine.h). */
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "base/err.h"
#include "remote/messages.h"
#include "remote/server.h"
#include "remote/server_engine.h"

/* A copy waiting for its answer, on the waiting thread's stack, listed
 * until the answer or the timeout. No UCX callback points at it: the
 * waiter polls its send and the rendezvous receive (recv) itself. */
struct pending {
    struct pending *next;
    uint64_t request;
    struct shmreg__rconn *conn;
    void *buf;
    size_t n;
    bool to_memory;
    unsigned char header[SHMREG__RMSG_SIZE]; /* what was sent: valid until the send completes */
    atomic_bool answered;
    _Atomic(ucs_status_ptr_t) recv; /* a rendezvous receive into buf, set under the lock */
    shmreg_err status;
    char why[200];
};

/* ---- copies waiting for answers */

static struct pending *pending_find_locked(uint64_t request, ucp_ep_h ep)
{
    for (struct pending *p = shmreg__engine.pending; p; p = p->next)
        if (p->request == request && p->conn->ep == ep)
            return p;
    return NULL;
}

static void answer_pending(struct pending *p, shmreg_err status, const char *why)
{
    p->status = status;
    if (why)
        snprintf(p->why, sizeof p->why, "%s", why);
    /* Release: the waiter reads status, why and buf's bytes after this. */
    atomic_store_explicit(&p->answered, true, memory_order_release);
}

/* The bytes of a fetch: whole in this message, or by rendezvous into the
 * waiter's buffer. True when a rendezvous receive was started; anything
 * else is refused (a rendezvous left unreceived is dropped by UCX). */
bool shmreg__copy_data(const struct shmreg__rmsg *m, void *bytes, size_t length, const ucp_am_recv_param_t *param)
{
    struct pending *p = pending_find_locked(m->request, param->reply_ep);
    bool rndv = param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV;
    if (!p || p->to_memory || atomic_load_explicit(&p->answered, memory_order_relaxed) ||
        atomic_load_explicit(&p->recv, memory_order_relaxed))
        return false;
    if (m->status != SHMREG_OK || length != p->n) {
        char why[120];
        if (m->status != SHMREG_OK)
            snprintf(why, sizeof why, "the client refused: %s", shmreg_err_name((shmreg_err)m->status));
        else
            snprintf(why, sizeof why, "the client sent %zu bytes where %zu were asked", length, p->n);
        answer_pending(p, SHMREG_ERR_FAULT, why);
        return false;
    }
    if (!rndv) {
        memcpy(p->buf, bytes, length);
        answer_pending(p, SHMREG_OK, NULL);
        return false;
    }
    ucp_request_param_t rp = {.op_attr_mask = 0};
    ucs_status_ptr_t req = shmreg__engine.w.ucx->am_recv_data_nbx(shmreg__engine.w.worker, bytes, p->buf, p->n, &rp);
    if (UCS_PTR_IS_PTR(req))
        atomic_store_explicit(&p->recv, req, memory_order_release); /* the waiter completes it */
    else
        answer_pending(p, UCS_PTR_IS_ERR(req) ? SHMREG_ERR_FAULT : SHMREG_OK,
                       UCS_PTR_IS_ERR(req) ? shmreg__engine.w.ucx->status_string(UCS_PTR_STATUS(req)) : NULL);
    return true;
}

void shmreg__copy_stored(const struct shmreg__rmsg *m, ucp_ep_h ep)
{
    struct pending *p = pending_find_locked(m->request, ep);
    if (!p || !p->to_memory || atomic_load_explicit(&p->answered, memory_order_relaxed))
        return;
    char why[120];
    snprintf(why, sizeof why, "the client refused: %s", shmreg_err_name((shmreg_err)m->status));
    answer_pending(p, m->status == SHMREG_OK ? SHMREG_OK : SHMREG_ERR_FAULT, m->status == SHMREG_OK ? NULL : why);
}

static shmreg_err copy_error(const char *name, bool to_memory, const char *why)
{
    return shmreg__fail(SHMREG_ERR_FAULT, "remote region '%s': the %s failed: %s", name,
                        to_memory ? "write" : "read", why);
}

/* List p, or say why not: the window must be announced now. */
static shmreg_err pending_add(struct pending *p, uint64_t window, uint64_t generation, uint64_t offset,
                              const char *name)
{
    shmreg_err err = SHMREG_OK;
    pthread_mutex_lock(&shmreg__engine.lock);
    struct window *w = shmreg__window_find_locked(p->conn, window, generation);
    if (!w)
        err = copy_error(name, p->to_memory, "the client has withdrawn the window");
    else if (offset > w->length || p->n > w->length - offset)
        err = shmreg__fail(SHMREG_ERR_OUT_OF_BOUNDS, "remote region '%s': [%llu, +%zu) is outside the client's "
                           "window of %llu bytes", name, (unsigned long long)offset, p->n,
                           (unsigned long long)w->length);
    if (err == SHMREG_OK) {
        p->request = ++shmreg__engine.next_request;
        p->next = shmreg__engine.pending;
        shmreg__engine.pending = p;
    }
    pthread_mutex_unlock(&shmreg__engine.lock);
    return err;
}

static void pending_remove(struct pending *p)
{
    pthread_mutex_lock(&shmreg__engine.lock);
    for (struct pending **pp = &shmreg__engine.pending; *pp; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    }
    /* Marked answered under the lock: a late answer finds it done. */
    atomic_store_explicit(&p->answered, true, memory_order_relaxed);
    pthread_mutex_unlock(&shmreg__engine.lock);
}

/* Post the request under the connection's read lock (a close waits for it).
 * A store's bytes go by copy (eager): the server's buffer is never offered
 * to the peer's rendezvous reads. */
static ucs_status_ptr_t post(struct pending *p, bool *closed)
{
    ucp_request_param_t rp = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
        .flags = UCP_AM_SEND_FLAG_EAGER | UCP_AM_SEND_FLAG_REPLY,
    };
    ucs_status_ptr_t req = NULL;
    pthread_rwlock_rdlock(&p->conn->use);
    *closed = p->conn->ep == NULL;
    if (!*closed)
        req = shmreg__engine.w.ucx->am_send_nbx(p->conn->ep, SHMREG__AM_TO_CLIENT, p->header, SHMREG__RMSG_SIZE,
                                        p->to_memory ? p->buf : NULL, p->to_memory ? p->n : 0, &rp);
    pthread_rwlock_unlock(&p->conn->use);
    return req;
}

/* Whether a request the waiter holds is over: its status into *st, and
 * the request freed, once it is. */
static bool request_over(ucs_status_ptr_t *req, ucs_status_t *st)
{
    if (!UCS_PTR_IS_PTR(*req))
        return true;
    ucs_status_t s = shmreg__engine.w.ucx->request_check_status(*req);
    if (s == UCS_INPROGRESS)
        return false;
    shmreg__engine.w.ucx->request_free(*req);
    *req = NULL;
    *st = s;
    return true;
}

/* A rendezvous receive the handler started, finished here: p is answered
 * once the bytes are in buf. */
static bool receive_over(struct pending *p)
{
    ucs_status_ptr_t recv = atomic_load_explicit(&p->recv, memory_order_acquire);
    ucs_status_t st = UCS_OK;
    if (!recv || !request_over(&recv, &st))
        return recv == NULL;
    atomic_store_explicit(&p->recv, NULL, memory_order_relaxed);
    if (st == UCS_OK) {
        answer_pending(p, SHMREG_OK, NULL);
        return true;
    }
    /* A receive UCX failed: the endpoint is broken, not this copy. */
    char why[200];
    snprintf(why, sizeof why, "the client's connection failed: %s", shmreg__engine.w.ucx->status_string(st));
    shmreg__mark_failed(p->conn, why);
    answer_pending(p, SHMREG_ERR_FAULT, why);
    return true;
}

static bool progress_until_answered(struct pending *p, ucs_status_ptr_t *req, uint64_t deadline)
{
    for (unsigned spin = 0, idle = 0;; spin++) {
        ucs_status_t st = UCS_OK;
        bool sent = request_over(req, &st);
        if (sent && st != UCS_OK && !atomic_load_explicit(&p->answered, memory_order_acquire)) {
            /* UCX failed the send: the endpoint is broken, not this copy. */
            char why[200];
            snprintf(why, sizeof why, "the client's connection failed: %s", shmreg__engine.w.ucx->status_string(st));
            shmreg__mark_failed(p->conn, why);
            answer_pending(p, SHMREG_ERR_FAULT, why);
        }
        if (sent && receive_over(p) && atomic_load_explicit(&p->answered, memory_order_acquire))
            return true;
        if (shmreg__engine.w.ucx->worker_progress(shmreg__engine.w.worker) != 0) {
            idle = 0;
            continue;
        }
        /* Several copies wait on one worker: past a short spin, let the
         * others (and the client, on a shared host) have the CPU. */
        if (++idle > 64)
            sched_yield();
        if ((spin & 255) == 0 && shmreg__ucx_now_ns() > deadline)
            return false;
    }
}

/* Progress until p is answered and its send is over, or the deadline.
 * A send that failed answers p. */
static bool wait_answer(struct pending *p, ucs_status_ptr_t *req, uint64_t deadline)
{
    shmreg__ucx_waiting(&shmreg__engine.w, +1);
    bool answered = progress_until_answered(p, req, deadline);
    shmreg__ucx_waiting(&shmreg__engine.w, -1);
    return answered;
}

/* A copy that got no answer: fail the connection and close it, which
 * cancels the send and any rendezvous receive into the caller's buffer,
 * and wait for them to be over before the buffer goes back to the caller.
 * UCX completes them in the close; the grace is a bound, not a plan. */
static void abandon(struct pending *p, ucs_status_ptr_t *req, uint64_t timeout_ns)
{
    char why[120];
    snprintf(why, sizeof why, "no answer from the client within %llu ms",
             (unsigned long long)(timeout_ns / 1000000u));
    shmreg__mark_failed(p->conn, why);
    pending_remove(p);
    (void)shmreg__conn_close(p->conn);
    ucs_status_ptr_t recv = atomic_load_explicit(&p->recv, memory_order_acquire);
    uint64_t grace = shmreg__ucx_now_ns() + (uint64_t)SHMREG__REMOTE_CLOSE_MS * 1000000u;
    ucs_status_t st;
    while (!(request_over(req, &st) && request_over(&recv, &st)) && shmreg__ucx_now_ns() < grace)
        shmreg__engine.w.ucx->worker_progress(shmreg__engine.w.worker);
}

shmreg_err shmreg__rconn_copy(struct shmreg__rconn *c, uint64_t window, uint64_t generation, uint64_t offset,
                              void *buf, size_t n, bool to_memory, uint64_t timeout_ns, const char *name)
{
    if (shmreg__conn_failed(c))
        return copy_error(name, to_memory, c->why);
    struct tenant *t = c->tenant;
    if (atomic_fetch_add_explicit(&t->copies, 1, memory_order_relaxed) >= shmreg__engine_max_copies()) {
        atomic_fetch_sub_explicit(&t->copies, 1, memory_order_relaxed);
        return shmreg__fail(SHMREG_ERR_NO_MEMORY, "remote region '%s': tenant '%s' has %u remote copies in "
                            "flight: the limit of %u; retry later", name, shmreg__tenant_name(t),
                            shmreg__engine_max_copies(), shmreg__engine_max_copies());
    }
    struct pending p = {.conn = c, .buf = buf, .n = n, .to_memory = to_memory};
    shmreg_err err = pending_add(&p, window, generation, offset, name);
    if (err == SHMREG_OK) {
        struct shmreg__rmsg m = {
            .kind = to_memory ? SHMREG__RMSG_STORE : SHMREG__RMSG_FETCH,
            .request = p.request,
            .window = window,
            .generation = generation,
            .offset = offset,
            .length = n,
        };
        shmreg__rmsg_encode(&m, p.header);
        uint64_t start = shmreg__ucx_now_ns();
        bool closed;
        ucs_status_ptr_t req = post(&p, &closed);
        if (closed || UCS_PTR_IS_ERR(req)) {
            pending_remove(&p);
            shmreg__mark_failed(c, closed ? "the client's connection is closed"
                                  : shmreg__engine.w.ucx->status_string(UCS_PTR_STATUS(req)));
            err = copy_error(name, to_memory, c->why);
        } else if (!wait_answer(&p, &req, start + timeout_ns)) {
            abandon(&p, &req, timeout_ns);
            err = copy_error(name, to_memory, c->why);
        } else {
            pending_remove(&p);
            if (p.status != SHMREG_OK)
                err = copy_error(name, to_memory, p.why);
        }
    }
    atomic_fetch_sub_explicit(&t->copies, 1, memory_order_relaxed);
    return err;
}
