/* shmreg-bench-remote: the time of one remote read (or write) through the
 * registry (shmreg_acquire + shmreg_copy_from_view + shmreg_release) of a
 * window of another process's memory, for comparison with ucx_perftest's
 * ucp_get on the same transport (docs/performance.md, "Remote regions").
 *
 *   UCX_TLS=posix,sysv,cma shmreg-bench-remote [SIZE [ITERATIONS [MODE]]]
 *
 * MODE: get (default) or put, with "-alloc" (get-alloc, put-alloc) when the
 * client exports memory UCX allocated (shmreg_remote_alloc, as
 * ucx_perftest's buffers are) instead of its own malloc'd buffer.
 *   shmreg-bench-remote capacity CLIENTS REGIONS
 * What an endpoint and a region cost the server in resident memory.
 * The exporting client is this program again, exec'd with "--client SIZE
 * alloc|export": it exports SIZE bytes and prints the descriptor in hex,
 * then waits for its stdin to close. Prints the median, mean and p99 of the copies, in us,
 * and the bandwidth of the median, as ucx_perftest reports them. */
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <shmreg/shmreg.h>

static int client(size_t size, bool alloc)
{
    unsigned char *buf = alloc ? NULL : malloc(size);
    shmreg_remote_client *c;
    shmreg_remote_window *w = NULL;
    const unsigned char *d;
    size_t n;
    if (shmreg_remote_client_create(&c) ||
        (alloc ? shmreg_remote_alloc(c, size, (void **)&buf, &w) : shmreg_remote_export(c, buf, size, &w)) ||
        shmreg_remote_descriptor(w, (const void **)&d, &n)) {
        fprintf(stderr, "client: %s\n", shmreg_last_error());
        return 1;
    }
    memset(buf, 0x5a, size);
    for (size_t i = 0; i < n; i++)
        printf("%02x", d[i]);
    printf("\n");
    fflush(stdout);
    char line[16];
    while (fgets(line, sizeof line, stdin))
        ;
    shmreg_remote_unexport(w);
    shmreg_remote_client_destroy(c);
    if (!alloc)
        free(buf);
    return 0;
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A client process (this program, exec'd) that exports size bytes. */
struct exporter {
    pid_t pid;
    int to;
    unsigned char desc[SHMREG_REMOTE_DESCRIPTOR_MAX];
    size_t size;
};

static int spawn(const char *self, size_t size, bool alloc, struct exporter *ex)
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
        close(to[1]);
        close(from[0]);
        char s[32];
        snprintf(s, sizeof s, "%zu", size);
        execl("/proc/self/exe", self, "--client", s, alloc ? "alloc" : "export", (char *)NULL);
        _exit(127);
    }
    close(to[0]);
    close(from[1]);
    FILE *in = fdopen(from[0], "r");
    static char hex[2 * SHMREG_REMOTE_DESCRIPTOR_MAX + 2];
    ex->pid = pid;
    ex->to = to[1];
    ex->size = 0;
    int ok = fgets(hex, sizeof hex, in) != NULL;
    fclose(in);
    for (const char *p = hex; ok && p[0] && p[1] && p[0] != '\n'; p += 2) {
        unsigned v;
        sscanf(p, "%2x", &v);
        ex->desc[ex->size++] = (unsigned char)v;
    }
    return ok && ex->size > 0 ? 0 : 1;
}

static void reap(struct exporter *ex)
{
    close(ex->to);
    waitpid(ex->pid, NULL, 0);
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

/* What one endpoint and one region cost the server: K clients, R regions
 * of each, the resident memory before and after. */
static int capacity(const char *self, int clients, int regions)
{
    struct exporter *ex = calloc((size_t)clients, sizeof *ex);
    for (int k = 0; k < clients; k++)
        if (spawn(self, 1 << 20, true, &ex[k]) != 0)
            return 1;
    shmreg_registry *reg;
    shmreg_registry_create(NULL, &reg);
    char name[64];
    /* The engine itself (context, worker, thread) first, off the count. */
    snprintf(name, sizeof name, "warm");
    if (shmreg_register_remote(reg, name, ex[0].desc, ex[0].size, 0, 4096, 0) != SHMREG_OK)
        return 1;
    shmreg_unregister(reg, name, SHMREG_KIND_REMOTE);
    double base = rss_kib();
    for (int k = 0; k < clients; k++) {
        snprintf(name, sizeof name, "c%d-0", k);
        if (shmreg_register_remote(reg, name, ex[k].desc, ex[k].size, 0, 4096, 0) != SHMREG_OK) {
            fprintf(stderr, "%s\n", shmreg_last_error());
            return 1;
        }
    }
    double with_endpoints = rss_kib();
    for (int k = 0; k < clients; k++)
        for (int r = 1; r < regions; r++) {
            snprintf(name, sizeof name, "c%d-%d", k, r);
            if (shmreg_register_remote(reg, name, ex[k].desc, ex[k].size, (size_t)r * 64, 4096, 0) != SHMREG_OK) {
                fprintf(stderr, "%s\n", shmreg_last_error());
                return 1;
            }
        }
    double with_regions = rss_kib();
    const char *tls = getenv("UCX_TLS");
    printf("capacity, UCX_TLS=%s: %d clients: %.1f KiB per client (endpoint + first region); "
           "%d more regions each: %.2f KiB per region\n", tls ? tls : "(default)", clients,
           (with_endpoints - base) / clients, regions - 1,
           (with_regions - with_endpoints) / ((double)clients * (regions - 1)));
    shmreg_registry_destroy(reg);
    for (int k = 0; k < clients; k++)
        reap(&ex[k]);
    free(ex);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--client") == 0)
        return client(strtoull(argv[2], NULL, 0), strcmp(argv[3], "alloc") == 0);
    if (argc == 4 && strcmp(argv[1], "capacity") == 0)
        return shmreg_remote_available() == SHMREG_OK ? capacity(argv[0], atoi(argv[2]), atoi(argv[3])) : 77;
    size_t size = argc > 1 ? strtoull(argv[1], NULL, 0) : 1u << 20;
    int iterations = argc > 2 ? atoi(argv[2]) : 2000;
    const char *mode = argc > 3 ? argv[3] : "get";
    bool put = strstr(mode, "put") != NULL, alloc = strstr(mode, "alloc") != NULL;
    if (shmreg_remote_available() != SHMREG_OK) {
        fprintf(stderr, "%s\n", shmreg_last_error());
        return 77;
    }
    struct exporter ex;
    if (spawn(argv[0], size, alloc, &ex) != 0)
        return 1;
    shmreg_registry *reg;
    shmreg_registry_create(NULL, &reg);
    if (shmreg_register_remote(reg, "bench", ex.desc, ex.size, 0, size, 0) != SHMREG_OK) {
        fprintf(stderr, "%s\n", shmreg_last_error());
        return 1;
    }
    unsigned char *dst = malloc(size);
    double *t = malloc(sizeof *t * (size_t)iterations);
    for (int i = -iterations / 10; i < iterations; i++) { /* a tenth as warm-up */
        double t0 = now_us();
        shmreg_region *ref;
        shmreg_view v;
        shmreg_err e = shmreg_acquire(reg, "bench", 0, size, &ref, &v);
        if (e == SHMREG_OK)
            e = put ? shmreg_copy_to_view(ref, &v, 0, dst, size) : shmreg_copy_from_view(ref, &v, 0, dst, size);
        shmreg_release(ref);
        if (e != SHMREG_OK) {
            fprintf(stderr, "%s\n", shmreg_last_error());
            return 1;
        }
        if (i >= 0)
            t[i] = now_us() - t0;
    }
    double sum = 0;
    for (int i = 0; i < iterations; i++)
        sum += t[i];
    qsort(t, (size_t)iterations, sizeof *t, by_value);
    double median = t[iterations / 2];
    const char *tls = getenv("UCX_TLS");
    printf("remote %s of %zu bytes through the registry (%s memory), UCX_TLS=%s, %d iterations: median "
           "%.2f us, mean %.2f us, p99 %.2f us, %.0f MB/s at the median\n",
           put ? "write" : "read", size, alloc ? "UCX-allocated" : "caller's", tls ? tls : "(default)",
           iterations, median, sum / iterations,
           t[iterations * 99 / 100], size / median);
    shmreg_unregister(reg, "bench", SHMREG_KIND_REMOTE);
    shmreg_registry_destroy(reg);
    reap(&ex);
    return 0;
}
