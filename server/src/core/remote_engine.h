/*
 * The remote_memory extension's engine: the library's UCX context and
 * listener, one for the whole process, configured and started once at
 * start-up, before anything listens. A setting the library refuses (a
 * transport on which a peer could read or write memory unchecked, tcp
 * without a trusted device), a port that cannot be bound or a host with
 * none of the transports asked then stops the server with the library's
 * message, rather than failing the first client's connect.
 *
 * Whether that is fatal depends on what the operator asked: with a flag
 * that shapes the engine (--remote-port, --remote-transports,
 * --remote-tcp-device, --remote-tcp-ports) a failure exits non-zero; with
 * none, remote_memory is optional (a CPU host has no RDMA device, and tcp
 * is opened only on a device named trusted), so the server starts without
 * it, says why in one line, and neither lists the extension nor serves
 * its connect and register calls (UNSUPPORTED, with that reason).
 */
#ifndef SERVER_REMOTE_ENGINE_H
#define SERVER_REMOTE_ENGINE_H

#ifdef __cplusplus
extern "C" {
#endif

/* What main.c gives the engine, from the flags. The strings must outlive
 * the process's use of the engine (argv does). */
typedef struct remote_engine_settings {
    const char *host;         /* --host: the listener's address */
    unsigned port;            /* --remote-port; 0: any free one */
    const char *transports;   /* --remote-transports; NULL: the library's default */
    const char *tcp_device;   /* --remote-tcp-device; NULL: no tcp */
    const char *tcp_ports;    /* --remote-tcp-ports; NULL: any */
    unsigned max_connections; /* --remote-max-connections; 0: the library's */
    unsigned max_copies;      /* --remote-max-copies; 0: the library's */
    const char *asked_by;     /* the engine flag given (without "--"), or NULL: none */
} remote_engine_settings;

/* The engine as it runs, for v2/remotememory/engine. */
typedef struct remote_engine_view {
    const char *listen;     /* "IP:PORT" where clients connect */
    const char *transports; /* the transports asked of UCX */
    const char *tcp_device; /* NULL: tcp is not open */
    const char *tcp_ports;  /* NULL: any port */
    int open_on_tcp;        /* 1: any host that reaches tcp_device can write into the server */
} remote_engine_view;

/* Configure and start the engine; one line on stderr says what came of it
 * (where it listens, or why it is off; with tcp open, who can reach the
 * server's memory). 0: the server goes on, the engine on or off; -1 after
 * the library's message, when an engine flag was given: exit non-zero.
 * Once, before any thread that reads remote_engine_get starts. */
int remote_engine_start(const remote_engine_settings *s);

/* The engine, or NULL when it is off, with the reason in *why_off (may be
 * NULL). */
const remote_engine_view *remote_engine_get(const char **why_off);

#ifdef __cplusplus
}
#endif

#endif
