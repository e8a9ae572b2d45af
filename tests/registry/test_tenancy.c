/* Tenancy and limits: what one client can no longer do to another, and how
 * much memory one client can make the server map. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fixture.h"

#define OBJ 8192

/* ---- owners */

static void test_owner_allow_list_refuses_other_owners(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ, 1);
    uid_t other = getuid() + 4242;
    shmreg_config cfg;
    shmreg_config_init(&cfg);
    cfg.allowed_owner_uids = &other;
    cfg.allowed_owner_uid_count = 1;
    shmreg_registry *reg = ut_registry_config(t, &cfg);

    assert_fails(shmreg_register_system(reg, "a", key, 0, OBJ, 0), SHMREG_ERR_INVALID_ARG,
                 ut_fmt("cannot register shared memory region 'a': shm key '%s' is owned by uid %u, "
                        "which this registry does not accept",
                        key, (unsigned)getuid()));
    assert_int_equal(ut_status_count(reg, SHMREG_KIND_ANY), 0);
    assert_int_equal(tu_wait_shm_maps(key, 0, 5000), 0);
}

static void test_owner_allow_list_accepts_listed_owners(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ, 2);
    uid_t uids[2] = {getuid() + 1, getuid()};
    shmreg_config cfg;
    shmreg_config_init(&cfg);
    cfg.allowed_owner_uids = uids;
    cfg.allowed_owner_uid_count = 2;
    shmreg_registry *reg = ut_registry_config(t, &cfg);
    uids[1] = getuid() + 2; /* the registry copied the list */

    assert_ok(shmreg_register_system(reg, "a", key, 0, OBJ, 0));
    assert_ok(shmreg_unregister(reg, "a", SHMREG_KIND_SYSTEM));
}

static void test_owner_list_without_array_is_refused(void **state)
{
    (void)state;
    shmreg_config cfg;
    shmreg_config_init(&cfg);
    cfg.allowed_owner_uid_count = 1;
    shmreg_registry *reg = (shmreg_registry *)0x1;
    assert_fails(shmreg_registry_create(&cfg, &reg), SHMREG_ERR_INVALID_ARG,
                 "allowed_owner_uids is NULL but its count is 1");
    assert_null(reg);
}

/* ---- limits */

static void test_region_limit_counts_pending_regions(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ, 3);
    shmreg_config cfg;
    shmreg_config_init(&cfg);
    cfg.max_regions = 2;
    shmreg_registry *reg = ut_registry_config(t, &cfg);

    assert_ok(shmreg_register_system(reg, "a", key, 0, 100, 0));
    assert_ok(shmreg_register_system(reg, "b", key, 100, 100, 0));
    assert_fails(shmreg_register_system(reg, "c", key, 200, 100, 0), SHMREG_ERR_NO_MEMORY,
                 "cannot register shared memory region 'c': this registry holds its limit of 2 regions");

    /* A DEFER-pending region is still mapped, so it still counts. */
    shmreg_region *ref;
    shmreg_view view;
    assert_ok(shmreg_acquire(reg, "a", 0, 10, &ref, &view));
    assert_ok(shmreg_unregister(reg, "a", SHMREG_KIND_SYSTEM));
    assert_fails_code(shmreg_register_system(reg, "c", key, 200, 100, 0), SHMREG_ERR_NO_MEMORY);
    shmreg_release(ref);
    assert_ok(shmreg_register_system(reg, "c", key, 200, 100, 0));
    assert_int_equal(ut_status_count(reg, SHMREG_KIND_ANY), 2);
}

static void test_mapped_bytes_limit(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ, 4);
    shmreg_config cfg;
    shmreg_config_init(&cfg);
    cfg.max_mapped_bytes = 10000;
    shmreg_registry *reg = ut_registry_config(t, &cfg);

    assert_ok(shmreg_register_system(reg, "a", key, 0, 6000, 0));
    assert_fails(shmreg_register_system(reg, "b", key, 0, 6000, 0), SHMREG_ERR_NO_MEMORY,
                 "cannot register shared memory region 'b': 6000 more mapped bytes would pass this "
                 "registry's limit of 10000 (6000 in use)");
    assert_int_equal(tu_wait_shm_maps(key, 1, 5000), 1);
    assert_ok(shmreg_register_system(reg, "b", key, 0, 4000, 0));
    /* A window past the object is refused as such, before any limit is
     * looked at (so a limit never changes that answer), and a size no
     * object has never wraps an addition into a pass. */
    assert_fails_code(shmreg_register_system(reg, "c", key, 0, SIZE_MAX, 0), SHMREG_ERR_OUT_OF_BOUNDS);
    assert_fails_code(shmreg_register_system(reg, "c", key, 0, 4 * OBJ, 0), SHMREG_ERR_OUT_OF_BOUNDS);
    assert_ok(shmreg_unregister_all(reg, SHMREG_KIND_ANY));
    assert_ok(shmreg_register_system(reg, "c", key, 0, 8000, 0));
}

static void test_pinned_bytes_limit_is_checked_before_pinning(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ, 5);
    shmreg_config cfg;
    shmreg_config_init(&cfg);
    cfg.max_pinned_bytes = 4096;
    shmreg_registry *reg = ut_registry_config(t, &cfg);

    /* Refused by the limit before any mapping or pinning, CUDA or not. */
    assert_fails(shmreg_register_system(reg, "a", key, 0, 5000, SHMREG_PIN), SHMREG_ERR_NO_MEMORY,
                 "cannot register shared memory region 'a': 5000 more pinned bytes would pass this "
                 "registry's limit of 4096 (0 in use)");
    assert_int_equal(tu_wait_shm_maps(key, 0, 5000), 0);
    /* Unpinned regions do not count against it. */
    assert_ok(shmreg_register_system(reg, "b", key, 0, 5000, SHMREG_NO_PIN));
}

struct racer {
    shmreg_registry *reg;
    const char *key;
    int id;
    atomic_int *ok;
};

static void *register_many(void *arg)
{
    struct racer *r = arg;
    for (int i = 0; i < 50; i++) {
        char name[32];
        snprintf(name, sizeof name, "r%d-%d", r->id, i);
        if (shmreg_register_system(r->reg, name, r->key, 0, 64, 0) == SHMREG_OK)
            atomic_fetch_add(r->ok, 1);
    }
    return NULL;
}

/* Concurrent registrations reserve under the lock before mapping, so they
 * can never together pass the limit. */
static void test_concurrent_registrations_respect_the_limit(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ, 6);
    shmreg_config cfg;
    shmreg_config_init(&cfg);
    cfg.max_regions = 37;
    shmreg_registry *reg = ut_registry_config(t, &cfg);
    atomic_int ok = 0;
    struct racer racers[4];
    pthread_t threads[4];
    for (int i = 0; i < 4; i++) {
        racers[i] = (struct racer){reg, key, i, &ok};
        assert_int_equal(pthread_create(&threads[i], NULL, register_many, &racers[i]), 0);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(threads[i], NULL);
    assert_int_equal(atomic_load(&ok), 37);
    assert_int_equal(ut_status_count(reg, SHMREG_KIND_ANY), 37);
    assert_int_equal(tu_wait_shm_maps(key, 37, 5000), 37);
}

/* ---- owner tags */

static void register_tagged(shmreg_registry *reg, const char *name, const char *key, const char *tag)
{
    assert_ok(tu_register_system_tagged(reg, name, key, 0, 64, 0, tag));
}

static void test_tags_scope_unregister_all_and_status(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ, 7);
    register_tagged(t->reg, "a1", key, "tenant-a");
    register_tagged(t->reg, "a2", key, "tenant-a");
    register_tagged(t->reg, "b1", key, "tenant-b");
    register_tagged(t->reg, "untagged", key, NULL);

    shmreg_region_status *st;
    size_t n;
    assert_ok(tu_status_tagged(t->reg, NULL, SHMREG_KIND_ANY, "tenant-b", &st, &n));
    assert_int_equal(n, 1);
    assert_string_equal(st[0].name, "b1");
    assert_string_equal(st[0].tag, "tenant-b");
    shmreg_status_free(st, n);

    assert_ok(tu_unregister_tagged(t->reg, NULL, SHMREG_KIND_SYSTEM, "tenant-a"));
    assert_int_equal(ut_status_count(t->reg, SHMREG_KIND_ANY), 2);
    shmreg_region_status *u = ut_status_of(t->reg, "untagged");
    assert_null(u->tag);
    shmreg_status_free(u, 1);
    assert_int_equal(tu_wait_shm_maps(key, 2, 5000), 2);
}

static void test_another_tenants_region_is_not_found(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ, 8);
    register_tagged(t->reg, "mine", key, "tenant-a");

    assert_fails(tu_unregister_tagged(t->reg, "mine", SHMREG_KIND_SYSTEM, "tenant-b"),
                 SHMREG_ERR_NOT_FOUND, "Unable to find system shared memory region: 'mine'");
    shmreg_region_status *st;
    size_t n;
    assert_fails(tu_status_tagged(t->reg, "mine", SHMREG_KIND_ANY, "tenant-b", &st, &n),
                 SHMREG_ERR_NOT_FOUND, "Unable to find shared memory region: 'mine'");
    assert_int_equal(ut_status_count(t->reg, SHMREG_KIND_ANY), 1);
    assert_ok(tu_unregister_tagged(t->reg, "mine", SHMREG_KIND_SYSTEM, "tenant-a"));
    assert_int_equal(ut_status_count(t->reg, SHMREG_KIND_ANY), 0);
}

static void test_bad_tags_are_refused(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ, 9);
    assert_fails_prefix(tu_register_system_tagged(t->reg, "x", key, 0, 64, 0, ""),
                        SHMREG_ERR_INVALID_ARG, "invalid owner tag: ");
    assert_fails_prefix(tu_register_system_tagged(t->reg, "x", key, 0, 64, 0, "a\nb"),
                        SHMREG_ERR_INVALID_ARG, "invalid owner tag: ");
    assert_fails_prefix(tu_unregister_tagged(t->reg, NULL, SHMREG_KIND_ANY, ""),
                        SHMREG_ERR_INVALID_ARG, "invalid owner tag: ");
    assert_int_equal(ut_status_count(t->reg, SHMREG_KIND_ANY), 0);
    assert_int_equal(tu_wait_shm_maps(key, 0, 5000), 0);
}

static void test_names_with_control_characters_are_refused(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ, 10);
    assert_fails(shmreg_register_system(t->reg, "evil\r\nname", key, 0, 64, 0), SHMREG_ERR_INVALID_ARG,
                 "invalid region name: it contains a control character");
    assert_fails(shmreg_register_system(t->reg, "del\x7f", key, 0, 64, 0), SHMREG_ERR_INVALID_ARG,
                 "invalid region name: it contains a control character");
    assert_int_equal(tu_wait_shm_maps(key, 0, 5000), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        UT_TEST(test_owner_allow_list_refuses_other_owners),
        UT_TEST(test_owner_allow_list_accepts_listed_owners),
        UT_TEST(test_owner_list_without_array_is_refused),
        UT_TEST(test_region_limit_counts_pending_regions),
        UT_TEST(test_mapped_bytes_limit),
        UT_TEST(test_pinned_bytes_limit_is_checked_before_pinning),
        UT_TEST(test_concurrent_registrations_respect_the_limit),
        UT_TEST(test_tags_scope_unregister_all_and_status),
        UT_TEST(test_another_tenants_region_is_not_found),
        UT_TEST(test_bad_tags_are_refused),
        UT_TEST(test_names_with_control_characters_are_refused),
    };
    return cmocka_run_group_tests(tests, ut_group_setup, NULL);
}
