/* The command line of options.h. */
#include "options.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Each design maps every region once and both are alive together: stay far
 * below the default vm.max_map_count (65530). */
#define REGIONS_MAX 16384u
#define THREADS_MAX 1024u

static const char usage[] =
    "usage: shmreg-bench [options]\n"
    "Acquire+release throughput and acquire latency under churn, libshmreg beside a\n"
    "Triton-style std::mutex + std::map + shared_ptr registry, in one run.\n"
    "\n"
    "  --threads LIST          thread counts, e.g. 1,2,4,8,16 (default: 1,2,4... up to\n"
    "                          the online CPUs, and that count)\n"
    "  --regions LIST          registered regions per table block (default 1,64,4096)\n"
    "  --seconds S             measured time per throughput cell (default 0.3; 0 skips)\n"
    "  --warmup S              warm-up before every measurement (default 0.1)\n"
    "  --repeat N              run each throughput cell N times, designs alternating,\n"
    "                          and report the medians; under churn, run each design N\n"
    "                          times, alternating, and count every sample (default 3)\n"
    "  --pick random|strided   how threads choose names (default random)\n"
    "  --latency-seconds S     measured time per run under churn (default 1; 0 skips)\n"
    "  --latency-readers N     timed reader threads (default: online CPUs - 2, at least 1)\n"
    "  --latency-regions N     regions the readers acquire (default 64)\n"
    "  --churn-mib N           size of the region churned (default 64)\n"
    "  --csv PATH              also write every figure as CSV to PATH ('-': stdout)\n";

static void bad_arg(const char *opt, const char *value)
{
    fprintf(stderr, "shmreg-bench: bad value '%s' for %s\n\n%s", value, opt, usage);
    exit(2);
}

static unsigned long parse_count(const char *opt, const char *s, unsigned long max)
{
    char *end;
    unsigned long v = strtoul(s, &end, 10);
    if (end == s || *end != '\0' || v == 0 || v > max)
        bad_arg(opt, s);
    return v;
}

static double parse_seconds(const char *opt, const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || !(v >= 0.0 && v <= 3600.0))
        bad_arg(opt, s);
    return v;
}

/* "1,2,4" into out; returns how many. */
static unsigned parse_list(const char *opt, const char *s, unsigned long max,
                           unsigned long out[OPTIONS_LIST_MAX])
{
    char buf[256];
    if (strlen(s) >= sizeof buf)
        bad_arg(opt, s);
    strcpy(buf, s);
    unsigned n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (n == OPTIONS_LIST_MAX)
            bad_arg(opt, s);
        out[n++] = parse_count(opt, tok, max);
    }
    if (n == 0)
        bad_arg(opt, s);
    return n;
}

static void set_defaults(bench_options *o)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned ncpu = cpus > 0 ? (unsigned)cpus : 1u;
    memset(o, 0, sizeof *o);
    for (unsigned t = 1; t < ncpu && o->nthreads < OPTIONS_LIST_MAX - 1; t *= 2)
        o->threads[o->nthreads++] = t;
    o->threads[o->nthreads++] = ncpu;
    static const size_t regions[] = {1, 64, 4096};
    for (unsigned i = 0; i < 3; i++)
        o->regions[o->nregions++] = regions[i];
    o->seconds = 0.3;
    o->warmup_s = 0.1;
    o->repeat = 3;
    o->latency_seconds = 1.0;
    /* One CPU for the churn thread and one for everything else (liburcu's
     * call_rcu worker, the main thread), so that readers are not preempted
     * by the machinery they measure. */
    o->latency_readers = ncpu > 2 ? ncpu - 2 : 1;
    o->latency_regions = 64;
    o->churn_mib = 64;
    o->pick = PICK_RANDOM;
}

enum { OPT_THREADS = 256, OPT_REGIONS, OPT_SECONDS, OPT_WARMUP, OPT_REPEAT, OPT_PICK, OPT_LAT_SECONDS,
       OPT_LAT_READERS, OPT_LAT_REGIONS, OPT_CHURN_MIB, OPT_CSV, OPT_HELP };

static const struct option long_options[] = {
    {"threads", required_argument, NULL, OPT_THREADS},
    {"regions", required_argument, NULL, OPT_REGIONS},
    {"seconds", required_argument, NULL, OPT_SECONDS},
    {"warmup", required_argument, NULL, OPT_WARMUP},
    {"repeat", required_argument, NULL, OPT_REPEAT},
    {"pick", required_argument, NULL, OPT_PICK},
    {"latency-seconds", required_argument, NULL, OPT_LAT_SECONDS},
    {"latency-readers", required_argument, NULL, OPT_LAT_READERS},
    {"latency-regions", required_argument, NULL, OPT_LAT_REGIONS},
    {"churn-mib", required_argument, NULL, OPT_CHURN_MIB},
    {"csv", required_argument, NULL, OPT_CSV},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

static void apply_list(bench_options *o, int opt, const char *arg)
{
    unsigned long v[OPTIONS_LIST_MAX];
    if (opt == OPT_THREADS) {
        o->nthreads = parse_list("--threads", arg, THREADS_MAX, v);
        for (unsigned i = 0; i < o->nthreads; i++)
            o->threads[i] = (unsigned)v[i];
    } else {
        o->nregions = parse_list("--regions", arg, REGIONS_MAX, v);
        for (unsigned i = 0; i < o->nregions; i++)
            o->regions[i] = v[i];
    }
}

static void apply_pick(bench_options *o, const char *arg)
{
    if (strcmp(arg, "random") == 0)
        o->pick = PICK_RANDOM;
    else if (strcmp(arg, "strided") == 0)
        o->pick = PICK_STRIDED;
    else
        bad_arg("--pick", arg);
}

void options_parse(bench_options *o, int argc, char **argv)
{
    set_defaults(o);
    int opt;
    while ((opt = getopt_long(argc, argv, "", long_options, NULL)) != -1) {
        switch (opt) {
        case OPT_THREADS:
        case OPT_REGIONS: apply_list(o, opt, optarg); break;
        case OPT_SECONDS: o->seconds = parse_seconds("--seconds", optarg); break;
        case OPT_WARMUP: o->warmup_s = parse_seconds("--warmup", optarg); break;
        case OPT_REPEAT: o->repeat = (unsigned)parse_count("--repeat", optarg, OPTIONS_REPEAT_MAX); break;
        case OPT_PICK: apply_pick(o, optarg); break;
        case OPT_LAT_SECONDS: o->latency_seconds = parse_seconds("--latency-seconds", optarg); break;
        case OPT_LAT_READERS:
            o->latency_readers = (unsigned)parse_count("--latency-readers", optarg, THREADS_MAX);
            break;
        case OPT_LAT_REGIONS:
            o->latency_regions = parse_count("--latency-regions", optarg, REGIONS_MAX);
            break;
        case OPT_CHURN_MIB: o->churn_mib = parse_count("--churn-mib", optarg, 65536); break;
        case OPT_CSV: o->csv_path = optarg; break;
        case OPT_HELP: fputs(usage, stdout); exit(0);
        default: fputs(usage, stderr); exit(2);
        }
    }
    if (optind < argc)
        bad_arg("an argument", argv[optind]);
}
