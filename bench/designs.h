/* The two registry designs the bench compares, behind one function table, so
 * that every measurement runs the same harness code over both and only the
 * registry differs. Both add one indirect call per operation, equally. */
#ifndef SHMREG_BENCH_DESIGNS_H
#define SHMREG_BENCH_DESIGNS_H

#include <shmreg/shmreg.h>

#include "baseline_triton.h"

/* One counted reference, whichever design handed it out. */
typedef union bench_ref {
    shmreg_region *region;
    triton_ref triton;
} bench_ref;

/* Every call but create/destroy/release returns 0 on success and -1 on
 * failure, with the design's message in last_error(). */
typedef struct bench_design {
    const char *name;  /* column heading and CSV value */
    void *(*create)(void);
    void (*destroy)(void *reg);
    int (*register_system)(void *reg, const char *name, const char *key, size_t offset,
                           size_t byte_size);
    int (*acquire)(void *reg, const char *name, size_t offset, size_t byte_size, bench_ref *ref,
                   void **addr);
    void (*release)(bench_ref *ref);
    int (*unregister)(void *reg, const char *name);
    const char *(*last_error)(void);
    /* Unregistering a region in use is done at once and its last release
     * unmaps it (libshmreg's DEFER); the churner then releases last, so
     * that the unmapping runs where the design runs its deleter (libshmreg:
     * the reclaim thread). Otherwise it releases before unregistering. */
    int releases_last;
} bench_design;

/* libshmreg through its public API, system regions never pinned (pinning is a
 * register-time cost that the baseline does not pay). */
extern const bench_design bench_design_shmreg;

/* The Triton-style baseline of baseline_triton.h. */
extern const bench_design bench_design_triton;

#endif
