/* The throughput cell of throughput.h. */
#include "throughput.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* Pairs between two publications of a worker's count and two looks at the
 * stop flag: rare enough to cost nothing, frequent enough that the count
 * is off by at most this many per thread at either end of the window. */
#define PAIRS_PER_CHECK 64u

typedef struct worker {
    _Alignas(64) atomic_uint_least64_t pairs; /* own cache line: only main reads it */
    const throughput_cell *cell;
    const atomic_bool *stop;
    unsigned index;
    pthread_t thread;
} worker;

static void *worker_main(void *arg)
{
    worker *w = arg;
    const throughput_cell *c = w->cell;
    const bench_design *d = c->design;
    const char **picks = region_set_picks(c->regions, w->index, c->threads, c->pick);
    uint64_t done = 0;
    while (!atomic_load_explicit(w->stop, memory_order_relaxed)) {
        for (unsigned i = 0; i < PAIRS_PER_CHECK; i++) {
            const char *name = picks[(done + i) & (PICK_SEQUENCE_LEN - 1)];
            bench_ref ref;
            void *addr;
            if (d->acquire(c->reg, name, 0, REGION_WINDOW, &ref, &addr) != 0)
                bench_fatal("%s: acquire %s: %s", d->name, name, d->last_error());
            d->release(&ref);
        }
        done += PAIRS_PER_CHECK;
        atomic_store_explicit(&w->pairs, done, memory_order_relaxed);
    }
    free(picks);
    return NULL;
}

static uint64_t pairs_so_far(worker *workers, unsigned n)
{
    uint64_t sum = 0;
    for (unsigned i = 0; i < n; i++)
        sum += atomic_load_explicit(&workers[i].pairs, memory_order_relaxed);
    return sum;
}

double throughput_run(const throughput_cell *cell)
{
    worker *workers = aligned_alloc(64, cell->threads * sizeof *workers);
    if (!workers)
        bench_fatal("out of memory for %u workers", cell->threads);
    memset(workers, 0, cell->threads * sizeof *workers);
    atomic_bool stop = false;
    for (unsigned i = 0; i < cell->threads; i++) {
        workers[i].cell = cell;
        workers[i].stop = &stop;
        workers[i].index = i;
        bench_spawn(&workers[i].thread, worker_main, &workers[i]);
    }
    bench_sleep(cell->warmup_s);
    uint64_t t0 = bench_now_ns(), before = pairs_so_far(workers, cell->threads);
    bench_sleep(cell->seconds);
    uint64_t after = pairs_so_far(workers, cell->threads), t1 = bench_now_ns();
    atomic_store_explicit(&stop, true, memory_order_relaxed);
    for (unsigned i = 0; i < cell->threads; i++)
        bench_join(workers[i].thread);
    free(workers);
    return (double)(after - before) * 1e3 / (double)(t1 - t0);
}
