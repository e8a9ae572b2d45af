/* The registry: names -> regions. Shared by registry.c (the API) and
 * region.c (a region's teardown unlinks it from its registry). */
#ifndef SHMREG_REGISTRY_H
#define SHMREG_REGISTRY_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "atomics.h"
#include "rcu.h"
#include "shmreg/shmreg.h"

struct shmreg_registry {
    /* Lookups traverse the table under RCU only. Every change to it, and
     * every read of the regions' linked/pending flags, holds `lock`; no code
     * holding it calls shm_open, mmap, munmap, any CUDA function or a log
     * callback, so acquire never waits behind them. */
    struct cds_lfht *table;
    pthread_mutex_t lock;
    /* One reference for the handle, one per region not yet torn down: the
     * lock and table outlive every region, even after destroy. */
    shmreg__refcount refs;
    uint64_t next_generation; /* under lock */
    uint64_t hash_seed;       /* random per registry: names come from clients */

    shmreg_policy busy_policy;
    shmreg_pin_policy pin_policy;
    shmreg_log_fn log_fn;
    void *log_user;
    char **reserved_prefixes; /* owned, NULL-terminated, or NULL */
};

/* Drop a registry reference; the last frees it. Never call it holding lock
 * or inside an RCU read-side section. */
void shmreg__registry_put(struct shmreg_registry *reg);

/* Hand a message to the configured log callback (or drop it). Never call it
 * holding lock. */
void shmreg__log(struct shmreg_registry *reg, shmreg_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
