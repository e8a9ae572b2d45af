/* shmreg_registry_stats: what a whole registry holds, detached mappings
 * (which status does not list) included. */
#include "fixture.h"

#include <string.h>

#define OBJ_SIZE 4096

static shmreg_stats stats_of(shmreg_registry *reg)
{
    shmreg_stats s;
    memset(&s, 0x5a, sizeof s);
    assert_ok(shmreg_registry_stats(reg, &s));
    for (size_t i = 0; i < sizeof s.reserved_ / sizeof s.reserved_[0]; i++)
        assert_int_equal(s.reserved_[i], 0);
    return s;
}

static void test_counts_follow_the_lifecycle(void **state)
{
    struct ut *t = *state;
    shmreg_registry *reg = ut_registry(t, SHMREG_POLICY_DEFER);
    const char *key = ut_object(t, OBJ_SIZE, 21);

    shmreg_stats s = stats_of(reg);
    assert_int_equal(s.regions + s.mapped_regions + s.mapped_bytes + s.references, 0);
    assert_int_equal(s.registrations + s.refusals, 0);

    assert_ok(shmreg_register_system(reg, "a", key, 0, 1000, SHMREG_NO_PIN));
    assert_ok(shmreg_register_system(reg, "b", key, 0, 24, SHMREG_NO_PIN));
    assert_fails_code(shmreg_register_system(reg, "a", key, 0, 1, 0), SHMREG_ERR_ALREADY_EXISTS);
    shmreg_region *r1, *r2;
    shmreg_view v;
    assert_ok(shmreg_acquire(reg, "a", 0, 1, &r1, &v));
    assert_ok(shmreg_acquire(reg, "a", 0, 1, &r2, &v));
    s = stats_of(reg);
    assert_int_equal(s.regions, 2);
    assert_int_equal(s.mapped_regions, 2);
    assert_int_equal(s.mapped_bytes, 1024);
    assert_int_equal(s.pinned_bytes, 0);
    assert_int_equal(s.references, 2);
    assert_int_equal(s.registrations, 2);
    assert_int_equal(s.refusals, 1);
    assert_int_equal(s.pending_regions, 0);
    assert_int_equal(s.detached_regions, 0);

    /* DEFER: still listed, pending, until the last release. */
    assert_ok(shmreg_unregister(reg, "a", SHMREG_KIND_SYSTEM));
    s = stats_of(reg);
    assert_int_equal(s.regions, 2);
    assert_int_equal(s.pending_regions, 1);
    assert_int_equal(s.references, 2);
    shmreg_release(r1);
    shmreg_release(r2);
    /* Unlisted at once; counted until the reclaim thread has unmapped it. */
    assert_ok(shmreg_registry_trim(reg));
    s = stats_of(reg);
    assert_int_equal(s.reclaim_waiting_bytes, 0);
    assert_int_equal(s.regions, 1);
    assert_int_equal(s.pending_regions, 0);
    assert_int_equal(s.mapped_bytes, 24);
}

static void test_detached_mappings_are_counted(void **state)
{
    struct ut *t = *state;
    shmreg_registry *reg = ut_registry(t, SHMREG_POLICY_DETACH);
    const char *key = ut_object(t, OBJ_SIZE, 22);

    assert_ok(shmreg_register_system(reg, "a", key, 0, 512, 0));
    shmreg_region *ref;
    shmreg_view v;
    assert_ok(shmreg_acquire(reg, "a", 0, 8, &ref, &v));
    assert_ok(shmreg_unregister(reg, "a", SHMREG_KIND_SYSTEM));
    /* Status lists it nowhere; the stats still see the mapping. */
    assert_int_equal(ut_status_count(reg, SHMREG_KIND_ANY), 0);
    shmreg_stats s = stats_of(reg);
    assert_int_equal(s.regions, 0);
    assert_int_equal(s.detached_regions, 1);
    assert_int_equal(s.mapped_regions, 1);
    assert_int_equal(s.mapped_bytes, 512);
    assert_int_equal(tu_wait_shm_maps(key, 1, 5000), 1);

    /* The name is free again: a new registration beside the detached one. */
    assert_ok(shmreg_register_system(reg, "a", key, 0, 64, 0));
    s = stats_of(reg);
    assert_int_equal(s.regions, 1);
    assert_int_equal(s.detached_regions, 1);
    assert_int_equal(s.mapped_bytes, 576);

    shmreg_release(ref);
    /* It counts until the reclaim thread has unmapped it. */
    assert_ok(shmreg_registry_trim(reg));
    s = stats_of(reg);
    assert_int_equal(s.detached_regions, 0);
    assert_int_equal(s.mapped_regions, 1);
    assert_int_equal(s.mapped_bytes, 64);
}

static void test_bad_arguments(void **state)
{
    struct ut *t = *state;
    shmreg_stats s;
    assert_fails(shmreg_registry_stats(NULL, &s), SHMREG_ERR_INVALID_ARG, "registry_stats: registry is NULL");
    assert_fails(shmreg_registry_stats(t->reg, NULL), SHMREG_ERR_INVALID_ARG, "registry_stats: out is NULL");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        UT_TEST(test_counts_follow_the_lifecycle),
        UT_TEST(test_detached_mappings_are_counted),
        UT_TEST(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, ut_group_setup, NULL);
}
