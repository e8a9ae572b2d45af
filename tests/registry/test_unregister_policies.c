/* shmreg_unregister and shmreg_unregister_all: idle regions go at once, busy
 * ones follow the busy policy (DEFER, DETACH, REFUSE), and a reference held
 * through all of it keeps reading its own bytes until its last release. */
#include "fixture.h"

#include <string.h>

#define OBJ_SIZE 4096

static void register_whole(shmreg_registry *reg, const char *name, const char *key)
{
    assert_ok(shmreg_register_system(reg, name, key, 0, OBJ_SIZE, 0));
}

static void acquire_whole(shmreg_registry *reg, const char *name, shmreg_region **ref,
                          shmreg_view *view, uint8_t seed)
{
    assert_ok(shmreg_acquire(reg, name, 0, OBJ_SIZE, ref, view));
    ut_assert_pattern(view->addr, OBJ_SIZE, seed, 0);
}

static void assert_unknown(shmreg_registry *reg, const char *name)
{
    shmreg_region *ref = NULL;
    shmreg_view view;
    assert_fails(shmreg_acquire(reg, name, 0, 0, &ref, &view), SHMREG_ERR_NOT_FOUND,
                 ut_fmt("Unable to find shared memory region: '%s'", name));
}

static uint64_t generation_of(shmreg_registry *reg, const char *name)
{
    shmreg_region_status *st = ut_status_of(reg, name);
    uint64_t g = st[0].generation;
    shmreg_status_free(st, 1);
    return g;
}

static void assert_listed(shmreg_registry *reg, const char *name, unsigned in_use, int pending)
{
    shmreg_region_status *st = ut_status_of(reg, name);
    assert_int_equal(st[0].references, in_use);
    assert_int_equal(st[0].pending_unregister, pending);
    shmreg_status_free(st, 1);
}

static void test_idle_region_is_unmapped_at_once(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ_SIZE, 41);
    shmreg_policy policies[] = {SHMREG_POLICY_DEFER, SHMREG_POLICY_DETACH, SHMREG_POLICY_REFUSE};

    for (size_t i = 0; i < 3; i++) {
        shmreg_registry *reg = ut_registry(t, policies[i]);
        register_whole(reg, "in", key);
        assert_int_equal(tu_wait_shm_maps(key, 1, 5000), 1);
        assert_ok(shmreg_unregister(reg, "in", SHMREG_KIND_SYSTEM));
        assert_int_equal(tu_wait_shm_maps(key, 0, 5000), 0);
        assert_int_equal(ut_status_count(reg, SHMREG_KIND_ANY), 0);
        assert_unknown(reg, "in");
    }
}

/* DEFER: the region stays listed and acquirable, keeps its name, and goes
 * exactly when its last reference is released. */
static void test_defer_waits_for_the_last_release(void **state)
{
    struct ut *t = *state;
    shmreg_registry *reg = ut_registry(t, SHMREG_POLICY_DEFER);
    const char *key = ut_object(t, OBJ_SIZE, 42);
    const char *other = ut_object(t, OBJ_SIZE, 43);
    shmreg_region *r1 = NULL, *r2 = NULL;
    shmreg_view v1, v2;

    register_whole(reg, "in", key);
    uint64_t gen = generation_of(reg, "in");
    acquire_whole(reg, "in", &r1, &v1, 42);
    assert_ok(shmreg_unregister(reg, "in", SHMREG_KIND_SYSTEM));
    assert_listed(reg, "in", 1, 1);
    assert_int_equal(tu_wait_shm_maps(key, 1, 5000), 1);

    /* Still acquirable, and the name is still taken. */
    acquire_whole(reg, "in", &r2, &v2, 42);
    assert_listed(reg, "in", 2, 1);
    assert_fails(shmreg_register_system(reg, "in", other, 0, OBJ_SIZE, 0),
                 SHMREG_ERR_ALREADY_EXISTS,
                 "shared memory region 'in' already in manager (pending unregister: the name is freed "
                 "when the 2 references still held are released)");
    assert_int_equal(tu_wait_shm_maps(other, 0, 5000), 0);

    /* Unregistering a pending region again is OK and changes nothing. */
    assert_ok(shmreg_unregister(reg, "in", SHMREG_KIND_SYSTEM));
    assert_ok(shmreg_unregister(reg, "in", SHMREG_KIND_ANY));
    assert_listed(reg, "in", 2, 1);

    shmreg_release(r1);
    assert_listed(reg, "in", 1, 1);
    assert_int_equal(tu_wait_shm_maps(key, 1, 5000), 1);
    ut_assert_pattern(v2.addr, OBJ_SIZE, 42, 0);
    shmreg_release(r2);
    /* Background reclaim: the name is free at once, the mapping goes when
     * the reclaim thread has unmapped it (trim waits for that). */
    assert_int_equal(ut_status_count(reg, SHMREG_KIND_ANY), 0);
    assert_ok(shmreg_registry_trim(reg));
    assert_int_equal(tu_wait_shm_maps(key, 0, 5000), 0);
    assert_unknown(reg, "in");

    /* The name is free again, for a new registration. */
    register_whole(reg, "in", other);
    assert_true(generation_of(reg, "in") != gen);
    acquire_whole(reg, "in", &r1, &v1, 43);
    shmreg_release(r1);
    assert_listed(reg, "in", 0, 0);
}

/* DETACH: the name is free at once; the old reference keeps its old bytes
 * while the name is registered again to a new mapping and generation. */
static void test_detach_frees_the_name_at_once(void **state)
{
    struct ut *t = *state;
    shmreg_registry *reg = ut_registry(t, SHMREG_POLICY_DETACH);
    const char *old_key = ut_object(t, OBJ_SIZE, 44);
    const char *new_key = ut_object(t, OBJ_SIZE, 45);
    shmreg_region *old_ref = NULL, *new_ref = NULL;
    shmreg_view old_view, new_view;

    register_whole(reg, "in", old_key);
    uint64_t old_gen = generation_of(reg, "in");
    acquire_whole(reg, "in", &old_ref, &old_view, 44);
    assert_ok(shmreg_unregister(reg, "in", SHMREG_KIND_SYSTEM));

    assert_unknown(reg, "in");
    assert_int_equal(ut_status_count(reg, SHMREG_KIND_ANY), 0);
    assert_int_equal(tu_wait_shm_maps(old_key, 1, 5000), 1);

    register_whole(reg, "in", new_key);
    assert_true(generation_of(reg, "in") != old_gen);
    acquire_whole(reg, "in", &new_ref, &new_view, 45);
    assert_ptr_not_equal(new_view.addr, old_view.addr);
    ut_assert_pattern(old_view.addr, OBJ_SIZE, 44, 0);
    assert_listed(reg, "in", 1, 0);

    /* The old region's last release unmaps it, and only it. */
    shmreg_release(old_ref);
    assert_int_equal(tu_wait_shm_maps(old_key, 0, 5000), 0);
    assert_int_equal(tu_wait_shm_maps(new_key, 1, 5000), 1);
    ut_assert_pattern(new_view.addr, OBJ_SIZE, 45, 0);
    shmreg_release(new_ref);
    assert_listed(reg, "in", 0, 0);
}

/* REFUSE: BUSY, with the count of references in the message; nothing changes. */
static void test_refuse_keeps_a_busy_region(void **state)
{
    struct ut *t = *state;
    shmreg_registry *reg = ut_registry(t, SHMREG_POLICY_REFUSE);
    const char *key = ut_object(t, OBJ_SIZE, 46);
    shmreg_region *ref = NULL;
    shmreg_view view;

    register_whole(reg, "input0_data", key);
    acquire_whole(reg, "input0_data", &ref, &view, 46);
    assert_fails(shmreg_unregister(reg, "input0_data", SHMREG_KIND_SYSTEM), SHMREG_ERR_BUSY,
                 "Cannot unregister shared memory region 'input0_data', it is currently in use "
                 "by 1 reference (views acquired and not yet released).");
    shmreg_retain(ref);
    assert_fails(shmreg_unregister(reg, "input0_data", SHMREG_KIND_ANY), SHMREG_ERR_BUSY,
                 "Cannot unregister shared memory region 'input0_data', it is currently in use "
                 "by 2 references (views acquired and not yet released).");
    assert_listed(reg, "input0_data", 2, 0);
    assert_int_equal(tu_wait_shm_maps(key, 1, 5000), 1);

    shmreg_release(ref);
    shmreg_release(ref);
    assert_ok(shmreg_unregister(reg, "input0_data", SHMREG_KIND_SYSTEM));
    assert_int_equal(tu_wait_shm_maps(key, 0, 5000), 0);
}

static void test_refuse_unregister_all_names_the_busy_ones(void **state)
{
    struct ut *t = *state;
    shmreg_registry *reg = ut_registry(t, SHMREG_POLICY_REFUSE);
    const char *ka = ut_object(t, OBJ_SIZE, 47);
    const char *kb = ut_object(t, OBJ_SIZE, 48);
    const char *kc = ut_object(t, OBJ_SIZE, 49);
    shmreg_region *ra = NULL, *rb = NULL;
    shmreg_view va, vb;

    register_whole(reg, "a", ka);
    register_whole(reg, "b", kb);
    register_whole(reg, "c", kc);
    acquire_whole(reg, "a", &ra, &va, 47);
    acquire_whole(reg, "b", &rb, &vb, 48);

    /* The busy names in whichever order the registry walks them. */
    shmreg_err e = shmreg_unregister_all(reg, SHMREG_KIND_SYSTEM);
    assert_string_equal(shmreg_err_name(e), "SHMREG_ERR_BUSY");
    const char *msg = shmreg_last_error();
    const char *ab = "Failed to unregister the following system shared memory regions: a, b, ";
    const char *ba = "Failed to unregister the following system shared memory regions: b, a, ";
    if (strcmp(msg, ab) != 0)
        assert_string_equal(msg, ba);

    /* The idle one went; the busy ones stay, untouched. */
    assert_unknown(reg, "c");
    assert_int_equal(tu_wait_shm_maps(kc, 0, 5000), 0);
    assert_listed(reg, "a", 1, 0);
    assert_listed(reg, "b", 1, 0);

    shmreg_release(rb);
    assert_fails(shmreg_unregister_all(reg, SHMREG_KIND_SYSTEM), SHMREG_ERR_BUSY,
                 "Failed to unregister the following system shared memory regions: a, ");
    assert_unknown(reg, "b");
    /* Over every kind the list of busy names is the same. */
    assert_fails_code(shmreg_unregister_all(reg, SHMREG_KIND_ANY), SHMREG_ERR_BUSY);
    assert_true(ut_ends_with(shmreg_last_error(), " regions: a, "));
    assert_unknown(reg, "b");
    assert_int_equal(tu_wait_shm_maps(kb, 0, 5000), 0);

    shmreg_release(ra);
    assert_ok(shmreg_unregister_all(reg, SHMREG_KIND_ANY));
    assert_int_equal(ut_status_count(reg, SHMREG_KIND_ANY), 0);
    assert_int_equal(tu_wait_shm_maps(ka, 0, 5000), 0);
}

/* Under DEFER and DETACH unregister_all never fails on busy regions. */
static void test_unregister_all_with_busy_regions(void **state)
{
    struct ut *t = *state;
    const char *ka = ut_object(t, OBJ_SIZE, 50);
    const char *kb = ut_object(t, OBJ_SIZE, 51);
    shmreg_policy policies[] = {SHMREG_POLICY_DEFER, SHMREG_POLICY_DETACH};

    for (size_t i = 0; i < 2; i++) {
        shmreg_registry *reg = ut_registry(t, policies[i]);
        shmreg_region *ref = NULL;
        shmreg_view view;

        register_whole(reg, "busy", ka);
        register_whole(reg, "idle", kb);
        acquire_whole(reg, "busy", &ref, &view, 50);
        assert_ok(shmreg_unregister_all(reg, SHMREG_KIND_ANY));
        assert_unknown(reg, "idle");
        assert_int_equal(tu_wait_shm_maps(kb, 0, 5000), 0);
        if (policies[i] == SHMREG_POLICY_DEFER)
            assert_listed(reg, "busy", 1, 1);
        else
            assert_int_equal(ut_status_count(reg, SHMREG_KIND_ANY), 0);
        assert_int_equal(tu_wait_shm_maps(ka, 1, 5000), 1);

        shmreg_release(ref);
        assert_int_equal(tu_wait_shm_maps(ka, 0, 5000), 0);
        assert_int_equal(ut_status_count(reg, SHMREG_KIND_ANY), 0);
    }
}

static void test_unregister_all_filters_by_kind(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ_SIZE, 52);

    register_whole(t->reg, "in", key);
    assert_ok(shmreg_unregister_all(t->reg, SHMREG_KIND_CUDA));
    assert_listed(t->reg, "in", 0, 0);
    assert_ok(shmreg_unregister_all(t->reg, SHMREG_KIND_SYSTEM));
    assert_int_equal(ut_status_count(t->reg, SHMREG_KIND_ANY), 0);
    assert_int_equal(tu_wait_shm_maps(key, 0, 5000), 0);
    /* Nothing registered: nothing to do, no error. */
    assert_ok(shmreg_unregister_all(t->reg, SHMREG_KIND_ANY));
}

static void test_unknown_name_and_wrong_kind(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ_SIZE, 53);

    register_whole(t->reg, "in", key);
    assert_fails(shmreg_unregister(t->reg, "in", SHMREG_KIND_CUDA), SHMREG_ERR_WRONG_KIND,
                 "The region named 'in' is registered as system shared memory, not CUDA shared "
                 "memory");
    assert_listed(t->reg, "in", 0, 0);
    assert_int_equal(tu_wait_shm_maps(key, 1, 5000), 1);

    assert_fails(shmreg_unregister(t->reg, "out", SHMREG_KIND_SYSTEM), SHMREG_ERR_NOT_FOUND,
                 "Unable to find system shared memory region: 'out'");
    assert_fails_code(shmreg_unregister(t->reg, "out", SHMREG_KIND_ANY), SHMREG_ERR_NOT_FOUND);
    assert_fails_code(shmreg_unregister(t->reg, "out", SHMREG_KIND_CUDA), SHMREG_ERR_NOT_FOUND);
    assert_listed(t->reg, "in", 0, 0);
}

static void test_bad_arguments_change_nothing(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ_SIZE, 54);

    register_whole(t->reg, "in", key);
    assert_fails_code(shmreg_unregister(NULL, "in", SHMREG_KIND_ANY), SHMREG_ERR_INVALID_ARG);
    assert_fails_code(shmreg_unregister(t->reg, NULL, SHMREG_KIND_ANY), SHMREG_ERR_INVALID_ARG);
    assert_fails_code(shmreg_unregister(t->reg, "in", (shmreg_kind)7), SHMREG_ERR_INVALID_ARG);
    assert_fails_code(shmreg_unregister_all(NULL, SHMREG_KIND_ANY), SHMREG_ERR_INVALID_ARG);
    assert_fails_code(shmreg_unregister_all(t->reg, (shmreg_kind)7), SHMREG_ERR_INVALID_ARG);
    assert_listed(t->reg, "in", 0, 0);
    assert_int_equal(tu_wait_shm_maps(key, 1, 5000), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        UT_TEST(test_idle_region_is_unmapped_at_once),
        UT_TEST(test_defer_waits_for_the_last_release),
        UT_TEST(test_detach_frees_the_name_at_once),
        UT_TEST(test_refuse_keeps_a_busy_region),
        UT_TEST(test_refuse_unregister_all_names_the_busy_ones),
        UT_TEST(test_unregister_all_with_busy_regions),
        UT_TEST(test_unregister_all_filters_by_kind),
        UT_TEST(test_unknown_name_and_wrong_kind),
        UT_TEST(test_bad_arguments_change_nothing),
    };
    return cmocka_run_group_tests(tests, ut_group_setup, NULL);
}
