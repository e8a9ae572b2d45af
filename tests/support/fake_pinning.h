/* A host pinning (src/backends/backend.h's shmreg__host_pinning) that works without a
 * GPU, for tests built against the static copy of the library: pinning is
 * usable, a pin pins nothing but is recorded, and each unpin must name a
 * range a pin recorded (the pairing is checked). A pin can be held (it waits
 * inside the call, as a slow cudaHostRegister of a window with holes does)
 * and is a failable call of the fault injection (faultinject.h, FI_PIN).
 * No cmocka in here: the tests assert on what it reports. */
#ifndef SHMREG_TESTS_FAKE_PINNING_H
#define SHMREG_TESTS_FAKE_PINNING_H

#include <stdbool.h>
#include <stddef.h>

/* Swap the fake in (idempotent; a new install starts its counts at 0),
 * and restore the library's own. */
void fp_install(void);
void fp_remove(void);

/* What the fake saw since fp_install. */
struct fp_counts {
    unsigned pins;       /* pins that succeeded */
    unsigned unpins;     /* unpins that matched a pin */
    unsigned unmatched;  /* unpins of an address no live pin has */
    size_t live;         /* pins not yet unpinned */
    size_t live_bytes;   /* their lengths */
};
struct fp_counts fp_counts(void);

/* While held, a pin of the region called `name` waits inside the call (at
 * most FP_HOLD_MAX_MS, so that a test that would deadlock fails instead of
 * hanging) until fp_hold(NULL); other regions' pins go through.
 * fp_wait_pinning waits until such a pin is waiting; false after the bound. */
#define FP_HOLD_MAX_MS 10000
void fp_hold(const char *name);
bool fp_wait_pinning(void);
/* Whether a held pin is still inside the call. */
bool fp_pinning(void);

#endif
