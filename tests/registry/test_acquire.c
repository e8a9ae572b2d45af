/* shmreg_acquire, shmreg_retain, shmreg_release: the view, its bounds, and
 * the reference counting that status reports as references. */
#include "fixture.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#define OBJ_SIZE 8192
#define REG_OFFSET 100
#define REG_SIZE 5000

/* The fixture's registry with "in" = [REG_OFFSET, REG_OFFSET + REG_SIZE) of
 * a fresh object of seed 31. */
static const char *register_input(struct ut *t)
{
    const char *key = ut_object(t, OBJ_SIZE, 31);
    assert_ok(shmreg_register_system(t->reg, "in", key, REG_OFFSET, REG_SIZE, 0));
    return key;
}

static unsigned in_use_of(shmreg_registry *reg, const char *name)
{
    shmreg_region_status *st = ut_status_of(reg, name);
    unsigned n = st[0].references;
    shmreg_status_free(st, 1);
    return n;
}

static void test_view_describes_the_window(void **state)
{
    struct ut *t = *state;
    register_input(t);
    shmreg_region *ref = NULL;
    shmreg_view view;

    assert_ok(shmreg_acquire(t->reg, "in", 0, REG_SIZE, &ref, &view));
    assert_non_null(ref);
    assert_int_equal(view.byte_size, REG_SIZE);
    assert_int_equal(view.kind, SHMREG_KIND_SYSTEM);
    assert_int_equal(view.device_id, -1);
    /* The default pin policy (AUTO) pins where CUDA is usable. */
    assert_int_equal(view.pinned, ut_cuda_usable() ? 1 : 0);
    ut_assert_pattern(view.addr, REG_SIZE, 31, REG_OFFSET);
    uint8_t *whole = view.addr;
    shmreg_release(ref);

    /* An offset inside the region moves the view by exactly that much. */
    assert_ok(shmreg_acquire(t->reg, "in", 1234, 50, &ref, &view));
    assert_ptr_equal(view.addr, whole + 1234);
    assert_int_equal(view.byte_size, 50);
    ut_assert_pattern(view.addr, 50, 31, REG_OFFSET + 1234);
    shmreg_release(ref);

    /* The last byte, and an empty view inside the region. */
    assert_ok(shmreg_acquire(t->reg, "in", REG_SIZE - 1, 1, &ref, &view));
    ut_assert_pattern(view.addr, 1, 31, REG_OFFSET + REG_SIZE - 1);
    shmreg_release(ref);
    assert_ok(shmreg_acquire(t->reg, "in", REG_SIZE - 1, 0, &ref, &view));
    assert_int_equal(view.byte_size, 0);
    shmreg_release(ref);
    assert_int_equal(in_use_of(t->reg, "in"), 0);
}

/* A failed acquire sets *out to NULL, leaves *view untouched and holds no
 * reference. */
static void assert_acquire_fails(shmreg_registry *reg, const char *name, size_t offset,
                                 size_t byte_size, shmreg_err code, const char *msg)
{
    shmreg_region *ref = (shmreg_region *)&ref;
    shmreg_view view, before;
    memset(&view, 0x5a, sizeof view);
    memcpy(&before, &view, sizeof view);
    assert_fails(shmreg_acquire(reg, name, offset, byte_size, &ref, &view), code, msg);
    assert_null(ref);
    assert_memory_equal(&view, &before, sizeof view);
}

static void test_bounds_have_their_messages(void **state)
{
    struct ut *t = *state;
    register_input(t);

    assert_acquire_fails(t->reg, "in", REG_SIZE, 0, SHMREG_ERR_OUT_OF_BOUNDS,
                         "Invalid offset for shared memory region: 'in'");
    assert_acquire_fails(t->reg, "in", REG_SIZE + 1, 1, SHMREG_ERR_OUT_OF_BOUNDS,
                         "Invalid offset for shared memory region: 'in'");
    assert_acquire_fails(t->reg, "in", SIZE_MAX, 1, SHMREG_ERR_OUT_OF_BOUNDS,
                         "Invalid offset for shared memory region: 'in'");
    assert_acquire_fails(t->reg, "in", 10, SIZE_MAX, SHMREG_ERR_OUT_OF_BOUNDS,
                         ut_fmt("Integer overflow detected: byte_size (%zu) + offset (10) exceeds "
                                "maximum value (%zu) for region 'in'",
                                (size_t)SIZE_MAX, (size_t)SIZE_MAX));
    assert_acquire_fails(t->reg, "in", 10, REG_SIZE - 9, SHMREG_ERR_OUT_OF_BOUNDS,
                         "Invalid offset + byte size for shared memory region: 'in'");
    assert_acquire_fails(t->reg, "in", 0, REG_SIZE + 1, SHMREG_ERR_OUT_OF_BOUNDS,
                         "Invalid offset + byte size for shared memory region: 'in'");
    assert_int_equal(in_use_of(t->reg, "in"), 0);
}

static void test_unknown_name_is_not_found(void **state)
{
    struct ut *t = *state;
    register_input(t);
    assert_acquire_fails(t->reg, "out", 0, 0, SHMREG_ERR_NOT_FOUND,
                         "Unable to find shared memory region: 'out'");
    assert_acquire_fails(t->reg, "i", 0, 0, SHMREG_ERR_NOT_FOUND,
                         "Unable to find shared memory region: 'i'");
}

static void test_null_arguments_are_refused(void **state)
{
    struct ut *t = *state;
    register_input(t);
    shmreg_region *ref = NULL;
    shmreg_view view;

    assert_fails_code(shmreg_acquire(NULL, "in", 0, 1, &ref, &view), SHMREG_ERR_INVALID_ARG);
    assert_fails_code(shmreg_acquire(t->reg, NULL, 0, 1, &ref, &view), SHMREG_ERR_INVALID_ARG);
    assert_fails_code(shmreg_acquire(t->reg, "in", 0, 1, NULL, &view), SHMREG_ERR_INVALID_ARG);
    assert_fails_code(shmreg_acquire(t->reg, "in", 0, 1, &ref, NULL), SHMREG_ERR_INVALID_ARG);
    assert_null(ref);
    assert_int_equal(in_use_of(t->reg, "in"), 0);

    shmreg_release(NULL);
    assert_null(shmreg_retain(NULL));
}

static void test_every_reference_is_counted(void **state)
{
    struct ut *t = *state;
    register_input(t);
    shmreg_region *a = NULL, *b = NULL;
    shmreg_view va, vb;

    assert_int_equal(in_use_of(t->reg, "in"), 0);
    assert_ok(shmreg_acquire(t->reg, "in", 0, 1, &a, &va));
    assert_int_equal(in_use_of(t->reg, "in"), 1);
    assert_ok(shmreg_acquire(t->reg, "in", 0, 1, &b, &vb));
    assert_int_equal(in_use_of(t->reg, "in"), 2);
    assert_ptr_equal(shmreg_retain(a), a);
    assert_int_equal(in_use_of(t->reg, "in"), 3);

    shmreg_release(a);
    assert_int_equal(in_use_of(t->reg, "in"), 2);
    /* The retained reference still reaches the bytes. */
    ut_assert_pattern(va.addr, 1, 31, REG_OFFSET);
    shmreg_release(a);
    assert_int_equal(in_use_of(t->reg, "in"), 1);
    shmreg_release(b);
    assert_int_equal(in_use_of(t->reg, "in"), 0);
}

static void *release_in_thread(void *ref)
{
    shmreg_release(ref);
    return NULL;
}

/* A reference may be dropped by a thread other than the one that took it. */
static void test_release_from_another_thread(void **state)
{
    struct ut *t = *state;
    register_input(t);
    shmreg_region *ref = NULL;
    shmreg_view view;
    pthread_t th;

    assert_ok(shmreg_acquire(t->reg, "in", 0, 1, &ref, &view));
    assert_int_equal(in_use_of(t->reg, "in"), 1);
    assert_int_equal(pthread_create(&th, NULL, release_in_thread, ref), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(in_use_of(t->reg, "in"), 0);
}

/* Thousands of names, more than the registry's front has slots (1024), so that
 * many share a slot: each still finds its own window, after neighbours leave
 * and come back, and a name re-registered while a reference to its old region
 * is held finds the new region. */
#define MANY 3000
#define WINDOW 8

static void register_many(shmreg_registry *reg, const char *key, size_t shift, int first, int step)
{
    for (int i = first; i < MANY; i += step)
        assert_ok(shmreg_register_system(reg, ut_fmt("region-%d", i), key, (size_t)i * WINDOW + shift, WINDOW,
                                         SHMREG_NO_PIN));
}

static void assert_window(shmreg_registry *reg, int i, size_t shift)
{
    shmreg_region *ref = NULL;
    shmreg_view view;
    assert_ok(shmreg_acquire(reg, ut_fmt("region-%d", i), 0, WINDOW, &ref, &view));
    ut_assert_pattern(view.addr, WINDOW, 47, (size_t)i * WINDOW + shift);
    shmreg_release(ref);
}

static void test_every_name_finds_its_own_window(void **state)
{
    struct ut *t = *state;
    shmreg_registry *reg = ut_registry(t, SHMREG_POLICY_DETACH);
    const char *key = ut_object(t, MANY * WINDOW + WINDOW, 47);
    register_many(reg, key, 0, 0, 1);
    for (int i = 0; i < MANY; i++)
        assert_window(reg, i, 0);

    /* The even ones leave; the odd ones are unaffected. */
    for (int i = 0; i < MANY; i += 2)
        assert_ok(shmreg_unregister(reg, ut_fmt("region-%d", i), SHMREG_KIND_SYSTEM));
    for (int i = 0; i < MANY; i++) {
        shmreg_region *ref = NULL;
        shmreg_view view;
        if (i % 2 == 0)
            assert_fails(shmreg_acquire(reg, ut_fmt("region-%d", i), 0, 1, &ref, &view), SHMREG_ERR_NOT_FOUND,
                         ut_fmt("Unable to find shared memory region: 'region-%d'", i));
        else
            assert_window(reg, i, 0);
    }

    /* They come back one window byte later. */
    register_many(reg, key, 1, 0, 2);
    for (int i = 0; i < MANY; i++)
        assert_window(reg, i, i % 2 == 0 ? 1 : 0);

    /* Detached while held, then registered again: the holder keeps the old
     * bytes, a new acquire gets the new region. */
    shmreg_region *old = NULL;
    shmreg_view old_view;
    assert_ok(shmreg_acquire(reg, "region-7", 0, WINDOW, &old, &old_view));
    assert_ok(shmreg_unregister(reg, "region-7", SHMREG_KIND_SYSTEM));
    assert_ok(shmreg_register_system(reg, "region-7", key, 7 * WINDOW + 3, WINDOW, SHMREG_NO_PIN));
    assert_window(reg, 7, 3);
    ut_assert_pattern(old_view.addr, WINDOW, 47, 7 * WINDOW);
    shmreg_release(old);
    assert_int_equal(ut_status_count(reg, SHMREG_KIND_SYSTEM), MANY);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        UT_TEST(test_view_describes_the_window),
        UT_TEST(test_bounds_have_their_messages),
        UT_TEST(test_unknown_name_is_not_found),
        UT_TEST(test_null_arguments_are_refused),
        UT_TEST(test_every_reference_is_counted),
        UT_TEST(test_release_from_another_thread),
        UT_TEST(test_every_name_finds_its_own_window),
    };
    return cmocka_run_group_tests(tests, ut_group_setup, NULL);
}
