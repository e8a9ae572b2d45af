/* What most tests of the core share: a per-test fixture that owns a registry
 * and the shm objects a test creates and proves that the test left no
 * descriptor or mapping behind, and small registry helpers that need no
 * fixture. Assertions on a call's code and message are in shmreg_assert.h. */
#ifndef SHMREG_TESTS_FIXTURE_H
#define SHMREG_TESTS_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shmreg/shmreg.h"
#include "shmreg_assert.h"
#include "testutil.h"

#define UT_MAX_OBJECTS 16

/* One test's world: a registry (default config unless the test asks for a
 * policy), the shm objects it created, and the counts it started from. */
struct ut {
    struct tu_baseline base;
    shmreg_registry *reg;
    char keys[UT_MAX_OBJECTS][64];
    int nkeys;
};

/* cmocka group setup: run one whole lifecycle once, so that what the library
 * (or liburcu) sets up once per process is not counted against a test. */
int ut_group_setup(void **state);

/* cmocka per-test setup/teardown: *state becomes a struct ut with a default
 * registry; teardown destroys the registry (if the test left one), unlinks
 * every object and checks descriptors and shm mappings against the baseline. */
int ut_setup(void **state);
int ut_teardown(void **state);

#define UT_TEST(fn) cmocka_unit_test_setup_teardown(fn, ut_setup, ut_teardown)

/* Replace the fixture's registry with one whose busy policy is `policy`. */
shmreg_registry *ut_registry(struct ut *t, shmreg_policy policy);

/* Replace the fixture's registry with one created from cfg. */
shmreg_registry *ut_registry_config(struct ut *t, const shmreg_config *cfg);

/* A new registry with these pin and busy policies (other settings default),
 * for tests that keep their own fixture. */
shmreg_registry *ut_new_registry(shmreg_pin_policy pin, shmreg_policy busy);

/* Create a shm object of `size` bytes filled with tu_pattern(seed, i); the
 * fixture unlinks it at teardown. Returns its key ("/shmreg-test-..."). */
const char *ut_object(struct ut *t, size_t size, uint8_t seed);

/* The one status entry of `name` (asserts OK and count 1). Free it with
 * shmreg_status_free(st, 1). */
shmreg_region_status *ut_status_of(shmreg_registry *reg, const char *name);

/* Whether this process can use CUDA (built, driver, device): pinning and
 * CUDA regions then work, and AUTO pinning pins. */
bool ut_cuda_usable(void);

/* The fixture of the tests that register one shm object of their own on a
 * registry with AUTO pinning and the DEFER policy (tests/cuda): the object,
 * of `size` bytes filled with tu_pattern(seed, i), the registry, and the
 * descriptors and mappings the test started from. */
struct ut_shm_fixture {
    struct tu_baseline base;
    char key[64];
    shmreg_registry *reg;
};

/* Take the baseline, create the object and the registry. */
struct ut_shm_fixture *ut_shm_fixture_new(size_t size, uint8_t seed);

/* Destroy the registry (the one the test left there: it may have replaced
 * it), unlink the object, check the baseline and free f. */
void ut_shm_fixture_free(struct ut_shm_fixture *f);

/* Number of regions of `kind` (SHMREG_KIND_ANY: all) that status lists. */
size_t ut_status_count(shmreg_registry *reg, shmreg_kind kind);

/* Assert that the `len` bytes at `p` are tu_pattern(seed, first + i). */
void ut_assert_pattern(const void *p, size_t len, uint8_t seed, size_t first);

#endif
