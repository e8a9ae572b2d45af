/* Command-line parsing: every knob of the frontend, with its default. */
#include "options.h"

#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *to, const char *argv0)
{
    fprintf(to,
            "usage: %s [options]\n"
            "  --host ADDR                 numeric address to listen on (default 127.0.0.1)\n"
            "  --port N                    TCP port, 0 = any free one (default 8000)\n"
            "  --grpc-port N               KServe v2 gRPC port beside HTTP, 0 = off (default 0;\n"
            "                              Triton's is 8001, which scripts/run.sh passes)\n"
            "  --busy-policy P             defer | detach | refuse: unregister of a region in use\n"
            "  --reserved-key-prefix P     refuse shm keys starting with P (repeatable)\n"
            "  --threads N                 inference worker threads at work (default 4; 3N more\n"
            "                              stand by for requests that wait for a GPU run)\n"
            "  --delay-ms N                sleep of the simple_delayed model (default 1000)\n"
            "  --max-body-mb N             largest request body in MiB (default 256)\n"
            "  --drain-s N                 shutdown waits this long for in-flight requests (default 30)\n"
            "  --pin P                     never | auto | always: page-lock registered system regions\n"
            "                              for DMA (default auto: when a CUDA device is usable)\n"
            "  --reclaim R                 background | inline: who unmaps (unpins) a region after\n"
            "                              its last request: the library's thread, or that request's\n"
            "                              (default background)\n"
            "  --remote-timeout-ms N       remote_memory: a read or write of a client's memory fails\n"
            "                              after N ms (default 10000); the client is then dropped\n"
            "  --remote-port N             remote_memory: the port on --host where clients connect\n"
            "                              through UCX after v2/remotememory/connect, 0 = any free\n"
            "                              one, which connect's answer names (default 0)\n"
            "  --remote-transports LIST    remote_memory: the UCX transports the server's worker\n"
            "                              uses, as UCX_TLS spells them (e.g. tcp, posix,sysv,cma);\n"
            "                              a client that can reach it by none of them cannot connect\n"
            "                              (default: UCX_TLS, else every transport UCX has)\n"
            "  --remote-max-connections N  remote_memory: connections plus unused invitations of one\n"
            "                              tenant; past it v2/remotememory/connect answers 429\n"
            "                              (default 16)\n"
            "  --remote-max-copies N       remote_memory: reads and writes of one tenant's regions in\n"
            "                              flight at once; past it a request fails at once instead of\n"
            "                              waiting (default 8)\n"
            "  --cache-bytes N             keep up to N bytes of mappings (and pins) of unregistered\n"
            "                              regions for clients that register the same shm again,\n"
            "                              0 = off (default 0; see README for a value)\n"
            "  --gpus LIST                 devices of the GPU model 'yolo': all, none or e.g. 0,1\n"
            "                              (default all)\n"
            "  --instances-per-gpu N       instances of 'yolo' on each device (default 2)\n"
            "  --yolo-window N             samples per side of each output's input window, the\n"
            "                              cost of 'yolo' (default 32)\n"
            "  --time-phases-every N       time the device phases of one run in N on each instance\n"
            "                              of 'yolo'; the others count its last timed run's\n"
            "                              (default 32; 1 = every run)\n"
            "  --copy-batch N              copy the tensors of up to N runs waiting for one instance\n"
            "                              of 'yolo' as one batch each way (1-12, default 4; 1 = each\n"
            "                              run's alone)\n"
            "  --uds PATH                  also listen on a Unix socket (SOCK_SEQPACKET) where clients\n"
            "                              register sealed memfds (shmreg_send_region); off by default\n"
            "  --uds-mode OCTAL            permissions of the socket file (default 0600: the server's\n"
            "                              user only; e.g. 0660 for its group)\n"
            "  --uds-max-connections N     Unix-socket clients at once (default 64)\n"
            "  --uds-max-regions N         regions per Unix-socket connection (default 16)\n"
            "  --allow-client-shm=B        true | false: let clients register and unregister shared\n"
            "                              memory, as Triton 2.73's flag (default false, as there)\n"
            "  --allow-uid UID|any         map only shm objects this uid owns (repeatable;\n"
            "                              default: the server's own uid; any: every owner)\n"
            "  --max-regions N             regions registered at once, 0 = no limit\n"
            "                              (default 4096)\n"
            "  --max-mapped-bytes N        bytes mapped for all regions, 0 = no limit\n"
            "                              (default 1099511627776, 1 TiB)\n"
            "  --max-pinned-bytes N        bytes page-locked, 0 = no limit but --pin auto's 1 GiB\n"
            "                              budget (default 0)\n"
            "  --http-restricted-api shared-memory:KEY=VALUE\n"
            "                              shared-memory endpoints need header KEY: VALUE\n"
            "  --grpc-restricted-protocol shared-memory:KEY=VALUE\n"
            "                              the same over gRPC: metadata triton-grpc-protocol-KEY\n"
            "  --tenants FILE              bearer tokens -> tenants, each with its own regions\n"
            "  --max-buffered-mb N         request bodies (HTTP) and messages (gRPC, apart) held at\n"
            "                              once, all connections together, in MiB; past it a request\n"
            "                              gets 503 (gRPC: RESOURCE_EXHAUSTED) (default 256, at least\n"
            "                              --max-body-mb)\n"
            "  --max-client-connections N  connections from one IP address at once, on each port,\n"
            "                              0 = no limit (default 64)\n"
            "  --request-timeout-s N       close a connection idle this long: a request whose headers\n"
            "                              or body stall, or an unused kept-alive one (default 10)\n"
            "  -v, --verbose               one log line per request on stderr, and one per inference\n"
            "                              with the path each shared-memory tensor took\n"
            "  -h, --help\n",
            argv0);
}

/* Strict unsigned parse: the whole string, in [min, max]. */
static int parse_uint(const char *opt, const char *s, unsigned long min, unsigned long max,
                      unsigned long *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v < min || v > max) {
        fprintf(stderr, "error: %s wants an integer in [%lu, %lu], got '%s'\n", opt, min, max, s);
        return -1;
    }
    *out = v;
    return 0;
}

/* One of a few named values. */
typedef struct choice {
    const char *name;
    int value;
} choice;

/* s as one of the n choices: 0 with its value in *out, or -1 after an error
 * that names opt and the choices ("wants a, b or c"). */
static int parse_choice(const char *opt, const char *s, const choice *choices, size_t n, int *out)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(s, choices[i].name) == 0) {
            *out = choices[i].value;
            return 0;
        }
    }
    fprintf(stderr, "error: %s wants ", opt);
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, "%s%s", i == 0 ? "" : i + 1 == n ? " or " : ", ", choices[i].name);
    fprintf(stderr, ", got '%s'\n", s);
    return -1;
}

static int parse_policy(const char *s, shmreg_policy *out)
{
    static const choice policies[] = {
        {"defer", SHMREG_POLICY_DEFER},
        {"detach", SHMREG_POLICY_DETACH},
        {"refuse", SHMREG_POLICY_REFUSE},
    };
    int v;
    int rc = parse_choice("--busy-policy", s, policies, sizeof policies / sizeof policies[0], &v);
    *out = (shmreg_policy)v;
    return rc;
}

static int parse_bool(const char *opt, const char *s, int *out)
{
    static const choice values[] = {{"true", 1}, {"false", 0}};
    return parse_choice(opt, s, values, sizeof values / sizeof values[0], out);
}

static int parse_reclaim(const char *s, shmreg_reclaim *out)
{
    static const choice modes[] = {
        {"background", SHMREG_RECLAIM_BACKGROUND},
        {"inline", SHMREG_RECLAIM_INLINE},
    };
    int v;
    int rc = parse_choice("--reclaim", s, modes, sizeof modes / sizeof modes[0], &v);
    *out = (shmreg_reclaim)v;
    return rc;
}

static int parse_pin(const char *s, shmreg_pin_policy *out)
{
    static const choice policies[] = {
        {"never", SHMREG_PIN_NEVER},
        {"auto", SHMREG_PIN_AUTO},
        {"always", SHMREG_PIN_ALWAYS},
    };
    int v;
    int rc = parse_choice("--pin", s, policies, sizeof policies / sizeof policies[0], &v);
    *out = (shmreg_pin_policy)v;
    return rc;
}

/* "all", "none" or a comma-separated list of device numbers; the devices
 * themselves are checked when the GPU model starts (gpu_instances.h). */
static int check_gpus(const char *s)
{
    if (strcmp(s, "all") == 0 || strcmp(s, "none") == 0)
        return 0;
    const char *p = s;
    for (;;) {
        if (*p < '0' || *p > '9')
            break;
        while (*p >= '0' && *p <= '9')
            p++;
        if (*p == 0)
            return 0;
        if (*p++ != ',')
            break;
    }
    fprintf(stderr, "error: --gpus wants all, none or a list of device numbers such as 0,1, "
                    "got '%s'\n", s);
    return -1;
}

/* Permission bits in octal, e.g. 0660: who may connect to the socket. */
static int parse_mode(const char *s, unsigned *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 8);
    if (errno || end == s || *end || s[0] == '-' || s[0] == '+' || v > 0777) {
        fprintf(stderr, "error: --uds-mode wants octal permission bits such as 0600, got '%s'\n", s);
        return -1;
    }
    *out = (unsigned)v;
    return 0;
}

static int add_prefix(frontend_options *o, const char *prefix, size_t *count)
{
    const char **grown = realloc(o->reserved_prefixes, (*count + 2) * sizeof *grown);
    if (!grown) {
        fprintf(stderr, "error: out of memory\n");
        return -1;
    }
    grown[(*count)++] = prefix; /* argv outlives the server */
    grown[*count] = NULL;
    o->reserved_prefixes = grown;
    return 0;
}

int options_parse(int argc, char **argv, frontend_options *o)
{
    enum { OPT_HOST = 256, OPT_PORT, OPT_POLICY, OPT_PREFIX, OPT_THREADS, OPT_DELAY, OPT_BODY,
           OPT_DRAIN, OPT_GRPC_PORT, OPT_PIN, OPT_GPUS, OPT_INSTANCES, OPT_WINDOW, OPT_TIME_PHASES,
           OPT_COPY_BATCH, OPT_UDS, OPT_UDS_MODE, OPT_UDS_CONNS, OPT_UDS_REGIONS, OPT_ALLOW_SHM, OPT_BUFFERED,
           OPT_CLIENT_CONNS, OPT_REQUEST_TIMEOUT, OPT_RECLAIM, OPT_CACHE_BYTES, OPT_REMOTE_TIMEOUT,
           OPT_REMOTE_PORT, OPT_REMOTE_TRANSPORTS, OPT_REMOTE_CONNS, OPT_REMOTE_COPIES,
           OPT_ACCESS /* + access_opt: access.c parses these: keep it last */ };
    static const struct option longopts[] = {
        {"host", required_argument, NULL, OPT_HOST},
        {"port", required_argument, NULL, OPT_PORT},
        {"grpc-port", required_argument, NULL, OPT_GRPC_PORT},
        {"busy-policy", required_argument, NULL, OPT_POLICY},
        {"reserved-key-prefix", required_argument, NULL, OPT_PREFIX},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"delay-ms", required_argument, NULL, OPT_DELAY},
        {"max-body-mb", required_argument, NULL, OPT_BODY},
        {"drain-s", required_argument, NULL, OPT_DRAIN},
        {"pin", required_argument, NULL, OPT_PIN},
        {"reclaim", required_argument, NULL, OPT_RECLAIM},
        {"cache-bytes", required_argument, NULL, OPT_CACHE_BYTES},
        {"remote-timeout-ms", required_argument, NULL, OPT_REMOTE_TIMEOUT},
        {"remote-port", required_argument, NULL, OPT_REMOTE_PORT},
        {"remote-transports", required_argument, NULL, OPT_REMOTE_TRANSPORTS},
        {"remote-max-connections", required_argument, NULL, OPT_REMOTE_CONNS},
        {"remote-max-copies", required_argument, NULL, OPT_REMOTE_COPIES},
        {"gpus", required_argument, NULL, OPT_GPUS},
        {"instances-per-gpu", required_argument, NULL, OPT_INSTANCES},
        {"yolo-window", required_argument, NULL, OPT_WINDOW},
        {"time-phases-every", required_argument, NULL, OPT_TIME_PHASES},
        {"copy-batch", required_argument, NULL, OPT_COPY_BATCH},
        {"uds", required_argument, NULL, OPT_UDS},
        {"uds-mode", required_argument, NULL, OPT_UDS_MODE},
        {"uds-max-connections", required_argument, NULL, OPT_UDS_CONNS},
        {"uds-max-regions", required_argument, NULL, OPT_UDS_REGIONS},
        {"allow-client-shm", required_argument, NULL, OPT_ALLOW_SHM},
        {"allow-uid", required_argument, NULL, OPT_ACCESS + ACCESS_ALLOW_UID},
        {"max-regions", required_argument, NULL, OPT_ACCESS + ACCESS_MAX_REGIONS},
        {"max-mapped-bytes", required_argument, NULL, OPT_ACCESS + ACCESS_MAX_MAPPED},
        {"max-pinned-bytes", required_argument, NULL, OPT_ACCESS + ACCESS_MAX_PINNED},
        {"http-restricted-api", required_argument, NULL, OPT_ACCESS + ACCESS_HTTP_RESTRICTED},
        {"grpc-restricted-protocol", required_argument, NULL, OPT_ACCESS + ACCESS_GRPC_RESTRICTED},
        {"tenants", required_argument, NULL, OPT_ACCESS + ACCESS_TENANTS},
        {"max-buffered-mb", required_argument, NULL, OPT_BUFFERED},
        {"max-client-connections", required_argument, NULL, OPT_CLIENT_CONNS},
        {"request-timeout-s", required_argument, NULL, OPT_REQUEST_TIMEOUT},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    *o = (frontend_options){.host = "127.0.0.1", .port = 8000, .busy_policy = SHMREG_POLICY_DEFER,
                            .threads = 4, .delay_ms = 1000, .max_body = (size_t)256 << 20,
                            .drain_s = 30, .pin_policy = SHMREG_PIN_AUTO, .gpus = "all",
                            .reclaim = SHMREG_RECLAIM_BACKGROUND,
                            .instances_per_gpu = 2, .yolo_window = 32, .time_phases_every = 32,
                            .copy_batch = 4,
                            .uds_mode = 0600,
                            .uds_max_connections = 64, .uds_max_regions = 16,
                            .max_buffered = (size_t)256 << 20, .max_client_connections = 64,
                            .request_timeout_s = 10};
    access_options_init(&o->access);
    size_t n_prefixes = 0;
    unsigned long v;
    int c;
    opterr = 1;
    while ((c = getopt_long(argc, argv, "vh", longopts, NULL)) != -1) {
        int rc = 0;
        switch (c) {
        case OPT_HOST: o->host = optarg; break;
        case OPT_PORT: rc = parse_uint("--port", optarg, 0, 65535, &v); o->port = (unsigned)v; break;
        case OPT_GRPC_PORT:
            rc = parse_uint("--grpc-port", optarg, 0, 65535, &v);
            o->grpc_port = (unsigned)v;
            break;
        case OPT_POLICY: rc = parse_policy(optarg, &o->busy_policy); break;
        case OPT_PREFIX:
            if (!optarg[0]) {
                fprintf(stderr, "error: --reserved-key-prefix must not be empty\n");
                rc = -1;
            } else {
                rc = add_prefix(o, optarg, &n_prefixes);
            }
            break;
        case OPT_THREADS: rc = parse_uint("--threads", optarg, 1, 256, &v); o->threads = (unsigned)v; break;
        case OPT_DELAY: rc = parse_uint("--delay-ms", optarg, 0, 600000, &v); o->delay_ms = (unsigned)v; break;
        case OPT_BODY: rc = parse_uint("--max-body-mb", optarg, 1, 4096, &v); o->max_body = (size_t)v << 20; break;
        case OPT_DRAIN: rc = parse_uint("--drain-s", optarg, 0, 3600, &v); o->drain_s = (unsigned)v; break;
        case OPT_PIN: rc = parse_pin(optarg, &o->pin_policy); break;
        case OPT_RECLAIM: rc = parse_reclaim(optarg, &o->reclaim); break;
        case OPT_CACHE_BYTES:
            rc = parse_uint("--cache-bytes", optarg, 0, SIZE_MAX, &v);
            o->cache_bytes = (size_t)v;
            break;
        case OPT_REMOTE_TIMEOUT:
            rc = parse_uint("--remote-timeout-ms", optarg, 1, 3600000, &v);
            o->remote_timeout_ms = (size_t)v;
            break;
        case OPT_REMOTE_PORT: rc = parse_uint("--remote-port", optarg, 0, 65535, &v); o->remote_port = (unsigned)v; break;
        case OPT_REMOTE_TRANSPORTS:
            rc = optarg[0] ? 0 : -1;
            if (rc)
                fprintf(stderr, "error: --remote-transports wants UCX transports such as tcp or "
                                "posix,sysv,cma\n");
            o->remote_transports = optarg;
            break;
        case OPT_REMOTE_CONNS: rc = parse_uint("--remote-max-connections", optarg, 1, 65536, &v); o->remote_max_connections = (unsigned)v; break;
        case OPT_REMOTE_COPIES: rc = parse_uint("--remote-max-copies", optarg, 1, 65536, &v); o->remote_max_copies = (unsigned)v; break;
        case OPT_GPUS: rc = check_gpus(optarg); o->gpus = optarg; break;
        case OPT_INSTANCES: rc = parse_uint("--instances-per-gpu", optarg, 1, 64, &v); o->instances_per_gpu = (unsigned)v; break;
        case OPT_WINDOW: rc = parse_uint("--yolo-window", optarg, 1, 64, &v); o->yolo_window = (unsigned)v; break;
        case OPT_TIME_PHASES:
            rc = parse_uint("--time-phases-every", optarg, 1, 1u << 20, &v);
            o->time_phases_every = (unsigned)v;
            break;
        case OPT_COPY_BATCH:
            rc = parse_uint("--copy-batch", optarg, 1, 12, &v);
            o->copy_batch = (unsigned)v;
            break;
        case OPT_UDS:
            rc = optarg[0] ? 0 : -1;
            if (rc)
                fprintf(stderr, "error: --uds wants a socket path\n");
            o->uds_path = optarg;
            break;
        case OPT_UDS_MODE: rc = parse_mode(optarg, &o->uds_mode); break;
        case OPT_UDS_CONNS: rc = parse_uint("--uds-max-connections", optarg, 1, 1024, &v); o->uds_max_connections = (unsigned)v; break;
        case OPT_UDS_REGIONS: rc = parse_uint("--uds-max-regions", optarg, 1, 4096, &v); o->uds_max_regions = (unsigned)v; break;
        case OPT_ALLOW_SHM: rc = parse_bool("--allow-client-shm", optarg, &o->allow_client_shm); break;
        case OPT_ACCESS + ACCESS_ALLOW_UID:
        case OPT_ACCESS + ACCESS_MAX_REGIONS:
        case OPT_ACCESS + ACCESS_MAX_MAPPED:
        case OPT_ACCESS + ACCESS_MAX_PINNED:
        case OPT_ACCESS + ACCESS_HTTP_RESTRICTED:
        case OPT_ACCESS + ACCESS_GRPC_RESTRICTED:
        case OPT_ACCESS + ACCESS_TENANTS:
            rc = access_option(&o->access, (access_opt)(c - OPT_ACCESS), optarg);
            break;
        case OPT_BUFFERED: rc = parse_uint("--max-buffered-mb", optarg, 1, 65536, &v); o->max_buffered = (size_t)v << 20; break;
        case OPT_CLIENT_CONNS: rc = parse_uint("--max-client-connections", optarg, 0, 65536, &v); o->max_client_connections = (unsigned)v; break;
        case OPT_REQUEST_TIMEOUT: rc = parse_uint("--request-timeout-s", optarg, 1, 3600, &v); o->request_timeout_s = (unsigned)v; break;
        case 'v': o->verbose = 1; break;
        case 'h': usage(stdout, argv[0]); return 1;
        default: usage(stderr, argv[0]); return -1;
        }
        if (rc)
            return -1;
    }
    if (o->uds_path && o->access.tenants) {
        /* A --uds region belongs to its connection, not to a bearer-token
         * tenant: no tenant could see it, so the two are not mixed. */
        fprintf(stderr, "error: --uds and --tenants cannot be used together\n");
        return -1;
    }
    shmreg_config shares; /* the tenants' quotas must fit the limits */
    shmreg_config_init(&shares);
    if (access_quota_config(&o->access, &shares) != 0)
        return -1;
    if (optind < argc) {
        fprintf(stderr, "error: unexpected argument '%s'\n", argv[optind]);
        usage(stderr, argv[0]);
        return -1;
    }
    /* Else a body the size limit allows could never be buffered. */
    if (o->max_body > o->max_buffered) {
        fprintf(stderr, "error: --max-body-mb (%zu) must not exceed --max-buffered-mb (%zu)\n",
                o->max_body >> 20, o->max_buffered >> 20);
        return -1;
    }
    return 0;
}

void options_free(frontend_options *o)
{
    free(o->reserved_prefixes);
    o->reserved_prefixes = NULL;
    access_options_free(&o->access);
}
