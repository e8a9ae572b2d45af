/* Quotas per owner tag (shmreg_config.max_*_per_tag,
 * shmreg_tag_quota_set, shmreg_tag_stats_get). One tenant (tag) filling its
 * quota of regions, mapped bytes or pinned bytes leaves every other
 * tenant's registrations working, and its refusal quotes its own usage
 * only. Also run under TSan (label "stress"): tags registering the same
 * names concurrently, against their quotas and against untagged lookups. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "fixture.h"

#define OBJ 65536

static shmreg_registry *quota_registry(struct ut *t, size_t regions, size_t mapped, size_t pinned)
{
    shmreg_config cfg;
    shmreg_config_init(&cfg);
    cfg.max_regions_per_tag = regions;
    cfg.max_mapped_bytes_per_tag = mapped;
    cfg.max_pinned_bytes_per_tag = pinned;
    return ut_registry_config(t, &cfg);
}

static shmreg_tag_stats stats_of(shmreg_registry *reg, const char *tag)
{
    shmreg_tag_stats s;
    assert_ok(shmreg_tag_stats_get(reg, tag, &s));
    return s;
}

static void test_regions_quota_leaves_other_tags_working(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ, 1);
    shmreg_registry *reg = quota_registry(t, 3, 0, 0);
    char name[16];
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "a%d", i);
        assert_ok(tu_register_system_tagged(reg, name, key, 0, 64, 0, "alice"));
    }
    assert_fails(tu_register_system_tagged(reg, "a3", key, 0, 64, 0, "alice"), SHMREG_ERR_NO_MEMORY,
                 "cannot register shared memory region 'a3': this owner tag holds its limit of 3 regions");
    /* bob, and the server's own untagged regions, are not affected. */
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "a%d", i); /* even alice's names: another namespace */
        assert_ok(tu_register_system_tagged(reg, name, key, 0, 64, 0, "bob"));
    }
    for (int i = 0; i < 5; i++) {
        snprintf(name, sizeof name, "server%d", i);
        assert_ok(shmreg_register_system(reg, name, key, 0, 64, 0));
    }
    shmreg_tag_stats a = stats_of(reg, "alice");
    assert_int_equal(a.regions, 3);
    assert_int_equal(a.mapped_bytes, 3 * 64);
    assert_int_equal(a.max_regions, 3);
    assert_int_equal(a.max_mapped_bytes, 0);

    /* A pending region still counts; its last release gives its place back. */
    shmreg_region *ref = NULL;
    shmreg_view view;
    shmreg_filter f = tu_filter("a0", SHMREG_KIND_ANY, "alice");
    assert_ok(shmreg_acquire_matching(reg, &f, 0, 1, &ref, &view));
    assert_ok(tu_unregister_tagged(reg, "a0", SHMREG_KIND_ANY, "alice"));
    assert_fails_code(tu_register_system_tagged(reg, "a3", key, 0, 64, 0, "alice"), SHMREG_ERR_NO_MEMORY);
    shmreg_release(ref);
    assert_ok(tu_register_system_tagged(reg, "a3", key, 0, 64, 0, "alice"));
}

/* The refusal quotes alice's own usage and limit, not bob's nor the total. */
static void test_mapped_quota_quotes_own_usage_only(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ, 2);
    shmreg_registry *reg = quota_registry(t, 0, 10000, 0);
    assert_ok(tu_register_system_tagged(reg, "b", key, 0, 7777, 0, "bob"));
    assert_ok(tu_register_system_tagged(reg, "a", key, 0, 6000, 0, "alice"));
    assert_fails(tu_register_system_tagged(reg, "a2", key, 0, 5000, 0, "alice"), SHMREG_ERR_NO_MEMORY,
                 "cannot register shared memory region 'a2': 5000 more mapped bytes would pass the limit of "
                 "10000 for this owner tag (6000 in use by it)");
    assert_null(strstr(shmreg_last_error(), "7777"));
    assert_null(strstr(shmreg_last_error(), "13777"));
    assert_ok(tu_register_system_tagged(reg, "b2", key, 0, 2000, 0, "bob"));
    assert_ok(tu_register_system_tagged(reg, "a2", key, 0, 4000, 0, "alice"));
    assert_int_equal(stats_of(reg, "alice").mapped_bytes, 10000);
    assert_int_equal(stats_of(reg, "bob").mapped_bytes, 9777);
    /* Unregistered and unmapped: the bytes come back to the tag. */
    assert_ok(tu_unregister_tagged(reg, NULL, SHMREG_KIND_ANY, "alice"));
    assert_ok(shmreg_registry_trim(reg));
    assert_int_equal(stats_of(reg, "alice").mapped_bytes, 0);
    assert_int_equal(stats_of(reg, "alice").regions, 0);
    assert_ok(tu_register_system_tagged(reg, "a", key, 0, 10000, 0, "alice"));
}

/* A demanded pin past the tag's pinned quota is refused before anything is
 * mapped or pinned, CUDA or not; another tag's demanded pin still passes
 * the quota check (it may then need CUDA to pin). */
static void test_pinned_quota_is_checked_before_pinning(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ, 3);
    shmreg_registry *reg = quota_registry(t, 0, 0, 4096);
    assert_fails(tu_register_system_tagged(reg, "a", key, 0, 5000, SHMREG_PIN, "alice"), SHMREG_ERR_NO_MEMORY,
                 "cannot register shared memory region 'a': 5000 more pinned bytes would pass the limit of 4096 "
                 "for this owner tag (0 in use by it)");
    assert_int_equal(tu_wait_shm_maps(key, 0, 5000), 0);
    /* Unpinned regions do not count against it. */
    assert_ok(tu_register_system_tagged(reg, "b", key, 0, 5000, SHMREG_NO_PIN, "alice"));
    if (!ut_cuda_usable())
        return;
    /* With CUDA: alice pins up to her quota, then AUTO registers unpinned
     * while bob's AUTO registrations still pin. */
    assert_ok(tu_register_system_tagged(reg, "p", key, 0, 4096, SHMREG_PIN, "alice"));
    assert_ok(tu_register_system_tagged(reg, "q", key, 8192, 4096, 0, "alice"));
    shmreg_region_status *q = ut_status_of(reg, "q");
    assert_int_equal(q->pinned, 0);
    shmreg_status_free(q, 1);
    assert_ok(tu_register_system_tagged(reg, "q", key, 8192, 4096, 0, "bob"));
    shmreg_region_status *st = NULL;
    size_t n = 0;
    assert_ok(tu_status_tagged(reg, "q", SHMREG_KIND_ANY, "bob", &st, &n));
    assert_int_equal(st[0].pinned, 1);
    shmreg_status_free(st, n);
    assert_int_equal(stats_of(reg, "alice").pinned_bytes, 4096);
}

/* A tag's own limits replace the default share; NULL gives it back. */
static void test_quota_set_per_tag(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ, 4);
    shmreg_registry *reg = quota_registry(t, 1, 0, 0);
    shmreg_quota q;
    shmreg_quota_init(&q);
    q.max_regions = 2;
    q.max_mapped_bytes = 1000;
    assert_ok(shmreg_tag_quota_set(reg, "big", &q));
    shmreg_tag_stats s = stats_of(reg, "big");
    assert_int_equal(s.max_regions, 2);
    assert_int_equal(s.max_mapped_bytes, 1000);
    assert_int_equal(s.regions, 0);
    assert_ok(tu_register_system_tagged(reg, "x", key, 0, 500, 0, "big"));
    assert_ok(tu_register_system_tagged(reg, "y", key, 0, 500, 0, "big"));
    assert_fails_code(tu_register_system_tagged(reg, "z", key, 0, 1, 0, "big"), SHMREG_ERR_NO_MEMORY);
    assert_ok(tu_register_system_tagged(reg, "x", key, 0, 500, 0, "small"));
    assert_fails_code(tu_register_system_tagged(reg, "y", key, 0, 500, 0, "small"), SHMREG_ERR_NO_MEMORY);
    /* Back to the default share: big holds 2, past its new limit of 1; what
     * it holds stays, the next registration is refused. */
    assert_ok(shmreg_tag_quota_set(reg, "big", NULL));
    assert_int_equal(stats_of(reg, "big").max_regions, 1);
    assert_int_equal(stats_of(reg, "big").regions, 2);
    assert_ok(tu_unregister_tagged(reg, "x", SHMREG_KIND_ANY, "big"));
    assert_fails_code(tu_register_system_tagged(reg, "x", key, 0, 1, 0, "big"), SHMREG_ERR_NO_MEMORY);

    assert_fails_code(shmreg_tag_quota_set(NULL, "big", &q), SHMREG_ERR_INVALID_ARG);
    assert_fails_code(shmreg_tag_quota_set(reg, NULL, &q), SHMREG_ERR_INVALID_ARG);
    assert_fails_code(shmreg_tag_quota_set(reg, "bad\ntag", &q), SHMREG_ERR_INVALID_ARG);
    assert_fails_code(shmreg_tag_stats_get(reg, "", &s), SHMREG_ERR_INVALID_ARG);
    assert_fails_code(shmreg_tag_stats_get(reg, "big", NULL), SHMREG_ERR_INVALID_ARG);
}

/* A tagged registration refused by the registry's global limit hears the
 * limit, not what the others hold; an untagged one hears it all, as in 1.1. */
static void test_global_limit_message_to_a_tag(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ, 5);
    shmreg_config cfg;
    shmreg_config_init(&cfg);
    cfg.max_mapped_bytes = 10000;
    shmreg_registry *reg = ut_registry_config(t, &cfg);
    assert_ok(tu_register_system_tagged(reg, "b", key, 0, 7777, 0, "bob"));
    assert_fails(tu_register_system_tagged(reg, "a", key, 0, 5000, 0, "alice"), SHMREG_ERR_NO_MEMORY,
                 "cannot register shared memory region 'a': 5000 more mapped bytes would pass this registry's "
                 "limit of 10000 for all owners together");
    assert_fails(shmreg_register_system(reg, "a", key, 0, 5000, 0), SHMREG_ERR_NO_MEMORY,
                 "cannot register shared memory region 'a': 5000 more mapped bytes would pass this registry's "
                 "limit of 10000 (7777 in use)");
}

/* ---- concurrency (TSan) */

struct racer {
    shmreg_registry *reg;
    const char *key;
    const char *tag; /* NULL: an untagged reader */
    atomic_int *ok;
};

/* Each tag registers 40 names (the same names for every tag), against a
 * quota of 25 regions, while others do the same. */
static void *register_names(void *arg)
{
    struct racer *r = arg;
    for (int i = 0; i < 40; i++) {
        char name[16];
        snprintf(name, sizeof name, "n%d", i);
        if (tu_register_system_tagged(r->reg, name, r->key, 0, 64, 0, r->tag) == SHMREG_OK)
            atomic_fetch_add(r->ok, 1);
    }
    return NULL;
}

/* Acquires by name, tagged and untagged, while the names are registered. */
static void *acquire_names(void *arg)
{
    struct racer *r = arg;
    for (int round = 0; round < 20; round++) {
        for (int i = 0; i < 40; i++) {
            char name[16];
            snprintf(name, sizeof name, "n%d", i);
            shmreg_region *ref = NULL;
            shmreg_view view;
            shmreg_filter f = tu_filter(name, SHMREG_KIND_ANY, r->tag);
            /* A read through the view: TSan and ASan see it against the unmap. */
            if (shmreg_acquire_matching(r->reg, &f, 0, 64, &ref, &view) == SHMREG_OK) {
                (void)((volatile const char *)view.addr)[63];
                shmreg_release(ref);
            }
        }
    }
    return NULL;
}

static void test_tags_race_for_names_and_quotas(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ, 6);
    shmreg_registry *reg = quota_registry(t, 25, 0, 0);
    const char *tags[] = {"t0", "t1", "t2", "t3"};
    atomic_int ok[4] = {0, 0, 0, 0}, unused = 0;
    struct racer racers[6];
    pthread_t threads[6];
    for (int i = 0; i < 4; i++)
        racers[i] = (struct racer){reg, key, tags[i], &ok[i]};
    racers[4] = (struct racer){reg, key, NULL, &unused};
    racers[5] = (struct racer){reg, key, "t0", &unused};
    for (int i = 0; i < 6; i++)
        assert_int_equal(pthread_create(&threads[i], NULL, i < 4 ? register_names : acquire_names, &racers[i]), 0);
    for (int i = 0; i < 6; i++)
        pthread_join(threads[i], NULL);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(atomic_load(&ok[i]), 25);
        assert_int_equal(stats_of(reg, tags[i]).regions, 25);
    }
    assert_int_equal(ut_status_count(reg, SHMREG_KIND_ANY), 100);
    assert_ok(shmreg_unregister_all(reg, SHMREG_KIND_ANY));
    assert_ok(shmreg_registry_trim(reg));
    for (int i = 0; i < 4; i++)
        assert_int_equal(stats_of(reg, tags[i]).regions, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        UT_TEST(test_regions_quota_leaves_other_tags_working),
        UT_TEST(test_mapped_quota_quotes_own_usage_only),
        UT_TEST(test_pinned_quota_is_checked_before_pinning),
        UT_TEST(test_quota_set_per_tag),
        UT_TEST(test_global_limit_message_to_a_tag),
        UT_TEST(test_tags_race_for_names_and_quotas),
    };
    return cmocka_run_group_tests_name("tag_quota", tests, ut_group_setup, NULL);
}
