/* shmreg-bench: libshmreg's acquire+release throughput and its acquire
 * latency under register/unregister churn, each measured beside a
 * Triton-style registry in the same run, so that ratios compare like with
 * like on whatever machine runs it. `shmreg-bench --help` lists the options;
 * docs/performance.md has the figures and how to read them. */
#include <stdio.h>
#include <stdlib.h>

#include "churn_latency.h"
#include "designs.h"
#include "harness.h"
#include "options.h"
#include "region_set.h"
#include "report.h"
#include "shm_objects.h"
#include "throughput.h"

/* The designs compared, in the order of every pair of figures: 0 is
 * libshmreg, 1 the baseline. */
static const bench_design *const designs[2] = {&bench_design_shmreg, &bench_design_triton};

/* A registry of the design with every region of the set registered. */
static void *design_setup(const bench_design *d, const region_set *set)
{
    void *reg = d->create();
    if (!reg)
        bench_fatal("%s: cannot create a registry", d->name);
    region_set_register(set, d, reg);
    return reg;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, unsigned n)
{
    qsort(v, n, sizeof *v, compare_doubles);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* One cell for both designs, o->repeat times, alternating which design runs
 * first so that a change in the machine's load falls on both; the medians go
 * to mops[0] (shmreg) and mops[1] (baseline). */
static void throughput_pair(const bench_options *o, throughput_cell *cell, void *regs[2],
                            double mops[2])
{
    double runs[2][OPTIONS_REPEAT_MAX];
    for (unsigned r = 0; r < o->repeat; r++) {
        for (unsigned k = 0; k < 2; k++) {
            unsigned d = (k + r) % 2;
            cell->design = designs[d];
            cell->reg = regs[d];
            runs[d][r] = throughput_run(cell);
        }
    }
    mops[0] = median(runs[0], o->repeat);
    mops[1] = median(runs[1], o->repeat);
}

/* One block of the throughput table: both designs over `regions` regions, at
 * every thread count. */
static void throughput_block(const bench_options *o, FILE *csv, const char *key, size_t regions)
{
    region_set set;
    region_set_init(&set, regions, key);
    void *regs[2] = {design_setup(designs[0], &set), design_setup(designs[1], &set)};
    for (unsigned i = 0; i < o->nthreads; i++) {
        throughput_cell cell = {.regions = &set, .threads = o->threads[i], .pick = o->pick,
                                .warmup_s = o->warmup_s, .seconds = o->seconds};
        double mops[2];
        throughput_pair(o, &cell, regs, mops);
        report_throughput_row(csv, regions, o->threads[i], mops[0], mops[1]);
    }
    designs[1]->destroy(regs[1]);
    designs[0]->destroy(regs[0]);
    region_set_free(&set);
}

/* Both designs under churn, o->repeat times each, alternating which goes
 * first; every timed acquire of every run counts, so that a burst of load
 * on the machine falls on both designs alike. */
static void latency_table(const bench_options *o, FILE *csv, const char *key)
{
    const char *churn_key = shm_object_create("churn", o->churn_mib << 20);
    report_latency_begin(o, churn_timer_overhead_ns());
    region_set set;
    region_set_init(&set, o->latency_regions, key);
    void *regs[2] = {design_setup(designs[0], &set), design_setup(designs[1], &set)};
    churn_totals *totals = calloc(2, sizeof *totals);
    if (!totals)
        bench_fatal("out of memory for latency histograms");
    for (unsigned r = 0; r < o->repeat; r++) {
        for (unsigned k = 0; k < 2; k++) {
            unsigned d = (k + r) % 2;
            churn_setup setup = {.design = designs[d], .reg = regs[d], .regions = &set,
                                 .readers = o->latency_readers, .pick = o->pick,
                                 .warmup_s = o->warmup_s, .seconds = o->latency_seconds,
                                 .churn_key = churn_key, .churn_size = o->churn_mib << 20};
            churn_latency_run(&setup, &totals[d]);
        }
    }
    churn_result results[2];
    for (unsigned d = 0; d < 2; d++) {
        churn_latency_result(&totals[d], &results[d]);
        report_latency_row(csv, designs[d], o, &results[d]);
        designs[d]->destroy(regs[d]);
    }
    report_latency_ratio(&results[0], &results[1]);
    free(totals);
    region_set_free(&set);
}

/* Enough windows for the largest region set either table registers. */
static size_t windows_needed(const bench_options *o)
{
    size_t most = o->latency_seconds > 0 ? o->latency_regions : 1;
    for (unsigned i = 0; o->seconds > 0 && i < o->nregions; i++)
        if (o->regions[i] > most)
            most = o->regions[i];
    return most;
}

int main(int argc, char **argv)
{
    bench_options o;
    options_parse(&o, argc, argv);
    FILE *csv = report_csv_open(o.csv_path);
    const char *key = shm_object_create("windows", windows_needed(&o) * REGION_WINDOW);
    report_header(&o);
    if (o.seconds > 0) {
        report_throughput_begin(&o);
        for (unsigned i = 0; i < o.nregions; i++)
            throughput_block(&o, csv, key, o.regions[i]);
    }
    if (o.latency_seconds > 0)
        latency_table(&o, csv, key);
    report_csv_close(csv);
    return 0;
}
