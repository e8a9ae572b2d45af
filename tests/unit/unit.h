/* What the unit tests of the core share: a per-test fixture that owns a
 * registry and the shm objects a test creates and proves that the test left
 * no descriptor or mapping behind, plus assertions on a call's error code and
 * its exact message. Compiled into every unit test with unit.c. */
#ifndef SHMREG_TESTS_UNIT_H
#define SHMREG_TESTS_UNIT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "shmreg/shmreg.h"
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

/* Create a shm object of `size` bytes filled with tu_pattern(seed, i); the
 * fixture unlinks it at teardown. Returns its key ("/shmreg-test-..."). */
const char *ut_object(struct ut *t, size_t size, uint8_t seed);

/* The one status entry of `name` (asserts OK and count 1). Free it with
 * shmreg_status_free(st, 1). */
shmreg_region_status *ut_status_of(shmreg_registry *reg, const char *name);

/* Whether this process can use CUDA (built, driver, device): pinning and
 * CUDA regions then work, and AUTO pinning pins. */
bool ut_cuda_usable(void);

/* Number of regions of `kind` that status lists. */
size_t ut_status_count(shmreg_registry *reg, shmreg_kind kind);

/* Assert that the `len` bytes at `p` are tu_pattern(seed, first + i). */
void ut_assert_pattern(const void *p, size_t len, uint8_t seed, size_t first);

/* printf into one of a few rotating static buffers: expected messages. */
const char *ut_fmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Whether s starts with prefix (ends with suffix); prints both when not. */
bool ut_starts_with(const char *s, const char *prefix);
bool ut_ends_with(const char *s, const char *suffix);

/* The call must succeed; on failure print its code and message. */
#define assert_ok(expr)                                                                      \
    do {                                                                                     \
        shmreg_err ut_e_ = (expr);                                                           \
        if (ut_e_ != SHMREG_OK)                                                              \
            print_error("%s: %s\n", shmreg_err_name(ut_e_), shmreg_last_error());            \
        assert_string_equal(shmreg_err_name(ut_e_), "SHMREG_OK");                            \
    } while (0)

/* The call must fail with `code` and leave exactly `msg` as this thread's
 * message. Codes are compared by name so a failure reads well. */
#define assert_fails(expr, code, msg)                                                        \
    do {                                                                                     \
        shmreg_err ut_e_ = (expr);                                                           \
        assert_string_equal(shmreg_err_name(ut_e_), shmreg_err_name(code));                  \
        assert_string_equal(shmreg_last_error(), (msg));                                     \
    } while (0)

/* As assert_fails, for messages whose tail is not fixed (errno text...). */
#define assert_fails_prefix(expr, code, prefix)                                              \
    do {                                                                                     \
        shmreg_err ut_e_ = (expr);                                                           \
        assert_string_equal(shmreg_err_name(ut_e_), shmreg_err_name(code));                  \
        assert_true(ut_starts_with(shmreg_last_error(), (prefix)));                          \
    } while (0)

/* Leave a known message as this thread's last error (a lookup of a name no
 * test registers), so a later check can tell that a call set its own. */
void ut_mark_error(void);
bool ut_error_is_new(void);

/* The call must fail with `code`; its message is not fixed by the spec, but
 * the call must have set one of its own. */
#define assert_fails_code(expr, code)                                                        \
    do {                                                                                     \
        ut_mark_error();                                                                     \
        shmreg_err ut_e_ = (expr);                                                           \
        assert_string_equal(shmreg_err_name(ut_e_), shmreg_err_name(code));                  \
        assert_true(ut_error_is_new());                                                      \
    } while (0)

#endif
