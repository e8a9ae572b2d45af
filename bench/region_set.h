/* A set of registered regions for the bench: `count` names, each the
 * REGION_WINDOW-byte window i of one shm object, and per-thread sequences of
 * names to acquire. Names are built once, before any timing, so that a
 * measured loop costs the registry's lookup and nothing else. */
#ifndef SHMREG_BENCH_REGION_SET_H
#define SHMREG_BENCH_REGION_SET_H

#include <stddef.h>

#include "designs.h"

/* One page per region: thousands of regions fit one small object, and Triton's
 * mmap needs page-aligned offsets. */
#define REGION_WINDOW 4096u

/* "region-00042": short enough for std::string's small-string buffer, so the
 * baseline's lookups allocate nothing. */
#define REGION_NAME_SIZE 16

/* Length of a pick sequence: a power of two, 32 KiB of pointers per thread. */
#define PICK_SEQUENCE_LEN 4096u

typedef enum pick_mode {
    PICK_RANDOM = 0, /* each thread its own uniform random sequence */
    PICK_STRIDED = 1 /* thread t walks all names in order from t * count / threads */
} pick_mode;

typedef struct region_set {
    size_t count;
    char (*names)[REGION_NAME_SIZE];
    const char *key; /* the shm object: at least count * REGION_WINDOW bytes */
} region_set;

/* Fatal on allocation failure. */
void region_set_init(region_set *set, size_t count, const char *key);
void region_set_free(region_set *set);

/* Register every region of the set in reg; fatal on the first failure. */
void region_set_register(const region_set *set, const bench_design *design, void *reg);

/* PICK_SEQUENCE_LEN names for thread `thread` of `threads`; free() it. */
const char **region_set_picks(const region_set *set, unsigned thread, unsigned threads,
                              pick_mode mode);

#endif
