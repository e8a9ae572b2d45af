/* The region sets of region_set.h. */
#include "region_set.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"

void region_set_init(region_set *set, size_t count, const char *key)
{
    set->count = count;
    set->key = key;
    set->names = calloc(count, REGION_NAME_SIZE);
    if (!set->names)
        bench_fatal("out of memory for %zu region names", count);
    /* The modulo only tells the compiler the name fits; options cap count. */
    for (size_t i = 0; i < count; i++)
        snprintf(set->names[i], REGION_NAME_SIZE, "region-%05u", (unsigned)(i % 100000u));
}

void region_set_free(region_set *set)
{
    free(set->names);
    set->names = NULL;
}

void region_set_register(const region_set *set, const bench_design *design, void *reg)
{
    for (size_t i = 0; i < set->count; i++)
        if (design->register_system(reg, set->names[i], set->key, i * REGION_WINDOW,
                                    REGION_WINDOW) != 0)
            bench_fatal("%s: register %s: %s", design->name, set->names[i],
                        design->last_error());
}

/* xorshift64*: cheap, and good enough to spread picks over the set. */
static uint64_t next_random(uint64_t *state)
{
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return *state * 2685821657736338717ull;
}

const char **region_set_picks(const region_set *set, unsigned thread, unsigned threads,
                              pick_mode mode)
{
    const char **seq = malloc(PICK_SEQUENCE_LEN * sizeof *seq);
    if (!seq)
        bench_fatal("out of memory for a pick sequence");
    uint64_t state = 0x9E3779B97F4A7C15ull * (thread + 1u);
    size_t start = set->count * thread / threads;
    for (size_t i = 0; i < PICK_SEQUENCE_LEN; i++) {
        size_t pick = mode == PICK_RANDOM ? (size_t)(next_random(&state) % set->count)
                                          : (start + i) % set->count;
        seq[i] = set->names[pick];
    }
    return seq;
}
