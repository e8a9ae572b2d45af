/*
 * The monotonic clock, which every interval the server measures or waits
 * for is read on (spins, queue waits, grace periods, the handover's lines):
 * never set back, unlike the wall clock.
 */
#ifndef SERVER_CLOCK_H
#define SERVER_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Now on CLOCK_MONOTONIC, in nanoseconds. */
static inline uint64_t monotonic_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

#endif
