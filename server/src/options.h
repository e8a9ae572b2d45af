/* Command-line options of the server: the whole set, seen by main.c (and
 * the test programs that start an adapter) only. Each adapter is handed its
 * own config (http_config, grpc_config, uds_config), filled from this by
 * options_http, options_grpc and options_uds, and so are the modules below
 * them (models_config, infer_config, remote_engine_settings); the registry
 * gets its shmreg_config from main.c. */
#ifndef SERVER_OPTIONS_H
#define SERVER_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

#include <shmreg/shmreg.h>

#include "core/access.h"
#include "core/infer_core.h"
#include "core/remote_engine.h"
#include "grpc/grpc_server.h"
#include "http/http_server.h"
#include "models/models.h"
#include "service/crash_survival.h"
#include "uds/uds_server.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct server_options {
    const char *host;                 /* numeric IPv4 or IPv6 address to listen on */
    unsigned port;                    /* 0: any free port (printed at start-up) */
    unsigned grpc_port;               /* KServe v2 gRPC port; 0: no gRPC (the default) */
    shmreg_policy busy_policy;        /* what unregister does to a region in use */
    const char **reserved_prefixes;   /* NULL-terminated; owned (the array, not the strings) */
    unsigned threads;                 /* inference worker threads at work at once */
    unsigned grpc_threads;            /* --grpc-threads: gRPC's serving threads; 0: by the cores */
    unsigned spin_us;                 /* --spin-us: poll this long before sleeping, 0: never */
    unsigned delay_ms;                /* how long the simple_delayed model sleeps */
    size_t max_body;                  /* largest request body accepted, bytes */
    unsigned drain_s;                 /* how long shutdown waits for in-flight requests */
    int verbose;                      /* 1: one log line per request */
    int allow_client_shm;             /* --allow-client-shm: register/unregister allowed */
    shmreg_pin_policy pin_policy;     /* --pin: whether system regions are page-locked */
    shmreg_reclaim reclaim;           /* --reclaim: who unmaps a region's last release */
    size_t cache_bytes;               /* --cache-bytes: the registration cache, 0: off */
    size_t remote_timeout_ms;         /* --remote-timeout-ms: one remote copy's bound, 0: the library's */
    unsigned remote_port;             /* --remote-port: the remote listener's, on host; 0: any free one */
    const char *remote_transports;    /* --remote-transports; NULL: the library's (rc,dc[,tcp]) */
    const char *remote_tcp_device;    /* --remote-tcp-device: tcp's trusted device; NULL: no tcp */
    const char *remote_tcp_ports;     /* --remote-tcp-ports: "LOW-HIGH"; NULL: any */
    const char *remote_engine_flag;   /* a flag that shapes the remote engine, given; NULL: none */
    unsigned remote_max_connections;  /* --remote-max-connections: per tenant, 0: the library's */
    unsigned remote_max_copies;       /* --remote-max-copies: per tenant in flight, 0: the library's */
    const char *gpus;                 /* --gpus: "all", "none" or a list "0,1" (the GPU model) */
    unsigned instances_per_gpu;       /* --instances-per-gpu: GPU model instances per device */
    unsigned yolo_window;             /* --yolo-window: samples per side of each anchor's window */
    unsigned time_phases_every;       /* --time-phases-every: 'yolo' times one run in this many */
    unsigned copy_batch;              /* --copy-batch: most 'yolo' runs whose copies go together */
    unsigned max_queue;               /* --max-queue: 'yolo' requests waiting for a slot, per instance */
    const char *uds_path;             /* --uds: Unix socket for sealed memfd regions; NULL: off */
    unsigned uds_mode;                /* --uds-mode: the socket file's permission bits */
    unsigned uds_max_connections;     /* --uds-max-connections: open at once */
    unsigned uds_max_regions;         /* --uds-max-regions: registered per connection */
    const char *handover_path;        /* --handover-socket: where a successor connects; NULL: off */
    const char *take_over_path;       /* --take-over: the running server to take over; NULL: none */
    unsigned orphan_grace_s;          /* --orphan-grace-s: uds/orphans.h */
    access_options access;            /* --allow-uid, --max-*, --*-restricted-*, --tenants */
    size_t max_buffered;              /* request body bytes held at once, all connections together */
    unsigned max_client_connections;  /* connections from one IP address at once; 0: no limit */
    unsigned request_timeout_s;       /* a connection idle this long is closed (stalled request) */
    uint64_t given;                   /* a bit per flag of the table that argv gave (options_given) */
    unsigned fd_store_ms;             /* --fd-store-ms: under a service manager, save at most this often */
} server_options;

/* Fill o from argv. Returns 0 to run, 1 when --help was printed (exit 0),
 * -1 after printing an error (exit 2). Free with options_free either way. */
int options_parse(int argc, char **argv, server_options *o);
void options_free(server_options *o);
/* Whether argv gave the flag of this long name (a live upgrade checks the
 * port flags that were given against what it inherits). */
int options_given(const server_options *o, const char *name);

/* Each adapter's share of o: 1 when the flags ask for that adapter (HTTP
 * always, gRPC with --grpc-port, the Unix socket with --uds), else 0. The
 * configs point into o (host, paths, the access options), which must
 * outlive the adapters. */
int options_http(const server_options *o, http_config *out);
int options_grpc(const server_options *o, grpc_config *out);
int options_uds(const server_options *o, uds_config *out);
/* The share of the modules below the adapters, which main.c configures
 * once for the process (models.h and infer_core.h say why). */
void options_models(const server_options *o, models_config *out);
void options_infer(const server_options *o, infer_config *out);
void options_remote(const server_options *o, remote_engine_settings *out);
/* Crash survival's share (service/crash_survival.h). */
void options_crash_survival(const server_options *o, crash_survival_config *out);

#ifdef __cplusplus
}
#endif

#endif
