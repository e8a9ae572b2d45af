/* What shmreg-bench prints: Markdown tables on stdout, ready to paste into
 * docs/performance.md, and optionally the same figures as CSV with one
 * header line:
 *   section,design,regions,threads,mops,p50_ns,p99_ns,p999_ns,max_ns,samples,stalls,churn_per_s
 * section is "throughput" (mops filled) or "churn_latency" (threads = reader
 * threads; the latency fields filled; stalls = acquires over 10 us); fields
 * that do not apply are empty. */
#ifndef SHMREG_BENCH_REPORT_H
#define SHMREG_BENCH_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include "churn_latency.h"
#include "designs.h"
#include "options.h"

/* NULL path: no CSV (NULL returned). "-": stdout. Fatal if it cannot open. */
FILE *report_csv_open(const char *path);
void report_csv_close(FILE *csv);

/* The machine, the library version and the settings of this run. */
void report_header(const bench_options *opts);

void report_throughput_begin(const bench_options *opts);
void report_throughput_row(FILE *csv, size_t regions, unsigned threads, double shmreg_mops,
                           double triton_mops);

void report_latency_begin(const bench_options *opts, uint64_t timer_overhead_ns);
void report_latency_row(FILE *csv, const bench_design *design, const bench_options *opts,
                        const churn_result *result);
/* The p99.9 ratio line under the latency table. */
void report_latency_ratio(const churn_result *shmreg, const churn_result *triton);

#endif
