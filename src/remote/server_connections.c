/* The server's engine for remote regions: the clients' connections, from
 * the request (with the bounds on those not yet proven) through the welcome
 * and the windows announced to the reap and the close (remote/server_engine.h). */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "base/err.h"
#include "base/sys.h"
#include "remote/messages.h"
#include "remote/server.h"
#include "remote/server_engine.h"
#include "remote/source.h"

/* An idle connection is asked for a sign of life at most this often. */
#define SHMREG__REMOTE_PING_NS 1000000000ull
/* Connections that have not yet presented a secret: how many may wait, and
 * for how long, so that anyone who can reach the listener holds little. */
#define SHMREG__MAX_UNPROVEN 64
/* ... and from one source address (an IPv6 address counts by its /64, which
 * one host commonly holds whole), so that one host cannot take all 64 and
 * keep every other client out. */
#define SHMREG__MAX_UNPROVEN_PER_SOURCE 8
#define SHMREG__HELLO_NS 5000000000ull
/* Windows one connection may have announced at once: each costs the server
 * a record, so a client may not announce without end. */
#define SHMREG__MAX_WINDOWS 4096

static void conn_free(struct shmreg__rconn *c);

/* ---- sending */

static void free_sent(void *request, ucs_status_t status, void *user_data)
{
    shmreg__free(user_data);
    shmreg__engine.w.ucx->request_free(request);
}

/* Send m on ep (the reply endpoint in a handler, or a connection's), by
 * copy, freeing its own copy of the header when UCX is done with it. */
static void send_owned(ucp_ep_h ep, const struct shmreg__rmsg *m)
{
    unsigned char *h = shmreg__malloc(SHMREG__RMSG_SIZE);
    if (!h)
        return; /* the peer times out waiting, as for a lost message */
    shmreg__rmsg_encode(m, h);
    ucp_request_param_t p = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS,
        .cb.send = free_sent,
        .user_data = h,
        .flags = UCP_AM_SEND_FLAG_EAGER,
    };
    ucs_status_ptr_t req =
        shmreg__engine.w.ucx->am_send_nbx(ep, SHMREG__AM_TO_CLIENT, h, SHMREG__RMSG_SIZE, NULL, 0, &p);
    if (!UCS_PTR_IS_PTR(req))
        shmreg__free(h); /* done at once, or failed: the callback will not run */
}

/* ---- connections */

void shmreg__mark_failed(struct shmreg__rconn *c, const char *why)
{
    if (atomic_flag_test_and_set_explicit(&c->why_set, memory_order_relaxed)) {
        /* Another thread is writing its reason: failed is set only after
         * it, so that nobody reads a reason half written. Short. */
        while (!atomic_load_explicit(&c->failed, memory_order_acquire))
            sched_yield();
        return;
    }
    snprintf(c->why, sizeof c->why, "%s", why);
    /* Release: whoever sees failed reads the reason written before it. */
    atomic_store_explicit(&c->failed, true, memory_order_release);
}

bool shmreg__conn_failed(const struct shmreg__rconn *c)
{
    return atomic_load_explicit(&c->failed, memory_order_acquire);
}

/* The transports of ep, from UCX's own description of its lanes
 * ("lane[0]: 2:tcp/lo ..."): each name once, in lane order. */
static void describe_transports(ucp_ep_h ep, char *out, size_t cap)
{
    out[0] = '\0';
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    if (!f)
        return;
    shmreg__engine.w.ucx->ep_print_info(ep, f);
    fclose(f);
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        char *lane = strstr(line, "lane[");
        char *colon = lane ? strchr(lane, ':') : NULL;
        char name[32];
        if (!colon || sscanf(colon + 1, " %*u:%31[^/ ]", name) != 1)
            continue;
        size_t used = strlen(out);
        char *seen = strstr(out, name);
        size_t len = strlen(name);
        if (seen && (seen == out || seen[-1] == ',') && (seen[len] == ',' || seen[len] == '\0'))
            continue;
        snprintf(out + used, cap - used, "%s%s", used ? "," : "", name);
    }
    free(text);
}

/* A hello on an unproven connection: the secret makes it its tenant's for
 * good, or the connection is refused and closed. */
static void welcome(struct shmreg__rconn *c, const struct shmreg__rmsg *hello)
{
    struct shmreg__rmsg answer = {.kind = SHMREG__RMSG_WELCOME, .request = hello->request};
    struct tenant *t = shmreg__secret_take_locked(hello->token, shmreg__ucx_now_ns());
    if (!t) {
        answer.status = SHMREG_ERR_NOT_FOUND;
        shmreg__mark_failed(c, "the client presented an unknown, used or expired secret");
    } else {
        c->tenant = t; /* the secret's place in t->connections passes to c */
        describe_transports(c->ep, c->transports, sizeof c->transports);
        memcpy(answer.token, c->id, sizeof c->id);
    }
    send_owned(c->ep, &answer);
}

static void on_conn_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    char why[200];
    snprintf(why, sizeof why, "the client's connection failed: %s", shmreg__engine.w.ucx->status_string(status));
    shmreg__mark_failed(arg, why);
}

/* Connections that never proved themselves in time are failed; the count
 * of those still waiting. */
static unsigned unproven_expire_locked(uint64_t now)
{
    unsigned waiting = 0;
    for (struct shmreg__rconn *c = shmreg__engine.conns; c; c = c->next) {
        if (c->tenant || shmreg__conn_failed(c))
            continue;
        if (now - c->accepted_ns > SHMREG__HELLO_NS)
            shmreg__mark_failed(c, "the client presented no secret in time");
        else
            waiting++;
    }
    return waiting;
}

/* The source a connection request came from, as counted (remote/source.h):
 * requests whose address UCX cannot give share the zero source. */
static void request_source(ucp_conn_request_h request, unsigned char source[SHMREG__SOURCE_SIZE])
{
    ucp_conn_request_attr_t attr = {.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR};
    bool known = shmreg__engine.w.ucx->conn_request_query(request, &attr) == UCS_OK;
    shmreg__remote_source(known ? &attr.client_address : NULL, source);
}

/* Connections from source still waiting to prove themselves (expired
 * ones were failed by unproven_expire_locked). */
static unsigned unproven_from_locked(const unsigned char source[SHMREG__SOURCE_SIZE])
{
    unsigned n = 0;
    for (struct shmreg__rconn *c = shmreg__engine.conns; c; c = c->next)
        if (!c->tenant && !shmreg__conn_failed(c) && memcmp(c->source, source, SHMREG__SOURCE_SIZE) == 0)
            n++;
    return n;
}

/* A connection from source may wait for its hello: fewer than 64 wait in
 * all, and fewer than 8 from its source. */
static bool unproven_room_locked(const unsigned char source[SHMREG__SOURCE_SIZE])
{
    return unproven_expire_locked(shmreg__ucx_now_ns()) < SHMREG__MAX_UNPROVEN &&
           unproven_from_locked(source) < SHMREG__MAX_UNPROVEN_PER_SOURCE;
}

/* A client's connection request, inside the progress of the listener's
 * worker: an endpoint of the server's own, unproven until its hello. */
void shmreg__on_conn_request(ucp_conn_request_h request, void *arg)
{
    struct shmreg__rconn *c = NULL;
    unsigned char source[SHMREG__SOURCE_SIZE];
    request_source(request, source);
    pthread_mutex_lock(&shmreg__engine.lock);
    if (unproven_room_locked(source))
        c = shmreg__calloc(1, sizeof *c);
    if (c && getrandom(c->id, sizeof c->id, 0) == (ssize_t)sizeof c->id) {
        pthread_rwlock_init(&c->use, NULL);
        atomic_flag_clear(&c->why_set);
        memcpy(c->source, source, sizeof c->source);
        ucp_ep_params_t p = {
            .field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                          UCP_EP_PARAM_FIELD_ERR_HANDLER,
            .conn_request = request,
            .err_mode = UCP_ERR_HANDLING_MODE_PEER,
            .err_handler = {.cb = on_conn_error, .arg = c},
        };
        if (shmreg__engine.w.ucx->ep_create(shmreg__engine.w.worker, &p, &c->ep) == UCS_OK) {
            c->refs = 1;
            c->listed = true;
            c->accepted_ns = c->last_heard_ns = shmreg__ucx_now_ns();
            c->next = shmreg__engine.conns;
            shmreg__engine.conns = c;
            pthread_mutex_unlock(&shmreg__engine.lock);
            return;
        }
        pthread_rwlock_destroy(&c->use);
        request = NULL; /* ep_create consumed it, failing */
    }
    shmreg__free(c);
    pthread_mutex_unlock(&shmreg__engine.lock);
    if (request)
        shmreg__engine.w.ucx->listener_reject(shmreg__engine.listener, request);
}

static struct shmreg__rconn *conn_of_ep_locked(ucp_ep_h ep)
{
    for (struct shmreg__rconn *c = shmreg__engine.conns; c; c = c->next)
        if (c->ep == ep && !shmreg__conn_failed(c))
            return c;
    return NULL;
}

struct window *shmreg__window_find_locked(struct shmreg__rconn *c, uint64_t id, uint64_t generation)
{
    for (struct window *w = c->windows; w; w = w->next)
        if (w->id == id && w->generation == generation)
            return w;
    return NULL;
}

static void window_withdraw_locked(struct shmreg__rconn *c, uint64_t id, uint64_t generation)
{
    for (struct window **pp = &c->windows; *pp; pp = &(*pp)->next) {
        if ((*pp)->id == id && (*pp)->generation == generation) {
            struct window *w = *pp;
            *pp = w->next;
            shmreg__free(w);
            c->window_count--;
            return;
        }
    }
}

/* An announcement: a window of the client's own memory, by its id. */
static void announce(struct shmreg__rconn *c, ucp_ep_h ep, const struct shmreg__rmsg *m)
{
    struct shmreg__rmsg answer = {.kind = SHMREG__RMSG_ANSWER, .request = m->request};
    struct window *w = NULL;
    if (shmreg__window_find_locked(c, m->window, m->generation))
        answer.status = SHMREG_ERR_ALREADY_EXISTS;
    else if (c->window_count >= SHMREG__MAX_WINDOWS || !(w = shmreg__calloc(1, sizeof *w)))
        answer.status = SHMREG_ERR_NO_MEMORY;
    if (w) {
        *w = (struct window){.next = c->windows, .id = m->window, .generation = m->generation, .length = m->length};
        c->windows = w;
        c->window_count++;
    }
    send_owned(ep, &answer);
}

/* Unlist c (it failed or said goodbye) and drop the list's reference. */
static void conn_unlist_locked(struct shmreg__rconn *c)
{
    if (!c->listed)
        return;
    for (struct shmreg__rconn **pp = &shmreg__engine.conns; *pp; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    }
    c->listed = false;
    c->refs--;
}

/* What arrives from a client, inside some thread's progress. A message
 * that does not parse, or comes from no connection (other than a hello),
 * is dropped: the sender learns nothing and the server changes nothing. A
 * rendezvous this side did not start to receive is refused (UCX drops it
 * and the sender's send ends with that status). */
ucs_status_t shmreg__on_message(void *arg, const void *header, size_t header_length, void *bytes, size_t length,
                               const ucp_am_recv_param_t *param)
{
    struct shmreg__rmsg m;
    bool rndv = param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV;
    bool has_ep = param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP;
    if (!has_ep || shmreg__rmsg_parse(header, header_length, true, &m) != NULL ||
        (length && m.kind != SHMREG__RMSG_DATA))
        return rndv ? UCS_ERR_REJECTED : UCS_OK;
    ucp_ep_h ep = param->reply_ep;
    pthread_mutex_lock(&shmreg__engine.lock);
    struct shmreg__rconn *c = conn_of_ep_locked(ep);
    /* Only a hello is heard from a connection that has not proven itself. */
    if (c && !c->tenant && m.kind != SHMREG__RMSG_HELLO)
        c = NULL;
    if (c)
        c->last_heard_ns = shmreg__ucx_now_ns();
    switch (m.kind) {
    case SHMREG__RMSG_HELLO:
        if (c && !c->tenant)
            welcome(c, &m);
        break;
    case SHMREG__RMSG_ANNOUNCE:
        if (c)
            announce(c, ep, &m);
        break;
    case SHMREG__RMSG_WITHDRAW:
        if (c)
            window_withdraw_locked(c, m.window, m.generation);
        if (c)
            send_owned(ep, &(struct shmreg__rmsg){.kind = SHMREG__RMSG_ANSWER, .request = m.request});
        break;
    case SHMREG__RMSG_DATA:
        if (c && shmreg__copy_data(&m, bytes, length, param))
            rndv = false; /* its receive is under way */
        break;
    case SHMREG__RMSG_STORED:
        if (c)
            shmreg__copy_stored(&m, ep);
        break;
    case SHMREG__RMSG_PONG:
        if (c)
            c->ping_sent_ns = 0;
        break;
    case SHMREG__RMSG_BYE:
        if (c)
            shmreg__mark_failed(c, "the client said goodbye");
        break;
    }
    pthread_mutex_unlock(&shmreg__engine.lock);
    return rndv ? UCS_ERR_REJECTED : UCS_OK;
}

/* Connections that failed with no region on them: nothing will drop
 * their last reference but this. Freed outside the lock (UCX's close). */
void shmreg__conns_reap(void)
{
    struct shmreg__rconn *dead = NULL;
    pthread_mutex_lock(&shmreg__engine.lock);
    (void)unproven_expire_locked(shmreg__ucx_now_ns()); /* and those that never proved themselves */
    for (struct shmreg__rconn **pp = &shmreg__engine.conns; *pp;) {
        struct shmreg__rconn *c = *pp;
        if (!shmreg__conn_failed(c) || c->refs != 1) {
            pp = &c->next;
            continue;
        }
        *pp = c->next;
        c->listed = false;
        c->refs = 0;
        c->next = dead;
        dead = c;
    }
    pthread_mutex_unlock(&shmreg__engine.lock);
    while (dead) {
        struct shmreg__rconn *c = dead;
        dead = c->next;
        conn_free(c);
    }
}

/* ---- the backend's calls */

shmreg_err shmreg__rconn_find(const struct shmreg__remote_descriptor *d, const void *registry, const char *tag,
                              const char *name, struct shmreg__rconn **out, uint64_t *window_length)
{
    shmreg_err err = shmreg__engine_start();
    if (err != SHMREG_OK)
        return err;
    pthread_mutex_lock(&shmreg__engine.lock);
    struct shmreg__rconn *c = shmreg__engine.conns;
    while (c && memcmp(c->id, d->connection, sizeof c->id) != 0)
        c = c->next;
    struct window *w = c && !shmreg__conn_failed(c) && c->tenant && shmreg__tenant_is(c->tenant, registry, tag)
                           ? shmreg__window_find_locked(c, d->window, d->generation)
                           : NULL;
    if (w && out) {
        c->refs++;
        *out = c;
    }
    if (w)
        *window_length = w->length;
    pthread_mutex_unlock(&shmreg__engine.lock);
    if (!w)
        return shmreg__fail(SHMREG_ERR_NOT_FOUND, "cannot register remote region '%s': no window of this tenant's "
                            "connections matches the descriptor (unknown connection or window, withdrawn, or "
                            "a stale generation)", name);
    return SHMREG_OK;
}

/* Close c's endpoint now if it is open; force (no goodbye to a peer that
 * may be dead), which completes every request still on it with an error.
 * False when UCX did not finish the close in time: it may still call c's
 * error handler. */
bool shmreg__conn_close(struct shmreg__rconn *c)
{
    const struct shmreg__ucx *u = shmreg__engine.w.ucx;
    pthread_rwlock_wrlock(&c->use);
    ucp_ep_h ep = c->ep;
    c->ep = NULL;
    pthread_rwlock_unlock(&c->use);
    if (!ep)
        return true;
    ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = UCP_EP_CLOSE_FLAG_FORCE};
    ucs_status_ptr_t req = u->ep_close_nbx(ep, &p);
    uint64_t deadline = shmreg__ucx_now_ns() + (uint64_t)SHMREG__REMOTE_CLOSE_MS * 1000000u;
    if (shmreg__ucx_wait(&shmreg__engine.w, req, deadline) != UCS_ERR_TIMED_OUT)
        return true;
    u->request_free(req);
    return false;
}

static void conn_free(struct shmreg__rconn *c)
{
    bool closed = shmreg__conn_close(c);
    pthread_mutex_lock(&shmreg__engine.lock);
    while (c->windows) {
        struct window *w = c->windows;
        c->windows = w->next;
        shmreg__free(w);
    }
    if (c->tenant)
        c->tenant->connections--;
    pthread_mutex_unlock(&shmreg__engine.lock);
    if (!closed)
        return; /* kept (a small leak) rather than freed under UCX's feet */
    pthread_rwlock_destroy(&c->use);
    shmreg__free(c);
}

void shmreg__rconn_put(struct shmreg__rconn *c)
{
    pthread_mutex_lock(&shmreg__engine.lock);
    if (shmreg__conn_failed(c))
        conn_unlist_locked(c);
    bool last = --c->refs == 0;
    pthread_mutex_unlock(&shmreg__engine.lock);
    if (last)
        conn_free(c);
}

bool shmreg__rconn_gone(struct shmreg__rconn *c, uint64_t timeout_ns)
{
    shmreg__conns_reap();
    if (shmreg__conn_failed(c))
        return true;
    uint64_t now = shmreg__ucx_now_ns();
    bool ping = false, silent = false;
    pthread_mutex_lock(&shmreg__engine.lock);
    if (c->ping_sent_ns && now - c->ping_sent_ns > timeout_ns)
        silent = true;
    else if (!c->ping_sent_ns && now - c->last_heard_ns > SHMREG__REMOTE_PING_NS)
        ping = true, c->ping_sent_ns = now;
    pthread_mutex_unlock(&shmreg__engine.lock);
    if (silent) {
        char why[120];
        snprintf(why, sizeof why, "no answer to a liveness check within %llu ms",
                 (unsigned long long)(timeout_ns / 1000000u));
        shmreg__mark_failed(c, why);
        return true;
    }
    if (ping) {
        pthread_rwlock_rdlock(&c->use);
        if (c->ep)
            send_owned(c->ep, &(struct shmreg__rmsg){.kind = SHMREG__RMSG_PING});
        pthread_rwlock_unlock(&c->use);
    }
    return false;
}

const char *shmreg__rconn_transports(const struct shmreg__rconn *c)
{
    return c->transports;
}
