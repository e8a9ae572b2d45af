/* Remote regions through UCX: the client side (shmreg_remote_client).
 *
 * A client owns a context, a worker and its progress thread
 * (remote/worker.h) and one connection: the endpoint it dialed to the
 * server's worker, proven with the secret its tenant was given
 * (remote/messages.h for the protocol). It answers the server's requests
 * for its announced windows only, checking each against the window again:
 * the server is trusted no further than what this process announced.
 *
 * Locks. c->lock guards the windows and the callers waiting for answers.
 * The message handler runs inside whichever thread progresses the worker,
 * under UCX's worker lock, and takes c->lock; other threads call UCX only
 * without c->lock held. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "base/err.h"
#include "base/sys.h"
#include "remote/descriptor.h"
#include "remote/hostport.h"
#include "remote/messages.h"
#include "remote/worker.h"

#define SHMREG__CLIENT_CLOSE_MS 1000

struct shmreg_remote_window {
    struct shmreg_remote_window *next; /* the client's list while announced */
    shmreg_remote_client *client;
    unsigned char *addr;
    size_t length;
    uint64_t id, generation;
    bool allocated;   /* shmreg_remote_alloc's: unmapped by unexport */
    atomic_uint busy; /* answers in flight that read from it */
    unsigned char bytes[SHMREG_REMOTE_DESCRIPTOR_SIZE]; /* the descriptor */
};

/* A caller waiting for the server's answer to one request. */
struct waiter {
    struct waiter *next;
    uint64_t request;
    atomic_bool done;
    struct shmreg__rmsg answer;
};

struct shmreg_remote_client {
    struct shmreg__ucx_worker w;
    pthread_mutex_t lock;
    ucp_ep_h ep; /* to the server, once connected; immutable then */
    unsigned char connection[SHMREG__RMSG_CONNECTION_ID];
    struct shmreg_remote_window *windows;
    struct waiter *waiters;
    atomic_bool failed; /* the connection failed: UCX said so */
    char why[120];      /* UCX's reason, written before failed is set */
    uint64_t next_request, next_window;
};

/* ---- sending */

struct owned {
    unsigned char header[SHMREG__RMSG_SIZE];
    struct shmreg_remote_window *window; /* whose bytes the payload is, or NULL */
    const struct shmreg__ucx *ucx;
};

static void owned_done(void *request, ucs_status_t status, void *user_data)
{
    struct owned *o = user_data;
    if (o->window)
        atomic_fetch_sub_explicit(&o->window->busy, 1, memory_order_release);
    o->ucx->request_free(request);
    shmreg__free(o);
}

/* Send m (and n bytes of window w's memory at bytes) to the server, by
 * whichever protocol UCX picks, freeing the header when UCX is done. The
 * reply flag gives the server this connection's endpoint. */
static void send_owned(shmreg_remote_client *c, const struct shmreg__rmsg *m, struct shmreg_remote_window *w,
                       const void *bytes, size_t n)
{
    struct owned *o = shmreg__calloc(1, sizeof *o);
    if (!o)
        return; /* the server times out waiting, as for a lost message */
    shmreg__rmsg_encode(m, o->header);
    o->window = w;
    o->ucx = c->w.ucx;
    if (w)
        atomic_fetch_add_explicit(&w->busy, 1, memory_order_relaxed);
    ucp_request_param_t p = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS,
        .cb.send = owned_done,
        .user_data = o,
        .flags = UCP_AM_SEND_FLAG_REPLY,
    };
    ucs_status_ptr_t req = c->w.ucx->am_send_nbx(c->ep, SHMREG__AM_TO_SERVER, o->header, SHMREG__RMSG_SIZE, bytes,
                                                 n, &p);
    if (!UCS_PTR_IS_PTR(req)) {
        if (w)
            atomic_fetch_sub_explicit(&w->busy, 1, memory_order_release);
        shmreg__free(o);
    }
}

/* ---- answering the server */

static struct shmreg_remote_window *window_find_locked(shmreg_remote_client *c, uint64_t id, uint64_t generation)
{
    for (struct shmreg_remote_window *w = c->windows; w; w = w->next)
        if (w->id == id && w->generation == generation)
            return w;
    return NULL;
}

/* The window of a fetch or store, when the range lies inside it. */
static struct shmreg_remote_window *window_for_locked(shmreg_remote_client *c, const struct shmreg__rmsg *m,
                                                      uint32_t *status)
{
    struct shmreg_remote_window *w = window_find_locked(c, m->window, m->generation);
    *status = !w ? SHMREG_ERR_NOT_FOUND
                 : m->offset > w->length || m->length > w->length - m->offset ? SHMREG_ERR_OUT_OF_BOUNDS
                                                                              : SHMREG_OK;
    return *status == SHMREG_OK ? w : NULL;
}

static void fetch(shmreg_remote_client *c, const struct shmreg__rmsg *m)
{
    struct shmreg__rmsg answer = {.kind = SHMREG__RMSG_DATA, .request = m->request};
    struct shmreg_remote_window *w = window_for_locked(c, m, &answer.status);
    if (w)
        send_owned(c, &answer, w, w->addr + m->offset, m->length);
    else
        send_owned(c, &answer, NULL, NULL, 0);
}

static void store(shmreg_remote_client *c, const struct shmreg__rmsg *m, const void *bytes, size_t length,
                  bool whole)
{
    struct shmreg__rmsg answer = {.kind = SHMREG__RMSG_STORED, .request = m->request};
    struct shmreg_remote_window *w = window_for_locked(c, m, &answer.status);
    if (w && (!whole || length != m->length))
        answer.status = SHMREG_ERR_INVALID_ARG, w = NULL;
    if (w)
        memcpy(w->addr + m->offset, bytes, length);
    send_owned(c, &answer, NULL, NULL, 0);
}

static void answered(shmreg_remote_client *c, const struct shmreg__rmsg *m)
{
    for (struct waiter *x = c->waiters; x; x = x->next) {
        if (x->request == m->request && !atomic_load_explicit(&x->done, memory_order_relaxed)) {
            x->answer = *m;
            atomic_store_explicit(&x->done, true, memory_order_release);
            return;
        }
    }
}

/* What arrives from the server, inside some thread's progress. */
static ucs_status_t on_message(void *arg, const void *header, size_t header_length, void *bytes, size_t length,
                               const ucp_am_recv_param_t *param)
{
    shmreg_remote_client *c = arg;
    struct shmreg__rmsg m;
    bool rndv = param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV;
    /* A rendezvous is never received here (UCX drops it, and the sender's
     * send ends with the refusal). */
    if (shmreg__rmsg_parse(header, header_length, false, &m) != NULL || (length && m.kind != SHMREG__RMSG_STORE))
        return rndv ? UCS_ERR_REJECTED : UCS_OK;
    pthread_mutex_lock(&c->lock);
    switch (m.kind) {
    case SHMREG__RMSG_WELCOME:
    case SHMREG__RMSG_ANSWER:
        answered(c, &m);
        break;
    case SHMREG__RMSG_FETCH:
        fetch(c, &m);
        break;
    case SHMREG__RMSG_STORE:
        /* The server sends stores whole (eager); a rendezvous is refused. */
        store(c, &m, bytes, length, !rndv);
        break;
    case SHMREG__RMSG_PING:
        send_owned(c, &(struct shmreg__rmsg){.kind = SHMREG__RMSG_PONG, .request = m.request}, NULL, NULL, 0);
        break;
    }
    pthread_mutex_unlock(&c->lock);
    return rndv ? UCS_ERR_REJECTED : UCS_OK;
}

/* ---- asking the server */

/* Send m and wait for its answer, at most SHMREG_REMOTE_TIMEOUT_MS. */
static shmreg_err ask(shmreg_remote_client *c, struct shmreg__rmsg *m, struct shmreg__rmsg *answer,
                      const char *what)
{
    struct waiter x = {0};
    pthread_mutex_lock(&c->lock);
    m->request = x.request = ++c->next_request;
    x.next = c->waiters;
    c->waiters = &x;
    pthread_mutex_unlock(&c->lock);
    send_owned(c, m, NULL, NULL, 0);
    uint64_t deadline = shmreg__ucx_now_ns() + (uint64_t)SHMREG_REMOTE_TIMEOUT_MS * 1000000u;
    bool done, failed = false;
    shmreg__ucx_waiting(&c->w, +1);
    for (unsigned spin = 0; !(done = atomic_load_explicit(&x.done, memory_order_acquire)); spin++) {
        if ((failed = atomic_load_explicit(&c->failed, memory_order_acquire)))
            break;
        if (c->w.ucx->worker_progress(c->w.worker) == 0 && (spin & 255) == 0 && shmreg__ucx_now_ns() > deadline)
            break;
    }
    shmreg__ucx_waiting(&c->w, -1);
    pthread_mutex_lock(&c->lock);
    for (struct waiter **pp = &c->waiters; *pp; pp = &(*pp)->next) {
        if (*pp == &x) {
            *pp = x.next;
            break;
        }
    }
    done = atomic_load_explicit(&x.done, memory_order_acquire);
    pthread_mutex_unlock(&c->lock);
    if (!done && failed)
        return shmreg__fail(SHMREG_ERR_SYSTEM, "%s: the connection to the server failed: %s", what, c->why);
    if (!done)
        return shmreg__fail(SHMREG_ERR_SYSTEM, "%s: no answer from the server within %d ms", what,
                            SHMREG_REMOTE_TIMEOUT_MS);
    *answer = x.answer;
    return SHMREG_OK;
}

/* ---- the public calls */

shmreg_err shmreg_remote_client_create(shmreg_remote_client **out)
{
    return shmreg_remote_client_create_with(NULL, out);
}

shmreg_err shmreg_remote_client_create_with(const shmreg_remote_client_config *config, shmreg_remote_client **out)
{
    if (!out)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "remote_client_create: out is NULL");
    *out = NULL;
    /* Used only while the context is made: UCX copies what it keeps. */
    struct shmreg__remote_transports t;
    shmreg_err err = shmreg__remote_client_transports(config, &t);
    if (err != SHMREG_OK)
        return err;
    shmreg_remote_client *c = shmreg__calloc(1, sizeof *c);
    if (!c)
        return shmreg__fail(SHMREG_ERR_NO_MEMORY, "out of memory creating a remote client");
    pthread_mutex_init(&c->lock, NULL);
    const struct shmreg__ucx_worker_params p = {
        .thread_name = "shmreg-ucx-cli",
        .what = "cannot create a remote client",
        .serves_peers = true,
        .transports = &t,
        .am_id = SHMREG__AM_TO_CLIENT,
        .am_cb = on_message,
        .am_arg = c,
    };
    if ((err = shmreg__ucx_worker_start(&c->w, &p)) != SHMREG_OK) {
        pthread_mutex_destroy(&c->lock);
        shmreg__free(c);
        return err;
    }
    *out = c;
    return SHMREG_OK;
}

static void on_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    shmreg_remote_client *c = arg;
    snprintf(c->why, sizeof c->why, "%s", c->w.ucx->status_string(status));
    /* Release: whoever sees failed reads why. */
    atomic_store_explicit(&c->failed, true, memory_order_release);
}

static shmreg_err dial(shmreg_remote_client *c, const char *server_address)
{
    struct sockaddr_storage ss;
    socklen_t len;
    shmreg_err err = shmreg__hostport_parse(server_address, false, &ss, &len, "cannot connect to the server");
    if (err != SHMREG_OK)
        return err;
    ucp_ep_params_t p = {
        .field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                      UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER,
        .flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER,
        .sockaddr = {.addr = (const struct sockaddr *)&ss, .addrlen = len},
        .err_mode = UCP_ERR_HANDLING_MODE_PEER,
        .err_handler = {.cb = on_error, .arg = c},
    };
    ucs_status_t st = c->w.ucx->ep_create(c->w.worker, &p, &c->ep);
    if (st != UCS_OK) {
        c->ep = NULL;
        return shmreg__ucx_fail(SHMREG_ERR_SYSTEM, st, "cannot connect to the server at %s: ucp_ep_create",
                                server_address);
    }
    return SHMREG_OK;
}

static void hang_up(shmreg_remote_client *c, bool force)
{
    ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0};
    ucs_status_ptr_t req = c->w.ucx->ep_close_nbx(c->ep, &p);
    uint64_t deadline = shmreg__ucx_now_ns() + (uint64_t)SHMREG__CLIENT_CLOSE_MS * 1000000u;
    if (shmreg__ucx_wait(&c->w, req, deadline) == UCS_ERR_TIMED_OUT)
        c->w.ucx->request_free(req);
    c->ep = NULL;
}

shmreg_err shmreg_remote_client_connect(shmreg_remote_client *c, const char *server_address,
                                        const unsigned char secret[SHMREG_REMOTE_SECRET_SIZE])
{
    if (!c || !server_address || !secret || c->ep)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "remote_client_connect: %s",
                            !c ? "client is NULL" : !server_address ? "address is NULL" : !secret ? "secret is NULL"
                            : "already connected");
    shmreg_err err = dial(c, server_address);
    if (err != SHMREG_OK)
        return err;
    struct shmreg__rmsg hello = {.kind = SHMREG__RMSG_HELLO}, welcome;
    memcpy(hello.token, secret, SHMREG_REMOTE_SECRET_SIZE);
    if ((err = ask(c, &hello, &welcome, "cannot connect to the server")) == SHMREG_OK &&
        welcome.status != SHMREG_OK)
        err = shmreg__fail((shmreg_err)welcome.status == SHMREG_ERR_NO_MEMORY ? SHMREG_ERR_NO_MEMORY
                                                                                : SHMREG_ERR_NOT_FOUND,
                           "the server refused the connection: %s",
                           welcome.status == SHMREG_ERR_NO_MEMORY ? "out of memory"
                                                                  : "unknown, used or expired secret");
    if (err != SHMREG_OK) {
        hang_up(c, true);
        return err;
    }
    memcpy(c->connection, welcome.token, sizeof c->connection);
    return SHMREG_OK;
}

void shmreg_remote_client_destroy(shmreg_remote_client *c)
{
    if (!c)
        return;
    if (c->ep) {
        bool failed = atomic_load_explicit(&c->failed, memory_order_acquire);
        if (!failed)
            send_owned(c, &(struct shmreg__rmsg){.kind = SHMREG__RMSG_BYE}, NULL, NULL, 0);
        hang_up(c, failed);
    }
    shmreg__ucx_worker_stop(&c->w);
    pthread_mutex_destroy(&c->lock);
    shmreg__free(c);
}

static shmreg_err announce(shmreg_remote_client *c, unsigned char *addr, size_t length, bool allocated,
                           shmreg_remote_window **out)
{
    shmreg_remote_window *w = shmreg__calloc(1, sizeof *w);
    if (!w)
        return shmreg__fail(SHMREG_ERR_NO_MEMORY, "out of memory exporting %zu bytes", length);
    pthread_mutex_lock(&c->lock);
    w->id = ++c->next_window;
    pthread_mutex_unlock(&c->lock);
    *w = (shmreg_remote_window){.client = c, .addr = addr, .length = length, .id = w->id, .generation = 1,
                                .allocated = allocated};
    struct shmreg__rmsg m = {.kind = SHMREG__RMSG_ANNOUNCE, .window = w->id, .generation = w->generation,
                             .offset = (uint64_t)(uintptr_t)addr, .length = length}, answer;
    /* Listed before the server hears of it: its first request may come
     * before the answer does. */
    pthread_mutex_lock(&c->lock);
    w->next = c->windows;
    c->windows = w;
    pthread_mutex_unlock(&c->lock);
    shmreg_err err = ask(c, &m, &answer, "cannot export memory");
    if (err == SHMREG_OK && answer.status != SHMREG_OK)
        err = shmreg__fail(SHMREG_ERR_NO_MEMORY, "cannot export memory: the server refused the window (%s)",
                           shmreg_err_name((shmreg_err)answer.status));
    if (err != SHMREG_OK) {
        shmreg_remote_unexport(w);
        return err;
    }
    struct shmreg__remote_descriptor d = {.window = w->id, .generation = w->generation};
    memcpy(d.connection, c->connection, sizeof d.connection);
    shmreg__remote_descriptor_encode(&d, w->bytes);
    *out = w;
    return SHMREG_OK;
}

static shmreg_err export_check(shmreg_remote_client *c, const void *addr, bool need_addr, size_t length,
                               void *out, const char *what)
{
    if (!c || !out || length == 0 || (need_addr && !addr) || !c->ep ||
        (addr && (uintptr_t)addr > UINTPTR_MAX - length))
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "%s: %s", what, !c ? "client is NULL" : !out ? "out is NULL"
                            : length == 0 ? "length is 0" : !c->ep ? "the client is not connected"
                            : !addr ? "addr is NULL" : "the range runs past the address space");
    return SHMREG_OK;
}

shmreg_err shmreg_remote_export(shmreg_remote_client *c, void *addr, size_t length, shmreg_remote_window **out)
{
    if (out)
        *out = NULL;
    shmreg_err err = export_check(c, addr, true, length, out, "remote_export");
    return err != SHMREG_OK ? err : announce(c, addr, length, false, out);
}

shmreg_err shmreg_remote_alloc(shmreg_remote_client *c, size_t length, void **addr, shmreg_remote_window **out)
{
    if (out)
        *out = NULL;
    shmreg_err err = export_check(c, NULL, false, length, out, "remote_alloc");
    if (err == SHMREG_OK && !addr)
        err = shmreg__fail(SHMREG_ERR_INVALID_ARG, "remote_alloc: addr is NULL");
    if (err != SHMREG_OK)
        return err;
    void *m = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return shmreg__fail_errno(SHMREG_ERR_NO_MEMORY, errno, "cannot allocate %zu bytes to export: mmap", length);
    if ((err = announce(c, m, length, true, out)) != SHMREG_OK)
        return err; /* unexport unmapped it */
    *addr = m;
    return SHMREG_OK;
}

shmreg_err shmreg_remote_descriptor(const shmreg_remote_window *w, const void **bytes, size_t *size)
{
    if (!w || !bytes || !size)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "remote_descriptor: %s is NULL",
                            !w ? "window" : !bytes ? "bytes" : "size");
    *bytes = w->bytes;
    *size = sizeof w->bytes;
    return SHMREG_OK;
}

void shmreg_remote_unexport(shmreg_remote_window *w)
{
    if (!w)
        return;
    shmreg_remote_client *c = w->client;
    pthread_mutex_lock(&c->lock);
    for (shmreg_remote_window **pp = &c->windows; *pp; pp = &(*pp)->next) {
        if (*pp == w) {
            *pp = w->next;
            break;
        }
    }
    pthread_mutex_unlock(&c->lock);
    /* No new answer reads it now. Tell the server (without waiting: this
     * process refuses the window already), then wait a bounded time for
     * the answers already sending its bytes. */
    if (c->ep)
        send_owned(c, &(struct shmreg__rmsg){.kind = SHMREG__RMSG_WITHDRAW, .window = w->id,
                                             .generation = w->generation}, NULL, NULL, 0);
    uint64_t deadline = shmreg__ucx_now_ns() + (uint64_t)SHMREG__CLIENT_CLOSE_MS * 1000000u;
    while (atomic_load_explicit(&w->busy, memory_order_acquire) && shmreg__ucx_now_ns() < deadline)
        c->w.ucx->worker_progress(c->w.worker);
    /* Memory an answer may still read stays mapped (a leak, never a fault). */
    if (w->allocated && !atomic_load_explicit(&w->busy, memory_order_acquire))
        munmap(w->addr, w->length);
    shmreg__free(w);
}
