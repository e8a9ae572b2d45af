/* shmreg-bench-copy: what a guarded copy (shmreg_copy_from_view /
 * shmreg_copy_to_view) costs over a plain memcpy of the same view, at
 * 4 KiB, 1 MiB and 16 MiB. One thread; each figure is the best of several
 * rounds of many copies (the least disturbed), with both sides warm in the
 * cache where they fit. Prints a Markdown table (docs/performance.md) and,
 * with --csv FILE, the same rows as CSV.
 *
 *   shmreg-bench-copy [--rounds N] [--csv FILE]
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <shmreg/shmreg.h>

#define MAX_SIZE ((size_t)16 << 20)

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void die(const char *what, shmreg_err err)
{
    fprintf(stderr, "shmreg-bench-copy: %s: %s: %s\n", what, shmreg_err_name(err), shmreg_last_error());
    exit(1);
}

enum how { PLAIN_FROM, GUARDED_FROM, PLAIN_TO, GUARDED_TO };

/* Nanoseconds per copy: the best round of `reps` copies. */
static double time_copies(enum how how, shmreg_region *ref, const shmreg_view *view, char *buf, size_t n,
                          int reps, int rounds)
{
    double best = 1e300;
    for (int r = 0; r < rounds; r++) {
        double t0 = now_ns();
        for (int i = 0; i < reps; i++) {
            shmreg_err err = SHMREG_OK;
            switch (how) {
            case PLAIN_FROM:
                memcpy(buf, view->addr, n);
                break;
            case GUARDED_FROM:
                err = shmreg_copy_from_view(ref, view, 0, buf, n);
                break;
            case PLAIN_TO:
                memcpy(view->addr, buf, n);
                break;
            case GUARDED_TO:
                err = shmreg_copy_to_view(ref, view, 0, buf, n);
                break;
            }
            if (err != SHMREG_OK)
                die("copy", err);
            /* Keep the compiler from dropping or merging the copies. */
            __asm__ __volatile__("" : : "r"(buf) : "memory");
        }
        double per = (now_ns() - t0) / reps;
        if (per < best)
            best = per;
    }
    return best;
}

int main(int argc, char **argv)
{
    int rounds = 7;
    const char *csv_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (strcmp(argv[i], "--csv") == 0 && i + 1 < argc)
            csv_path = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--rounds N] [--csv FILE]\n", argv[0]);
            return strcmp(argv[i], "--help") == 0 ? 0 : 2;
        }
    }
    if (rounds < 1) {
        fprintf(stderr, "shmreg-bench-copy: --rounds must be at least 1\n");
        return 2;
    }

    char key[64];
    snprintf(key, sizeof key, "/shmreg-bench-copy-%ld", (long)getpid());
    int fd = shm_open(key, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)MAX_SIZE) != 0) {
        perror("shmreg-bench-copy: shm object");
        return 1;
    }
    close(fd);
    shmreg_registry *reg = NULL;
    shmreg_err err;
    if ((err = shmreg_registry_create(NULL, &reg)) != SHMREG_OK)
        die("registry_create", err);
    if ((err = shmreg_register_system(reg, "bench", key, 0, MAX_SIZE, SHMREG_NO_PIN)) != SHMREG_OK)
        die("register", err);
    {
        /* Populate the object, so that no round pays its first-touch faults. */
        shmreg_region *ref = NULL;
        shmreg_view view;
        if ((err = shmreg_acquire(reg, "bench", 0, MAX_SIZE, &ref, &view)) != SHMREG_OK)
            die("acquire", err);
        memset(view.addr, 1, MAX_SIZE);
        shmreg_release(ref);
    }
    if ((err = shmreg_guard_install()) != SHMREG_OK)
        die("guard_install", err);
    char *buf = malloc(MAX_SIZE);
    if (!buf)
        return 1;
    memset(buf, 7, MAX_SIZE);

    FILE *csv = csv_path ? fopen(csv_path, "w") : NULL;
    if (csv_path && !csv) {
        perror(csv_path);
        return 1;
    }
    if (csv)
        fprintf(csv, "table,direction,bytes,memcpy_ns,guarded_ns,overhead_ns,overhead_pct\n");
    printf("| direction | size | memcpy | guarded copy | overhead per copy |\n");
    printf("| --- | ---: | ---: | ---: | ---: |\n");
    static const size_t sizes[] = {4096, (size_t)1 << 20, MAX_SIZE};
    static const char *const labels[] = {"4 KiB", "1 MiB", "16 MiB"};
    for (int dir = 0; dir < 2; dir++) {
        for (size_t s = 0; s < 3; s++) {
            size_t n = sizes[s];
            shmreg_region *ref = NULL;
            shmreg_view view;
            if ((err = shmreg_acquire(reg, "bench", 0, n, &ref, &view)) != SHMREG_OK)
                die("acquire", err);
            /* About 64 MiB per round, at least 20 copies. */
            int reps = (int)(((size_t)64 << 20) / n);
            if (reps < 20)
                reps = 20;
            enum how plain = dir == 0 ? PLAIN_FROM : PLAIN_TO, guarded = dir == 0 ? GUARDED_FROM : GUARDED_TO;
            (void)time_copies(guarded, ref, &view, buf, n, reps, 1); /* warm both sides */
            /* Interleave the two, so a drift of the machine hits both alike. */
            double p = 1e300, g = 1e300;
            for (int r = 0; r < rounds; r++) {
                double pr = time_copies(plain, ref, &view, buf, n, reps, 1);
                double gr = time_copies(guarded, ref, &view, buf, n, reps, 1);
                p = pr < p ? pr : p;
                g = gr < g ? gr : g;
            }
            const char *d = dir == 0 ? "from view" : "to view";
            printf("| %s | %s | %.0f ns (%.1f GB/s) | %.0f ns (%.1f GB/s) | %+.0f ns (%+.1f%%) |\n", d, labels[s], p,
                   (double)n / p, g, (double)n / g, g - p, (g - p) / p * 100);
            if (csv)
                fprintf(csv, "guarded_copy,%s,%zu,%.1f,%.1f,%.1f,%.2f\n", dir == 0 ? "from" : "to", n, p, g, g - p,
                        (g - p) / p * 100);
            shmreg_release(ref);
        }
    }
    if (csv)
        fclose(csv);
    free(buf);
    shmreg_registry_destroy(reg);
    shm_unlink(key);
    return 0;
}
