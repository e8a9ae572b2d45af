/* The HTTP server: libmicrohttpd glue, routing, and the drain at shutdown. */
#ifndef SERVER_HTTP_SERVER_H
#define SERVER_HTTP_SERVER_H

#include <stdatomic.h>

#include <shmreg/shmreg.h>

#include "common/byte_budget.h"
#include "core/access.h"
#include "core/remote_turns.h"
#include "http/request.h"
#include "common/worker_pool.h"

/* What the HTTP server is told (main.c fills it from the flags). */
typedef struct http_config {
    const char *host;                /* --host: numeric IPv4 or IPv6 address to listen on */
    unsigned port;                   /* --port; 0: any free port */
    int listen_fd;                   /* a listening socket to serve instead of binding host:port
                                        (a live upgrade: main.c's); -1: bind */
    worker_pool_config workers;      /* --threads at work, spares for requests whose worker
                                        waits for a GPU run, --spin-us */
    size_t max_body;                 /* --max-body-mb: largest request body, bytes */
    unsigned drain_s;                /* --drain-s: how long the stop waits for requests */
    unsigned request_timeout_s;      /* --request-timeout-s: an idle connection is closed */
    unsigned max_client_connections; /* --max-client-connections: per IP address; 0: no limit */
    int allow_client_shm;            /* --allow-client-shm: register/unregister allowed */
    int verbose;                     /* -v: one log line per request */
    const access_options *access;    /* --allow-uid, --http-restricted-api, --tenants: outlives the server */
} http_config;

typedef struct http_server {
    struct MHD_Daemon *daemon;
    worker_pool *workers;   /* runs inference off the HTTP thread */
    remote_turns *remote_turns; /* the workers' turns for remote copies */
    shmreg_registry *registry;
    http_config cfg;
    /* Requests whose body is in, until their completion: what the drain
     * waits for. An upload still arriving is not waited for: it would be
     * answered 503 anyway. */
    atomic_uint in_flight;
    byte_budget *bodies;    /* request body bytes held, all connections together (main.c's) */
    atomic_bool draining;   /* shutdown began: new requests get 503 */
    atomic_bool handing_over; /* an upgrade's pause: every answer closes its connection */
    atomic_bool closing;    /* past an upgrade's pause: a request is dropped unanswered */
    atomic_uint dispatched; /* requests whose body is in, ever: the pause's clock */
    /* Runs handed to the device from the HTTP thread and not yet answered
     * (they hold a suspended connection): the stop waits for them to end
     * before it stops the daemon, as it waits for the workers' runs. */
    atomic_uint on_device;
    unsigned port;          /* the port actually bound */
} http_server;

/* The shape every adapter has (main.c starts them from one table). */

/* Listen on cfg->host:cfg->port (0: any free port), or on cfg->listen_fd,
 * which the server takes from the call on (closed on failure too). Each
 * request body is
 * charged to bodies (the bytes of HTTP requests the server holds,
 * --max-buffered-mb) while it is held; one that does not fit is refused.
 * cfg is copied; what it points to must outlive the server. NULL with a
 * message on stderr. */
http_server *http_server_start(const http_config *cfg, shmreg_registry *reg,
                               byte_budget *bodies);
/* The port actually bound. */
unsigned http_server_port(const http_server *s);
/* Stop accepting, let in-flight requests finish (up to cfg->drain_s), then
 * answer 503 to those still queued, cut the running ones short (a slow
 * model's delay), stop every thread and free s. Every request's references
 * are released when this returns. NULL is a no-op. */
void http_server_stop(http_server *s);
/* For a live upgrade: stop accepting, with the listening socket left open
 * and returned (-1 when there is none): connections that arrive meanwhile
 * wait in the kernel's backlog for whoever serves it next. Unlike a stop,
 * requests on connections already open are served on, each answer closing
 * its connection, until none has come for a moment; one that comes later
 * is dropped unanswered (its client may send it again: nothing of it was
 * read); then as http_server_stop. */
int http_server_detach(http_server *s);

#endif
