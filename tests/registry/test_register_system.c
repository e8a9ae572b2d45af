/* shmreg_register_system: bounds, any offset, the bytes a view reaches, flags,
 * and that a failed registration keeps nothing. */
#include "fixture.h"

#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#define OBJ_SIZE (3 * 4096 + 100)

/* Triton's words first, which its clients match, then the sizes. */
static void assert_invalid_args(shmreg_registry *reg, const char *key, size_t offset,
                                size_t byte_size)
{
    assert_fails_prefix(shmreg_register_system(reg, "in", key, offset, byte_size, 0),
                        SHMREG_ERR_OUT_OF_BOUNDS,
                        "failed to register shared memory region 'in': invalid args (");
    assert_int_equal(ut_status_count(reg, SHMREG_KIND_ANY), 0);
    assert_int_equal(tu_wait_shm_maps(key, 0, 5000), 0);
}

static void test_bounds_are_checked(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ_SIZE, 21);

    assert_invalid_args(t->reg, key, 0, 0);
    assert_invalid_args(t->reg, key, 5, 0);
    assert_invalid_args(t->reg, key, SIZE_MAX, 1);
    assert_invalid_args(t->reg, key, 1, SIZE_MAX);
    assert_invalid_args(t->reg, key, SIZE_MAX - 10, 20);
    assert_invalid_args(t->reg, key, 0, OBJ_SIZE + 1);
    assert_invalid_args(t->reg, key, OBJ_SIZE, 1);
    assert_invalid_args(t->reg, key, OBJ_SIZE - 1, 2);
    assert_invalid_args(t->reg, key, OBJ_SIZE + 4096, 1);
}

static void test_window_at_the_very_end_fits(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ_SIZE, 22);
    shmreg_region *ref = NULL;
    shmreg_view view;

    assert_ok(shmreg_register_system(t->reg, "last", key, OBJ_SIZE - 1, 1, 0));
    assert_ok(shmreg_register_system(t->reg, "all", key, 0, OBJ_SIZE, 0));
    assert_ok(shmreg_acquire(t->reg, "last", 0, 1, &ref, &view));
    ut_assert_pattern(view.addr, 1, 22, OBJ_SIZE - 1);
    shmreg_release(ref);
}

static void test_empty_object_has_no_room(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, 0, 0);
    assert_invalid_args(t->reg, key, 0, 1);
}

/* Any offset works: the view starts exactly at the offset's byte, and writes
 * through it land in the object. */
static void test_unaligned_offsets_reach_the_right_bytes(void **state)
{
    struct ut *t = *state;
    static const size_t offsets[] = {0, 1, 7, 4095, 4096, 4097, 8191, 12345};
    const char *key = ut_object(t, OBJ_SIZE, 23);
    uint8_t *mine = tu_shm_map(key, OBJ_SIZE);

    for (size_t i = 0; i < sizeof offsets / sizeof offsets[0]; i++) {
        size_t off = offsets[i], len = OBJ_SIZE - off;
        shmreg_region *ref = NULL;
        shmreg_view view;

        assert_ok(shmreg_register_system(t->reg, "w", key, off, len, 0));
        assert_ok(shmreg_acquire(t->reg, "w", 0, len, &ref, &view));
        assert_int_equal(view.byte_size, len);
        ut_assert_pattern(view.addr, len, 23, off);

        /* Through the registry's mapping into the test's own, and back. */
        uint8_t *v = view.addr;
        v[0] = (uint8_t)~v[0];
        v[len - 1] = (uint8_t)~v[len - 1];
        assert_int_equal(mine[off], (uint8_t)~tu_pattern(23, off));
        assert_int_equal(mine[OBJ_SIZE - 1], (uint8_t)~tu_pattern(23, OBJ_SIZE - 1));
        mine[off] = tu_pattern(23, off);
        mine[OBJ_SIZE - 1] = tu_pattern(23, OBJ_SIZE - 1);
        assert_int_equal(v[0], tu_pattern(23, off));
        assert_int_equal(v[len - 1], tu_pattern(23, OBJ_SIZE - 1));

        shmreg_release(ref);
        assert_ok(shmreg_unregister(t->reg, "w", SHMREG_KIND_SYSTEM));
    }
    munmap(mine, OBJ_SIZE);
}

/* Several names on one key, each its own window over the same bytes. */
static void test_several_names_share_one_key(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ_SIZE, 24);
    shmreg_region *a = NULL, *b = NULL;
    shmreg_view va, vb;

    assert_ok(shmreg_register_system(t->reg, "input", key, 0, 4096, 0));
    assert_ok(shmreg_register_system(t->reg, "output", key, 4096 + 3, 2 * 4096, 0));
    assert_ok(shmreg_acquire(t->reg, "input", 0, 4096, &a, &va));
    assert_ok(shmreg_acquire(t->reg, "output", 0, 2 * 4096, &b, &vb));
    ut_assert_pattern(va.addr, 4096, 24, 0);
    ut_assert_pattern(vb.addr, 2 * 4096, 24, 4096 + 3);

    /* Unregistering one name leaves the other's mapping alone. */
    shmreg_release(a);
    assert_ok(shmreg_unregister(t->reg, "input", SHMREG_KIND_SYSTEM));
    ut_assert_pattern(vb.addr, 2 * 4096, 24, 4096 + 3);
    shmreg_release(b);
    assert_ok(shmreg_unregister(t->reg, "output", SHMREG_KIND_SYSTEM));
    assert_int_equal(tu_wait_shm_maps(key, 0, 5000), 0);
}

static void test_readonly_maps_for_reading(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ_SIZE, 25);
    shmreg_region *ref = NULL;
    shmreg_view view;

    assert_ok(shmreg_register_system(t->reg, "ro", key, 10, 100, SHMREG_READONLY));
    assert_ok(shmreg_acquire(t->reg, "ro", 0, 100, &ref, &view));
    ut_assert_pattern(view.addr, 100, 25, 10);
    assert_int_equal(tu_wait_shm_maps(key, 1, 5000), 1);
    assert_int_equal(tu_count_writable_shm_maps(key), 0);
    shmreg_region_status *st = ut_status_of(t->reg, "ro");
    assert_int_equal(st[0].flags, SHMREG_READONLY);
    shmreg_status_free(st, 1);
    shmreg_release(ref);
}

static void test_default_maps_for_writing(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ_SIZE, 29);

    assert_ok(shmreg_register_system(t->reg, "rw", key, 0, OBJ_SIZE, 0));
    assert_int_equal(tu_count_writable_shm_maps(key), 1);
}

static void test_unknown_flags_are_refused(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ_SIZE, 26);

    assert_fails_code(shmreg_register_system(t->reg, "in", key, 0, OBJ_SIZE, 0x8u),
                      SHMREG_ERR_INVALID_ARG);
    assert_fails_code(shmreg_register_system(t->reg, "in", key, 0, OBJ_SIZE, 0x80000000u),
                      SHMREG_ERR_INVALID_ARG);
    assert_int_equal(ut_status_count(t->reg, SHMREG_KIND_ANY), 0);
    assert_int_equal(tu_wait_shm_maps(key, 0, 5000), 0);
}

static void test_null_arguments_are_refused(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ_SIZE, 27);

    assert_fails_code(shmreg_register_system(NULL, "in", key, 0, OBJ_SIZE, 0),
                      SHMREG_ERR_INVALID_ARG);
    assert_fails_code(shmreg_register_system(t->reg, NULL, key, 0, OBJ_SIZE, 0),
                      SHMREG_ERR_INVALID_ARG);
    assert_fails_code(shmreg_register_system(t->reg, "in", NULL, 0, OBJ_SIZE, 0),
                      SHMREG_ERR_INVALID_ARG);
    assert_int_equal(ut_status_count(t->reg, SHMREG_KIND_ANY), 0);
}

/* Without a usable CUDA device nothing can be pinned: demanding it fails
 * cleanly, AUTO and NO_PIN register unpinned. */
static void test_pinning_without_cuda(void **state)
{
    struct ut *t = *state;
    if (ut_cuda_usable())
        skip();
    const char *key = ut_object(t, OBJ_SIZE, 28);
    shmreg_region *ref = NULL;
    shmreg_view view;

    assert_fails_code(shmreg_register_system(t->reg, "p", key, 0, OBJ_SIZE, SHMREG_PIN),
                      SHMREG_ERR_UNSUPPORTED);
    assert_int_equal(tu_wait_shm_maps(key, 0, 5000), 0);

    shmreg_config cfg;
    shmreg_registry *always = NULL;
    shmreg_config_init(&cfg);
    cfg.pin_policy = SHMREG_PIN_ALWAYS;
    assert_ok(shmreg_registry_create(&cfg, &always));
    assert_fails_code(shmreg_register_system(always, "p", key, 0, OBJ_SIZE, 0),
                      SHMREG_ERR_UNSUPPORTED);
    assert_int_equal(ut_status_count(always, SHMREG_KIND_ANY), 0);
    shmreg_registry_destroy(always);
    assert_int_equal(tu_wait_shm_maps(key, 0, 5000), 0);

    assert_ok(shmreg_register_system(t->reg, "auto", key, 0, OBJ_SIZE, 0));
    assert_ok(shmreg_register_system(t->reg, "nopin", key, 0, OBJ_SIZE, SHMREG_NO_PIN));
    assert_ok(shmreg_acquire(t->reg, "auto", 0, 1, &ref, &view));
    assert_int_equal(view.pinned, 0);
    shmreg_release(ref);
    shmreg_region_status *st = ut_status_of(t->reg, "nopin");
    assert_int_equal(st[0].pinned, 0);
    assert_int_equal(st[0].flags, SHMREG_NO_PIN);
    shmreg_status_free(st, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        UT_TEST(test_bounds_are_checked),
        UT_TEST(test_window_at_the_very_end_fits),
        UT_TEST(test_empty_object_has_no_room),
        UT_TEST(test_unaligned_offsets_reach_the_right_bytes),
        UT_TEST(test_several_names_share_one_key),
        UT_TEST(test_readonly_maps_for_reading),
        UT_TEST(test_default_maps_for_writing),
        UT_TEST(test_unknown_flags_are_refused),
        UT_TEST(test_null_arguments_are_refused),
        UT_TEST(test_pinning_without_cuda),
    };
    return cmocka_run_group_tests(tests, ut_group_setup, NULL);
}
