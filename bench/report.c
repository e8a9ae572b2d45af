/* The output of report.h. */
#include "report.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <shmreg/shmreg.h>

#include "harness.h"

/* Where the tables go: stdout, or stderr when the CSV takes stdout, so that
 * `--csv -` pipes clean CSV. */
static FILE *tables;

FILE *report_csv_open(const char *path)
{
    tables = stdout;
    if (!path)
        return NULL;
    if (strcmp(path, "-") == 0)
        tables = stderr;
    FILE *csv = tables == stderr ? stdout : fopen(path, "w");
    if (!csv)
        bench_fatal("cannot write %s: %s", path, strerror(errno));
    fputs("section,design,regions,threads,mops,p50_ns,p99_ns,p999_ns,max_ns,samples,stalls,churn_per_s\n",
          csv);
    return csv;
}

void report_csv_close(FILE *csv)
{
    if (csv && csv != stdout && fclose(csv) != 0)
        bench_fatal("writing the CSV: %s", strerror(errno));
}

/* The "model name" line of /proc/cpuinfo, or "unknown CPU". */
static void cpu_model(char *out, size_t cap)
{
    snprintf(out, cap, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) == 0 && colon) {
            snprintf(out, cap, "%s", colon + 2);
            out[strcspn(out, "\n")] = '\0';
            break;
        }
    }
    fclose(f);
}

void report_header(const bench_options *o)
{
    char model[128];
    struct utsname u;
    cpu_model(model, sizeof model);
    if (uname(&u) != 0)
        snprintf(u.release, sizeof u.release, "unknown");
    fprintf(tables, "# shmreg-bench: libshmreg %s beside a Triton-style registry\n\n",
            shmreg_version());
    fprintf(tables, "machine: %ld online CPUs, %s, Linux %s\n", sysconf(_SC_NPROCESSORS_ONLN),
            model, u.release);
    double load[3] = {0, 0, 0};
    getloadavg(load, 3);
    fprintf(tables, "load average before the run: %.2f %.2f %.2f (other work skews figures)\n",
            load[0], load[1], load[2]);
    fprintf(tables, "names picked: %s, from per-thread lists built before timing\n\n",
            o->pick == PICK_RANDOM ? "random" : "strided");
}

void report_throughput_begin(const bench_options *o)
{
    fprintf(tables, "## acquire+release throughput, million pairs/s, all threads together\n\n");
    fprintf(tables,
            "%.2f s per cell after %.2f s warm-up, median of %u run(s) per design;\n"
            "regions are %u-byte windows of one shm object\n\n",
            o->seconds, o->warmup_s, o->repeat, REGION_WINDOW);
    fprintf(tables, "| regions | threads | shmreg | triton-style | shmreg / triton-style |\n");
    fprintf(tables, "| ---: | ---: | ---: | ---: | ---: |\n");
    fflush(tables);
}

static void csv_throughput(FILE *csv, const char *design, size_t regions, unsigned threads,
                           double mops)
{
    fprintf(csv, "throughput,%s,%zu,%u,%.3f,,,,,,,\n", design, regions, threads, mops);
}

void report_throughput_row(FILE *csv, size_t regions, unsigned threads, double ours,
                           double base)
{
    fprintf(tables, "| %zu | %u | %.2f | %.2f | %.2fx |\n", regions, threads, ours, base,
            ours / base);
    fflush(tables);
    if (!csv)
        return;
    csv_throughput(csv, bench_design_shmreg.name, regions, threads, ours);
    csv_throughput(csv, bench_design_triton.name, regions, threads, base);
    fflush(csv);
}

void report_latency_begin(const bench_options *o, uint64_t timer_ns)
{
    fprintf(tables, "\n## acquire latency under churn, ns\n\n");
    fprintf(tables,
            "%u reader thread(s) acquire+release %zu regions, %u run(s) of %.2f s per design\n"
            "after %.2f s warm-up each, designs alternating, every sample counted. Each acquire\n"
            "is timed alone with clock_gettime (a back-to-back pair costs %" PRIu64
            " ns here, included).\nMeanwhile one more thread registers a %zu MiB region, writes "
            "a byte per page through\nan acquired view, and gives it up (shmreg: unregisters, then "
            "releases last, so that\nits reclaim thread unmaps; triton-style: releases, then "
            "unregisters), over and over.\nStalls: acquires over %u us.\n\n",
            o->latency_readers, o->latency_regions, o->repeat, o->latency_seconds, o->warmup_s,
            timer_ns, o->churn_mib, CHURN_STALL_NS / 1000u);
    fprintf(tables, "| design | p50 | p99 | p99.9 | max | acquires timed | stalls | churn cycles/s |\n");
    fprintf(tables, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    fflush(tables);
}

void report_latency_row(FILE *csv, const bench_design *d, const bench_options *o,
                        const churn_result *r)
{
    fprintf(tables,
            "| %s | %" PRIu64 " | %" PRIu64 " | %" PRIu64 " | %" PRIu64 " | %" PRIu64 " | %" PRIu64
            " | %.1f |\n",
            d->name, r->p50_ns, r->p99_ns, r->p999_ns, r->max_ns, r->samples, r->stalls,
            r->churn_per_s);
    fflush(tables);
    if (!csv)
        return;
    fprintf(csv,
            "churn_latency,%s,%zu,%u,,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64
            ",%" PRIu64 ",%.2f\n",
            d->name, o->latency_regions, o->latency_readers, r->p50_ns, r->p99_ns, r->p999_ns,
            r->max_ns, r->samples, r->stalls, r->churn_per_s);
    fflush(csv);
}

/* A ratio of two latencies; a zero denominator (an empty run) counts as 1 ns. */
static double latency_ratio(uint64_t num, uint64_t den)
{
    return (double)num / (double)(den ? den : 1u);
}

void report_latency_ratio(const churn_result *ours, const churn_result *base)
{
    fprintf(tables, "\ntriton-style / shmreg: p99.9 %.1fx, p99 %.1fx, p50 %.1fx\n",
            latency_ratio(base->p999_ns, ours->p999_ns), latency_ratio(base->p99_ns, ours->p99_ns),
            latency_ratio(base->p50_ns, ours->p50_ns));
    fflush(tables);
}
