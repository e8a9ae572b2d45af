/* shmreg_registry_destroy (server shutdown): everything is unregistered
 * whatever the policy, references still held keep working, and each region is
 * unmapped by its own last release, after the registry is gone. */
#include "fixture.h"

#include <pthread.h>
#include <stdio.h>

#define OBJ_SIZE 4096

static void test_destroy_null_is_a_no_op(void **state)
{
    shmreg_registry_destroy(NULL);
}

static void test_destroy_unmaps_idle_regions(void **state)
{
    struct ut *t = *state;
    const char *ka = ut_object(t, OBJ_SIZE, 71);
    const char *kb = ut_object(t, OBJ_SIZE, 72);

    assert_ok(shmreg_register_system(t->reg, "a", ka, 0, OBJ_SIZE, 0));
    assert_ok(shmreg_register_system(t->reg, "b", kb, 1, 100, 0));
    assert_ok(shmreg_register_system(t->reg, "b2", kb, 0, OBJ_SIZE, 0));
    assert_true(tu_count_shm_maps(kb) > 0);
    shmreg_registry_destroy(t->reg);
    t->reg = NULL;
    assert_int_equal(tu_wait_shm_maps(ka, 0, 5000), 0);
    assert_int_equal(tu_wait_shm_maps(kb, 0, 5000), 0);
}

/* Under every policy, even REFUSE: references outlive the registry. */
static void test_references_outlive_destroy(void **state)
{
    struct ut *t = *state;
    const char *ka = ut_object(t, OBJ_SIZE, 73);
    const char *kb = ut_object(t, OBJ_SIZE, 74);
    shmreg_policy policies[] = {SHMREG_POLICY_DEFER, SHMREG_POLICY_DETACH, SHMREG_POLICY_REFUSE};

    for (size_t i = 0; i < 3; i++) {
        shmreg_registry *reg = ut_registry(t, policies[i]);
        shmreg_region *ra = NULL, *rb = NULL;
        shmreg_view va, vb;

        assert_ok(shmreg_register_system(reg, "a", ka, 0, OBJ_SIZE, 0));
        assert_ok(shmreg_register_system(reg, "b", kb, 0, OBJ_SIZE, 0));
        assert_ok(shmreg_acquire(reg, "a", 0, OBJ_SIZE, &ra, &va));
        assert_ok(shmreg_acquire(reg, "b", 0, OBJ_SIZE, &rb, &vb));
        shmreg_registry_destroy(reg);
        t->reg = NULL;

        ut_assert_pattern(va.addr, OBJ_SIZE, 73, 0);
        ut_assert_pattern(vb.addr, OBJ_SIZE, 74, 0);
        /* A second owner may still be handed a reference. */
        assert_ptr_equal(shmreg_retain(rb), rb);

        shmreg_release(ra);
        assert_int_equal(tu_wait_shm_maps(ka, 0, 5000), 0);
        assert_int_equal(tu_wait_shm_maps(kb, 1, 5000), 1);
        shmreg_release(rb);
        assert_int_equal(tu_wait_shm_maps(kb, 1, 5000), 1);
        ut_assert_pattern(vb.addr, OBJ_SIZE, 74, 0);
        shmreg_release(rb);
        assert_int_equal(tu_wait_shm_maps(kb, 0, 5000), 0);
    }
}

/* A region already pending under DEFER is finished by its last release
 * after destroy, not unmapped twice. */
static void test_destroy_with_a_pending_region(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ_SIZE, 75);
    shmreg_region *ref = NULL;
    shmreg_view view;

    assert_ok(shmreg_register_system(t->reg, "in", key, 0, OBJ_SIZE, 0));
    assert_ok(shmreg_acquire(t->reg, "in", 0, OBJ_SIZE, &ref, &view));
    assert_ok(shmreg_unregister(t->reg, "in", SHMREG_KIND_SYSTEM));
    shmreg_registry_destroy(t->reg);
    t->reg = NULL;
    assert_int_equal(tu_wait_shm_maps(key, 1, 5000), 1);
    ut_assert_pattern(view.addr, OBJ_SIZE, 75, 0);
    shmreg_release(ref);
    assert_int_equal(tu_wait_shm_maps(key, 0, 5000), 0);
}

static void *release_in_thread(void *ref)
{
    shmreg_release(ref);
    return NULL;
}

static void test_last_release_in_another_thread(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ_SIZE, 76);
    shmreg_region *ref = NULL;
    shmreg_view view;
    pthread_t th;

    assert_ok(shmreg_register_system(t->reg, "in", key, 0, OBJ_SIZE, 0));
    assert_ok(shmreg_acquire(t->reg, "in", 0, OBJ_SIZE, &ref, &view));
    shmreg_registry_destroy(t->reg);
    t->reg = NULL;
    assert_int_equal(pthread_create(&th, NULL, release_in_thread, ref), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(tu_wait_shm_maps(key, 0, 5000), 0);
}

struct warnings {
    int count;
    char last[1024];
};

static void capture_warning(void *user, shmreg_log_level level, const char *msg)
{
    struct warnings *w = user;
    if (level == SHMREG_LOG_WARNING) {
        w->count++;
        snprintf(w->last, sizeof w->last, "%s", msg);
    }
}

/* Destroying a registry whose regions callers still hold is allowed, but
 * worth a WARNING: those mappings outlive the server's teardown. */
static void test_destroy_warns_about_held_regions(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ_SIZE, 79);
    struct warnings w = {0};
    shmreg_config cfg;
    shmreg_config_init(&cfg);
    cfg.log_fn = capture_warning;
    cfg.log_user = &w;

    shmreg_registry *reg;
    assert_ok(shmreg_registry_create(&cfg, &reg));
    assert_ok(shmreg_register_system(reg, "idle", key, 0, OBJ_SIZE, 0));
    shmreg_registry_destroy(reg);
    assert_int_equal(w.count, 0);

    assert_ok(shmreg_registry_create(&cfg, &reg));
    assert_ok(shmreg_register_system(reg, "held", key, 0, OBJ_SIZE, 0));
    shmreg_region *ref;
    shmreg_view v;
    assert_ok(shmreg_acquire(reg, "held", 0, 1, &ref, &v));
    shmreg_registry_destroy(reg);
    assert_int_equal(w.count, 1);
    assert_string_equal(w.last, "registry destroyed while callers still hold references to 1 regions: each is "
                                "unmapped by its last shmreg_release");
    shmreg_release(ref);
    assert_int_equal(w.count, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_destroy_null_is_a_no_op),
        UT_TEST(test_destroy_unmaps_idle_regions),
        UT_TEST(test_references_outlive_destroy),
        UT_TEST(test_destroy_with_a_pending_region),
        UT_TEST(test_last_release_in_another_thread),
        UT_TEST(test_destroy_warns_about_held_regions),
    };
    return cmocka_run_group_tests(tests, ut_group_setup, NULL);
}
