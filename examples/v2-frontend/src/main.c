/*
 * shmreg-v2-frontend: a KServe v2 inference server with Triton's
 * shared-memory extension, on libshmreg's public API alone.
 *
 * Start-up:  registry, then the HTTP server; print "listening on HOST:PORT".
 * Shutdown:  SIGINT or SIGTERM -> stop accepting, finish in-flight requests
 *            (their completion releases their region references), stop the
 *            workers, then destroy the registry, which unmaps every region.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include <shmreg/shmreg.h>

#include "models.h"
#include "options.h"
#include "server.h"

/* The library's messages that no call can return (a failing munmap in a
 * last release, say) go to stderr. */
static void log_to_stderr(void *user, shmreg_log_level level, const char *msg)
{
    static const char *const names[] = {"error", "warning", "info"};
    fprintf(stderr, "shmreg %s: %s\n", level <= SHMREG_LOG_INFO ? names[level] : "?", msg);
}

static shmreg_registry *create_registry(const frontend_options *o)
{
    shmreg_config cfg;
    shmreg_config_init(&cfg);
    cfg.busy_policy = o->busy_policy;
    cfg.reserved_key_prefixes = o->reserved_prefixes; /* copied by create */
    cfg.pin_policy = SHMREG_PIN_AUTO;
    cfg.log_fn = log_to_stderr;
    shmreg_registry *reg = NULL;
    if (shmreg_registry_create(&cfg, &reg) != SHMREG_OK)
        fprintf(stderr, "error: %s\n", shmreg_last_error());
    return reg;
}

int main(int argc, char **argv)
{
    frontend_options opts;
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

    models_set_delay(opts.delay_ms);
    shmreg_registry *reg = create_registry(&opts);
    frontend_server server;
    if (!reg || server_start(&server, &opts, reg) != 0) {
        shmreg_registry_destroy(reg);
        options_free(&opts);
        return 1;
    }
    printf("listening on %s:%u (libshmreg %s)\n", opts.host, server.port, shmreg_version());
    fflush(stdout);

    int sig = 0;
    sigwait(&stop, &sig);
    fprintf(stderr, "shutdown: signal %d, draining requests\n", sig);
    server_stop(&server);
    shmreg_registry_destroy(reg); /* no reference is held any more: everything unmaps here */
    options_free(&opts);
    fprintf(stderr, "shutdown: done\n");
    return 0;
}
