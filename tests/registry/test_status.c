/* shmreg_status: what a snapshot holds, filters by name and kind, and that it
 * is the caller's own copy. */
#include "fixture.h"

#include <stdio.h>
#include <string.h>

#define OBJ_SIZE 8192

static void test_entry_describes_the_registration(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ_SIZE, 61);
    char slashed[80];
    snprintf(slashed, sizeof slashed, "//%s", key + 1);
    shmreg_region *a = NULL, *b = NULL;
    shmreg_view va, vb;

    assert_ok(shmreg_register_system(t->reg, "in", slashed, 123, 4567, SHMREG_NO_PIN));
    shmreg_region_status *st = ut_status_of(t->reg, "in");
    assert_string_equal(st[0].key, slashed);
    assert_int_equal(st[0].kind, SHMREG_KIND_SYSTEM);
    assert_int_equal(st[0].offset, 123);
    assert_int_equal(st[0].byte_size, 4567);
    assert_int_equal(st[0].device_id, -1);
    assert_int_equal(st[0].references, 0);
    assert_int_equal(st[0].pending_unregister, 0);
    assert_int_equal(st[0].pinned, 0);
    assert_int_equal(st[0].flags, SHMREG_NO_PIN);
    uint64_t gen = st[0].generation;
    shmreg_status_free(st, 1);

    /* in_use follows the references; the rest does not move. */
    assert_ok(shmreg_acquire(t->reg, "in", 0, 1, &a, &va));
    assert_ok(shmreg_acquire(t->reg, "in", 10, 1, &b, &vb));
    st = ut_status_of(t->reg, "in");
    assert_int_equal(st[0].references, 2);
    assert_int_equal(st[0].generation, gen);
    assert_int_equal(st[0].byte_size, 4567);
    shmreg_status_free(st, 1);
    shmreg_release(a);
    shmreg_release(b);
}

static bool seen_before(const uint64_t *gens, size_t n, uint64_t g)
{
    for (size_t i = 0; i < n; i++)
        if (gens[i] == g)
            return true;
    return false;
}

/* Every registration gets its own generation, a re-registered name too. */
static void test_generations_are_unique(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ_SIZE, 62);
    static const char *const names[] = {"a", "b", "c", "b", "a", "b"};
    uint64_t gens[6];

    for (size_t i = 0; i < 6; i++) {
        if (i >= 3)
            assert_ok(shmreg_unregister(t->reg, names[i], SHMREG_KIND_SYSTEM));
        assert_ok(shmreg_register_system(t->reg, names[i], key, 0, OBJ_SIZE, 0));
        shmreg_region_status *st = ut_status_of(t->reg, names[i]);
        assert_false(seen_before(gens, i, st[0].generation));
        gens[i] = st[0].generation;
        shmreg_status_free(st, 1);
    }
}

static void test_listing_filters_by_kind(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ_SIZE, 63);
    static const char *const names[] = {"x", "y", "z"};
    shmreg_region_status *st = NULL;
    size_t n = 99;

    assert_ok(shmreg_status(t->reg, NULL, SHMREG_KIND_ANY, &st, &n));
    assert_int_equal(n, 0);
    assert_null(st);

    for (size_t i = 0; i < 3; i++)
        assert_ok(shmreg_register_system(t->reg, names[i], key, i, 100, 0));
    assert_ok(shmreg_status(t->reg, NULL, SHMREG_KIND_SYSTEM, &st, &n));
    assert_int_equal(n, 3);
    bool seen[3] = {false, false, false};
    for (size_t i = 0; i < n; i++) {
        size_t which = (size_t)(st[i].name[0] - 'x');
        assert_true(which < 3 && !seen[which]);
        seen[which] = true;
        assert_int_equal(st[i].offset, which);
        assert_string_equal(st[i].key, key);
    }
    shmreg_status_free(st, n);

    static shmreg_region_status untouched;
    st = &untouched;
    assert_ok(shmreg_status(t->reg, NULL, SHMREG_KIND_CUDA, &st, &n));
    assert_int_equal(n, 0);
    assert_null(st);
    assert_int_equal(ut_status_count(t->reg, SHMREG_KIND_ANY), 3);
}

static void test_missing_and_wrong_kind(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ_SIZE, 64);
    shmreg_region_status *st = NULL;
    size_t n = 0;

    assert_ok(shmreg_register_system(t->reg, "in", key, 0, OBJ_SIZE, 0));
    assert_fails(shmreg_status(t->reg, "out", SHMREG_KIND_SYSTEM, &st, &n), SHMREG_ERR_NOT_FOUND,
                 "Unable to find system shared memory region: 'out'");
    assert_fails_code(shmreg_status(t->reg, "out", SHMREG_KIND_ANY, &st, &n),
                      SHMREG_ERR_NOT_FOUND);
    assert_fails(shmreg_status(t->reg, "in", SHMREG_KIND_CUDA, &st, &n), SHMREG_ERR_WRONG_KIND,
                 "The region named 'in' is registered as system shared memory, not CUDA shared "
                 "memory");
    assert_null(st);
    assert_int_equal(n, 0);

    assert_ok(shmreg_status(t->reg, "in", SHMREG_KIND_SYSTEM, &st, &n));
    assert_int_equal(n, 1);
    shmreg_status_free(st, n);
}

static void test_bad_arguments_are_refused(void **state)
{
    struct ut *t = *state;
    shmreg_region_status *st = NULL;
    size_t n = 0;
    char too_long[300];
    memset(too_long, 'n', 256);
    too_long[256] = '\0';

    assert_fails_code(shmreg_status(NULL, NULL, SHMREG_KIND_ANY, &st, &n), SHMREG_ERR_INVALID_ARG);
    assert_fails_code(shmreg_status(t->reg, NULL, SHMREG_KIND_ANY, NULL, &n),
                      SHMREG_ERR_INVALID_ARG);
    assert_fails_code(shmreg_status(t->reg, NULL, SHMREG_KIND_ANY, &st, NULL),
                      SHMREG_ERR_INVALID_ARG);
    assert_fails_code(shmreg_status(t->reg, NULL, (shmreg_kind)5, &st, &n),
                      SHMREG_ERR_INVALID_ARG);
    assert_fails_code(shmreg_status(t->reg, "", SHMREG_KIND_ANY, &st, &n),
                      SHMREG_ERR_INVALID_ARG);
    assert_fails_code(shmreg_status(t->reg, too_long, SHMREG_KIND_ANY, &st, &n),
                      SHMREG_ERR_INVALID_ARG);
    assert_null(st);

    shmreg_status_free(NULL, 0);
    shmreg_status_free(NULL, 5);
}

/* The snapshot is the caller's: it outlives the region and the registry. */
static void test_snapshot_outlives_the_registry(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ_SIZE, 65);
    shmreg_region_status *st = NULL;
    size_t n = 0;

    assert_ok(shmreg_register_system(t->reg, "in", key, 0, OBJ_SIZE, 0));
    assert_ok(shmreg_status(t->reg, NULL, SHMREG_KIND_ANY, &st, &n));
    assert_ok(shmreg_unregister(t->reg, "in", SHMREG_KIND_ANY));
    shmreg_registry_destroy(t->reg);
    t->reg = NULL;
    assert_int_equal(n, 1);
    assert_string_equal(st[0].name, "in");
    assert_string_equal(st[0].key, key);
    shmreg_status_free(st, n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        UT_TEST(test_entry_describes_the_registration),
        UT_TEST(test_generations_are_unique),
        UT_TEST(test_listing_filters_by_kind),
        UT_TEST(test_missing_and_wrong_kind),
        UT_TEST(test_bad_arguments_are_refused),
        UT_TEST(test_snapshot_outlives_the_registry),
    };
    return cmocka_run_group_tests(tests, ut_group_setup, NULL);
}
