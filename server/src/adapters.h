/* The adapters (HTTP, gRPC, the Unix socket) as main.c runs them: from one
 * table, started in its order and stopped in the reverse order, their
 * drains at once; or, for a live upgrade (upgrade.h), stopped with their
 * listening sockets kept open and handed on, and started on sockets handed
 * to them. */
#ifndef SERVER_ADAPTERS_H
#define SERVER_ADAPTERS_H

#include <pthread.h>

#include <shmreg/shmreg.h>

#include "common/byte_budget.h"
#include "options.h"
#include "uds/uds_server.h"

/* The listening sockets of a live upgrade (-1: none) and the Unix socket's
 * client connections. Whoever holds the struct owns every descriptor. */
typedef struct adapter_sockets {
    int http, grpc;
    uds_handoff uds;
} adapter_sockets;

/* None: every descriptor -1. */
void adapter_sockets_init(adapter_sockets *s);
/* Close every descriptor and free the connections; s is then empty. */
void adapter_sockets_close(adapter_sockets *s);

struct adapter;

/* One adapter as it runs. */
typedef struct running {
    const struct adapter *a;
    void *server;      /* NULL: not asked for, or not started */
    byte_budget *held; /* its budget of request bytes */
    pthread_t stopper; /* stops it while the others drain too */
    int on_thread;     /* 1: stopper was started */
    adapter_sockets *keep; /* a detach's: where its sockets go; NULL: a stop closes them */
} running;

#define N_ADAPTERS 3

/* Start the adapters the flags ask for, in the table's order; those of
 * given (NULL: none) serve its sockets instead of binding, and take them
 * (given is emptied, on failure too). 0, or -1 with those started stopped
 * again (a message on stderr). */
int adapters_start(const server_options *o, shmreg_registry *reg, running *run,
                   adapter_sockets *given);
/* Stop every adapter started: no request runs when this returns. */
void adapters_stop(running *run);
/* adapters_stop, except that each listening socket and the Unix socket's
 * connections are kept open, in *out (the caller's): connections that
 * arrive meanwhile wait in the kernels' backlogs. */
void adapters_detach(running *run, adapter_sockets *out);
/* Whether any adapter runs (none after a stop or a detach). */
int adapters_serving(const running *run);
/* The lines that tell clients (and the tests) where each adapter listens. */
void adapters_announce(const server_options *o, const running *run);

#endif
