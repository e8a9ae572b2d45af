/*
 * shmreg-server: a KServe v2 inference server with Triton's
 * shared-memory extension, on libshmreg's public API alone.
 *
 * Start-up:  with --allow-client-shm=true, remote_memory's engine
 *            (remote_engine.h: a line on stderr); the models; the registry;
 *            then the adapters of the table below that the flags ask for
 *            (HTTP always, gRPC with --grpc-port, the Unix socket with
 *            --uds), and once all of them are up, one line each:
 *            "listening on HOST:PORT (libshmreg VERSION)", "grpc listening
 *            on HOST:PORT", "uds listening on PATH".
 * Under a service manager (NOTIFY_SOCKET), the registry is restored from
 *            its fd store before the adapters start and kept there while
 *            serving; READY=1 once they are up (service/crash_survival.h).
 * Shutdown:  SIGINT or SIGTERM -> the fd store is emptied, the adapters stop accepting and finish
 *            their in-flight requests at the same time (their completion
 *            releases their region references), stop their workers, then the
 *            registry is destroyed, which unmaps every region.
 */
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <shmreg/shmreg.h>

#include "common/byte_budget.h"
#include "grpc/grpc_server.h"
#include "core/infer_core.h"
#include "core/remote_engine.h"
#include "core/remote_sweep.h"
#include "models/models.h"
#include "options.h"
#include "http/http_server.h"
#include "service/crash_survival.h"
#include "uds/uds_server.h"

/* The library's messages that no call can return (a failing munmap in a
 * last release, say) go to stderr. */
static void log_to_stderr(void *user, shmreg_log_level level, const char *msg)
{
    static const char *const names[] = {"error", "warning"};
    fprintf(stderr, "shmreg %s: %s\n", level <= SHMREG_LOG_WARNING ? names[level] : "?", msg);
}

static shmreg_registry *create_registry(const server_options *o)
{
    shmreg_config cfg;
    shmreg_config_init(&cfg);
    cfg.busy_policy = o->busy_policy;
    cfg.reserved_key_prefixes = o->reserved_prefixes; /* copied by create */
    cfg.pin_policy = o->pin_policy; /* --pin */
    cfg.reclaim = o->reclaim;         /* --reclaim */
    cfg.cache_bytes = o->cache_bytes; /* --cache-bytes */
    cfg.remote_timeout_ms = o->remote_timeout_ms; /* --remote-timeout-ms */
    cfg.log_fn = log_to_stderr;
    access_config(&o->access, &cfg); /* --allow-uid, --max-*: copied by create */
    if (access_quota_config(&o->access, &cfg) != 0) /* --tenants: each tenant's share */
        return NULL;
    shmreg_registry *reg = NULL;
    if (shmreg_registry_create(&cfg, &reg) != SHMREG_OK) {
        fprintf(stderr, "error: %s\n", shmreg_last_error());
        return NULL;
    }
    if (access_set_quotas(&o->access, reg) != 0) { /* tenants with their own */
        shmreg_registry_destroy(reg);
        return NULL;
    }
    return reg;
}

/* The shared-memory transports of UCX (remote_memory over posix) keep
 * segments of their own for the process's life: not a client's region. */
#define UCX_OWN_SEGMENT "/dev/shm/ucx_shm_posix_"

/* After shutdown, count what still refers to POSIX shared memory or to a
 * client's memfd (--uds) in this process: mappings in /proc/self/maps and
 * descriptors in /proc/self/fd.
 * Both must be 0 once the registry is destroyed; the tests read this line. */
static void report_leftovers(void)
{
    unsigned mappings = 0, descriptors = 0;
    char line[4096];
    FILE *maps = fopen("/proc/self/maps", "r");
    while (maps && fgets(line, sizeof line, maps))
        mappings += (strstr(line, " /dev/shm/") != NULL && !strstr(line, UCX_OWN_SEGMENT)) ||
                    strstr(line, " /memfd:") != NULL;
    if (maps)
        fclose(maps);
    DIR *fds = opendir("/proc/self/fd");
    struct dirent *e;
    while (fds && (e = readdir(fds)) != NULL) {
        char path[300], target[4096];
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(path, target, sizeof target - 1);
        if (n > 0) {
            target[n] = 0;
            descriptors += (strncmp(target, "/dev/shm/", 9) == 0 && !strstr(target, UCX_OWN_SEGMENT)) ||
                           strncmp(target, "/memfd:", 7) == 0;
        }
    }
    if (fds)
        closedir(fds);
    fprintf(stderr, "shutdown: done; shm mappings left: %u, shm descriptors left: %u\n", mappings,
            descriptors);
}

/* ------------------------------------------------------------ adapters */

/* Every adapter has the same shape: SERVER_start(config, registry, budget)
 * returns the running server or NULL after a message on stderr,
 * SERVER_port gives the port it bound (0: none, a Unix socket's path),
 * SERVER_stop drains and frees it (NULL: no-op); SERVER is http_server,
 * kserve_grpc_server or uds_server. The glue here fills each adapter's own
 * config from the options (options_KIND, which also says whether the flags
 * ask for it), so that no adapter sees a flag that is not its own. */
typedef struct adapter {
    const char *name;
    /* 0 with *out the server (NULL: not asked for), -1 when it failed */
    int (*start)(const server_options *o, shmreg_registry *reg, byte_budget *held, void **out);
    unsigned (*port)(const void *server);
    void (*stop)(void *server);
} adapter;

#define ADAPTER_GLUE(kind, server)                                                             \
    static int kind##_start(const server_options *o, shmreg_registry *reg, byte_budget *held,  \
                            void **out)                                                        \
    {                                                                                          \
        kind##_config cfg;                                                                     \
        *out = NULL;                                                                           \
        if (!options_##kind(o, &cfg))                                                          \
            return 0;                                                                          \
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
 * in the reverse order, from stop_adapters alone, whether the start failed
 * part way or a signal came.
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
static const adapter adapters[] = {
    {"http", http_start, http_port, http_stop},
    {"grpc", grpc_start, grpc_port, grpc_stop},
    {"uds", uds_start, uds_port, uds_stop},
};
#define N_ADAPTERS (sizeof adapters / sizeof adapters[0])

/* One adapter as it runs. */
typedef struct running {
    const adapter *a;
    void *server;      /* NULL: not asked for, or not started */
    byte_budget *held; /* its budget of request bytes */
    pthread_t stopper; /* runs a->stop while the others drain too */
    int on_thread;     /* 1: stopper was started */
} running;

static void *stop_on_thread(void *arg)
{
    running *r = arg;
    r->a->stop(r->server);
    return NULL;
}

/* Stop every adapter started, in the reverse order of the table, their
 * drains at once (adapters' comment); free their budgets. An adapter whose
 * thread cannot start stops on this one, after the drains before it. */
static void stop_adapters(running *run)
{
    for (size_t i = N_ADAPTERS; i-- > 0;) {
        running *r = &run[i];
        r->on_thread = r->server && pthread_create(&r->stopper, NULL, stop_on_thread, r) == 0;
        if (r->server && !r->on_thread)
            r->a->stop(r->server);
    }
    for (size_t i = N_ADAPTERS; i-- > 0;) {
        if (run[i].on_thread)
            pthread_join(run[i].stopper, NULL);
        run[i].server = NULL;
        byte_budget_free(run[i].held);
        run[i].held = NULL;
    }
}

/* Start the adapters the flags ask for, in the table's order: 0, or -1
 * with those started stopped again. */
static int start_adapters(const server_options *o, shmreg_registry *reg, running *run)
{
    for (size_t i = 0; i < N_ADAPTERS; i++)
        run[i] = (running){.a = &adapters[i]};
    for (size_t i = 0; i < N_ADAPTERS; i++) {
        run[i].held = byte_budget_new(o->max_buffered);
        if (!run[i].held || adapters[i].start(o, reg, run[i].held, &run[i].server) != 0) {
            if (!run[i].held)
                fprintf(stderr, "error: out of memory for the %s adapter\n", adapters[i].name);
            stop_adapters(run);
            return -1;
        }
    }
    return 0;
}

/* The lines that tell clients (and the tests) where each adapter listens,
 * once all are up. HTTP's, the first, names no adapter and carries the
 * library's version, as it always has. */
static void announce(const server_options *o, const running *run)
{
    for (size_t i = 0; i < N_ADAPTERS; i++) {
        if (!run[i].server)
            continue;
        unsigned port = run[i].a->port(run[i].server);
        if (i == 0)
            printf("listening on %s:%u (libshmreg %s)\n", o->host, port, shmreg_version());
        else if (port)
            printf("%s listening on %s:%u\n", run[i].a->name, o->host, port);
        else
            printf("%s listening on %s\n", run[i].a->name, o->uds_path);
    }
    fflush(stdout);
}

/* ------------------------------------------------------------------ main */

/* What runs below the adapters, configured once for the process (models.h,
 * infer_core.h and remote_engine.h say why): 0, or -1 after a message. */
static int start_modules(const server_options *o)
{
    /* remote_memory's engine, before anything listens: a setting the
     * library refuses or a port it cannot bind stops the start
     * (remote_engine.h says when it is fatal). */
    remote_engine_settings remote;
    options_remote(o, &remote);
    if (o->allow_client_shm && remote_engine_start(&remote) != 0)
        return -1;
    infer_config infer;
    options_infer(o, &infer);
    infer_configure(&infer);
    models_config models;
    options_models(o, &models);
    return models_start(&models);
}

/* Block the stop signals before any thread exists, so that every worker
 * inherits the mask and only sigwait receives them. */
static void block_stop_signals(sigset_t *stop)
{
    sigemptyset(stop);
    sigaddset(stop, SIGINT);
    sigaddset(stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, stop, NULL);
    signal(SIGPIPE, SIG_IGN); /* a client that hangs up is an error return, not a kill */
}

int main(int argc, char **argv)
{
    server_options opts;
    int parsed = options_parse(argc, argv, &opts);
    if (parsed != 0) {
        options_free(&opts);
        return parsed > 0 ? 0 : 2;
    }
    sigset_t stop;
    block_stop_signals(&stop);
    /* Clients' named shm objects can be truncated under our mappings: with
     * the guard, a copy of a lost page fails that one request (infer_core.c)
     * instead of a SIGBUS killing the server. Before any thread starts. */
    if (shmreg_guard_install() != SHMREG_OK) {
        fprintf(stderr, "error: %s\n", shmreg_last_error());
        options_free(&opts);
        return 1;
    }
    if (start_modules(&opts) != 0) {
        options_free(&opts);
        return 1;
    }
    shmreg_registry *reg = create_registry(&opts);
    /* remote_memory: dead clients' regions go without being asked. */
    remote_sweeper *sweeper = reg && remote_engine_get(NULL) ? remote_sweep_start(reg) : NULL;
    /* Crash survival: the regions a crashed predecessor held are back
     * before any adapter serves (service/crash_survival.h). */
    crash_survival_config keep_cfg;
    options_crash_survival(&opts, &keep_cfg);
    crash_survival *keep = NULL;
    running run[N_ADAPTERS];
    int rc = !reg || crash_survival_start(&keep_cfg, reg, &keep) != 0 ||
             start_adapters(&opts, reg, run) != 0;
    if (rc == 0) {
        announce(&opts, run);
        crash_survival_ready(keep);
        int sig = 0;
        sigwait(&stop, &sig);
        fprintf(stderr, "shutdown: signal %d, draining requests\n", sig);
        crash_survival_stop(keep, 1); /* a stop asked for: nothing to restore */
        keep = NULL;
        stop_adapters(run);
    }
    crash_survival_stop(keep, 0); /* a failed start keeps the store for the next */
    models_stop(); /* no request runs any more, on any adapter */
    remote_sweep_stop(sweeper);
    shmreg_registry_destroy(reg); /* no reference is held any more: everything unmaps here */
    options_free(&opts);
    if (rc == 0)
        report_leftovers();
    return rc;
}
