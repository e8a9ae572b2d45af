/* The 1.0 idiom: shmreg_registration + shmreg_register, shmreg_filter +
 * the _matching verbs, their defaults, and what a view says about access. */
#include "fixture.h"

#include <string.h>

#define OBJ_SIZE 4096

static void test_init_functions_fill_the_defaults(void **state)
{
    shmreg_registration r;
    memset(&r, 0x5a, sizeof r);
    shmreg_registration_init(&r);
    assert_int_equal(r.source, SHMREG_SOURCE_SHM);
    assert_null(r.name);
    assert_null(r.tag);
    assert_null(r.key);
    assert_int_equal(r.byte_size, 0);
    assert_int_equal(r.offset, 0);
    assert_int_equal(r.flags, 0);
    assert_int_equal(r.device_id, 0);
    assert_int_equal(r.fd, -1);
    assert_null(r.raw_handle);
    for (size_t i = 0; i < sizeof r.reserved_ / sizeof r.reserved_[0]; i++)
        assert_null(r.reserved_[i]);

    shmreg_filter f;
    memset(&f, 0x5a, sizeof f);
    shmreg_filter_init(&f);
    assert_null(f.name);
    assert_null(f.tag);
    assert_int_equal(f.kind, SHMREG_KIND_ANY);

    /* NULL is a no-op for every _init. */
    shmreg_registration_init(NULL);
    shmreg_filter_init(NULL);
    shmreg_config_init(NULL);
}

static void test_register_with_the_struct(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ_SIZE, 11);
    shmreg_registration r;
    shmreg_registration_init(&r);
    r.name = "in";
    r.key = key;
    r.offset = 100;
    r.byte_size = 200;
    r.tag = "tenant";
    assert_ok(shmreg_register(t->reg, &r));

    shmreg_region_status *st = ut_status_of(t->reg, "in");
    assert_string_equal(st->key, key);
    assert_string_equal(st->tag, "tenant");
    assert_int_equal(st->offset, 100);
    assert_int_equal(st->byte_size, 200);
    shmreg_status_free(st, 1);

    shmreg_region *ref;
    shmreg_view view;
    assert_ok(shmreg_acquire(t->reg, "in", 0, 200, &ref, &view));
    ut_assert_pattern(view.addr, 200, 11, 100);
    shmreg_release(ref);
}

static void test_bad_registrations_are_refused(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ_SIZE, 12);
    shmreg_registration r;
    shmreg_registration_init(&r);
    r.name = "in";
    r.key = key;
    r.byte_size = 64;

    assert_fails(shmreg_register(NULL, &r), SHMREG_ERR_INVALID_ARG, "register: registry is NULL");
    assert_fails(shmreg_register(t->reg, NULL), SHMREG_ERR_INVALID_ARG, "register: registration is NULL");
    r.source = (shmreg_source)7;
    assert_fails(shmreg_register(t->reg, &r), SHMREG_ERR_INVALID_ARG,
                 "cannot register shared memory region 'in': unknown source 7");
    r.source = (shmreg_source)-1;
    assert_fails(shmreg_register(t->reg, &r), SHMREG_ERR_INVALID_ARG,
                 "cannot register shared memory region 'in': unknown source -1");
    r.source = SHMREG_SOURCE_SHM;
    r.byte_size = 0;
    assert_fails(shmreg_register(t->reg, &r), SHMREG_ERR_OUT_OF_BOUNDS,
                 "failed to register shared memory region 'in': invalid args (byte_size is 0)");
    r.byte_size = 64;
    r.offset = OBJ_SIZE - 10;
    assert_fails(shmreg_register(t->reg, &r), SHMREG_ERR_OUT_OF_BOUNDS,
                 ut_fmt("failed to register shared memory region 'in': invalid args (offset %d + byte_size 64 "
                        "is past the end of the %d-byte object '%s')",
                        OBJ_SIZE - 10, OBJ_SIZE, key));
    r.offset = SIZE_MAX;
    assert_fails(shmreg_register(t->reg, &r), SHMREG_ERR_OUT_OF_BOUNDS,
                 ut_fmt("failed to register shared memory region 'in': invalid args (offset %zu + byte_size 64 "
                        "overflows)",
                        (size_t)SIZE_MAX));
    assert_int_equal(ut_status_count(t->reg, SHMREG_KIND_ANY), 0);

    /* The CUDA sources' own arguments are checked in every build. */
    shmreg_registration c;
    shmreg_registration_init(&c);
    c.name = "gpu";
    c.byte_size = 64;
    c.source = SHMREG_SOURCE_CUDA_IPC;
    assert_fails(shmreg_register(t->reg, &c), SHMREG_ERR_INVALID_ARG,
                 "failed to register CUDA IPC region 'gpu': a CUDA IPC handle is 64 bytes, got 0 at NULL");
    c.source = SHMREG_SOURCE_CUDA_FD;
    assert_fails(shmreg_register(t->reg, &c), SHMREG_ERR_INVALID_ARG,
                 "failed to register CUDA VMM region 'gpu': descriptor -1 is negative");
    assert_int_equal(ut_status_count(t->reg, SHMREG_KIND_ANY), 0);
}

static void test_view_says_whether_it_is_writable(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ_SIZE, 13);
    assert_ok(shmreg_register_system(t->reg, "rw", key, 0, OBJ_SIZE, 0));
    assert_ok(shmreg_register_system(t->reg, "ro", key, 0, OBJ_SIZE, SHMREG_READONLY));
    shmreg_region *rw, *ro;
    shmreg_view vrw, vro;
    assert_ok(shmreg_acquire(t->reg, "rw", 0, 16, &rw, &vrw));
    assert_ok(shmreg_acquire(t->reg, "ro", 0, 16, &ro, &vro));
    assert_int_equal(vrw.writable, 1);
    assert_int_equal(vro.writable, 0);
    /* What the flag promises: the read-only mapping refuses writes. */
    assert_int_equal(tu_count_writable_shm_maps(key), 1);
    shmreg_release(rw);
    shmreg_release(ro);
}

static void test_wrong_kind_is_its_own_answer(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ_SIZE, 14);
    assert_ok(shmreg_register_system(t->reg, "in", key, 0, OBJ_SIZE, 0));
    shmreg_filter f;
    shmreg_filter_init(&f);
    f.name = "in";
    f.kind = SHMREG_KIND_CUDA;
    shmreg_region_status *st = NULL;
    size_t n = 0;
    const char *msg = "The region named 'in' is registered as system shared memory, not CUDA shared memory";
    assert_fails(shmreg_status_matching(t->reg, &f, &st, &n), SHMREG_ERR_WRONG_KIND, msg);
    assert_fails(shmreg_unregister_matching(t->reg, &f), SHMREG_ERR_WRONG_KIND, msg);
    /* An absent name stays NOT_FOUND, and so does another tenant's. */
    f.name = "out";
    assert_fails(shmreg_unregister_matching(t->reg, &f), SHMREG_ERR_NOT_FOUND,
                 "Unable to find cuda shared memory region: 'out'");
    f.name = "in";
    f.tag = "someone";
    assert_fails(shmreg_unregister_matching(t->reg, &f), SHMREG_ERR_NOT_FOUND,
                 "Unable to find cuda shared memory region: 'in'");
    assert_int_equal(ut_status_count(t->reg, SHMREG_KIND_SYSTEM), 1);
}

static void test_matching_without_a_name_takes_every_region(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ_SIZE, 15);
    assert_ok(tu_register_system_tagged(t->reg, "a1", key, 0, 64, 0, "a"));
    assert_ok(tu_register_system_tagged(t->reg, "a2", key, 0, 64, 0, "a"));
    assert_ok(tu_register_system_tagged(t->reg, "b1", key, 0, 64, 0, "b"));

    shmreg_region_status *st = NULL;
    size_t n = 0;
    assert_ok(shmreg_status_matching(t->reg, NULL, &st, &n));
    assert_int_equal(n, 3);
    shmreg_status_free(st, n);

    shmreg_filter f;
    shmreg_filter_init(&f);
    f.tag = "a";
    assert_ok(shmreg_unregister_matching(t->reg, &f));
    assert_ok(shmreg_status_matching(t->reg, NULL, &st, &n));
    assert_int_equal(n, 1);
    assert_string_equal(st[0].name, "b1");
    shmreg_status_free(st, n);

    /* A filter with a bad field changes nothing. */
    f.tag = "";
    assert_fails_prefix(shmreg_unregister_matching(t->reg, &f), SHMREG_ERR_INVALID_ARG, "invalid owner tag: ");
    f.tag = NULL;
    f.kind = (shmreg_kind)9;
    assert_fails(shmreg_unregister_matching(t->reg, &f), SHMREG_ERR_INVALID_ARG, "invalid region kind 9");
    assert_int_equal(ut_status_count(t->reg, SHMREG_KIND_ANY), 1);
    assert_ok(shmreg_unregister_matching(t->reg, NULL));
    assert_int_equal(ut_status_count(t->reg, SHMREG_KIND_ANY), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_functions_fill_the_defaults),
        UT_TEST(test_register_with_the_struct),
        UT_TEST(test_bad_registrations_are_refused),
        UT_TEST(test_view_says_whether_it_is_writable),
        UT_TEST(test_wrong_kind_is_its_own_answer),
        UT_TEST(test_matching_without_a_name_takes_every_region),
    };
    return cmocka_run_group_tests(tests, ut_group_setup, NULL);
}
