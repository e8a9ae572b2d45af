/*
 * A test server: the server's own HTTP server and handlers, over a
 * registry in which one region was registered read-only (SHMREG_READONLY)
 * before the server started.
 *
 * The server registers what clients ask over HTTP, and Triton's protocol
 * has no read-only registration, so no client of shmreg-server can make
 * it hold a read-only region. A server that embeds the library can, and its
 * inference path must then refuse an output placed there (view.writable is
 * 0) instead of faulting. This program is that server, so that
 * server/tests/http/test_readonly_output.py can drive the server's unchanged
 * request path over HTTP against such a region. It is not installed.
 *
 * usage: shmreg-server-readonly-test NAME KEY BYTE_SIZE [server options]
 * Prints "listening on HOST:PORT" like the server; SIGTERM stops it, exit 0.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include <shmreg/shmreg.h>

#include "options.h"
#include "http/http_server.h"

/* The region the test names, registered read-only: 0, or -1 with a message. */
static int register_readonly(shmreg_registry *reg, const char *name, const char *key,
                             const char *size)
{
    shmreg_registration r;
    shmreg_registration_init(&r);
    r.name = name;
    r.key = key;
    r.byte_size = strtoull(size, NULL, 10);
    r.flags = SHMREG_READONLY;
    if (shmreg_register(reg, &r) == SHMREG_OK)
        return 0;
    fprintf(stderr, "error: registering '%s' read-only: %s\n", name, shmreg_last_error());
    return -1;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s NAME KEY BYTE_SIZE [server options]\n", argv[0]);
        return 2;
    }
    const char *name = argv[1], *key = argv[2], *size = argv[3];
    /* The server's options follow the three of this program. */
    argv[3] = argv[0];
    server_options opts;
    if (options_parse(argc - 3, argv + 3, &opts) != 0) {
        options_free(&opts);
        return 2;
    }
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL); /* before any thread, as in main.c */
    signal(SIGPIPE, SIG_IGN);

    shmreg_config cfg;
    shmreg_config_init(&cfg);
    cfg.busy_policy = opts.busy_policy;
    shmreg_registry *reg = NULL;
    byte_budget *held = byte_budget_new(opts.max_buffered);
    http_server *server = NULL;
    http_config http;
    options_http(&opts, &http);
    int rc = 1;
    /* As main.c: the request path reads system regions with guarded copies. */
    if (!held || shmreg_guard_install() != SHMREG_OK ||
        shmreg_registry_create(&cfg, &reg) != SHMREG_OK)
        fprintf(stderr, "error: %s\n", shmreg_last_error());
    else if (register_readonly(reg, name, key, size) == 0 &&
             (server = http_server_start(&http, reg, held)) != NULL) {
        printf("listening on %s:%u (libshmreg %s)\n", opts.host, http_server_port(server),
               shmreg_version());
        fflush(stdout);
        int sig = 0;
        sigwait(&stop, &sig);
        http_server_stop(server);
        rc = 0;
    }
    shmreg_registry_destroy(reg);
    byte_budget_free(held);
    options_free(&opts);
    return rc;
}
