/* The measurement of churn_latency.h. Latency is taken per operation with two
 * clock_gettime calls (vDSO, tens of ns), not over batches: the tail is what
 * matters here, and a batch would average a stall away. */
#include "churn_latency.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "harness.h"

#define CHURN_NAME "churn-region"

enum phase { PHASE_WARMUP, PHASE_MEASURE, PHASE_STOP };

typedef struct reader {
    const churn_setup *setup;
    const atomic_int *phase;
    unsigned index;
    pthread_t thread;
    latency_histogram hist;
} reader;

typedef struct churner {
    const churn_setup *setup;
    const atomic_int *phase;
    uint64_t cycles; /* completed while measuring */
    pthread_t thread;
} churner;

static void *reader_main(void *arg)
{
    reader *r = arg;
    const churn_setup *s = r->setup;
    const bench_design *d = s->design;
    const char **picks = region_set_picks(s->regions, r->index, s->readers, s->pick);
    for (uint64_t n = 0;; n++) {
        int phase = atomic_load_explicit(r->phase, memory_order_relaxed);
        if (phase == PHASE_STOP)
            break;
        const char *name = picks[n & (PICK_SEQUENCE_LEN - 1)];
        bench_ref ref;
        void *addr;
        uint64_t t0 = bench_now_ns();
        int rc = d->acquire(s->reg, name, 0, REGION_WINDOW, &ref, &addr);
        uint64_t t1 = bench_now_ns();
        if (rc != 0)
            bench_fatal("%s: acquire %s: %s", d->name, name, d->last_error());
        d->release(&ref);
        if (phase == PHASE_MEASURE)
            latency_histogram_add(&r->hist, t1 - t0);
    }
    free(picks);
    return NULL;
}

/* One cycle of a client coming and going: register, fault every page in
 * through a view (so that unmapping has page tables to tear down), release,
 * unregister. */
static void churn_once(const churn_setup *s, size_t page, uint64_t cycle)
{
    const bench_design *d = s->design;
    bench_ref ref;
    void *addr;
    if (d->register_system(s->reg, CHURN_NAME, s->churn_key, 0, s->churn_size) != 0)
        bench_fatal("%s: register %s: %s", d->name, CHURN_NAME, d->last_error());
    if (d->acquire(s->reg, CHURN_NAME, 0, s->churn_size, &ref, &addr) != 0)
        bench_fatal("%s: acquire %s: %s", d->name, CHURN_NAME, d->last_error());
    for (size_t off = 0; off < s->churn_size; off += page)
        ((volatile char *)addr)[off] = (char)cycle;
    /* Where the design allows it, unregister first and drop the last
     * reference after: the unmapping is then the last release's, which
     * under background reclaim is the reclaim thread's, running beside the
     * readers (issue 10's churn row). */
    if (!d->releases_last)
        d->release(&ref);
    if (d->unregister(s->reg, CHURN_NAME) != 0)
        bench_fatal("%s: unregister %s: %s", d->name, CHURN_NAME, d->last_error());
    if (d->releases_last)
        d->release(&ref);
}

static void *churner_main(void *arg)
{
    churner *c = arg;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    for (uint64_t n = 0;; n++) {
        int phase = atomic_load_explicit(c->phase, memory_order_relaxed);
        if (phase == PHASE_STOP)
            break;
        churn_once(c->setup, page, n);
        if (phase == PHASE_MEASURE)
            c->cycles++;
    }
    return NULL;
}

void churn_latency_result(const churn_totals *t, churn_result *out)
{
    out->p50_ns = latency_histogram_percentile(&t->latency, 0.50);
    out->p99_ns = latency_histogram_percentile(&t->latency, 0.99);
    out->p999_ns = latency_histogram_percentile(&t->latency, 0.999);
    out->max_ns = t->latency.max;
    out->samples = t->latency.count;
    out->stalls = latency_histogram_count_above(&t->latency, CHURN_STALL_NS);
    out->churn_per_s = t->seconds > 0 ? (double)t->cycles / t->seconds : 0;
}

void churn_latency_run(const churn_setup *s, churn_totals *totals)
{
    reader *readers = calloc(s->readers, sizeof *readers);
    if (!readers)
        bench_fatal("out of memory for %u readers", s->readers);
    atomic_int phase = PHASE_WARMUP;
    churner churn = {.setup = s, .phase = &phase};
    for (unsigned i = 0; i < s->readers; i++) {
        readers[i] = (reader){.setup = s, .phase = &phase, .index = i};
        bench_spawn(&readers[i].thread, reader_main, &readers[i]);
    }
    bench_spawn(&churn.thread, churner_main, &churn);
    bench_sleep(s->warmup_s);
    atomic_store_explicit(&phase, PHASE_MEASURE, memory_order_relaxed);
    uint64_t t0 = bench_now_ns();
    bench_sleep(s->seconds);
    atomic_store_explicit(&phase, PHASE_STOP, memory_order_relaxed);
    uint64_t t1 = bench_now_ns();
    for (unsigned i = 0; i < s->readers; i++) {
        bench_join(readers[i].thread);
        latency_histogram_merge(&totals->latency, &readers[i].hist);
    }
    bench_join(churn.thread);
    totals->cycles += churn.cycles;
    totals->seconds += (double)(t1 - t0) / 1e9;
    free(readers);
}

uint64_t churn_timer_overhead_ns(void)
{
    latency_histogram *h = calloc(1, sizeof *h);
    if (!h)
        bench_fatal("out of memory for a histogram");
    for (int i = 0; i < 100000; i++) {
        uint64_t t0 = bench_now_ns();
        latency_histogram_add(h, bench_now_ns() - t0);
    }
    uint64_t median = latency_histogram_percentile(h, 0.5);
    free(h);
    return median;
}
