/* The HTTP server: libmicrohttpd glue, routing, and the drain at shutdown. */
#ifndef SERVER_SERVER_H
#define SERVER_SERVER_H

#include <stdatomic.h>

#include <shmreg/shmreg.h>

#include "common/byte_budget.h"
#include "options.h"
#include "http/request.h"
#include "common/worker_pool.h"

typedef struct http_server {
    struct MHD_Daemon *daemon;
    worker_pool *workers;   /* runs inference off the HTTP thread */
    shmreg_registry *registry;
    const server_options *opts;
    /* Requests whose body is in, until their completion: what the drain
     * waits for. An upload still arriving is not waited for: it would be
     * answered 503 anyway. */
    atomic_uint in_flight;
    byte_budget *bodies;    /* request body bytes held, all connections together (main.c's) */
    atomic_bool draining;   /* shutdown began: new requests get 503 */
    unsigned port;          /* the port actually bound */
} http_server;

/* Start listening; 0 on success, -1 with a message on stderr. */
int http_server_start(http_server *s, const server_options *opts, shmreg_registry *reg,
                 byte_budget *bodies);
/* Stop accepting, let in-flight requests finish (up to opts->drain_s), then
 * answer 503 to those still queued, cut the running ones short (a slow
 * model's delay) and stop every thread. Every request's references are
 * released when this returns. */
void http_server_stop(http_server *s);

#endif
