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
 *            With --take-over PATH, the adapters start instead on the
 *            sockets of the server listening there, with its regions
 *            (upgrade.h); with --handover-socket PATH, a successor may take
 *            this server over in turn. Under a service manager
 *            (NOTIFY_SOCKET), the registry is restored from its fd store
 *            before the adapters start and kept there while serving;
 *            READY=1 once they are up (service/crash_survival.h).
 * Shutdown:  SIGINT or SIGTERM -> the fd store is emptied (a stop asked
 *            for restores nothing), the adapters stop accepting and finish
 *            their in-flight requests at the same time (their completion
 *            releases their region references), stop their workers, then the
 *            registry is destroyed, which unmaps every region. A successor
 *            that took over ends it the same way, its adapters detached
 *            instead of stopped.
 */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <shmreg/shmreg.h>

#include "adapters.h"
#include "core/infer_core.h"
#include "core/remote_engine.h"
#include "core/remote_sweep.h"
#include "models/models.h"
#include "options.h"
#include "service/crash_survival.h"
#include "upgrade.h"

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

/* Listen for a successor once serving: a path that cannot be taken costs
 * the next upgrade only. */
static void listen_for_successor(const server_options *o, upgrade_listener **l)
{
    if (o->handover_path && (*l = upgrade_listen(o->handover_path)) == NULL)
        fprintf(stderr, "warning: no --handover-socket: this server cannot be taken over\n");
}

/* The server --take-over names is gone before it gave its sockets: start
 * as without --take-over, on the flags given (upgrade.h says when). A
 * server that still holds them makes the start fail: nothing is taken
 * from it. 0, or 1 after a message. */
static int start_on_own(const server_options *o, shmreg_registry *reg, running *run,
                        upgrade_listener **l)
{
    if (!options_given(o, "port") || o->port == 0) {
        fprintf(stderr, "error: --take-over: the running server is gone, and without a fixed --port "
                        "this one has no address of its own to serve on instead\n");
        return 1;
    }
    shmreg_stats st;
    if (shmreg_registry_stats(reg, &st) != SHMREG_OK)
        st.regions = 0;
    fprintf(stderr, "upgrade: the running server is gone before it handed over; this one starts on "
                    "its own flags (--port %u, --grpc-port %u, --uds %s) with %zu region(s): the old "
                    "one's clients register theirs again\n",
            o->port, o->grpc_port, o->uds_path ? o->uds_path : "none", st.regions);
    if (adapters_start(o, reg, run, NULL) != 0) {
        fprintf(stderr, "error: --take-over: cannot start on this server's own flags either (does a "
                        "server still hold them?)\n");
        return 1;
    }
    adapters_announce(o, run);
    listen_for_successor(o, l);
    return 0;
}

/* Start the adapters on the sockets of the server --take-over names, with
 * its regions (upgrade.h), and print their lines; or on sockets of their
 * own when it is gone. 0, or 1 after a message (the old server, if any,
 * serves). */
static int take_over(server_options *o, shmreg_registry *reg, running *run, upgrade_carried *c,
                     upgrade_listener **l)
{
    int conn = -1;
    enum upgrade_take took = upgrade_take_over(o->take_over_path, reg, o, c, &conn);
    if (took == UPGRADE_OLD_GONE)
        return start_on_own(o, reg, run, l);
    if (took != UPGRADE_TAKEN)
        return 1;
    if (adapters_start(o, reg, run, &c->sockets) != 0) {
        close(conn); /* the old server serves again on the sockets it kept */
        return 1;
    }
    adapters_announce(o, run);
    enum upgrade_answer answer = upgrade_confirm(conn);
    if (answer == UPGRADE_OLD_RESUMED) {
        /* The old server serves on these sockets: hand nothing of theirs
         * away here (a stop would remove the --uds file). */
        adapter_sockets kept;
        adapters_detach(run, &kept);
        adapter_sockets_close(&kept);
        close(conn);
        return 1;
    }
    if (answer == UPGRADE_OLD_SILENT) {
        /* Closed, the old server would read an end instead of "R" when it
         * wakes, and serve again beside this one: kept to the exit. */
        c->old_conn = conn;
        return 0;
    }
    if (answer == UPGRADE_CONFIRMED)
        upgrade_finish(conn); /* the old server has let go of its --handover-socket path */
    else
        close(conn); /* it died: its path is stale, which the listen replaces */
    listen_for_successor(o, l);
    return 0;
}

/* Start the adapters, on sockets of their own (with the --handover-socket
 * listener, *l, made first: a path one must not take stops the start) or on
 * those of the server --take-over names, and print their lines. 0, or 1
 * after a message. */
static int start(server_options *o, shmreg_registry *reg, running *run, upgrade_carried *c,
                 upgrade_listener **l)
{
    *l = NULL;
    if (o->take_over_path)
        return take_over(o, reg, run, c, l);
    if (o->handover_path && (*l = upgrade_listen(o->handover_path)) == NULL)
        return 1;
    if (adapters_start(o, reg, run, NULL) != 0)
        return 1;
    adapters_announce(o, run);
    return 0;
}

/* A successor connected to l: 1 when the serving is over (handed over: rc
 * 0; or the adapters could not serve again: rc 1), else 0. */
static int take_successor(const server_options *o, shmreg_registry *reg, running *run,
                          upgrade_listener **l, int *rc)
{
    int conn = accept4(upgrade_listener_fd(*l), NULL, NULL, SOCK_CLOEXEC);
    if (conn < 0)
        return 0;
    enum upgrade_outcome out = upgrade_hand_over(conn, reg, o, run);
    if (out == UPGRADE_HANDED_OVER) {
        /* The file first: the successor takes the path once this connection ends. */
        upgrade_listener_close(*l);
        *l = NULL;
        fprintf(stderr, "shutdown: handed over, unmapping every region\n");
    }
    close(conn);
    *rc = out == UPGRADE_FAILED;
    return out != UPGRADE_RESUMED;
}

/* Serve until a stop signal (the adapters stop and drain) or a successor
 * takes over (they are detached already): 0, or 1 when the adapters could
 * not serve again after a failed upgrade. Takes l; a stop signal empties
 * the fd store first (*keep, then NULL). */
static int serve(const server_options *o, shmreg_registry *reg, running *run, const sigset_t *stop,
                 upgrade_listener *l, crash_survival **keep)
{
    int rc = 0, sig_fd = signalfd(-1, stop, SFD_CLOEXEC);
    for (int over = sig_fd < 0; !over;) {
        struct pollfd p[2] = {{.fd = sig_fd, .events = POLLIN},
                              {.fd = l ? upgrade_listener_fd(l) : -1, .events = POLLIN}};
        if (poll(p, 2, -1) < 0 && errno != EINTR)
            break;
        if (p[1].revents & POLLIN)
            over = take_successor(o, reg, run, &l, &rc);
        else if (p[0].revents & POLLIN)
            over = 1;
    }
    if (adapters_serving(run)) { /* a stop signal, not a successor */
        struct signalfd_siginfo info = {0};
        if (sig_fd >= 0 && read(sig_fd, &info, sizeof info) != (ssize_t)sizeof info)
            info.ssi_signo = 0;
        fprintf(stderr, "shutdown: signal %u, draining requests\n", info.ssi_signo);
        crash_survival_stop(*keep, 1); /* a stop asked for: nothing to restore */
        *keep = NULL;
        adapters_stop(run);
    }
    upgrade_listener_close(l);
    if (sig_fd >= 0)
        close(sig_fd);
    return rc;
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
    upgrade_carried carried = {.old_conn = -1}; /* what o points to after a take-over */
    upgrade_listener *successors = NULL;
    int rc = !reg || crash_survival_start(&keep_cfg, reg, &keep) != 0 ||
             start(&opts, reg, run, &carried, &successors) != 0;
    if (rc == 0) {
        crash_survival_ready(keep);
        rc = serve(&opts, reg, run, &stop, successors, &keep);
    }
    if (carried.old_conn >= 0)
        close(carried.old_conn); /* a silent old server's: it stops once it reads "R" */
    crash_survival_stop(keep, 0); /* a failed start keeps the store for the next */
    models_stop(); /* no request runs any more, on any adapter */
    remote_sweep_stop(sweeper);
    shmreg_registry_destroy(reg); /* no reference is held any more: everything unmaps here */
    options_free(&opts);
    if (rc == 0)
        report_leftovers();
    return rc;
}
