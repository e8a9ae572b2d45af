/* A latency histogram in nanoseconds with bounded relative error: exact
 * below 1024 ns, then 64 buckets per power of two (error under 1.6%), so a
 * reader thread can record every operation in 36 KiB without allocating. */
#ifndef SHMREG_BENCH_LATENCY_HISTOGRAM_H
#define SHMREG_BENCH_LATENCY_HISTOGRAM_H

#include <stdint.h>

#define LATENCY_EXACT 1024u
#define LATENCY_SUB_BITS 6u
#define LATENCY_BUCKETS (LATENCY_EXACT + (64u - 10u) * (1u << LATENCY_SUB_BITS))

typedef struct latency_histogram {
    uint64_t count, max;
    uint64_t buckets[LATENCY_BUCKETS];
} latency_histogram;

static inline unsigned latency_bucket(uint64_t ns)
{
    if (ns < LATENCY_EXACT)
        return (unsigned)ns;
    unsigned exp = 63u - (unsigned)__builtin_clzll(ns); /* >= 10 */
    unsigned sub = (unsigned)(ns >> (exp - LATENCY_SUB_BITS)) & ((1u << LATENCY_SUB_BITS) - 1u);
    return LATENCY_EXACT + ((exp - 10u) << LATENCY_SUB_BITS) + sub;
}

static inline void latency_histogram_add(latency_histogram *h, uint64_t ns)
{
    h->buckets[latency_bucket(ns)]++;
    h->count++;
    if (ns > h->max)
        h->max = ns;
}

void latency_histogram_merge(latency_histogram *into, const latency_histogram *from);

/* The smallest bucket bound at or below which `fraction` (0..1] of the
 * samples lie: an upper bound on the true percentile, within the bucket
 * width. 0 for an empty histogram. */
uint64_t latency_histogram_percentile(const latency_histogram *h, double fraction);

/* How many samples exceed `ns`, counting whole buckets: exact below 1024 ns,
 * within the bucket width above. */
uint64_t latency_histogram_count_above(const latency_histogram *h, uint64_t ns);

#endif
