/*
 * shmreg-server: a KServe v2 inference server with Triton's
 * shared-memory extension, on libshmreg's public API alone.
 *
 * Start-up:  with --allow-client-shm=true, remote_memory's engine
 *            (remote_engine.h: a line on stderr); the registry, then the
 *            HTTP server; print "listening on HOST:PORT";
 *            with --grpc-port, the gRPC service too ("grpc listening on
 *            HOST:PORT").
 * Shutdown:  SIGINT or SIGTERM -> both servers stop accepting and finish
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

#include "common/worker_pool.h"
#include "grpc/grpc_server.h"
#include "core/infer_core.h"
#include "core/remote_engine.h"
#include "core/remote_sweep.h"
#include "models/gpu_instances.h"
#include "models/model_yolo.h"
#include "models/models.h"
#include "options.h"
#include "http/http_server.h"
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

/* The gRPC drain runs on its own thread, so that both servers drain at once. */
static void *stop_grpc(void *g)
{
    grpc_frontend_stop(g);
    return NULL;
}

int main(int argc, char **argv)
{
    server_options opts;
    int parsed = options_parse(argc, argv, &opts);
    if (parsed != 0) {
        options_free(&opts);
        return parsed > 0 ? 0 : 2;
    }
    /* Block the stop signals before any thread exists, so that every worker
     * inherits the mask and only sigwait below receives them. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN); /* a client that hangs up is an error return, not a kill */

    /* Clients' named shm objects can be truncated under our mappings: with
     * the guard, a copy of a lost page fails that one request (infer_core.c)
     * instead of a SIGBUS killing the server. Before any thread starts. */
    if (shmreg_guard_install() != SHMREG_OK) {
        fprintf(stderr, "error: %s\n", shmreg_last_error());
        options_free(&opts);
        return 1;
    }
    /* remote_memory's engine, before anything listens: a setting the
     * library refuses or a port it cannot bind stops the start
     * (remote_engine.h says when it is fatal). */
    remote_engine_settings remote;
    options_remote(&opts, &remote);
    if (opts.allow_client_shm && remote_engine_start(&remote) != 0) {
        options_free(&opts);
        return 1;
    }
    models_set_delay(opts.delay_ms);
    if (models_keep_tenant_books(access_tenant_count(&opts.access)) != 0) {
        fprintf(stderr, "error: out of memory for each tenant's statistics\n");
        options_free(&opts);
        return 1;
    }
    worker_pool_set_spin_ns((uint64_t)opts.spin_us * 1000);
    gpu_instances_set_wait_spin_ns((uint64_t)opts.spin_us * 1000);
    yolo_start(opts.gpus, opts.instances_per_gpu, opts.yolo_window, opts.time_phases_every,
               opts.copy_batch);
    shmreg_registry *reg = create_registry(&opts);
    /* --uds first: a socket path it must not take stops the start before
     * anything listens. */
    infer_limit_copies(opts.max_body);
    infer_log_paths(opts.verbose);
    /* Each adapter gets its own settings, not the whole option set. */
    http_config http;
    grpc_config grpc_cfg;
    uds_config uds_cfg;
    options_http(&opts, &http);
    options_grpc(&opts, &grpc_cfg);
    options_uds(&opts, &uds_cfg);
    uds_server *uds = reg && opts.uds_path ? uds_server_start(&uds_cfg, reg) : NULL;
    /* Request bytes held at once (--max-buffered-mb), one budget per
     * protocol: HTTP bodies, gRPC messages. Shared, a flood of stalled HTTP
     * uploads (each dropped only once it overflows) kept the budget full
     * often enough to refuse honest gRPC calls; apart, each protocol's
     * clients can only crowd out their own, and the server holds at most
     * twice the figure. */
    byte_budget *held = byte_budget_new(opts.max_buffered);
    byte_budget *grpc_held = byte_budget_new(opts.max_buffered);
    http_server server;
    if (!reg || !held || !grpc_held || (opts.uds_path && !uds) ||
        http_server_start(&server, &http, reg, held) != 0) {
        byte_budget_free(held);
        byte_budget_free(grpc_held);
        uds_server_stop(uds);
        yolo_stop();
        shmreg_registry_destroy(reg);
        options_free(&opts);
        return 1;
    }
    /* remote_memory: dead clients' regions go without being asked. */
    remote_sweeper *sweeper = remote_engine_get(NULL) ? remote_sweep_start(reg) : NULL;
    printf("listening on %s:%u (libshmreg %s)\n", opts.host, server.port, shmreg_version());
    fflush(stdout);
    grpc_frontend *grpc = NULL;
    if (opts.grpc_port) {
        grpc = grpc_frontend_start(&grpc_cfg, reg, grpc_held);
        if (!grpc) {
            remote_sweep_stop(sweeper);
            uds_server_stop(uds);
            http_server_stop(&server);
            byte_budget_free(held);
            byte_budget_free(grpc_held);
            yolo_stop();
            shmreg_registry_destroy(reg);
            options_free(&opts);
            return 1;
        }
        printf("grpc listening on %s:%u\n", opts.host, grpc_frontend_port(grpc));
        fflush(stdout);
    }

    if (uds) {
        printf("uds listening on %s\n", opts.uds_path);
        fflush(stdout);
    }

    int sig = 0;
    sigwait(&stop, &sig);
    fprintf(stderr, "shutdown: signal %d, draining requests\n", sig);
    uds_server_stop(uds); /* no new regions; its clients' regions go as requests finish */
    pthread_t grpc_stopper;
    int grpc_thread = grpc && pthread_create(&grpc_stopper, NULL, stop_grpc, grpc) == 0;
    if (grpc && !grpc_thread)
        grpc_frontend_stop(grpc); /* no thread: one drain after the other */
    http_server_stop(&server);
    if (grpc_thread)
        pthread_join(grpc_stopper, NULL);
    yolo_stop(); /* no request runs any more, on either protocol */
    remote_sweep_stop(sweeper);
    byte_budget_free(held);
    byte_budget_free(grpc_held);
    shmreg_registry_destroy(reg); /* no reference is held any more: everything unmaps here */
    options_free(&opts);
    report_leftovers();
    return 0;
}
