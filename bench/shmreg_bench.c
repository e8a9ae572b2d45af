/* shmreg-bench: libshmreg's acquire+release throughput and its acquire
 * latency under register/unregister churn, each measured beside a
 * Triton-style registry in the same run, so that ratios compare like with
 * like on whatever machine runs it. `shmreg-bench --help` lists the options;
 * docs/performance.md has the figures and how to read them. */
#include <stdio.h>

#include "churn_latency.h"
#include "designs.h"
#include "harness.h"
#include "options.h"
#include "region_set.h"
#include "report.h"
#include "shm_objects.h"
#include "throughput.h"

/* A registry of the design with every region of the set registered. */
static void *design_setup(const bench_design *d, const region_set *set)
{
    void *reg = d->create();
    if (!reg)
        bench_fatal("%s: cannot create a registry", d->name);
    region_set_register(set, d, reg);
    return reg;
}

/* One block of the throughput table: both designs over `regions` regions, at
 * every thread count, each cell run for both designs back to back. */
static void throughput_block(const bench_options *o, FILE *csv, const char *key, size_t regions)
{
    region_set set;
    region_set_init(&set, regions, key);
    void *ours = design_setup(&bench_design_shmreg, &set);
    void *base = design_setup(&bench_design_triton, &set);
    for (unsigned i = 0; i < o->nthreads; i++) {
        throughput_cell cell = {.design = &bench_design_shmreg, .reg = ours, .regions = &set,
                                .threads = o->threads[i], .pick = o->pick,
                                .warmup_s = o->warmup_s, .seconds = o->seconds};
        double ours_mops = throughput_run(&cell);
        cell.design = &bench_design_triton;
        cell.reg = base;
        report_throughput_row(csv, regions, o->threads[i], ours_mops, throughput_run(&cell));
    }
    bench_design_triton.destroy(base);
    bench_design_shmreg.destroy(ours);
    region_set_free(&set);
}

static void churn_for(const bench_options *o, const bench_design *d, const char *key,
                      const char *churn_key, churn_result *out)
{
    region_set set;
    region_set_init(&set, o->latency_regions, key);
    void *reg = design_setup(d, &set);
    churn_setup setup = {.design = d, .reg = reg, .regions = &set,
                         .readers = o->latency_readers, .pick = o->pick,
                         .warmup_s = o->warmup_s, .seconds = o->latency_seconds,
                         .churn_key = churn_key, .churn_size = o->churn_mib << 20};
    churn_latency_run(&setup, out);
    d->destroy(reg);
    region_set_free(&set);
}

static void latency_table(const bench_options *o, FILE *csv, const char *key)
{
    const char *churn_key = shm_object_create("churn", o->churn_mib << 20);
    report_latency_begin(o, churn_timer_overhead_ns());
    churn_result ours, base;
    churn_for(o, &bench_design_shmreg, key, churn_key, &ours);
    report_latency_row(csv, &bench_design_shmreg, o, &ours);
    churn_for(o, &bench_design_triton, key, churn_key, &base);
    report_latency_row(csv, &bench_design_triton, o, &base);
    report_latency_ratio(&ours, &base);
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
