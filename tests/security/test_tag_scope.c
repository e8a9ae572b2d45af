/* issue 11 (11): owner tags cover acquire (shmreg_acquire_matching), and a
 * tenant learns nothing of another tenant's region from acquiring it, nor,
 * beyond "the name is taken", from registering its name. */
#include <string.h>

#include "fixture.h"

#define OBJ 8192

static shmreg_err acquire_as(shmreg_registry *reg, const char *tag, const char *name, shmreg_kind kind,
                             size_t offset, size_t size, shmreg_region **ref, shmreg_view *view)
{
    shmreg_filter f = tu_filter(name, kind, tag);
    return shmreg_acquire_matching(reg, &f, offset, size, ref, view);
}

static void test_other_tag_answers_as_absent(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ, 1);
    assert_ok(tu_register_system_tagged(t->reg, "a-in", key, 0, OBJ, 0, "tenant-a"));
    assert_ok(shmreg_register_system(t->reg, "untagged", key, 0, OBJ, 0));
    shmreg_region *ref = NULL;
    shmreg_view view;
    memset(&view, 0x5a, sizeof view);
    shmreg_view untouched = view;

    /* What an absent name answers ... */
    assert_fails(acquire_as(t->reg, "tenant-b", "nothing", SHMREG_KIND_ANY, 0, 1, &ref, &view),
                 SHMREG_ERR_NOT_FOUND, "Unable to find shared memory region: 'nothing'");
    /* ... another tag's region answers too, whatever the window (no size
     * oracle) and kind asked, and so does an untagged one. */
    const size_t sizes[][2] = {{0, 1}, {0, OBJ + 1}, {OBJ, 1}, {SIZE_MAX, 2}};
    for (size_t i = 0; i < 4; i++) {
        assert_fails(acquire_as(t->reg, "tenant-b", "a-in", SHMREG_KIND_ANY, sizes[i][0], sizes[i][1], &ref, &view),
                     SHMREG_ERR_NOT_FOUND, "Unable to find shared memory region: 'a-in'");
        assert_null(ref);
    }
    assert_fails(acquire_as(t->reg, "tenant-b", "a-in", SHMREG_KIND_CUDA, 0, 1, &ref, &view), SHMREG_ERR_NOT_FOUND,
                 "Unable to find cuda shared memory region: 'a-in'");
    assert_fails(acquire_as(t->reg, "tenant-b", "nothing", SHMREG_KIND_CUDA, 0, 1, &ref, &view),
                 SHMREG_ERR_NOT_FOUND, "Unable to find cuda shared memory region: 'nothing'");
    assert_fails_code(acquire_as(t->reg, "tenant-b", "untagged", SHMREG_KIND_ANY, 0, 1, &ref, &view),
                      SHMREG_ERR_NOT_FOUND);
    assert_memory_equal(&view, &untouched, sizeof view);

    /* The failed lookups hold nothing. */
    shmreg_region_status *st = ut_status_of(t->reg, "a-in");
    assert_int_equal(st->references, 0);
    shmreg_status_free(st, 1);
}

static void test_own_tag_acquires(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ, 2);
    assert_ok(tu_register_system_tagged(t->reg, "a-in", key, 100, 1000, 0, "tenant-a"));
    shmreg_region *ref = NULL;
    shmreg_view view;
    assert_ok(acquire_as(t->reg, "tenant-a", "a-in", SHMREG_KIND_SYSTEM, 10, 20, &ref, &view));
    ut_assert_pattern(view.addr, 20, 2, 110);
    shmreg_release(ref);
    /* No tag in the filter: as shmreg_acquire. */
    assert_ok(acquire_as(t->reg, NULL, "a-in", SHMREG_KIND_ANY, 0, 1000, &ref, &view));
    shmreg_release(ref);
    /* Own region, other kind: WRONG_KIND; own region, bad window: the bounds. */
    assert_fails_code(acquire_as(t->reg, "tenant-a", "a-in", SHMREG_KIND_CUDA, 0, 1, &ref, &view),
                      SHMREG_ERR_WRONG_KIND);
    assert_fails_code(acquire_as(t->reg, "tenant-a", "a-in", SHMREG_KIND_ANY, 0, 1001, &ref, &view),
                      SHMREG_ERR_OUT_OF_BOUNDS);
    shmreg_region_status *st = ut_status_of(t->reg, "a-in");
    assert_int_equal(st->references, 0);
    shmreg_status_free(st, 1);
}

static void test_bad_filters(void **state)
{
    struct ut *t = *state;
    shmreg_region *ref = (shmreg_region *)1;
    shmreg_view view;
    assert_fails_code(shmreg_acquire_matching(t->reg, NULL, 0, 1, &ref, &view), SHMREG_ERR_INVALID_ARG);
    assert_null(ref);
    assert_fails_code(acquire_as(t->reg, "tenant-a", NULL, SHMREG_KIND_ANY, 0, 1, &ref, &view),
                      SHMREG_ERR_INVALID_ARG);
    assert_fails_code(acquire_as(t->reg, "", "x", SHMREG_KIND_ANY, 0, 1, &ref, &view), SHMREG_ERR_INVALID_ARG);
    assert_fails_code(acquire_as(t->reg, "a", "x", (shmreg_kind)7, 0, 1, &ref, &view), SHMREG_ERR_INVALID_ARG);
    assert_fails_code(acquire_as(NULL, "a", "x", SHMREG_KIND_ANY, 0, 1, &ref, &view), SHMREG_ERR_INVALID_ARG);
}

/* Registering a name another tag holds cannot succeed (one namespace), but
 * the answer is the same whatever the holder's state: before the fix it
 * said the region was pending and how many references it held. */
static void test_register_of_another_tags_name_reveals_no_state(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ, 3);
    assert_ok(tu_register_system_tagged(t->reg, "shared", key, 0, OBJ, 0, "tenant-a"));
    const char *plain = "shared memory region 'shared' already in manager";
    assert_fails(tu_register_system_tagged(t->reg, "shared", key, 0, OBJ, 0, "tenant-b"),
                 SHMREG_ERR_ALREADY_EXISTS, plain);

    /* tenant-a's region busy, then pending unregister. */
    shmreg_region *ref = NULL;
    shmreg_view view;
    assert_ok(acquire_as(t->reg, "tenant-a", "shared", SHMREG_KIND_ANY, 0, 1, &ref, &view));
    assert_ok(tu_unregister_tagged(t->reg, "shared", SHMREG_KIND_ANY, "tenant-a"));
    assert_fails(tu_register_system_tagged(t->reg, "shared", key, 0, OBJ, 0, "tenant-b"),
                 SHMREG_ERR_ALREADY_EXISTS, plain);
    /* The owner itself (and an untagged caller, the server) still hears why. */
    assert_fails_containing(tu_register_system_tagged(t->reg, "shared", key, 0, OBJ, 0, "tenant-a"),
                            SHMREG_ERR_ALREADY_EXISTS, "pending unregister");
    assert_fails_containing(shmreg_register_system(t->reg, "shared", key, 0, OBJ, 0), SHMREG_ERR_ALREADY_EXISTS,
                            "pending unregister");
    shmreg_release(ref);
    assert_ok(tu_register_system_tagged(t->reg, "shared", key, 0, OBJ, 0, "tenant-b"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        UT_TEST(test_other_tag_answers_as_absent),
        UT_TEST(test_own_tag_acquires),
        UT_TEST(test_bad_filters),
        UT_TEST(test_register_of_another_tags_name_reveals_no_state),
    };
    return cmocka_run_group_tests_name("tag_scope", tests, ut_group_setup, NULL);
}
