/*
 * The KServe v2 gRPC service (inference.GRPCInferenceService, proto/
 * inference.proto) beside the HTTP server, in the same process and over the
 * same registry and models: service.cc (its ModelInfer calls in
 * infer_call.cc, conversions in convert.cc), C++17, callable from main.c.
 *
 * gRPC's completion-queue API, drained by a few serving threads
 * (--threads does not count them): a short call runs and is answered on the
 * serving thread that read it, a longer inference on the service's worker
 * threads; each call's region references are released once its response
 * has been sent: the same rule as HTTP's completion callback.
 */
#ifndef SERVER_GRPC_SERVER_H
#define SERVER_GRPC_SERVER_H

#include <shmreg/shmreg.h>

#include "common/byte_budget.h"
#include "common/worker_pool.h"
#include "core/access.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the gRPC service is told (main.c fills it from the flags). */
typedef struct grpc_config {
    const char *host;                /* --host: numeric IPv4 or IPv6 address to listen on */
    unsigned port;                   /* --grpc-port (not 0 here, unless listen_fd is given) */
    int listen_fd;                   /* a listening socket to serve instead of binding host:port
                                        (a live upgrade: main.c's); -1: bind */
    worker_pool_config workers;      /* --threads at work, spares for calls whose worker
                                        waits for a GPU run, --spin-us */
    unsigned serving_threads;        /* --grpc-threads: threads draining the completion queue */
    size_t max_body;                 /* --max-body-mb: largest ModelInfer message, bytes;
                                        also the memory quota's room for gRPC's read buffers */
    unsigned drain_s;                /* --drain-s: how long the stop waits for calls */
    unsigned request_timeout_s;      /* --request-timeout-s: an idle connection is closed */
    unsigned max_client_connections; /* --max-client-connections: per IP address; 0: no limit */
    int allow_client_shm;            /* --allow-client-shm: register/unregister allowed */
    const access_options *access;    /* --allow-uid, --grpc-restricted-protocol, --tenants: outlives the service */
} grpc_config;

/* Not grpc_server: gRPC's core library owns the grpc_ prefix (its own
 * grpc_server and grpc_server_start, which a symbol of ours of that name
 * would clash with at link time). The shape every adapter has (main.c
 * starts them from one table). */
typedef struct kserve_grpc_server kserve_grpc_server;

/* Listen on cfg->host:cfg->port (which must not be 0), or on
 * cfg->listen_fd, which the service takes from the call on (closed on
 * failure too). Each
 * ModelInfer message is charged to held (the bytes of gRPC requests the
 * server holds, --max-buffered-mb) until its call is done; one that does
 * not fit is answered RESOURCE_EXHAUSTED at once. While they arrive, gRPC's
 * memory quota bounds them, as the cap less what held holds (service.cc's
 * Budget). cfg is copied; what it points to must outlive the service. NULL
 * with a message on stderr when the port cannot be bound. */
kserve_grpc_server *kserve_grpc_server_start(const grpc_config *cfg, shmreg_registry *reg,
                                             byte_budget *held);
/* The port actually bound. */
unsigned kserve_grpc_server_port(const kserve_grpc_server *g);
/* Refuse new calls, let the calls in flight finish (up to cfg->drain_s,
 * then they are cancelled), wait until every call's references are
 * released, stop the threads and free g. NULL is a no-op. */
void kserve_grpc_server_stop(kserve_grpc_server *g);
/* kserve_grpc_server_stop, except that the listening socket is left open
 * and returned (-1: none): connections that arrive meanwhile wait in the
 * kernel's backlog for whoever serves it next (a live upgrade). */
int kserve_grpc_server_detach(kserve_grpc_server *g);

#ifdef __cplusplus
}
#endif

#endif
