/* Acquire latency under churn: reader threads time every acquire while one
 * more thread keeps registering a large region, writing a byte in each of
 * its pages through an acquired view, releasing and unregistering it, which
 * is what a server sees when clients come and go during inference. A design
 * that holds the acquire path's lock across mmap or munmap shows it here. */
#ifndef SHMREG_BENCH_CHURN_LATENCY_H
#define SHMREG_BENCH_CHURN_LATENCY_H

#include <stddef.h>
#include <stdint.h>

#include "designs.h"
#include "latency_histogram.h"
#include "region_set.h"

typedef struct churn_setup {
    const bench_design *design;
    void *reg; /* with every region of `regions` registered */
    const region_set *regions;
    unsigned readers;
    pick_mode pick;
    double warmup_s, seconds;
    const char *churn_key; /* shm object of churn_size bytes */
    size_t churn_size;
} churn_setup;

/* An acquire this slow waited for something (a lock, the scheduler): one
 * such wait per churn cycle is what a lock held across munmap costs, and it
 * hides below the 99.9th percentile when cycles are rare. */
#define CHURN_STALL_NS 10000u

typedef struct churn_result {
    uint64_t p50_ns, p99_ns, p999_ns, max_ns;
    uint64_t samples;   /* acquires timed, all readers together */
    uint64_t stalls;    /* of them, slower than CHURN_STALL_NS */
    double churn_per_s; /* register+touch+unregister cycles per second */
} churn_result;

/* What runs of one design add up to. Zero it before the first run. */
typedef struct churn_totals {
    latency_histogram latency; /* every timed acquire of every reader */
    uint64_t cycles;           /* churn cycles completed while measuring */
    double seconds;            /* time measured */
} churn_totals;

/* One measurement, added to *totals. Fatal if any registry call fails. */
void churn_latency_run(const churn_setup *setup, churn_totals *totals);

void churn_latency_result(const churn_totals *totals, churn_result *out);

/* The median cost of the clock read pair around each timed acquire, which
 * every latency figure includes. */
uint64_t churn_timer_overhead_ns(void);

#endif
