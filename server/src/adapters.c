/* The adapters' table, and how they start and stop together (adapters.h). */
#include "adapters.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "grpc/grpc_server.h"
#include "http/http_server.h"

void adapter_sockets_init(adapter_sockets *s)
{
    *s = (adapter_sockets){.http = -1, .grpc = -1, .uds = {.listen_fd = -1}};
}

void adapter_sockets_close(adapter_sockets *s)
{
    int *fds[] = {&s->http, &s->grpc, &s->uds.listen_fd};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        if (*fds[i] >= 0)
            close(*fds[i]);
    for (size_t i = 0; i < s->uds.n_connections; i++)
        if (s->uds.connections[i].fd >= 0)
            close(s->uds.connections[i].fd);
    free(s->uds.connections);
    adapter_sockets_init(s);
}

/* Every adapter has the same shape: SERVER_start(config, registry, budget)
 * returns the running server or NULL after a message on stderr,
 * SERVER_port gives the port it bound (0: none, a Unix socket's path),
 * SERVER_stop drains and frees it (NULL: no-op), SERVER_detach does the
 * same but hands its sockets on; SERVER is http_server, kserve_grpc_server
 * or uds_server. The glue here fills each adapter's own config from the
 * options (options_KIND, which also says whether the flags ask for it) and
 * the sockets it is given (KIND_take), so that no adapter sees a flag that
 * is not its own. */
typedef struct adapter {
    const char *name;
    /* 0 with *out the server (NULL: not asked for), -1 when it failed */
    int (*start)(const server_options *o, shmreg_registry *reg, byte_budget *held,
                 adapter_sockets *given, void **out);
    unsigned (*port)(const void *server);
    void (*stop)(void *server);
    void (*detach)(void *server, adapter_sockets *out);
} adapter;

/* What each adapter takes of the sockets given: they are its own from its
 * start on (uds_take leaves the array of connections to be freed). */
static void http_take(http_config *cfg, adapter_sockets *given)
{
    cfg->listen_fd = given->http;
    given->http = -1;
}

static void grpc_take(grpc_config *cfg, adapter_sockets *given)
{
    cfg->listen_fd = given->grpc;
    given->grpc = -1;
}

static void uds_take(uds_config *cfg, adapter_sockets *given)
{
    cfg->listen_fd = given->uds.listen_fd;
    cfg->adopt = given->uds.connections;
    cfg->n_adopt = given->uds.n_connections;
    cfg->tags_made = given->uds.tags_made;
    given->uds.listen_fd = -1;
    given->uds.n_connections = 0;
}

static void http_give(void *s, adapter_sockets *out)
{
    out->http = http_server_detach(s);
}

static void grpc_give(void *s, adapter_sockets *out)
{
    out->grpc = kserve_grpc_server_detach(s);
}

static void uds_give(void *s, adapter_sockets *out)
{
    uds_server_detach(s, &out->uds);
}

#define ADAPTER_GLUE(kind, server)                                                             \
    static int kind##_start(const server_options *o, shmreg_registry *reg, byte_budget *held,  \
                            adapter_sockets *given, void **out)                                \
    {                                                                                          \
        kind##_config cfg;                                                                     \
        *out = NULL;                                                                           \
        if (!options_##kind(o, &cfg))                                                          \
            return 0;                                                                          \
        if (given)                                                                             \
            kind##_take(&cfg, given);                                                          \
        *out = server##_start(&cfg, reg, held);                                                \
        return *out ? 0 : -1;                                                                  \
    }                                                                                          \
    static unsigned kind##_port(const void *s)                                                 \
    {                                                                                          \
        return server##_port(s);                                                               \
    }                                                                                          \
    static void kind##_stop(void *s)                                                           \
    {                                                                                          \
        server##_stop(s);                                                                      \
    }

ADAPTER_GLUE(http, http_server)
ADAPTER_GLUE(grpc, kserve_grpc_server)
ADAPTER_GLUE(uds, uds_server)

/* The adapters, in the order they start and print their line; they stop
 * in the reverse order, from stop_all alone, whether the start failed
 * part way, a signal came or a successor takes over.
 * - They start in this order, and print their lines only once all of them
 *   are up: an address or a socket path one must not take stops the start
 *   before a client is told of any (clients and the tests read the lines
 *   in this order).
 * - Each has a budget of request bytes of its own (--max-buffered-mb each).
 *   Shared, a flood of stalled HTTP uploads (each dropped only once it
 *   overflows) kept the budget full often enough to refuse honest gRPC
 *   calls; apart, each protocol's clients can only crowd out their own,
 *   and the server holds at most the figure once per adapter.
 * - They drain at the same time, each on a thread of its own, so that a
 *   stop takes one --drain-s, not one per adapter. The Unix socket (last
 *   here, its stop begun first) closes its connections at once: it takes
 *   no new region while the requests that use its clients' regions finish,
 *   and those regions go as they do (the registry's busy policy).
 * - Only once every adapter has stopped, no request runs: the models stop,
 *   then the sweeper, then the budgets and the registry go (main). */
static const adapter adapters[N_ADAPTERS] = {
    {"http", http_start, http_port, http_stop, http_give},
    {"grpc", grpc_start, grpc_port, grpc_stop, grpc_give},
    {"uds", uds_start, uds_port, uds_stop, uds_give},
};

static void halt(running *r)
{
    if (r->keep)
        r->a->detach(r->server, r->keep);
    else
        r->a->stop(r->server);
}

static void *halt_on_thread(void *arg)
{
    halt(arg);
    return NULL;
}

/* Stop (keep NULL) or detach every adapter started, in the reverse order
 * of the table, their drains at once (adapters' comment); free their
 * budgets. An adapter whose thread cannot start stops on this one, after
 * the drains before it. */
static void stop_all(running *run, adapter_sockets *keep)
{
    for (size_t i = N_ADAPTERS; i-- > 0;) {
        running *r = &run[i];
        r->keep = keep;
        r->on_thread = r->server && pthread_create(&r->stopper, NULL, halt_on_thread, r) == 0;
        if (r->server && !r->on_thread)
            halt(r);
    }
    for (size_t i = N_ADAPTERS; i-- > 0;) {
        if (run[i].on_thread)
            pthread_join(run[i].stopper, NULL);
        run[i].server = NULL;
        byte_budget_free(run[i].held);
        run[i].held = NULL;
    }
}

void adapters_stop(running *run)
{
    stop_all(run, NULL);
}

void adapters_detach(running *run, adapter_sockets *out)
{
    adapter_sockets_init(out);
    stop_all(run, out);
}

int adapters_start(const server_options *o, shmreg_registry *reg, running *run,
                   adapter_sockets *given)
{
    for (size_t i = 0; i < N_ADAPTERS; i++)
        run[i] = (running){.a = &adapters[i]};
    int rc = 0;
    for (size_t i = 0; i < N_ADAPTERS && rc == 0; i++) {
        run[i].held = byte_budget_new(o->max_buffered);
        if (!run[i].held)
            fprintf(stderr, "error: out of memory for the %s adapter\n", adapters[i].name);
        if (!run[i].held || adapters[i].start(o, reg, run[i].held, given, &run[i].server) != 0)
            rc = -1;
    }
    if (given)
        adapter_sockets_close(given); /* what no adapter took, and the connections' array */
    if (rc != 0)
        adapters_stop(run);
    return rc;
}

int adapters_serving(const running *run)
{
    for (size_t i = 0; i < N_ADAPTERS; i++)
        if (run[i].server)
            return 1;
    return 0;
}

void adapters_announce(const server_options *o, const running *run)
{
    for (size_t i = 0; i < N_ADAPTERS; i++) {
        if (!run[i].server)
            continue;
        unsigned port = run[i].a->port(run[i].server);
        if (i == 0) /* names no adapter and carries the library's version, as it always has */
            printf("listening on %s:%u (libshmreg %s)\n", o->host, port, shmreg_version());
        else if (port)
            printf("%s listening on %s:%u\n", run[i].a->name, o->host, port);
        else
            printf("%s listening on %s\n", run[i].a->name, o->uds_path);
    }
    fflush(stdout);
}
