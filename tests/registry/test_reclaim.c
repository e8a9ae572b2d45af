/* Background reclaim (shmreg_config.reclaim): under BACKGROUND a last
 * shmreg_release hands the region to the registry's "shmreg-reclaim"
 * thread; under INLINE it unmaps in the releasing thread. Who runs the
 * thread: started with the first registration, joined by destroy, or, when
 * references outlive destroy, ended by the last teardown it runs. */
#include <dirent.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "fixture.h"

#define OBJ 8192

/* Threads of this process named "shmreg-reclaim". */
static int reclaim_threads(void)
{
    DIR *d = opendir("/proc/self/task");
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[300], comm[64] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue; /* the thread ended meanwhile */
        if (fgets(comm, sizeof comm, f) && strncmp(comm, "shmreg-reclaim", 14) == 0)
            n++;
        fclose(f);
    }
    closedir(d);
    return n;
}

static int wait_reclaim_threads(int want)
{
    int n = reclaim_threads();
    for (int ms = 0; n != want && ms < 5000; ms++) {
        struct timespec one = {0, 1000000};
        nanosleep(&one, NULL);
        n = reclaim_threads();
    }
    return n;
}

static shmreg_registry *registry(struct ut *t, shmreg_reclaim mode)
{
    shmreg_config cfg;
    shmreg_config_init(&cfg);
    cfg.reclaim = mode;
    cfg.pin_policy = SHMREG_PIN_NEVER;
    return ut_registry_config(t, &cfg);
}

static void test_zero_is_background(void **state)
{
    shmreg_config cfg;
    shmreg_config_init(&cfg);
    assert_int_equal(cfg.reclaim, SHMREG_RECLAIM_BACKGROUND);
    assert_int_equal(SHMREG_RECLAIM_BACKGROUND, 0);
    assert_int_equal(cfg.cache_bytes, 0);
    cfg.reclaim = (shmreg_reclaim)2;
    shmreg_registry *reg = NULL;
    assert_fails(shmreg_registry_create(&cfg, &reg), SHMREG_ERR_INVALID_ARG, "invalid reclaim mode 2");
    assert_null(reg);
}

static void test_inline_unmaps_in_the_releasing_thread(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ, 31);
    shmreg_registry *reg = registry(t, SHMREG_RECLAIM_INLINE);
    shmreg_region *ref;
    shmreg_view v;
    assert_ok(shmreg_register_system(reg, "a", key, 0, OBJ, 0));
    assert_int_equal(reclaim_threads(), 0);
    assert_ok(shmreg_acquire(reg, "a", 0, OBJ, &ref, &v));
    assert_ok(shmreg_unregister(reg, "a", SHMREG_KIND_SYSTEM));
    shmreg_release(ref);
    assert_int_equal(tu_count_shm_maps(key), 0);
}

static void test_background_hands_off_and_destroy_joins(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ, 32);
    shmreg_registry *reg = registry(t, SHMREG_RECLAIM_BACKGROUND);
    assert_int_equal(reclaim_threads(), 0); /* started lazily */
    assert_ok(shmreg_register_system(reg, "a", key, 0, OBJ, 0));
    assert_int_equal(reclaim_threads(), 1);

    shmreg_region *ref;
    shmreg_view v;
    assert_ok(shmreg_acquire(reg, "a", 0, OBJ, &ref, &v));
    assert_ok(shmreg_unregister(reg, "a", SHMREG_KIND_SYSTEM));
    shmreg_release(ref);
    /* Unlisted at once; unmapped by the thread. */
    assert_int_equal(ut_status_count(reg, SHMREG_KIND_ANY), 0);
    assert_ok(shmreg_registry_trim(reg));
    shmreg_stats s;
    assert_ok(shmreg_registry_stats(reg, &s));
    assert_int_equal(s.reclaim_waiting_bytes, 0);
    assert_int_equal(s.mapped_bytes, 0);
    assert_int_equal(s.mapped_regions, 0);
    assert_int_equal(tu_count_shm_maps(key), 0);

    /* The room is back at once for a registration. */
    assert_ok(shmreg_register_system(reg, "a", key, 0, OBJ, 0));
    shmreg_registry_destroy(reg);
    t->reg = NULL;
    assert_int_equal(reclaim_threads(), 0);
    assert_int_equal(tu_count_shm_maps(key), 0);
}

/* Unregister, then register at the limit: the registration waits for the
 * reclaim thread instead of being refused. */
static void test_limits_count_until_reclaimed(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ, 33);
    shmreg_config cfg;
    shmreg_config_init(&cfg);
    cfg.max_mapped_bytes = OBJ;
    cfg.pin_policy = SHMREG_PIN_NEVER;
    ut_registry_config(t, &cfg);
    for (int i = 0; i < 200; i++) {
        shmreg_region *ref;
        shmreg_view v;
        assert_ok(shmreg_register_system(t->reg, "a", key, 0, OBJ, 0));
        assert_ok(shmreg_acquire(t->reg, "a", 0, OBJ, &ref, &v));
        assert_ok(shmreg_unregister(t->reg, "a", SHMREG_KIND_SYSTEM));
        shmreg_release(ref);
    }
}

/* References outlive destroy: the thread runs on, unmaps at the last
 * release, frees what is left of the registry and ends. */
static void test_the_last_release_after_destroy_ends_the_thread(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ, 34);
    shmreg_registry *reg = registry(t, SHMREG_RECLAIM_BACKGROUND);
    shmreg_region *ref;
    shmreg_view v;
    assert_ok(shmreg_register_system(reg, "a", key, 0, OBJ, 0));
    assert_ok(shmreg_acquire(reg, "a", 0, OBJ, &ref, &v));
    shmreg_registry_destroy(reg);
    t->reg = NULL;
    assert_int_equal(reclaim_threads(), 1);
    ut_assert_pattern(v.addr, OBJ, 34, 0);
    shmreg_release(ref);
    assert_int_equal(tu_wait_shm_maps(key, 0, 5000), 0);
    assert_int_equal(wait_reclaim_threads(0), 0);
}

static void *release_in_thread(void *ref)
{
    shmreg_release(ref);
    return NULL;
}

/* Many registries, each its own thread, released from other threads. */
static void test_each_registry_has_its_thread(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ, 35);
    shmreg_registry *regs[4];
    shmreg_region *refs[4];
    shmreg_view v;
    shmreg_config cfg;
    shmreg_config_init(&cfg);
    for (int i = 0; i < 4; i++) {
        assert_ok(shmreg_registry_create(&cfg, &regs[i]));
        assert_ok(shmreg_register_system(regs[i], "a", key, 0, OBJ, 0));
        assert_ok(shmreg_acquire(regs[i], "a", 0, OBJ, &refs[i], &v));
    }
    assert_int_equal(reclaim_threads(), 4);
    for (int i = 0; i < 4; i++) {
        pthread_t th;
        if (i % 2)
            shmreg_registry_destroy(regs[i]);
        else
            assert_ok(shmreg_unregister(regs[i], "a", SHMREG_KIND_ANY));
        assert_int_equal(pthread_create(&th, NULL, release_in_thread, refs[i]), 0);
        assert_int_equal(pthread_join(th, NULL), 0);
    }
    for (int i = 0; i < 4; i += 2)
        shmreg_registry_destroy(regs[i]);
    assert_int_equal(tu_wait_shm_maps(key, 0, 5000), 0);
    assert_int_equal(wait_reclaim_threads(0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        UT_TEST(test_zero_is_background),
        UT_TEST(test_inline_unmaps_in_the_releasing_thread),
        UT_TEST(test_background_hands_off_and_destroy_joins),
        UT_TEST(test_limits_count_until_reclaimed),
        UT_TEST(test_the_last_release_after_destroy_ends_the_thread),
        UT_TEST(test_each_registry_has_its_thread),
    };
    return cmocka_run_group_tests(tests, ut_group_setup, NULL);
}
