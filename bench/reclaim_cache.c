/* shmreg-bench-reclaim: what background reclaim and the registration cache
 * buy, on system shared memory (the CPU rows of issue 10's table; the
 * pinned ones are in bench/gpu). Each figure comes with its reference in
 * the same run:
 *
 *   release   the last shmreg_release of an unregistered (DEFER-pending)
 *             region of SIZE MiB with every page touched, timed on the
 *             releasing thread: INLINE (it unmaps) against BACKGROUND (it
 *             hands off). Median and p99 of --cycles.
 *   reregister  registering the same key again right after unregistering
 *             it, with the cache on, against a bare shm_open + fstat +
 *             close of the key, and against the cache off (shm_open, mmap).
 *   loop      register, acquire, release, unregister on one key, cycles
 *             per second, cache on against off.
 *
 * Usage: shmreg-bench-reclaim [--size-mib N] [--loop-mib N] [--cycles N]
 *                             [--seconds S] */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "shmreg/shmreg.h"

static void check(shmreg_err err, const char *what)
{
    if (err != SHMREG_OK)
        bench_fatal("%s: %s: %s", what, shmreg_err_name(err), shmreg_last_error());
}

static char *make_key(size_t size)
{
    static char key[64];
    snprintf(key, sizeof key, "/shmreg-bench-reclaim-%ld", (long)getpid());
    int fd = shm_open(key, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)size) != 0)
        bench_fatal("cannot create %s", key);
    close(fd);
    return key;
}

static shmreg_registry *registry(shmreg_reclaim reclaim, size_t cache_bytes)
{
    shmreg_config cfg;
    shmreg_config_init(&cfg);
    cfg.reclaim = reclaim;
    cfg.cache_bytes = cache_bytes;
    cfg.pin_policy = SHMREG_PIN_NEVER;
    shmreg_registry *reg = NULL;
    check(shmreg_registry_create(&cfg, &reg), "registry_create");
    return reg;
}

static int compare_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static double pct(uint64_t *v, unsigned n, double p)
{
    qsort(v, n, sizeof *v, compare_u64);
    unsigned i = (unsigned)(p * (n - 1) + 0.5);
    return (double)v[i];
}

/* ---- the last release */

static void release_row(const char *key, size_t size, unsigned cycles, shmreg_reclaim mode, const char *label)
{
    shmreg_registry *reg = registry(mode, 0);
    uint64_t *ns = calloc(cycles, sizeof *ns);
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    for (unsigned c = 0; c < cycles; c++) {
        shmreg_region *ref;
        shmreg_view v;
        check(shmreg_register_system(reg, "r", key, 0, size, 0), "register");
        check(shmreg_acquire(reg, "r", 0, size, &ref, &v), "acquire");
        for (size_t off = 0; off < size; off += page)
            ((volatile char *)v.addr)[off] = (char)c;
        check(shmreg_unregister(reg, "r", SHMREG_KIND_SYSTEM), "unregister");
        uint64_t t0 = bench_now_ns();
        shmreg_release(ref);
        ns[c] = bench_now_ns() - t0;
        check(shmreg_registry_trim(reg), "trim"); /* not timed: the thread's share */
    }
    printf("| last release, %zu MiB touched, %s | %.1f | %.1f |\n", size >> 20, label,
           pct(ns, cycles, 0.5) / 1000.0, pct(ns, cycles, 0.99) / 1000.0);
    free(ns);
    shmreg_registry_destroy(reg);
}

/* ---- registering the same key again */

static double bare_open_ns(const char *key, unsigned n)
{
    uint64_t *ns = calloc(n, sizeof *ns);
    for (unsigned i = 0; i < n; i++) {
        uint64_t t0 = bench_now_ns();
        int fd = shm_open(key, O_RDWR, 0);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) != 0)
            bench_fatal("shm_open/fstat %s", key);
        close(fd);
        ns[i] = bench_now_ns() - t0;
    }
    double m = pct(ns, n, 0.5);
    free(ns);
    return m;
}

static double reregister_ns(const char *key, size_t size, size_t cache_bytes, unsigned n)
{
    shmreg_registry *reg = registry(SHMREG_RECLAIM_BACKGROUND, cache_bytes);
    uint64_t *ns = calloc(n, sizeof *ns);
    check(shmreg_register_system(reg, "r", key, 0, size, 0), "register");
    check(shmreg_unregister(reg, "r", SHMREG_KIND_SYSTEM), "unregister");
    for (unsigned i = 0; i < n; i++) {
        uint64_t t0 = bench_now_ns();
        check(shmreg_register_system(reg, "r", key, 0, size, 0), "register");
        ns[i] = bench_now_ns() - t0;
        check(shmreg_unregister(reg, "r", SHMREG_KIND_SYSTEM), "unregister");
    }
    double m = pct(ns, n, 0.5);
    free(ns);
    shmreg_registry_destroy(reg);
    return m;
}

/* ---- the whole loop */

static double loop_per_s(const char *key, size_t size, size_t cache_bytes, double seconds)
{
    shmreg_registry *reg = registry(SHMREG_RECLAIM_BACKGROUND, cache_bytes);
    uint64_t end = bench_now_ns() + (uint64_t)(seconds * 1e9), cycles = 0, t0 = bench_now_ns();
    while (bench_now_ns() < end) {
        shmreg_region *ref;
        shmreg_view v;
        check(shmreg_register_system(reg, "r", key, 0, size, 0), "register");
        check(shmreg_acquire(reg, "r", 0, size, &ref, &v), "acquire");
        ((volatile char *)v.addr)[0] = 1; /* a request touches the tensor */
        shmreg_release(ref);
        check(shmreg_unregister(reg, "r", SHMREG_KIND_SYSTEM), "unregister");
        cycles++;
    }
    double rate = (double)cycles / ((double)(bench_now_ns() - t0) / 1e9);
    shmreg_registry_destroy(reg);
    return rate;
}

int main(int argc, char **argv)
{
    size_t size_mib = 256, loop_mib = 16;
    unsigned cycles = 30;
    double seconds = 1.0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--size-mib") == 0)
            size_mib = strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--loop-mib") == 0)
            loop_mib = strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--cycles") == 0)
            cycles = (unsigned)strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--seconds") == 0)
            seconds = strtod(argv[i + 1], NULL);
        else
            bench_fatal("usage: %s [--size-mib N] [--loop-mib N] [--cycles N] [--seconds S]", argv[0]);
    }
    if (cycles == 0 || size_mib == 0 || loop_mib == 0)
        bench_fatal("sizes and cycles must be positive");
    size_t size = size_mib << 20, loop = loop_mib << 20;
    char *key = make_key(size > loop ? size : loop);

    printf("| measure | median µs | p99 µs |\n| --- | --- | --- |\n");
    release_row(key, size, cycles, SHMREG_RECLAIM_INLINE, "INLINE");
    release_row(key, size, cycles, SHMREG_RECLAIM_BACKGROUND, "BACKGROUND");

    const unsigned n = 2000;
    double bare = bare_open_ns(key, n);
    double on = reregister_ns(key, size, (size_t)1 << 30, n);
    double off = reregister_ns(key, size, 0, n / 10);
    printf("\n| re-register the same unpinned %zu MiB key | median µs | ratio to bare |\n| --- | --- | --- |\n",
           size_mib);
    printf("| bare shm_open + fstat + close | %.2f | 1.00 |\n", bare / 1000.0);
    printf("| register, cache on (a hit) | %.2f | %.2f |\n", on / 1000.0, on / bare);
    printf("| register, cache off (shm_open + mmap) | %.2f | %.2f |\n", off / 1000.0, off / bare);

    double loop_on = loop_per_s(key, loop, (size_t)1 << 30, seconds);
    double loop_off = loop_per_s(key, loop, 0, seconds);
    printf("\n| register, acquire, release, unregister on one %zu MiB key | cycles/s |\n| --- | --- |\n",
           loop_mib);
    printf("| cache off | %.0f |\n| cache on | %.0f (%.1fx) |\n", loop_off, loop_on, loop_on / loop_off);
    shm_unlink(key);
    return 0;
}
