/* shmreg-bench-remote: the time of one remote read (or write) through the
 * registry (shmreg_acquire + shmreg_copy_from_view + shmreg_release) of a
 * window of another process's memory, for comparison with ucx_perftest's
 * ucp_get on the same transport, and what a client's handshake costs
 * (docs/performance.md, "Remote regions through UCX").
 *
 *   shmreg-bench-remote [SIZE [ITERATIONS [MODE [HANDSHAKES]]]]
 *
 * MODE: get (default) or put, with "-alloc" (get-alloc, put-alloc) when the
 * client exports memory UCX allocated (shmreg_remote_alloc) instead of its
 * own malloc'd buffer. Prints the median, mean and p99 of the copies, in
 * us, and the bandwidth of the median, as ucx_perftest reports them; then
 * the median over HANDSHAKES (default 50; 0: none) fresh clients of what
 * one registration costs from nothing: invite, connect, export (the
 * announcement), register, with the median of each phase.
 *   shmreg-bench-remote capacity CLIENTS REGIONS
 * What a client connection and a region cost the server in resident memory.
 *
 * Both halves open tcp on the loopback device alone (tcp_device "lo"): the
 * bench's clients are on this host, and the library refuses tcp elsewhere
 * unless told which device is trusted.
 *
 * The exporting client is this program again, exec'd with
 * "--client SIZE alloc|export COUNT": COUNT times over, it creates a
 * client, says "READY", reads "ADDRESS SECRET-IN-HEX" from stdin, connects,
 * exports SIZE bytes and says "DESC <hex> <connect us> <export us>"; then
 * the next line on stdin (or its end) unexports and destroys that client. */
#include <ctype.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <shmreg/shmreg.h>

/* The one device both halves open tcp on: their own host's loopback. */
#define BENCH_TCP_DEVICE "lo"

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void put_hex(FILE *f, const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%02x", p[i]);
}

/* Hex digits into bytes, up to cap; stops at the first non-digit pair. */
static size_t unhex(const char *s, unsigned char *out, size_t cap)
{
    size_t n = 0;
    unsigned v;
    while (n < cap && isxdigit((unsigned char)s[0]) && isxdigit((unsigned char)s[1]) && sscanf(s, "%2x", &v) == 1) {
        out[n++] = (unsigned char)v;
        s += 2;
    }
    return n;
}

/* One client of the exec'd program: connect with the secret on stdin,
 * export, say the descriptor, and wait for the next line. */
static int client_once(size_t size, bool alloc)
{
    shmreg_remote_client *c;
    const shmreg_remote_client_config loopback = {.tcp_device = BENCH_TCP_DEVICE};
    if (shmreg_remote_client_create_with(&loopback, &c) != SHMREG_OK) {
        printf("ERR %s\n", shmreg_last_error());
        return 1;
    }
    printf("READY\n");
    fflush(stdout);
    char line[256];
    unsigned char secret[SHMREG_REMOTE_SECRET_SIZE];
    char *space;
    if (!fgets(line, sizeof line, stdin) || !(space = strchr(line, ' ')) ||
        unhex(space + 1, secret, sizeof secret) != sizeof secret) {
        shmreg_remote_client_destroy(c);
        return 2;
    }
    *space = '\0';
    unsigned char *buf = alloc ? NULL : malloc(size);
    shmreg_remote_window *w = NULL;
    const unsigned char *d;
    size_t n;
    double t0 = now_us();
    shmreg_err e = shmreg_remote_client_connect(c, line, secret);
    double t1 = now_us();
    if (e == SHMREG_OK)
        e = alloc ? shmreg_remote_alloc(c, size, (void **)&buf, &w) : shmreg_remote_export(c, buf, size, &w);
    double t2 = now_us();
    if (e == SHMREG_OK)
        e = shmreg_remote_descriptor(w, (const void **)&d, &n);
    if (e != SHMREG_OK) {
        printf("ERR %s\n", shmreg_last_error());
        fflush(stdout);
        shmreg_remote_client_destroy(c);
        return 1;
    }
    memset(buf, 0x5a, size);
    printf("DESC ");
    put_hex(stdout, d, n);
    printf(" %.1f %.1f\n", t1 - t0, t2 - t1);
    fflush(stdout);
    int more = fgets(line, sizeof line, stdin) != NULL;
    shmreg_remote_unexport(w);
    shmreg_remote_client_destroy(c);
    if (!alloc)
        free(buf);
    return more ? 0 : 3;
}

static int client(size_t size, bool alloc, int count)
{
    for (int i = 0; i < count; i++) {
        int rc = client_once(size, alloc);
        if (rc == 3) /* stdin closed: the server is done with us */
            return 0;
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* CPU time in us: of the whole process, or of the calling thread. */
static double cpu_us(int who)
{
    struct rusage u;
    getrusage(who, &u);
    return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e6 + u.ru_utime.tv_usec + u.ru_stime.tv_usec;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, by_value);
    return v[n / 2];
}

/* A client process (this program, exec'd) that exports windows. */
struct exporter {
    pid_t pid;
    FILE *in, *out;
    unsigned char desc[SHMREG_REMOTE_DESCRIPTOR_MAX];
    size_t size;
    double connect_us, export_us; /* the client's own clock, last handshake */
};

/* Start the client program, to connect `count` times over. */
static int spawn(const char *self, size_t size, bool alloc, int count, struct exporter *ex)
{
    int to[2], from[2];
    /* Close-on-exec: a later client must not inherit this one's stdin, or
     * closing it would never reach this one as end of file. */
    if (pipe2(to, O_CLOEXEC) || pipe2(from, O_CLOEXEC))
        return 1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(to[0], 0);
        dup2(from[1], 1);
        char s[32], k[16];
        snprintf(s, sizeof s, "%zu", size);
        snprintf(k, sizeof k, "%d", count);
        execl("/proc/self/exe", self, "--client", s, alloc ? "alloc" : "export", k, (char *)NULL);
        _exit(127);
    }
    close(to[0]);
    close(from[1]);
    ex->pid = pid;
    ex->in = fdopen(to[1], "w");
    ex->out = fdopen(from[0], "r");
    return 0;
}

static int expect_ready(struct exporter *ex)
{
    char line[512];
    if (!fgets(line, sizeof line, ex->out) || strcmp(line, "READY\n") != 0) {
        fprintf(stderr, "client: %s", line);
        return 1;
    }
    return 0;
}

/* The client said READY: hand it the address and secret, read its descriptor. */
static int handshake(struct exporter *ex, const char *address, const unsigned char *secret)
{
    fprintf(ex->in, "%s ", address);
    put_hex(ex->in, secret, SHMREG_REMOTE_SECRET_SIZE);
    fputc('\n', ex->in);
    fflush(ex->in);
    static char line[2 * SHMREG_REMOTE_DESCRIPTOR_MAX + 512];
    if (!fgets(line, sizeof line, ex->out) || strncmp(line, "DESC ", 5) != 0) {
        fprintf(stderr, "client: %s", line);
        return 1;
    }
    ex->size = unhex(line + 5, ex->desc, sizeof ex->desc);
    if (sscanf(line + 5 + 2 * ex->size, "%lf %lf", &ex->connect_us, &ex->export_us) != 2)
        return 1;
    return 0;
}

/* Let the client drop its connection and make the next one. */
static void next(struct exporter *ex)
{
    fputs("next\n", ex->in);
    fflush(ex->in);
}

static void reap(struct exporter *ex)
{
    fclose(ex->in);
    fclose(ex->out);
    waitpid(ex->pid, NULL, 0);
}

/* The listener's address as a client on this host dials it. */
static const char *server_address(void)
{
    const char *a;
    if (shmreg_remote_server_address(&a) != SHMREG_OK) {
        fprintf(stderr, "%s\n", shmreg_last_error());
        return NULL;
    }
    return a;
}

/* A fresh client of this tenant (untagged), connected, its window of size
 * bytes exported and registered as name. */
static int connect_one(const char *self, shmreg_registry *reg, const char *name, size_t size, bool alloc,
                       struct exporter *ex)
{
    unsigned char secret[SHMREG_REMOTE_SECRET_SIZE];
    const char *address = server_address();
    if (!address || spawn(self, size, alloc, 1, ex) || expect_ready(ex) ||
        shmreg_remote_invite(reg, NULL, secret) != SHMREG_OK || handshake(ex, address, secret))
        return 1;
    if (shmreg_register_remote(reg, name, ex->desc, ex->size, 0, size, 0) != SHMREG_OK) {
        fprintf(stderr, "%s\n", shmreg_last_error());
        return 1;
    }
    return 0;
}

/* What one registration costs from nothing: the server invites, a client
 * that exists but has no connection connects with the secret and exports,
 * the server registers its descriptor. Timed by the server from before the
 * invite to after the registration (the pipe's two messages included: tens
 * of us); the client times its connect and export itself. */
static int handshakes(const char *self, shmreg_registry *reg, size_t size, bool alloc, int count)
{
    const char *address = server_address();
    struct exporter ex;
    if (!address || spawn(self, size, alloc, count + 1, &ex))
        return 1;
    double *total = calloc((size_t)count, sizeof *total), *invite = calloc((size_t)count, sizeof *invite);
    double *conn = calloc((size_t)count, sizeof *conn), *exp = calloc((size_t)count, sizeof *exp);
    double *regi = calloc((size_t)count, sizeof *regi);
    for (int i = -1; i < count; i++) { /* the first one as warm-up */
        unsigned char secret[SHMREG_REMOTE_SECRET_SIZE];
        if (expect_ready(&ex))
            return 1;
        double t0 = now_us();
        if (shmreg_remote_invite(reg, NULL, secret) != SHMREG_OK) {
            fprintf(stderr, "%s\n", shmreg_last_error());
            return 1;
        }
        double t1 = now_us();
        if (handshake(&ex, address, secret))
            return 1;
        double t2 = now_us();
        if (shmreg_register_remote(reg, "handshake", ex.desc, ex.size, 0, size, 0) != SHMREG_OK) {
            fprintf(stderr, "%s\n", shmreg_last_error());
            return 1;
        }
        double t3 = now_us();
        if (i >= 0) {
            total[i] = t3 - t0;
            invite[i] = t1 - t0;
            conn[i] = ex.connect_us;
            exp[i] = ex.export_us;
            regi[i] = t3 - t2;
        }
        shmreg_unregister(reg, "handshake", SHMREG_KIND_REMOTE);
        next(&ex);
        /* The old connection's goodbye comes before the next READY; the
         * sweep gives it back (the tenant's limit counts connections). */
        shmreg_remote_sweep(reg, NULL);
    }
    reap(&ex);
    printf("handshake per registration (%s memory), tcp on " BENCH_TCP_DEVICE ", %d fresh clients: median %.0f us "
           "(phases' medians: invite %.1f us, connect %.0f us, export %.0f us, register %.1f us)\n",
           alloc ? "UCX-allocated" : "caller's", count, median(total, count),
           median(invite, count), median(conn, count), median(exp, count), median(regi, count));
    free(total);
    free(invite);
    free(conn);
    free(exp);
    free(regi);
    return 0;
}

static double rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            kib = atof(line + 6);
    if (f)
        fclose(f);
    return kib;
}

/* What one connection and one region cost the server: K clients, R regions
 * of each, the resident memory before and after. */
static int capacity(const char *self, shmreg_registry *reg, int clients, int regions)
{
    struct exporter warm, *ex = calloc((size_t)clients, sizeof *ex);
    char name[64];
    /* The engine itself (context, worker, thread, listener) and what a
     * first connection allocates once, off the count. */
    if (connect_one(self, reg, "warm", 1 << 20, true, &warm))
        return 1;
    double base = rss_kib();
    for (int k = 0; k < clients; k++) {
        snprintf(name, sizeof name, "c%d-0", k);
        if (connect_one(self, reg, name, 1 << 20, true, &ex[k]))
            return 1;
    }
    double with_connections = rss_kib();
    for (int k = 0; k < clients; k++)
        for (int r = 1; r < regions; r++) {
            snprintf(name, sizeof name, "c%d-%d", k, r);
            if (shmreg_register_remote(reg, name, ex[k].desc, ex[k].size, (size_t)r * 64, 4096, 0) != SHMREG_OK) {
                fprintf(stderr, "%s\n", shmreg_last_error());
                return 1;
            }
        }
    double with_regions = rss_kib();
    printf("capacity, tcp on " BENCH_TCP_DEVICE ": %d clients: %.1f KiB per client (connection + first region); "
           "%d more regions each: %.2f KiB per region\n", clients,
           (with_connections - base) / clients, regions - 1,
           (with_regions - with_connections) / ((double)clients * (regions - 1)));
    for (int k = 0; k < clients; k++)
        reap(&ex[k]);
    reap(&warm);
    free(ex);
    return 0;
}

static int copies(const char *self, shmreg_registry *reg, size_t size, int iterations, bool put, bool alloc)
{
    struct exporter ex;
    if (connect_one(self, reg, "bench", size, alloc, &ex))
        return 1;
    unsigned char *buf = malloc(size);
    double *t = malloc(sizeof *t * (size_t)iterations);
    memset(buf, 0xa5, size);
    /* The server's CPU over the counted copies, and how much of it its
     * other threads (UCX's progress) spent while this one copied. */
    double cpu0 = 0, thread0 = 0;
    for (int i = -iterations / 10; i < iterations; i++) { /* a tenth as warm-up */
        double t0 = now_us();
        shmreg_region *ref;
        shmreg_view v;
        shmreg_err e = shmreg_acquire(reg, "bench", 0, size, &ref, &v);
        if (e == SHMREG_OK)
            e = put ? shmreg_copy_to_view(ref, &v, 0, buf, size) : shmreg_copy_from_view(ref, &v, 0, buf, size);
        shmreg_release(ref);
        if (e != SHMREG_OK) {
            fprintf(stderr, "%s\n", shmreg_last_error());
            return 1;
        }
        if (i >= 0)
            t[i] = now_us() - t0;
        if (i == -1)
            cpu0 = cpu_us(RUSAGE_SELF), thread0 = cpu_us(RUSAGE_THREAD);
    }
    double cpu = (cpu_us(RUSAGE_SELF) - cpu0) / iterations, thread = (cpu_us(RUSAGE_THREAD) - thread0) / iterations;
    for (size_t i = 0; !put && i < size; i++)
        if (buf[i] != 0x5a) {
            fprintf(stderr, "byte %zu of the read is not the client's\n", i);
            return 1;
        }
    double sum = 0;
    for (int i = 0; i < iterations; i++)
        sum += t[i];
    double med = median(t, iterations);
    shmreg_region_status *st = NULL;
    size_t n = 0;
    shmreg_status(reg, "bench", SHMREG_KIND_REMOTE, &st, &n);
    printf("remote %s of %zu bytes through the registry (%s memory), tcp on " BENCH_TCP_DEVICE " (connection: %s), "
           "%d iterations: median %.2f us, mean %.2f us, p99 %.2f us, %.0f MB/s at the median; "
           "server CPU %.0f us per copy, %.0f us of it outside the copying thread\n",
           put ? "write" : "read", size, alloc ? "UCX-allocated" : "caller's",
           n == 1 && st[0].transports ? st[0].transports : "?", iterations, med, sum / iterations,
           t[iterations * 99 / 100], size / med, cpu, cpu - thread);
    shmreg_status_free(st, n);
    shmreg_unregister(reg, "bench", SHMREG_KIND_REMOTE);
    reap(&ex);
    free(buf);
    free(t);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "--client") == 0)
        return client(strtoull(argv[2], NULL, 0), strcmp(argv[3], "alloc") == 0, atoi(argv[4]));
    if (shmreg_remote_available() != SHMREG_OK) {
        fprintf(stderr, "%s\n", shmreg_last_error());
        return 77;
    }
    /* Loopback only: the bench's clients are on this host. Room for every
     * client the capacity mode starts at once. */
    shmreg_remote_config rc = {
        .listen = "127.0.0.1:0", .max_connections = 4096, .max_copies = 64, .tcp_device = BENCH_TCP_DEVICE};
    if (shmreg_remote_configure(&rc) != SHMREG_OK) {
        fprintf(stderr, "%s\n", shmreg_last_error());
        return 1;
    }
    shmreg_registry *reg;
    if (shmreg_registry_create(NULL, &reg) != SHMREG_OK) {
        fprintf(stderr, "%s\n", shmreg_last_error());
        return 1;
    }
    int status;
    if (argc == 4 && strcmp(argv[1], "capacity") == 0) {
        status = capacity(argv[0], reg, atoi(argv[2]), atoi(argv[3]));
        shmreg_registry_destroy(reg);
        return status;
    }
    size_t size = argc > 1 ? strtoull(argv[1], NULL, 0) : 1u << 20;
    int iterations = argc > 2 ? atoi(argv[2]) : 2000;
    const char *mode = argc > 3 ? argv[3] : "get";
    int count = argc > 4 ? atoi(argv[4]) : 50;
    bool put = strstr(mode, "put") != NULL, alloc = strstr(mode, "alloc") != NULL;
    status = copies(argv[0], reg, size, iterations, put, alloc);
    if (status == 0 && count > 0)
        status = handshakes(argv[0], reg, size, alloc, count);
    shmreg_registry_destroy(reg);
    return status;
}
