/* The histogram of latency_histogram.h. */
#include "latency_histogram.h"

#include <math.h>

void latency_histogram_merge(latency_histogram *into, const latency_histogram *from)
{
    for (unsigned i = 0; i < LATENCY_BUCKETS; i++)
        into->buckets[i] += from->buckets[i];
    into->count += from->count;
    if (from->max > into->max)
        into->max = from->max;
}

/* The largest value that falls in bucket i. */
static uint64_t bucket_upper(unsigned i)
{
    if (i < LATENCY_EXACT)
        return i;
    unsigned exp = 10u + ((i - LATENCY_EXACT) >> LATENCY_SUB_BITS);
    uint64_t sub = (i - LATENCY_EXACT) & ((1u << LATENCY_SUB_BITS) - 1u);
    unsigned shift = exp - LATENCY_SUB_BITS;
    return (((1ull << LATENCY_SUB_BITS) + sub + 1u) << shift) - 1u;
}

uint64_t latency_histogram_percentile(const latency_histogram *h, double fraction)
{
    if (h->count == 0)
        return 0;
    uint64_t rank = (uint64_t)ceil(fraction * (double)h->count);
    if (rank == 0)
        rank = 1;
    uint64_t seen = 0;
    for (unsigned i = 0; i < LATENCY_BUCKETS; i++) {
        seen += h->buckets[i];
        if (seen >= rank)
            return bucket_upper(i) < h->max ? bucket_upper(i) : h->max;
    }
    return h->max;
}

uint64_t latency_histogram_count_above(const latency_histogram *h, uint64_t ns)
{
    uint64_t above = 0;
    for (unsigned i = latency_bucket(ns) + 1u; i < LATENCY_BUCKETS; i++)
        above += h->buckets[i];
    return above;
}
