/* The server's engine for remote regions (remote/server.h).
 *
 * Locks. engine.lock guards every list (tenants, secrets, connections,
 * their windows, copies waiting for an answer). UCX runs the message
 * handler inside whichever thread progresses the worker, holding the
 * worker's own (recursive) lock; the handler takes engine.lock and may
 * call UCX under it. Every other thread therefore calls UCX only without
 * engine.lock held, so the two locks are always taken worker first. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "base/err.h"
#include "base/names.h"
#include "base/sys.h"
#include "remote/hostport.h"
#include "remote/messages.h"
#include "remote/server.h"
#include "remote/source.h"
#include "remote/worker.h"

/* A close waits this long for UCX to finish the endpoint's disconnection. */
#define SHMREG__REMOTE_CLOSE_MS 1000
/* An idle connection is asked for a sign of life at most this often. */
#define SHMREG__REMOTE_PING_NS 1000000000ull
#define SHMREG__DEFAULT_MAX_CONNECTIONS 16
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
#define SHMREG__DEFAULT_MAX_COPIES 8

struct tenant {
    struct tenant *next;
    const void *registry;
    char *tag;              /* NULL: the untagged tenant */
    unsigned connections;   /* live connections plus unused secrets, under the lock */
    atomic_uint copies;     /* copies in flight */
};

struct secret {
    struct secret *next;
    unsigned char bytes[SHMREG_REMOTE_SECRET_SIZE];
    struct tenant *tenant;
    uint64_t expires_ns;
};

struct window {
    struct window *next;
    uint64_t id, generation, length;
};


struct shmreg__rconn {
    struct shmreg__rconn *next; /* the engine's list while listed */
    bool listed;
    unsigned char id[SHMREG__RMSG_CONNECTION_ID];
    struct tenant *tenant;      /* NULL until the hello proved it; then for good */
    uint64_t accepted_ns;
    unsigned char source[SHMREG__SOURCE_SIZE]; /* where it came from (SHMREG__SOURCE_SIZE) */
    unsigned long refs;         /* the list's one, and one per region; under the lock */
    pthread_rwlock_t use;       /* read: posting on ep; write: closing it */
    ucp_ep_h ep;                /* NULL once closed */
    struct window *windows;     /* under the lock */
    unsigned window_count;
    atomic_bool failed;
    atomic_flag why_set;
    char why[200];              /* written once, before failed is set */
    char transports[96];        /* immutable after the welcome */
    /* Liveness, under the lock. */
    uint64_t last_heard_ns;
    uint64_t ping_sent_ns;      /* 0: none outstanding */
};

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

/* The engine's own copies of config's strings. */
struct config_strings {
    char *listen, *transports, *tcp_device, *tcp_ports;
};

static struct {
    pthread_mutex_t lock;
    bool started;
    shmreg_err start_error;
    struct shmreg__ucx_worker w;
    ucp_listener_h listener;
    char address[80];
    shmreg_remote_config config;
    struct config_strings strings; /* owned; config's pointers point here */
    struct tenant *tenants;
    struct secret *secrets;
    struct shmreg__rconn *conns;
    struct pending *pending;
    uint64_t next_request;
} engine = {.lock = PTHREAD_MUTEX_INITIALIZER};

static ucs_status_t on_message(void *arg, const void *header, size_t header_length, void *data, size_t length,
                               const ucp_am_recv_param_t *param);
static void conns_reap(void);
static void conn_free(struct shmreg__rconn *c);

static unsigned max_connections(void)
{
    return engine.config.max_connections ? engine.config.max_connections : SHMREG__DEFAULT_MAX_CONNECTIONS;
}

static unsigned max_copies(void)
{
    return engine.config.max_copies ? engine.config.max_copies : SHMREG__DEFAULT_MAX_COPIES;
}

static void config_strings_free(struct config_strings *k)
{
    shmreg__free(k->listen);
    shmreg__free(k->transports);
    shmreg__free(k->tcp_device);
    shmreg__free(k->tcp_ports);
}

static shmreg_err config_strings_copy(const shmreg_remote_config *c, struct config_strings *k)
{
    const char *from[] = {c->listen, c->transports, c->tcp_device, c->tcp_ports};
    char **to[] = {&k->listen, &k->transports, &k->tcp_device, &k->tcp_ports};
    for (size_t i = 0; i < 4; i++) {
        if (from[i] && !(*to[i] = shmreg__strdup(from[i]))) {
            config_strings_free(k);
            return shmreg__fail(SHMREG_ERR_NO_MEMORY, "out of memory configuring remote regions");
        }
    }
    return SHMREG_OK;
}

shmreg_err shmreg_remote_configure(const shmreg_remote_config *config)
{
    shmreg_remote_config c = config ? *config : (shmreg_remote_config){0};
    struct sockaddr_storage ss;
    socklen_t len;
    if (c.listen && shmreg__hostport_parse(c.listen, true, &ss, &len, "remote_configure: listen") != SHMREG_OK)
        return SHMREG_ERR_INVALID_ARG;
    struct shmreg__remote_transports t;
    if (shmreg__remote_server_transports(&c, &t) != SHMREG_OK)
        return SHMREG_ERR_INVALID_ARG;
    struct config_strings k = {0};
    if (config_strings_copy(&c, &k) != SHMREG_OK)
        return SHMREG_ERR_NO_MEMORY;
    pthread_mutex_lock(&engine.lock);
    bool started = engine.started;
    if (!started) {
        config_strings_free(&engine.strings);
        engine.strings = k;
        engine.config = c;
        engine.config.listen = k.listen;
        engine.config.transports = k.transports;
        engine.config.tcp_device = k.tcp_device;
        engine.config.tcp_ports = k.tcp_ports;
    }
    pthread_mutex_unlock(&engine.lock);
    if (started) {
        config_strings_free(&k);
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "remote_configure: the remote engine has already started");
    }
    return SHMREG_OK;
}

static void on_conn_request(ucp_conn_request_h request, void *arg);

static shmreg_err listen_start_locked(void)
{
    const char *at = engine.config.listen ? engine.config.listen : "0.0.0.0:0";
    struct sockaddr_storage ss;
    socklen_t len;
    shmreg_err err = shmreg__hostport_parse(at, true, &ss, &len, "cannot start the remote engine: listen");
    if (err != SHMREG_OK)
        return err;
    ucp_listener_params_t p = {
        .field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER,
        .sockaddr = {.addr = (const struct sockaddr *)&ss, .addrlen = len},
        .conn_handler = {.cb = on_conn_request},
    };
    ucs_status_t st = engine.w.ucx->listener_create(engine.w.worker, &p, &engine.listener);
    if (st != UCS_OK)
        return shmreg__ucx_fail(SHMREG_ERR_SYSTEM, st, "cannot start the remote engine: ucp_listener_create on %s",
                                at);
    ucp_listener_attr_t attr = {.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR};
    if ((st = engine.w.ucx->listener_query(engine.listener, &attr)) != UCS_OK) {
        engine.w.ucx->listener_destroy(engine.listener);
        return shmreg__ucx_fail(SHMREG_ERR_SYSTEM, st, "cannot start the remote engine: ucp_listener_query");
    }
    shmreg__hostport_format((const struct sockaddr *)&attr.sockaddr, engine.address, sizeof engine.address);
    return SHMREG_OK;
}

static shmreg_err engine_start_locked(void)
{
    if (engine.started)
        return SHMREG_OK;
    struct shmreg__remote_transports t;
    shmreg_err err = shmreg__remote_server_transports(&engine.config, &t); /* again: a device may have gone */
    if (err != SHMREG_OK)
        return err;
    const struct shmreg__ucx_worker_params p = {
        .thread_name = "shmreg-ucx",
        .what = "cannot start the remote engine",
        .transports = &t,
        .reuse_address = true,
        .am_id = SHMREG__AM_TO_SERVER,
        .am_cb = on_message,
    };
    err = shmreg__ucx_worker_start(&engine.w, &p);
    if (err != SHMREG_OK)
        return err;
    if ((err = listen_start_locked()) != SHMREG_OK) {
        shmreg__ucx_worker_stop(&engine.w);
        return err;
    }
    engine.started = true;
    return SHMREG_OK;
}

/* Start the engine if it has not; callers hold no lock. */
static shmreg_err engine_start(void)
{
    pthread_mutex_lock(&engine.lock);
    shmreg_err err = engine_start_locked();
    pthread_mutex_unlock(&engine.lock);
    return err;
}

shmreg_err shmreg_remote_server_address(const char **address)
{
    if (!address)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "remote_server_address: address is NULL");
    shmreg_err err = engine_start();
    if (err != SHMREG_OK)
        return err;
    *address = engine.address;
    return SHMREG_OK;
}

/* ---- tenants and secrets */

static bool same_tag(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static struct tenant *tenant_get_locked(const void *registry, const char *tag)
{
    for (struct tenant *t = engine.tenants; t; t = t->next)
        if (t->registry == registry && same_tag(t->tag, tag))
            return t;
    struct tenant *t = shmreg__calloc(1, sizeof *t);
    if (!t || (tag && !(t->tag = shmreg__strdup(tag)))) {
        shmreg__free(t);
        return NULL;
    }
    t->registry = registry;
    t->next = engine.tenants;
    engine.tenants = t;
    return t;
}

static const char *tenant_name(const struct tenant *t)
{
    return t->tag ? t->tag : "(untagged)";
}

/* Secrets past their time are dropped, and their tenants' places freed. */
static void secrets_expire_locked(uint64_t now)
{
    for (struct secret **pp = &engine.secrets; *pp;) {
        struct secret *s = *pp;
        if (s->expires_ns > now) {
            pp = &s->next;
            continue;
        }
        *pp = s->next;
        s->tenant->connections--;
        shmreg__free(s);
    }
}

shmreg_err shmreg_remote_invite(shmreg_registry *reg, const char *tag, unsigned char secret[SHMREG_REMOTE_SECRET_SIZE])
{
    if (!reg || !secret)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "remote_invite: %s is NULL", !reg ? "registry" : "secret");
    shmreg_err err = shmreg__check_tag(tag);
    if (err != SHMREG_OK)
        return err;
    struct secret *s = shmreg__calloc(1, sizeof *s);
    if (!s)
        return shmreg__fail(SHMREG_ERR_NO_MEMORY, "out of memory issuing a remote connection secret");
    if (getrandom(s->bytes, sizeof s->bytes, 0) != (ssize_t)sizeof s->bytes) {
        shmreg__free(s);
        return shmreg__fail_errno(SHMREG_ERR_SYSTEM, errno, "remote_invite: getrandom");
    }
    uint64_t now = shmreg__ucx_now_ns();
    conns_reap();
    pthread_mutex_lock(&engine.lock);
    err = engine_start_locked();
    struct tenant *t = err == SHMREG_OK ? tenant_get_locked(reg, tag) : NULL;
    if (err == SHMREG_OK && !t)
        err = shmreg__fail(SHMREG_ERR_NO_MEMORY, "out of memory issuing a remote connection secret");
    if (t) {
        secrets_expire_locked(now);
        if (t->connections >= max_connections()) {
            err = shmreg__fail(SHMREG_ERR_NO_MEMORY, "tenant '%s' holds %u remote connections and unused "
                               "secrets: the limit of %u", tenant_name(t), t->connections, max_connections());
        } else {
            t->connections++;
            s->tenant = t;
            s->expires_ns = now + (uint64_t)SHMREG_REMOTE_INVITE_MS * 1000000u;
            s->next = engine.secrets;
            engine.secrets = s;
            memcpy(secret, s->bytes, sizeof s->bytes);
        }
    }
    pthread_mutex_unlock(&engine.lock);
    if (err != SHMREG_OK)
        shmreg__free(s);
    return err;
}

/* The tenant of a valid secret, which is used up; NULL for any other.
 * Compared in full, in constant time: a near miss tells nothing. */
static struct tenant *secret_take_locked(const unsigned char *bytes, uint64_t now)
{
    secrets_expire_locked(now);
    for (struct secret **pp = &engine.secrets; *pp; pp = &(*pp)->next) {
        unsigned char diff = 0;
        for (size_t i = 0; i < SHMREG_REMOTE_SECRET_SIZE; i++)
            diff |= (unsigned char)((*pp)->bytes[i] ^ bytes[i]);
        if (diff == 0) {
            struct secret *s = *pp;
            struct tenant *t = s->tenant;
            *pp = s->next;
            shmreg__free(s); /* its place in t->connections passes to the connection */
            return t;
        }
    }
    return NULL;
}

/* ---- sending */

static void free_sent(void *request, ucs_status_t status, void *user_data)
{
    shmreg__free(user_data);
    engine.w.ucx->request_free(request);
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
    ucs_status_ptr_t req = engine.w.ucx->am_send_nbx(ep, SHMREG__AM_TO_CLIENT, h, SHMREG__RMSG_SIZE, NULL, 0, &p);
    if (!UCS_PTR_IS_PTR(req))
        shmreg__free(h); /* done at once, or failed: the callback will not run */
}

/* ---- connections */

static void mark_failed(struct shmreg__rconn *c, const char *why)
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

static bool conn_failed(const struct shmreg__rconn *c)
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
    engine.w.ucx->ep_print_info(ep, f);
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
    struct tenant *t = secret_take_locked(hello->token, shmreg__ucx_now_ns());
    if (!t) {
        answer.status = SHMREG_ERR_NOT_FOUND;
        mark_failed(c, "the client presented an unknown, used or expired secret");
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
    snprintf(why, sizeof why, "the client's connection failed: %s", engine.w.ucx->status_string(status));
    mark_failed(arg, why);
}

/* Connections that never proved themselves in time are failed; the count
 * of those still waiting. */
static unsigned unproven_expire_locked(uint64_t now)
{
    unsigned waiting = 0;
    for (struct shmreg__rconn *c = engine.conns; c; c = c->next) {
        if (c->tenant || conn_failed(c))
            continue;
        if (now - c->accepted_ns > SHMREG__HELLO_NS)
            mark_failed(c, "the client presented no secret in time");
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
    bool known = engine.w.ucx->conn_request_query(request, &attr) == UCS_OK;
    shmreg__remote_source(known ? &attr.client_address : NULL, source);
}

/* Connections from source still waiting to prove themselves (expired
 * ones were failed by unproven_expire_locked). */
static unsigned unproven_from_locked(const unsigned char source[SHMREG__SOURCE_SIZE])
{
    unsigned n = 0;
    for (struct shmreg__rconn *c = engine.conns; c; c = c->next)
        if (!c->tenant && !conn_failed(c) && memcmp(c->source, source, SHMREG__SOURCE_SIZE) == 0)
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
static void on_conn_request(ucp_conn_request_h request, void *arg)
{
    struct shmreg__rconn *c = NULL;
    unsigned char source[SHMREG__SOURCE_SIZE];
    request_source(request, source);
    pthread_mutex_lock(&engine.lock);
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
        if (engine.w.ucx->ep_create(engine.w.worker, &p, &c->ep) == UCS_OK) {
            c->refs = 1;
            c->listed = true;
            c->accepted_ns = c->last_heard_ns = shmreg__ucx_now_ns();
            c->next = engine.conns;
            engine.conns = c;
            pthread_mutex_unlock(&engine.lock);
            return;
        }
        pthread_rwlock_destroy(&c->use);
        request = NULL; /* ep_create consumed it, failing */
    }
    shmreg__free(c);
    pthread_mutex_unlock(&engine.lock);
    if (request)
        engine.w.ucx->listener_reject(engine.listener, request);
}

static struct shmreg__rconn *conn_of_ep_locked(ucp_ep_h ep)
{
    for (struct shmreg__rconn *c = engine.conns; c; c = c->next)
        if (c->ep == ep && !conn_failed(c))
            return c;
    return NULL;
}

static struct window *window_find_locked(struct shmreg__rconn *c, uint64_t id, uint64_t generation)
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
    if (window_find_locked(c, m->window, m->generation))
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
    for (struct shmreg__rconn **pp = &engine.conns; *pp; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    }
    c->listed = false;
    c->refs--;
}

/* ---- copies waiting for answers */

static struct pending *pending_find_locked(uint64_t request, ucp_ep_h ep)
{
    for (struct pending *p = engine.pending; p; p = p->next)
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
static bool data(const struct shmreg__rmsg *m, void *bytes, size_t length, const ucp_am_recv_param_t *param)
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
    ucs_status_ptr_t req = engine.w.ucx->am_recv_data_nbx(engine.w.worker, bytes, p->buf, p->n, &rp);
    if (UCS_PTR_IS_PTR(req))
        atomic_store_explicit(&p->recv, req, memory_order_release); /* the waiter completes it */
    else
        answer_pending(p, UCS_PTR_IS_ERR(req) ? SHMREG_ERR_FAULT : SHMREG_OK,
                       UCS_PTR_IS_ERR(req) ? engine.w.ucx->status_string(UCS_PTR_STATUS(req)) : NULL);
    return true;
}

static void stored(const struct shmreg__rmsg *m, ucp_ep_h ep)
{
    struct pending *p = pending_find_locked(m->request, ep);
    if (!p || !p->to_memory || atomic_load_explicit(&p->answered, memory_order_relaxed))
        return;
    char why[120];
    snprintf(why, sizeof why, "the client refused: %s", shmreg_err_name((shmreg_err)m->status));
    answer_pending(p, m->status == SHMREG_OK ? SHMREG_OK : SHMREG_ERR_FAULT, m->status == SHMREG_OK ? NULL : why);
}

/* What arrives from a client, inside some thread's progress. A message
 * that does not parse, or comes from no connection (other than a hello),
 * is dropped: the sender learns nothing and the server changes nothing. A
 * rendezvous this side did not start to receive is refused (UCX drops it
 * and the sender's send ends with that status). */
static ucs_status_t on_message(void *arg, const void *header, size_t header_length, void *bytes, size_t length,
                               const ucp_am_recv_param_t *param)
{
    struct shmreg__rmsg m;
    bool rndv = param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV;
    bool has_ep = param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP;
    if (!has_ep || shmreg__rmsg_parse(header, header_length, true, &m) != NULL ||
        (length && m.kind != SHMREG__RMSG_DATA))
        return rndv ? UCS_ERR_REJECTED : UCS_OK;
    ucp_ep_h ep = param->reply_ep;
    pthread_mutex_lock(&engine.lock);
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
        if (c && data(&m, bytes, length, param))
            rndv = false; /* its receive is under way */
        break;
    case SHMREG__RMSG_STORED:
        if (c)
            stored(&m, ep);
        break;
    case SHMREG__RMSG_PONG:
        if (c)
            c->ping_sent_ns = 0;
        break;
    case SHMREG__RMSG_BYE:
        if (c)
            mark_failed(c, "the client said goodbye");
        break;
    }
    pthread_mutex_unlock(&engine.lock);
    return rndv ? UCS_ERR_REJECTED : UCS_OK;
}

/* Connections that failed with no region on them: nothing will drop
 * their last reference but this. Freed outside the lock (UCX's close). */
static void conns_reap(void)
{
    struct shmreg__rconn *dead = NULL;
    pthread_mutex_lock(&engine.lock);
    (void)unproven_expire_locked(shmreg__ucx_now_ns()); /* and those that never proved themselves */
    for (struct shmreg__rconn **pp = &engine.conns; *pp;) {
        struct shmreg__rconn *c = *pp;
        if (!conn_failed(c) || c->refs != 1) {
            pp = &c->next;
            continue;
        }
        *pp = c->next;
        c->listed = false;
        c->refs = 0;
        c->next = dead;
        dead = c;
    }
    pthread_mutex_unlock(&engine.lock);
    while (dead) {
        struct shmreg__rconn *c = dead;
        dead = c->next;
        conn_free(c);
    }
}

/* ---- the backend's calls */

static bool tenant_is(const struct tenant *t, const void *registry, const char *tag)
{
    return t->registry == registry && same_tag(t->tag, tag);
}

shmreg_err shmreg__rconn_find(const struct shmreg__remote_descriptor *d, const void *registry, const char *tag,
                              const char *name, struct shmreg__rconn **out, uint64_t *window_length)
{
    shmreg_err err = engine_start();
    if (err != SHMREG_OK)
        return err;
    pthread_mutex_lock(&engine.lock);
    struct shmreg__rconn *c = engine.conns;
    while (c && memcmp(c->id, d->connection, sizeof c->id) != 0)
        c = c->next;
    struct window *w = c && !conn_failed(c) && c->tenant && tenant_is(c->tenant, registry, tag)
                           ? window_find_locked(c, d->window, d->generation)
                           : NULL;
    if (w && out) {
        c->refs++;
        *out = c;
    }
    if (w)
        *window_length = w->length;
    pthread_mutex_unlock(&engine.lock);
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
static bool conn_close(struct shmreg__rconn *c)
{
    const struct shmreg__ucx *u = engine.w.ucx;
    pthread_rwlock_wrlock(&c->use);
    ucp_ep_h ep = c->ep;
    c->ep = NULL;
    pthread_rwlock_unlock(&c->use);
    if (!ep)
        return true;
    ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = UCP_EP_CLOSE_FLAG_FORCE};
    ucs_status_ptr_t req = u->ep_close_nbx(ep, &p);
    uint64_t deadline = shmreg__ucx_now_ns() + (uint64_t)SHMREG__REMOTE_CLOSE_MS * 1000000u;
    if (shmreg__ucx_wait(&engine.w, req, deadline) != UCS_ERR_TIMED_OUT)
        return true;
    u->request_free(req);
    return false;
}

static void conn_free(struct shmreg__rconn *c)
{
    bool closed = conn_close(c);
    pthread_mutex_lock(&engine.lock);
    while (c->windows) {
        struct window *w = c->windows;
        c->windows = w->next;
        shmreg__free(w);
    }
    if (c->tenant)
        c->tenant->connections--;
    pthread_mutex_unlock(&engine.lock);
    if (!closed)
        return; /* kept (a small leak) rather than freed under UCX's feet */
    pthread_rwlock_destroy(&c->use);
    shmreg__free(c);
}

void shmreg__rconn_put(struct shmreg__rconn *c)
{
    pthread_mutex_lock(&engine.lock);
    if (conn_failed(c))
        conn_unlist_locked(c);
    bool last = --c->refs == 0;
    pthread_mutex_unlock(&engine.lock);
    if (last)
        conn_free(c);
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
    pthread_mutex_lock(&engine.lock);
    struct window *w = window_find_locked(p->conn, window, generation);
    if (!w)
        err = copy_error(name, p->to_memory, "the client has withdrawn the window");
    else if (offset > w->length || p->n > w->length - offset)
        err = shmreg__fail(SHMREG_ERR_OUT_OF_BOUNDS, "remote region '%s': [%llu, +%zu) is outside the client's "
                           "window of %llu bytes", name, (unsigned long long)offset, p->n,
                           (unsigned long long)w->length);
    if (err == SHMREG_OK) {
        p->request = ++engine.next_request;
        p->next = engine.pending;
        engine.pending = p;
    }
    pthread_mutex_unlock(&engine.lock);
    return err;
}

static void pending_remove(struct pending *p)
{
    pthread_mutex_lock(&engine.lock);
    for (struct pending **pp = &engine.pending; *pp; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    }
    /* Marked answered under the lock: a late answer finds it done. */
    atomic_store_explicit(&p->answered, true, memory_order_relaxed);
    pthread_mutex_unlock(&engine.lock);
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
        req = engine.w.ucx->am_send_nbx(p->conn->ep, SHMREG__AM_TO_CLIENT, p->header, SHMREG__RMSG_SIZE,
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
    ucs_status_t s = engine.w.ucx->request_check_status(*req);
    if (s == UCS_INPROGRESS)
        return false;
    engine.w.ucx->request_free(*req);
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
    snprintf(why, sizeof why, "the client's connection failed: %s", engine.w.ucx->status_string(st));
    mark_failed(p->conn, why);
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
            snprintf(why, sizeof why, "the client's connection failed: %s", engine.w.ucx->status_string(st));
            mark_failed(p->conn, why);
            answer_pending(p, SHMREG_ERR_FAULT, why);
        }
        if (sent && receive_over(p) && atomic_load_explicit(&p->answered, memory_order_acquire))
            return true;
        if (engine.w.ucx->worker_progress(engine.w.worker) != 0) {
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
    shmreg__ucx_waiting(&engine.w, +1);
    bool answered = progress_until_answered(p, req, deadline);
    shmreg__ucx_waiting(&engine.w, -1);
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
    mark_failed(p->conn, why);
    pending_remove(p);
    (void)conn_close(p->conn);
    ucs_status_ptr_t recv = atomic_load_explicit(&p->recv, memory_order_acquire);
    uint64_t grace = shmreg__ucx_now_ns() + (uint64_t)SHMREG__REMOTE_CLOSE_MS * 1000000u;
    ucs_status_t st;
    while (!(request_over(req, &st) && request_over(&recv, &st)) && shmreg__ucx_now_ns() < grace)
        engine.w.ucx->worker_progress(engine.w.worker);
}

shmreg_err shmreg__rconn_copy(struct shmreg__rconn *c, uint64_t window, uint64_t generation, uint64_t offset,
                              void *buf, size_t n, bool to_memory, uint64_t timeout_ns, const char *name)
{
    if (conn_failed(c))
        return copy_error(name, to_memory, c->why);
    struct tenant *t = c->tenant;
    if (atomic_fetch_add_explicit(&t->copies, 1, memory_order_relaxed) >= max_copies()) {
        atomic_fetch_sub_explicit(&t->copies, 1, memory_order_relaxed);
        return shmreg__fail(SHMREG_ERR_NO_MEMORY, "remote region '%s': tenant '%s' has %u remote copies in "
                            "flight: the limit of %u; retry later", name, tenant_name(t), max_copies(), max_copies());
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
            mark_failed(c, closed ? "the client's connection is closed"
                                  : engine.w.ucx->status_string(UCS_PTR_STATUS(req)));
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

bool shmreg__rconn_gone(struct shmreg__rconn *c, uint64_t timeout_ns)
{
    conns_reap();
    if (conn_failed(c))
        return true;
    uint64_t now = shmreg__ucx_now_ns();
    bool ping = false, silent = false;
    pthread_mutex_lock(&engine.lock);
    if (c->ping_sent_ns && now - c->ping_sent_ns > timeout_ns)
        silent = true;
    else if (!c->ping_sent_ns && now - c->last_heard_ns > SHMREG__REMOTE_PING_NS)
        ping = true, c->ping_sent_ns = now;
    pthread_mutex_unlock(&engine.lock);
    if (silent) {
        char why[120];
        snprintf(why, sizeof why, "no answer to a liveness check within %llu ms",
                 (unsigned long long)(timeout_ns / 1000000u));
        mark_failed(c, why);
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
