/* The server's engine for remote regions (remote/server.h): what its parts
 * share. remote/server_engine.c configures and starts it, server_invitations.c
 * holds the tenants and their secrets, server_connections.c the clients'
 * connections and their windows, server_copies.c the copies in flight.
 *
 * Locks. shmreg__engine.lock guards every list (tenants, secrets,
 * connections, their windows, copies waiting for an answer). UCX runs the
 * message handler inside whichever thread progresses the worker, holding
 * the worker's own (recursive) lock; the handler takes shmreg__engine.lock
 * and may call UCX under it. Every other thread therefore calls UCX only
 * without shmreg__engine.lock held, so the two locks are always taken
 * worker first. */
#ifndef SHMREG_REMOTE_SERVER_ENGINE_H
#define SHMREG_REMOTE_SERVER_ENGINE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "remote/messages.h"
#include "remote/source.h"
#include "remote/worker.h"
#include "shmreg/shmreg.h"

/* A close waits this long for UCX to finish the endpoint's disconnection. */
#define SHMREG__REMOTE_CLOSE_MS 1000

struct tenant {
    struct tenant *next;
    const void *registry;
    char *tag;              /* NULL: the untagged tenant */
    unsigned connections;   /* live connections plus unused secrets, under the lock */
    atomic_uint copies;     /* copies in flight */
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

/* The engine's own copies of config's strings. */
struct config_strings {
    char *listen, *transports, *tcp_device, *tcp_ports;
};

struct secret;  /* remote/server_invitations.c */
struct pending; /* remote/server_copies.c */

struct shmreg__remote_engine {
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
};

extern struct shmreg__remote_engine shmreg__engine;

/* remote/server_engine.c */
unsigned shmreg__engine_max_connections(void);
unsigned shmreg__engine_max_copies(void);
shmreg_err shmreg__engine_start_locked(void);
shmreg_err shmreg__engine_start(void);

/* remote/server_invitations.c */
const char *shmreg__tenant_name(const struct tenant *t);
bool shmreg__tenant_is(const struct tenant *t, const void *registry, const char *tag);
struct tenant *shmreg__secret_take_locked(const unsigned char *bytes, uint64_t now);

/* remote/server_connections.c */
void shmreg__on_conn_request(ucp_conn_request_h request, void *arg);
ucs_status_t shmreg__on_message(void *arg, const void *header, size_t header_length, void *bytes, size_t length,
                                const ucp_am_recv_param_t *param);
void shmreg__mark_failed(struct shmreg__rconn *c, const char *why);
bool shmreg__conn_failed(const struct shmreg__rconn *c);
bool shmreg__conn_close(struct shmreg__rconn *c);
void shmreg__conns_reap(void);
struct window *shmreg__window_find_locked(struct shmreg__rconn *c, uint64_t id, uint64_t generation);

/* remote/server_copies.c */
bool shmreg__copy_data(const struct shmreg__rmsg *m, void *bytes, size_t length, const ucp_am_recv_param_t *param);
void shmreg__copy_stored(const struct shmreg__rmsg *m, ucp_ep_h ep);

#endif
