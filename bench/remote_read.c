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
 * The exporting client is this program again, exec'd with "--client SIZE
 * alloc|export": it exports SIZE bytes and prints the descriptor in hex,
 * then waits for its stdin to close. Prints the median, mean and p99 of the copies, in us,
 * and the bandwidth of the median, as ucx_perftest reports them. */
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

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--client") == 0)
        return client(strtoull(argv[2], NULL, 0), strcmp(argv[3], "alloc") == 0);
    size_t size = argc > 1 ? strtoull(argv[1], NULL, 0) : 1u << 20;
    int iterations = argc > 2 ? atoi(argv[2]) : 2000;
    const char *mode = argc > 3 ? argv[3] : "get";
    bool put = strstr(mode, "put") != NULL, alloc = strstr(mode, "alloc") != NULL;
    if (shmreg_remote_available() != SHMREG_OK) {
        fprintf(stderr, "%s\n", shmreg_last_error());
        return 77;
    }
    int to[2], from[2];
    if (pipe(to) || pipe(from))
        return 1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(to[0], 0);
        dup2(from[1], 1);
        close(to[1]);
        close(from[0]);
        char s[32];
        snprintf(s, sizeof s, "%zu", size);
        execl("/proc/self/exe", argv[0], "--client", s, alloc ? "alloc" : "export", (char *)NULL);
        _exit(127);
    }
    close(to[0]);
    close(from[1]);
    FILE *in = fdopen(from[0], "r");
    static char hex[2 * SHMREG_REMOTE_DESCRIPTOR_MAX + 2];
    static unsigned char desc[SHMREG_REMOTE_DESCRIPTOR_MAX];
    size_t n = 0;
    if (!fgets(hex, sizeof hex, in))
        return 1;
    for (const char *p = hex; p[0] && p[1] && p[0] != '\n'; p += 2) {
        unsigned v;
        sscanf(p, "%2x", &v);
        desc[n++] = (unsigned char)v;
    }
    shmreg_registry *reg;
    shmreg_registry_create(NULL, &reg);
    if (shmreg_register_remote(reg, "bench", desc, n, 0, size, 0) != SHMREG_OK) {
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
    fclose(fdopen(to[1], "w"));
    waitpid(pid, NULL, 0);
    return 0;
}
