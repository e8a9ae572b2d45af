/* Command-line parsing: every knob of the server, with its default. One
 * table (flags[] below) names each flag, its argument, how that argument is
 * read and checked, the field it sets and its --help text: the parser and
 * --help are both made from it, so they cannot drift. */
#include "options.h"

#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* s as one of the choices (ended by a NULL name): 0 with its value in *out,
 * or -1 after an error that names opt and the choices ("wants a, b or c"). */
static int parse_choice(const char *opt, const char *s, const choice *choices, int *out)
{
    size_t n = 0;
    while (choices[n].name)
        n++;
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

static int add_prefix(server_options *o, const char *prefix, size_t *count)
{
    if (!prefix[0]) {
        fprintf(stderr, "error: --reserved-key-prefix must not be empty\n");
        return -1;
    }
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

/* ------------------------------------------------------------ the flags */

/* How a flag's argument is read into its field. */
typedef enum flag_kind {
    FLAG_STRING, /* const char *: the argument itself, after check if any */
    FLAG_UINT,   /* unsigned: a decimal integer in [min, max] */
    FLAG_SIZE,   /* size_t: a decimal integer in [min, max] */
    FLAG_MIB,    /* size_t: a decimal number of MiB in [min, max], kept in bytes */
    FLAG_CHOICE, /* int or enum: one of choices' names */
    FLAG_OCTAL,  /* unsigned: permission bits in octal (parse_mode) */
    FLAG_PREFIX, /* one more reserved key prefix (repeatable) */
    FLAG_ACCESS, /* handed to access_option (core/access.h), which keeps it */
    FLAG_SET,    /* no argument: the int field becomes 1 */
    FLAG_HELP,   /* no argument: print --help and stop */
} flag_kind;

typedef struct flag {
    char short_name;              /* or 0 */
    const char *name;             /* the long name, without "--" */
    const char *arg;              /* the argument as --help names it; NULL: takes none.
                                     "=B" is written --name=B */
    flag_kind kind;
    size_t field;                 /* offsetof(server_options, the field it sets) */
    unsigned long min, max;       /* FLAG_UINT, FLAG_SIZE, FLAG_MIB */
    const choice *choices;        /* FLAG_CHOICE */
    int (*check)(const char *s);  /* FLAG_STRING: 0, or -1 after a message */
    const char *wants;            /* FLAG_STRING: an empty argument is refused, "--name
                                     wants <this>" */
    access_opt access;            /* FLAG_ACCESS */
    int remote_engine;            /* shapes the remote engine: a failure to start it is fatal */
    const char *help;             /* --help's text: its lines after the first start
                                     in the first one's column */
} flag;

/* FLAG_CHOICE writes an int into these fields. */
_Static_assert(sizeof(shmreg_policy) == sizeof(int), "busy_policy is set as an int");
_Static_assert(sizeof(shmreg_pin_policy) == sizeof(int), "pin_policy is set as an int");
_Static_assert(sizeof(shmreg_reclaim) == sizeof(int), "reclaim is set as an int");

static const choice busy_policies[] = {
    {"defer", SHMREG_POLICY_DEFER}, {"detach", SHMREG_POLICY_DETACH}, {"refuse", SHMREG_POLICY_REFUSE},
    {NULL, 0}};
static const choice pin_policies[] = {
    {"never", SHMREG_PIN_NEVER}, {"auto", SHMREG_PIN_AUTO}, {"always", SHMREG_PIN_ALWAYS}, {NULL, 0}};
static const choice reclaim_modes[] = {
    {"background", SHMREG_RECLAIM_BACKGROUND}, {"inline", SHMREG_RECLAIM_INLINE}, {NULL, 0}};
static const choice booleans[] = {{"true", 1}, {"false", 0}, {NULL, 0}};

#define FIELD(f) offsetof(server_options, f)
#define UINT(f, lo, hi) .kind = FLAG_UINT, .field = FIELD(f), .min = (lo), .max = (hi)
#define SIZE(f, lo, hi) .kind = FLAG_SIZE, .field = FIELD(f), .min = (lo), .max = (hi)
#define MIB(f, lo, hi) .kind = FLAG_MIB, .field = FIELD(f), .min = (lo), .max = (hi)
#define CHOICE(f, c) .kind = FLAG_CHOICE, .field = FIELD(f), .choices = (c)
#define ACCESS(a) .kind = FLAG_ACCESS, .access = (a)

/* Every flag, in --help's order. The defaults are options_parse's. */
static const flag flags[] = {
    {.name = "host", .arg = "ADDR", .kind = FLAG_STRING, .field = FIELD(host),
     .help = "numeric address to listen on (default 127.0.0.1)"},
    {.name = "port", .arg = "N", UINT(port, 0, 65535),
     .help = "TCP port, 0 = any free one (default 8000)"},
    {.name = "grpc-port", .arg = "N", UINT(grpc_port, 0, 65535),
     .help = "KServe v2 gRPC port beside HTTP, 0 = off (default 0;\n"
             "Triton's is 8001, which scripts/run.sh passes)"},
    {.name = "busy-policy", .arg = "P", CHOICE(busy_policy, busy_policies),
     .help = "defer | detach | refuse: unregister of a region in use"},
    {.name = "reserved-key-prefix", .arg = "P", .kind = FLAG_PREFIX,
     .help = "refuse shm keys starting with P (repeatable)"},
    {.name = "threads", .arg = "N", UINT(threads, 1, 256),
     .help = "inference worker threads at work (default 4; 3N more\n"
             "stand by for requests that wait for a GPU run); copies\n"
             "from and to remote clients hold at most N-1 of them, and\n"
             "under --tenants (N-1)/2 (at least 1) for one tenant"},
    {.name = "grpc-threads", .arg = "N", UINT(grpc_threads, 0, 64),
     .help = "gRPC's serving threads, which read every call and answer\n"
             "the short ones themselves (default 0: half the cores,\n"
             "two to eight)"},
    {.name = "spin-us", .arg = "N", UINT(spin_us, 0, 1000),
     .help = "one worker that finished a request polls for the next\n"
             "one, and a lone 'yolo' run polls for its end, up to N us\n"
             "before sleeping: a lower latency when requests come one\n"
             "at a time, for CPU (default 0: sleep at once)"},
    {.name = "delay-ms", .arg = "N", UINT(delay_ms, 0, 600000),
     .help = "sleep of the simple_delayed model (default 1000)"},
    {.name = "max-body-mb", .arg = "N", MIB(max_body, 1, 4096),
     .help = "largest request in MiB: an HTTP body, a gRPC message (gRPC's\n"
             "receive limit: past it RESOURCE_EXHAUSTED); also the\n"
             "largest tensor copied out of shared memory and HTTP\n"
             "response (default 256)"},
    {.name = "drain-s", .arg = "N", UINT(drain_s, 0, 3600),
     .help = "shutdown waits this long for in-flight requests (default 30)"},
    {.name = "pin", .arg = "P", CHOICE(pin_policy, pin_policies),
     .help = "never | auto | always: page-lock registered system regions\n"
             "for DMA (default auto: when a CUDA device is usable)"},
    {.name = "reclaim", .arg = "R", CHOICE(reclaim, reclaim_modes),
     .help = "background | inline: who unmaps (unpins) a region after\n"
             "its last request: the library's thread, or that request's\n"
             "(default background)"},
    {.name = "remote-timeout-ms", .arg = "N", SIZE(remote_timeout_ms, 1, 3600000),
     .help = "remote_memory: a read or write of a client's memory fails\n"
             "after N ms (default 10000); the client is then dropped"},
    {.name = "remote-port", .arg = "N", UINT(remote_port, 0, 65535), .remote_engine = 1,
     .help = "remote_memory: the port on --host where clients connect\n"
             "through UCX after v2/remotememory/connect, 0 = any free\n"
             "one, which connect's answer names (default 0)"},
    {.name = "remote-transports", .arg = "LIST", .kind = FLAG_STRING, .field = FIELD(remote_transports),
     .wants = "UCX transports such as rc,dc or tcp", .remote_engine = 1,
     .help = "remote_memory: the UCX transports the server opens: rc,\n"
             "dc and their variants, tcp (with --remote-tcp-device),\n"
             "cuda_copy, rocm_copy, gdr_copy; any other is refused at\n"
             "start (default: rc,dc, plus tcp with --remote-tcp-device)"},
    {.name = "remote-tcp-device", .arg = "DEV", .kind = FLAG_STRING,
     .field = FIELD(remote_tcp_device), .wants = "a network device such as lo or eth1",
     .remote_engine = 1,
     .help = "remote_memory: open tcp on this network device only (e.g.\n"
             "lo): any host that reaches its address can then write\n"
             "into the server's memory; name one whose network you\n"
             "trust (default: none, tcp refused)"},
    {.name = "remote-tcp-ports", .arg = "LOW-HIGH", .kind = FLAG_STRING,
     .field = FIELD(remote_tcp_ports), .wants = "a range of ports LOW-HIGH",
     .remote_engine = 1,
     .help = "remote_memory: the ports tcp's own listener may take,\n"
             "for a firewall (default: any)"},
    {.name = "remote-max-connections", .arg = "N", UINT(remote_max_connections, 1, 65536),
     .help = "remote_memory: connections plus unused invitations of one\n"
             "tenant; past it v2/remotememory/connect answers 429\n"
             "(default 16)"},
    {.name = "remote-max-copies", .arg = "N", UINT(remote_max_copies, 1, 65536),
     .help = "remote_memory: reads and writes of one tenant's regions in\n"
             "flight at once; past it a request fails at once instead of\n"
             "waiting (default 8)"},
    {.name = "cache-bytes", .arg = "N", SIZE(cache_bytes, 0, SIZE_MAX),
     .help = "keep up to N bytes of mappings (and pins) of unregistered\n"
             "regions for clients that register the same shm again,\n"
             "0 = off (default 0; see README for a value)"},
    {.name = "gpus", .arg = "LIST", .kind = FLAG_STRING, .field = FIELD(gpus), .check = check_gpus,
     .help = "devices of the GPU model 'yolo': all, none or e.g. 0,1\n"
             "(default all)"},
    {.name = "instances-per-gpu", .arg = "N", UINT(instances_per_gpu, 1, 64),
     .help = "instances of 'yolo' on each device (default 2)"},
    {.name = "yolo-window", .arg = "N", UINT(yolo_window, 1, 64),
     .help = "samples per side of each output's input window, the\n"
             "cost of 'yolo' (default 32)"},
    {.name = "time-phases-every", .arg = "N", UINT(time_phases_every, 1, 1u << 20),
     .help = "time the device phases of one run in N on each instance\n"
             "of 'yolo'; the others count its last timed run's\n"
             "(default 32; 1 = every run)"},
    {.name = "copy-batch", .arg = "N", UINT(copy_batch, 1, 12),
     .help = "copy the tensors of up to N runs waiting for one instance\n"
             "of 'yolo' as one batch each way (1-12, default 4; 1 = each\n"
             "run's alone)"},
    {.name = "max-queue", .arg = "N", UINT(max_queue, 1, 1u << 16),
     .help = "requests of 'yolo' that may wait for a run slot of one\n"
             "instance (each has 12); one more is refused at once with\n"
             "429 / RESOURCE_EXHAUSTED (default 64)"},
    {.name = "uds", .arg = "PATH", .kind = FLAG_STRING, .field = FIELD(uds_path),
     .wants = "a socket path",
     .help = "also listen on a Unix socket (SOCK_SEQPACKET) where clients\n"
             "register sealed memfds (shmreg_send_region) and GPU memory\n"
             "(shmreg_send_cuda_region); off by default"},
    {.name = "uds-mode", .arg = "OCTAL", .kind = FLAG_OCTAL, .field = FIELD(uds_mode),
     .help = "permissions of the socket file (default 0600: the server's\n"
             "user only; e.g. 0660 for its group)"},
    {.name = "uds-max-connections", .arg = "N", UINT(uds_max_connections, 1, 1024),
     .help = "Unix-socket clients at once (default 64)"},
    {.name = "uds-max-regions", .arg = "N", UINT(uds_max_regions, 1, 4096),
     .help = "regions per Unix-socket connection (default 16)"},
    {.name = "handover-socket", .arg = "PATH", .kind = FLAG_STRING, .field = FIELD(handover_path),
     .wants = "a socket path",
     .help = "listen on this Unix socket (mode 0600, removed at exit) for\n"
             "a new server of the same user that takes over this one\n"
             "(--take-over): its regions, listening sockets and Unix-\n"
             "socket clients; off by default"},
    {.name = "take-over", .arg = "PATH", .kind = FLAG_STRING, .field = FIELD(take_over_path),
     .wants = "a socket path",
     .help = "start by taking over the server whose --handover-socket\n"
             "is PATH instead of binding ports: --host, --port,\n"
             "--grpc-port and --uds left out or equal to its own;\n"
             "if that server is gone before it hands over, bind\n"
             "them (a fixed --port needed) with no region"},
    {.name = "orphan-grace-s", .arg = "N", UINT(orphan_grace_s, 0, 86400),
     .help = "after --take-over, unregister a Unix-socket client's\n"
             "regions that came without its connection after N s\n"
             "(default 60)"},
    {.name = "allow-client-shm", .arg = "=B", CHOICE(allow_client_shm, booleans),
     .help = "true | false: let clients register and unregister shared\n"
             "memory, as Triton 2.73's flag (default false, as there)"},
    {.name = "allow-uid", .arg = "UID|any", ACCESS(ACCESS_ALLOW_UID),
     .help = "map only shm objects this uid owns (repeatable;\n"
             "default: the server's own uid; any: every owner)"},
    {.name = "max-regions", .arg = "N", ACCESS(ACCESS_MAX_REGIONS),
     .help = "regions registered at once, 0 = no limit\n"
             "(default 4096)"},
    {.name = "max-mapped-bytes", .arg = "N", ACCESS(ACCESS_MAX_MAPPED),
     .help = "bytes mapped for all regions, 0 = no limit\n"
             "(default 1099511627776, 1 TiB)"},
    {.name = "max-pinned-bytes", .arg = "N", ACCESS(ACCESS_MAX_PINNED),
     .help = "bytes page-locked, 0 = no limit but --pin auto's 1 GiB\n"
             "budget (default 0)"},
    {.name = "http-restricted-api", .arg = "shared-memory:KEY=VALUE", ACCESS(ACCESS_HTTP_RESTRICTED),
     .help = "shared-memory endpoints need header KEY: VALUE"},
    {.name = "grpc-restricted-protocol", .arg = "shared-memory:KEY=VALUE",
     ACCESS(ACCESS_GRPC_RESTRICTED),
     .help = "the same over gRPC: metadata triton-grpc-protocol-KEY"},
    {.name = "tenants", .arg = "FILE", ACCESS(ACCESS_TENANTS),
     .help = "bearer tokens -> tenants, each with its own regions"},
    {.name = "max-buffered-mb", .arg = "N", MIB(max_buffered, 1, 65536),
     .help = "request bytes held at once, all connections together, in\n"
             "MiB, each protocol its own N (default 256, at least\n"
             "--max-body-mb). HTTP: bodies as they arrive, until their\n"
             "request is done; past it 503. gRPC: ModelInfer messages\n"
             "from their first byte (gRPC's memory quota: N plus\n"
             "--max-body-mb, at least 64, for gRPC's read buffers, less\n"
             "the messages held) until their call is done; past it\n"
             "RESOURCE_EXHAUSTED, calls still arriving cancelled at\n"
             "random. Not the models' outputs or responses"},
    {.name = "max-client-connections", .arg = "N", UINT(max_client_connections, 0, 65536),
     .help = "connections from one IP address at once, on each port\n"
             "(HTTP and gRPC: refused past it; gRPC calls on one\n"
             "connection are not limited), 0 = no limit (default 64)"},
    {.name = "request-timeout-s", .arg = "N", UINT(request_timeout_s, 1, 3600),
     .help = "close a connection idle this long: a request whose headers\n"
             "or body stall, or an unused kept-alive one (default 10)"},
    {.name = "fd-store-ms", .arg = "N", UINT(fd_store_ms, 1, 60000),
     .help = "under a service manager (NOTIFY_SOCKET): keep the regions\n"
             "in its fd store, saved at most every N ms after a change,\n"
             "so that a restart after a crash has them (default 100)"},
    {.short_name = 'v', .name = "verbose", .kind = FLAG_SET, .field = FIELD(verbose),
     .help = "one log line per request on stderr, and one per inference\n"
             "with the path each shared-memory tensor took"},
    {.short_name = 'h', .name = "help", .kind = FLAG_HELP, .help = "print these options and exit"},
};
enum { N_FLAGS = sizeof flags / sizeof flags[0] };
_Static_assert(N_FLAGS <= 64, "server_options.given has a bit per flag");

/* The text of --help: each flag's spelling, then its help in a column. */
static void usage(FILE *to, const char *argv0)
{
    enum { COLUMN = 30 };
    fprintf(to, "usage: %s [options]\n", argv0);
    for (size_t i = 0; i < N_FLAGS; i++) {
        const flag *f = &flags[i];
        char left[96];
        int n = f->short_name ? snprintf(left, sizeof left, "  -%c, --%s", f->short_name, f->name)
                              : snprintf(left, sizeof left, "  --%s", f->name);
        if (f->arg) /* "--port N", "--allow-client-shm=B" */
            n += snprintf(left + n, sizeof left - (size_t)n, "%s%s", f->arg[0] == '=' ? "" : " ",
                          f->arg);
        const char *line = f->help;
        size_t len = strcspn(line, "\n");
        if (n <= COLUMN - 2)
            fprintf(to, "%-*s%.*s\n", COLUMN, left, (int)len, line);
        else
            fprintf(to, "%s\n%*s%.*s\n", left, COLUMN, "", (int)len, line);
        while (line[len]) {
            line += len + 1;
            len = strcspn(line, "\n");
            fprintf(to, "%*s%.*s\n", COLUMN, "", (int)len, line);
        }
    }
}

/* Set f's field of o from its argument arg: 0, or -1 after a message. */
static int apply(const flag *f, const char *arg, server_options *o, size_t *n_prefixes)
{
    char *field = (char *)o + f->field;
    char opt[64];
    snprintf(opt, sizeof opt, "--%s", f->name);
    unsigned long v;
    if (f->remote_engine)
        o->remote_engine_flag = f->name; /* static */
    switch (f->kind) {
    case FLAG_STRING:
        if (f->wants && !arg[0]) {
            fprintf(stderr, "error: %s wants %s\n", opt, f->wants);
            return -1;
        }
        *(const char **)field = arg;
        return f->check ? f->check(arg) : 0;
    case FLAG_UINT:
        if (parse_uint(opt, arg, f->min, f->max, &v) != 0)
            return -1;
        *(unsigned *)field = (unsigned)v;
        return 0;
    case FLAG_SIZE:
        if (parse_uint(opt, arg, f->min, f->max, &v) != 0)
            return -1;
        *(size_t *)field = (size_t)v;
        return 0;
    case FLAG_MIB:
        if (parse_uint(opt, arg, f->min, f->max, &v) != 0)
            return -1;
        *(size_t *)field = (size_t)v << 20;
        return 0;
    case FLAG_CHOICE: return parse_choice(opt, arg, f->choices, (int *)field);
    case FLAG_OCTAL: return parse_mode(arg, (unsigned *)field);
    case FLAG_PREFIX: return add_prefix(o, arg, n_prefixes);
    case FLAG_ACCESS: return access_option(&o->access, f->access, arg);
    case FLAG_SET: *(int *)field = 1; return 0;
    case FLAG_HELP: return 0;
    }
    return -1;
}

enum { FIRST = 256 }; /* a long flag's getopt_long value: its index + FIRST */

/* How many flags' names start with given's ("--remote-t" or "--remote-t=x"). */
static size_t starts_of(const char *given)
{
    given += strspn(given, "-");
    size_t len = strcspn(given, "="), n = 0;
    for (size_t i = 0; i < N_FLAGS; i++)
        n += strncmp(flags[i].name, given, len) == 0;
    return n;
}

/* Why getopt_long refused the flag it answered c (':' or '?') for, on one
 * line that points at --help: the whole help here, some hundred lines,
 * would scroll the reason off the terminal. */
static void refuse_flag(int c, char **argv)
{
    const char *given = argv[optind - 1];
    if (optopt >= FIRST && optopt < FIRST + N_FLAGS) {
        const char *name = flags[optopt - FIRST].name;
        if (c == ':')
            fprintf(stderr, "error: --%s wants an argument; see --help\n", name);
        else
            fprintf(stderr, "error: --%s takes no argument, got '%s'; see --help\n", name, given);
    } else if (optopt != 0) {
        fprintf(stderr, "error: unknown option '-%c'; see --help\n", optopt);
    } else if (starts_of(given) > 1) { /* getopt_long takes a flag's start */
        fprintf(stderr, "error: '%.*s' is the start of more than one option; see --help\n",
                (int)strcspn(given, "="), given);
    } else {
        fprintf(stderr, "error: unknown option '%s'; see --help\n", given);
    }
}

/* The flag getopt_long answered c for: a long one's index + FIRST, or a
 * short name. NULL for ':' (a missing argument) and '?' (any other refusal). */
static const flag *flag_of(int c)
{
    if (c >= FIRST && c < FIRST + N_FLAGS)
        return &flags[c - FIRST];
    for (size_t i = 0; i < N_FLAGS; i++)
        if (c != 0 && flags[i].short_name == c)
            return &flags[i];
    return NULL;
}

int options_parse(int argc, char **argv, server_options *o)
{
    struct option longopts[N_FLAGS + 1];
    char shortopts[2 * N_FLAGS + 2];
    size_t n_short = 0;
    shortopts[n_short++] = ':'; /* a missing argument answers ':', not '?' */
    for (size_t i = 0; i < N_FLAGS; i++) {
        longopts[i] = (struct option){flags[i].name, flags[i].arg ? required_argument : no_argument,
                                      NULL, FIRST + (int)i};
        if (flags[i].short_name) {
            shortopts[n_short++] = flags[i].short_name;
            if (flags[i].arg)
                shortopts[n_short++] = ':';
        }
    }
    longopts[N_FLAGS] = (struct option){NULL, 0, NULL, 0};
    shortopts[n_short] = 0;
    *o = (server_options){.host = "127.0.0.1", .port = 8000, .busy_policy = SHMREG_POLICY_DEFER,
                          .threads = 4, .delay_ms = 1000, .max_body = (size_t)256 << 20,
                          .drain_s = 30, .pin_policy = SHMREG_PIN_AUTO, .gpus = "all",
                          .reclaim = SHMREG_RECLAIM_BACKGROUND,
                          .instances_per_gpu = 2, .yolo_window = 32, .time_phases_every = 32,
                          .copy_batch = 4, .max_queue = GPU_DEFAULT_MAX_QUEUE,
                          .uds_mode = 0600,
                          .uds_max_connections = 64, .uds_max_regions = 16,
                          .orphan_grace_s = 60,
                          .max_buffered = (size_t)256 << 20, .max_client_connections = 64,
                          .request_timeout_s = 10, .fd_store_ms = 100};
    access_options_init(&o->access);
    size_t n_prefixes = 0;
    int c;
    opterr = 0; /* refuse_flag says why, on one line */
    while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
        const flag *f = flag_of(c);
        if (!f) {
            refuse_flag(c, argv);
            return -1;
        }
        if (f->kind == FLAG_HELP) {
            usage(stdout, argv[0]);
            return 1;
        }
        if (apply(f, optarg, o, &n_prefixes) != 0)
            return -1;
        o->given |= (uint64_t)1 << (f - flags);
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
        fprintf(stderr, "error: unexpected argument '%s'; see --help\n", argv[optind]);
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

int options_given(const server_options *o, const char *name)
{
    for (size_t i = 0; i < N_FLAGS; i++)
        if (strcmp(flags[i].name, name) == 0)
            return (o->given >> i) & 1;
    return 0;
}

/* ------------------------------------------------- each adapter's share */

/* Each protocol's pool of workers: --threads at work, and three threads
 * more per worker for requests whose worker waits for a GPU run
 * (worker_pool.h), so that 12 workers keep up to 36 more runs in flight on
 * the GPU's instances. */
static worker_pool_config workers(const server_options *o)
{
    return (worker_pool_config){.working = o->threads,
                                .spare = o->threads * 3u,
                                .spin_ns = (uint64_t)o->spin_us * 1000};
}

int options_http(const server_options *o, http_config *out)
{
    *out = (http_config){.host = o->host,
                         .port = o->port,
                         .listen_fd = -1,
                         .workers = workers(o),
                         .max_body = o->max_body,
                         .drain_s = o->drain_s,
                         .request_timeout_s = o->request_timeout_s,
                         .max_client_connections = o->max_client_connections,
                         .allow_client_shm = o->allow_client_shm,
                         .verbose = o->verbose,
                         .access = &o->access};
    return 1;
}

/* gRPC's serving threads (grpc_server.h): --grpc-threads, else half the
 * cores, at least two and at most eight. Each runs the short calls it reads
 * to their answer; more would wait for cores that the workers and the GPU's
 * threads need. */
static unsigned serving_threads(const server_options *o)
{
    if (o->grpc_threads)
        return o->grpc_threads;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores < 4 ? 2u : cores > 16 ? 8u : (unsigned)(cores / 2);
}

int options_grpc(const server_options *o, grpc_config *out)
{
    *out = (grpc_config){.host = o->host,
                         .port = o->grpc_port,
                         .listen_fd = -1,
                         .workers = workers(o),
                         .serving_threads = serving_threads(o),
                         .max_body = o->max_body,
                         .drain_s = o->drain_s,
                         .request_timeout_s = o->request_timeout_s,
                         .max_client_connections = o->max_client_connections,
                         .allow_client_shm = o->allow_client_shm,
                         .access = &o->access};
    return o->grpc_port != 0;
}

int options_uds(const server_options *o, uds_config *out)
{
    *out = (uds_config){.path = o->uds_path,
                        .listen_fd = -1,
                        .orphan_grace_s = o->orphan_grace_s,
                        .mode = o->uds_mode,
                        .max_connections = o->uds_max_connections,
                        .max_regions = o->uds_max_regions,
                        .verbose = o->verbose,
                        .access = &o->access};
    return o->uds_path != NULL;
}

void options_models(const server_options *o, models_config *out)
{
    *out = (models_config){.delay_ms = o->delay_ms,
                           .tenants = access_tenant_count(&o->access),
                           .gpu = {.gpus = o->gpus,
                                   .per_gpu = o->instances_per_gpu,
                                   .window = o->yolo_window,
                                   .time_every = o->time_phases_every,
                                   .copy_batch = o->copy_batch,
                                   .wait_spin_ns = (uint64_t)o->spin_us * 1000,
                                   .max_queue = o->max_queue}};
}

void options_infer(const server_options *o, infer_config *out)
{
    *out = (infer_config){.max_copy = o->max_body, .log_paths = o->verbose};
}

void options_remote(const server_options *o, remote_engine_settings *out)
{
    *out = (remote_engine_settings){.host = o->host,
                                    .port = o->remote_port,
                                    .transports = o->remote_transports,
                                    .tcp_device = o->remote_tcp_device,
                                    .tcp_ports = o->remote_tcp_ports,
                                    .max_connections = o->remote_max_connections,
                                    .max_copies = o->remote_max_copies,
                                    .asked_by = o->remote_engine_flag};
}

void options_free(server_options *o)
{
    free(o->reserved_prefixes);
    o->reserved_prefixes = NULL;
    access_options_free(&o->access);
}

void options_crash_survival(const server_options *o, crash_survival_config *out)
{
    *out = (crash_survival_config){.save_ms = o->fd_store_ms, .verbose = o->verbose};
}
