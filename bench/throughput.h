/* Acquire+release throughput of one design, one region set and one thread
 * count: the cell of the bench's first table. */
#ifndef SHMREG_BENCH_THROUGHPUT_H
#define SHMREG_BENCH_THROUGHPUT_H

#include "designs.h"
#include "region_set.h"

typedef struct throughput_cell {
    const bench_design *design;
    void *reg; /* the design's registry, with every region of `regions` registered */
    const region_set *regions;
    unsigned threads;
    pick_mode pick;
    double warmup_s, seconds;
} throughput_cell;

/* Run `threads` threads that acquire a picked name and release it in a tight
 * loop; after warmup_s, count the pairs completed over `seconds`. Returns
 * millions of pairs per second, all threads together. Fatal if an acquire
 * fails. */
double throughput_run(const throughput_cell *cell);

#endif
