/* A double shmreg_release used to drop the registry's own
 * reference and unmap the region under everyone else. Now a release that
 * would drop the registry's reference while the region is still registered
 * is detected, logged at ERROR and ignored; the region stays mapped. */
#include <stdio.h>
#include <string.h>

#include "fixture.h"

#define OBJ 8192

struct log_capture {
    int errors;
    char last[512];
};

static void capture(void *user, shmreg_log_level level, const char *msg)
{
    struct log_capture *log = user;
    if (level == SHMREG_LOG_ERROR) {
        log->errors++;
        snprintf(log->last, sizeof log->last, "%s", msg);
    }
}

static shmreg_registry *logging_registry(struct ut *t, struct log_capture *log)
{
    shmreg_config cfg;
    shmreg_config_init(&cfg);
    cfg.log_fn = capture;
    cfg.log_user = log;
    return ut_registry_config(t, &cfg);
}

static const char *const past_zero_msg =
    "shmreg_release of shared memory region 'r' past zero (its last reference is the registry's own): a "
    "reference released twice, or never acquired; ignored, the region stays mapped";

static void assert_still_usable(shmreg_registry *reg, const char *key)
{
    shmreg_region *ref = NULL;
    shmreg_view view;
    assert_ok(shmreg_acquire(reg, "r", 0, OBJ, &ref, &view));
    ut_assert_pattern(view.addr, OBJ, 1, 0);
    shmreg_release(ref);
    assert_int_equal(tu_count_shm_maps(key), 1);
    shmreg_region_status *st = ut_status_of(reg, "r");
    assert_int_equal(st->references, 0);
    assert_int_equal(st->pending_unregister, 0);
    shmreg_status_free(st, 1);
}

static void test_double_release_keeps_the_region(void **state)
{
    struct ut *t = *state;
    struct log_capture log = {0};
    shmreg_registry *reg = logging_registry(t, &log);
    const char *key = ut_object(t, OBJ, 1);
    assert_ok(shmreg_register_system(reg, "r", key, 0, OBJ, 0));
    shmreg_region *ref = NULL;
    shmreg_view view;
    assert_ok(shmreg_acquire(reg, "r", 0, OBJ, &ref, &view));
    shmreg_release(ref);
    assert_int_equal(log.errors, 0);
    shmreg_release(ref); /* the bug: once too often */
    assert_int_equal(log.errors, 1);
    assert_string_equal(log.last, past_zero_msg);
    assert_still_usable(reg, key);
    shmreg_release(ref); /* and again: still caught */
    assert_int_equal(log.errors, 2);
    assert_still_usable(reg, key);
    /* The registry's reference is intact: unregister unmaps, once. */
    assert_ok(shmreg_unregister(reg, "r", SHMREG_KIND_ANY));
    assert_int_equal(tu_count_shm_maps(key), 0);
    assert_int_equal(log.errors, 2);
}

/* A release of a reference another holder has cannot be told from a right
 * one; the damage surfaces at the innocent holder's release, which is then
 * the one caught, and the mapping never goes while the registry holds it. */
static void test_release_of_anothers_reference(void **state)
{
    struct ut *t = *state;
    struct log_capture log = {0};
    shmreg_registry *reg = logging_registry(t, &log);
    const char *key = ut_object(t, OBJ, 1);
    assert_ok(shmreg_register_system(reg, "r", key, 0, OBJ, 0));
    shmreg_region *mine = NULL, *theirs = NULL;
    shmreg_view view;
    assert_ok(shmreg_acquire(reg, "r", 0, OBJ, &mine, &view));
    assert_ok(shmreg_acquire(reg, "r", 0, OBJ, &theirs, &view));
    shmreg_release(mine);
    shmreg_release(mine); /* takes "theirs" in effect: not detectable */
    assert_int_equal(log.errors, 0);
    ut_assert_pattern(view.addr, OBJ, 1, 0); /* still mapped for "theirs" */
    shmreg_release(theirs);
    assert_int_equal(log.errors, 1);
    assert_string_equal(log.last, past_zero_msg);
    assert_still_usable(reg, key);
}

/* The right last releases are not taken for double ones: after DEFER and
 * DETACH unregisters, and at destroy, whichever thread unmaps (the reclaim
 * thread under BACKGROUND: the releasing thread only reads, without a
 * lock, that the registry gave up its reference). */
static void test_right_last_releases_are_not_flagged(void **state)
{
    struct ut *t = *state;
    struct log_capture log = {0};
    const char *key = ut_object(t, OBJ, 1);
    for (int mode = 0; mode < 4; mode++) {
        shmreg_config cfg;
        shmreg_config_init(&cfg);
        cfg.log_fn = capture;
        cfg.log_user = &log;
        cfg.busy_policy = mode % 2 ? SHMREG_POLICY_DETACH : SHMREG_POLICY_DEFER;
        cfg.reclaim = mode / 2 ? SHMREG_RECLAIM_INLINE : SHMREG_RECLAIM_BACKGROUND;
        shmreg_registry *reg = NULL;
        assert_ok(shmreg_registry_create(&cfg, &reg));
        assert_ok(shmreg_register_system(reg, "r", key, 0, OBJ, 0));
        shmreg_region *ref = NULL;
        shmreg_view view;
        assert_ok(shmreg_acquire(reg, "r", 0, OBJ, &ref, &view));
        assert_ok(shmreg_unregister(reg, "r", SHMREG_KIND_ANY));
        shmreg_release(ref); /* the last: unmaps, or hands the unmapping over */
        assert_ok(shmreg_registry_trim(reg)); /* waits for the reclaim thread */
        assert_int_equal(tu_count_shm_maps(key), 0);
        assert_ok(shmreg_register_system(reg, "r", key, 0, OBJ, 0));
        assert_ok(shmreg_acquire(reg, "r", 0, OBJ, &ref, &view));
        shmreg_registry_destroy(reg);
        shmreg_release(ref); /* after destroy */
        assert_int_equal(tu_wait_shm_maps(key, 0, 5000), 0);
    }
    assert_int_equal(log.errors, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        UT_TEST(test_double_release_keeps_the_region),
        UT_TEST(test_release_of_anothers_reference),
        UT_TEST(test_right_last_releases_are_not_flagged),
    };
    return cmocka_run_group_tests_name("release_past_zero", tests, ut_group_setup, NULL);
}
