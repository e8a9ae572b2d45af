/* shmreg_config_init defaults and shmreg_registry_create's checks of a config. */
#include "fixture.h"

#include <string.h>

static void test_config_init_sets_every_default(void **state)
{
    shmreg_config cfg;
    memset(&cfg, 0xa5, sizeof cfg);
    shmreg_config_init(&cfg);
    assert_int_equal(cfg.busy_policy, SHMREG_POLICY_DEFER);
    assert_null(cfg.reserved_key_prefixes);
    assert_int_equal(cfg.pin_policy, SHMREG_PIN_AUTO);
    assert_null(cfg.log_fn);
    assert_null(cfg.log_user);
    assert_null(cfg.allowed_owner_uids);
    assert_int_equal(cfg.allowed_owner_uid_count, 0);
    assert_int_equal(cfg.max_regions, 0);
    assert_int_equal(cfg.max_mapped_bytes, 0);
    assert_int_equal(cfg.max_pinned_bytes, 0);
    assert_int_equal(cfg.accept_unsealed_fds, 0);
    for (size_t i = 0; i < sizeof cfg.reserved_ / sizeof cfg.reserved_[0]; i++)
        assert_null(cfg.reserved_[i]);
}

static void test_create_with_null_config_uses_defer(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, 4096, 1);
    shmreg_region *ref = NULL;
    shmreg_view view;

    /* The fixture's registry was created with cfg NULL: DEFER keeps a busy
     * region listed and pending. */
    assert_ok(shmreg_register_system(t->reg, "r", key, 0, 4096, 0));
    assert_ok(shmreg_acquire(t->reg, "r", 0, 1, &ref, &view));
    assert_ok(shmreg_unregister(t->reg, "r", SHMREG_KIND_SYSTEM));
    shmreg_region_status *st = ut_status_of(t->reg, "r");
    assert_int_equal(st[0].pending_unregister, 1);
    shmreg_status_free(st, 1);
    shmreg_release(ref);
    assert_int_equal(ut_status_count(t->reg, SHMREG_KIND_ANY), 0);
}

static void test_create_rejects_null_out(void **state)
{
    shmreg_config cfg;
    shmreg_config_init(&cfg);
    assert_fails_code(shmreg_registry_create(&cfg, NULL), SHMREG_ERR_INVALID_ARG);
    assert_fails_code(shmreg_registry_create(NULL, NULL), SHMREG_ERR_INVALID_ARG);
}

static void assert_config_refused(const shmreg_config *cfg)
{
    shmreg_registry *reg = NULL;
    assert_fails_code(shmreg_registry_create(cfg, &reg), SHMREG_ERR_INVALID_ARG);
    assert_null(reg);
}

static void test_create_rejects_bad_policies(void **state)
{
    shmreg_config cfg;

    shmreg_config_init(&cfg);
    cfg.busy_policy = (shmreg_policy)3;
    assert_config_refused(&cfg);
    cfg.busy_policy = (shmreg_policy)-1;
    assert_config_refused(&cfg);

    shmreg_config_init(&cfg);
    cfg.pin_policy = (shmreg_pin_policy)3;
    assert_config_refused(&cfg);
}

static void test_create_rejects_empty_reserved_prefix(void **state)
{
    static const char *const prefixes[] = {"triton_", "", NULL};
    static const char *const only_empty[] = {"", NULL};
    shmreg_config cfg;

    shmreg_config_init(&cfg);
    cfg.reserved_key_prefixes = prefixes;
    assert_config_refused(&cfg);
    cfg.reserved_key_prefixes = only_empty;
    assert_config_refused(&cfg);
}

/* The deny-list is copied: changing the caller's array afterwards changes
 * nothing in the registry. */
static void test_reserved_prefixes_are_copied(void **state)
{
    struct ut *t = *state;
    char prefix[16] = "nv_";
    const char *prefixes[] = {prefix, NULL};
    shmreg_config cfg;
    shmreg_registry *reg = NULL;

    shmreg_config_init(&cfg);
    cfg.reserved_key_prefixes = prefixes;
    assert_ok(shmreg_registry_create(&cfg, &reg));
    strcpy(prefix, "zz_");
    prefixes[0] = NULL;

    assert_fails(shmreg_register_system(reg, "r", "/nv_model", 0, 1, 0), SHMREG_ERR_INVALID_ARG,
                 "cannot register shared memory region 'r' with key '/nv_model' as the key "
                 "contains the reserved prefix 'nv_'");
    const char *key = ut_object(t, 4096, 2);
    assert_ok(shmreg_register_system(reg, "r", key, 0, 4096, 0));
    shmreg_registry_destroy(reg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_init_sets_every_default),
        UT_TEST(test_create_with_null_config_uses_defer),
        UT_TEST(test_create_rejects_null_out),
        UT_TEST(test_create_rejects_bad_policies),
        UT_TEST(test_create_rejects_empty_reserved_prefix),
        UT_TEST(test_reserved_prefixes_are_copied),
    };
    return cmocka_run_group_tests(tests, ut_group_setup, NULL);
}
