/* The remote_memory engine's start and state (remote_engine.h). */
#include "core/remote_engine.h"

#include <stdio.h>
#include <string.h>

#include <shmreg/shmreg.h>

/* Written once by remote_engine_start, before the threads that read it. */
static remote_engine_view engine;
static int engine_on;
static char why_off[1024] = "remote_memory was not started: client memory is not allowed "
                            "(--allow-client-shm=true allows it)";

/* The transports the library opens for s (shmreg_remote_config's default). */
static const char *transports_of(const remote_engine_settings *s)
{
    if (s->transports)
        return s->transports;
    return s->tcp_device ? "rc,dc,tcp" : "rc,dc";
}

/* Whether the comma-separated list names tcp. */
static int lists_tcp(const char *list)
{
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, ",");
        if (n == 3 && strncmp(p, "tcp", 3) == 0)
            return 1;
        p += n + (p[n] == ',');
    }
    return 0;
}

static shmreg_err configure(const remote_engine_settings *s)
{
    char listen[80]; /* "[IPv6]:PORT" at the most */
    snprintf(listen, sizeof listen, strchr(s->host, ':') ? "[%s]:%u" : "%s:%u", s->host, s->port);
    shmreg_remote_config config = {
        .listen = listen, /* copied, as every string */
        .max_connections = s->max_connections,
        .max_copies = s->max_copies,
        .transports = s->transports,
        .tcp_device = s->tcp_device,
        .tcp_ports = s->tcp_ports,
    };
    return shmreg_remote_configure(&config);
}

/* The start-up line of an engine that runs; with tcp, the exposure it
 * opens (docs/security.md). */
static void say_listening(void)
{
    fprintf(stderr, "remote_memory listening on %s (transports %s)\n", engine.listen,
            engine.transports);
    if (engine.open_on_tcp)
        fprintf(stderr, "warning: remote_memory: tcp is open on %s: any host that reaches %s's "
                        "address, on %s or on the tcp transport's own port (%s), can write into "
                        "this server's memory (docs/security.md)\n",
                engine.tcp_device, engine.tcp_device, engine.listen,
                engine.tcp_ports ? engine.tcp_ports : "any port");
}

int remote_engine_start(const remote_engine_settings *s)
{
    const char *address = NULL;
    shmreg_err e = configure(s);
    if (e == SHMREG_OK)
        e = shmreg_remote_server_address(&address);
    if (e != SHMREG_OK) {
        if (s->asked_by) {
            fprintf(stderr, "error: remote_memory (--%s given): %s\n", s->asked_by,
                    shmreg_last_error());
            return -1;
        }
        snprintf(why_off, sizeof why_off, "%s", shmreg_last_error());
        fprintf(stderr, "remote_memory: off, not listed in v2's extensions: %s\n", why_off);
        return 0;
    }
    engine = (remote_engine_view){.listen = address,
                                  .transports = transports_of(s),
                                  .tcp_device = s->tcp_device,
                                  .tcp_ports = s->tcp_device ? s->tcp_ports : NULL};
    engine.open_on_tcp = s->tcp_device && lists_tcp(engine.transports);
    if (!engine.open_on_tcp)
        engine.tcp_device = engine.tcp_ports = NULL;
    engine_on = 1;
    say_listening();
    return 0;
}

const remote_engine_view *remote_engine_get(const char **why)
{
    if (why)
        *why = engine_on ? NULL : why_off;
    return engine_on ? &engine : NULL;
}
