/* shmreg-bench's command line. */
#ifndef SHMREG_BENCH_OPTIONS_H
#define SHMREG_BENCH_OPTIONS_H

#include <stddef.h>

#include "region_set.h"

#define OPTIONS_LIST_MAX 32
#define OPTIONS_REPEAT_MAX 99

typedef struct bench_options {
    unsigned threads[OPTIONS_LIST_MAX];
    unsigned nthreads;
    size_t regions[OPTIONS_LIST_MAX];
    unsigned nregions;
    double seconds, warmup_s;  /* per throughput cell; seconds 0 skips the table */
    unsigned repeat;           /* runs of each throughput cell (the median is reported)
                                  and of each design under churn (all samples count) */
    double latency_seconds;    /* per design and run; 0 skips the latency table */
    unsigned latency_readers;
    size_t latency_regions;
    size_t churn_mib;
    pick_mode pick;
    const char *csv_path;      /* NULL: none; "-": stdout */
} bench_options;

/* Fill opts from argv over the defaults (which depend on the number of
 * online CPUs). Prints usage and exits 0 on --help; exits 2 on a bad
 * argument. */
void options_parse(bench_options *opts, int argc, char **argv);

#endif
