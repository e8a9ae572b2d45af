/* Owner tags cover acquire (shmreg_acquire_matching), and a
 * tenant learns nothing of another tenant's region from acquiring it.
 * A tag is a namespace: two tags may hold the same name, and
 * another tag's region answers byte for byte as an absent one on every
 * verb; untagged calls keep 1.1's one namespace. */
#include <stdio.h>
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

/* A tag is a namespace. Two tags each register "in0" and each
 * acquires, lists and unregisters its own, never the other's. */
static void test_two_tags_hold_the_same_name(void **state)
{
    struct ut *t = *state;
    const char *key_a = ut_object(t, OBJ, 3), *key_b = ut_object(t, OBJ, 4);
    assert_ok(tu_register_system_tagged(t->reg, "in0", key_a, 0, OBJ, 0, "tenant-a"));
    assert_ok(tu_register_system_tagged(t->reg, "in0", key_b, 0, OBJ, 0, "tenant-b"));
    /* Its own tag's name is taken, as before. */
    assert_fails(tu_register_system_tagged(t->reg, "in0", key_b, 0, OBJ, 0, "tenant-b"),
                 SHMREG_ERR_ALREADY_EXISTS, "shared memory region 'in0' already in manager");

    shmreg_region *ref = NULL;
    shmreg_view view;
    assert_ok(acquire_as(t->reg, "tenant-a", "in0", SHMREG_KIND_ANY, 0, 64, &ref, &view));
    ut_assert_pattern(view.addr, 64, 3, 0);
    shmreg_release(ref);
    assert_ok(acquire_as(t->reg, "tenant-b", "in0", SHMREG_KIND_SYSTEM, 0, 64, &ref, &view));
    ut_assert_pattern(view.addr, 64, 4, 0);
    shmreg_release(ref);

    shmreg_region_status *st = NULL;
    size_t n = 0;
    assert_ok(tu_status_tagged(t->reg, "in0", SHMREG_KIND_ANY, "tenant-b", &st, &n));
    assert_int_equal(n, 1);
    assert_string_equal(st[0].tag, "tenant-b");
    assert_string_equal(st[0].key, key_b);
    shmreg_status_free(st, n);
    /* An untagged caller (the server) sees both, and cannot mean one by
     * the name alone. */
    assert_int_equal(ut_status_count(t->reg, SHMREG_KIND_ANY), 2);
    assert_fails(shmreg_acquire(t->reg, "in0", 0, 1, &ref, &view), SHMREG_ERR_NOT_FOUND,
                 "Unable to find shared memory region: 'in0' (several owner tags hold that name: name the tag)");
    assert_null(ref);

    /* tenant-b's unregister removes its own only. */
    assert_ok(tu_unregister_tagged(t->reg, "in0", SHMREG_KIND_ANY, "tenant-b"));
    assert_fails_code(acquire_as(t->reg, "tenant-b", "in0", SHMREG_KIND_ANY, 0, 1, &ref, &view),
                      SHMREG_ERR_NOT_FOUND);
    assert_ok(acquire_as(t->reg, "tenant-a", "in0", SHMREG_KIND_ANY, 0, 64, &ref, &view));
    ut_assert_pattern(view.addr, 64, 3, 0);
    shmreg_release(ref);
    /* One region of the name left: the untagged caller finds it, as in 1.1. */
    assert_ok(shmreg_acquire(t->reg, "in0", 0, 64, &ref, &view));
    ut_assert_pattern(view.addr, 64, 3, 0);
    shmreg_release(ref);
}

/* The answers one tag gets about a name, on every verb. */
struct answers {
    char text[6][512];
};

static void answer_of(struct answers *a, int i, shmreg_err err)
{
    snprintf(a->text[i], sizeof a->text[i], "%s %s", shmreg_err_name(err), err == SHMREG_OK ? "" : shmreg_last_error());
}

static void ask_all_verbs(shmreg_registry *reg, const char *tag, const char *name, struct answers *a)
{
    shmreg_region *ref = NULL;
    shmreg_view view;
    shmreg_region_status *st = NULL;
    size_t n = 0;
    answer_of(a, 0, acquire_as(reg, tag, name, SHMREG_KIND_ANY, 0, 1, &ref, &view));
    answer_of(a, 1, acquire_as(reg, tag, name, SHMREG_KIND_CUDA, 8, 1 << 20, &ref, &view));
    answer_of(a, 2, tu_status_tagged(reg, name, SHMREG_KIND_ANY, tag, &st, &n));
    answer_of(a, 3, tu_status_tagged(reg, name, SHMREG_KIND_SYSTEM, tag, &st, &n));
    answer_of(a, 4, tu_unregister_tagged(reg, name, SHMREG_KIND_ANY, tag));
    answer_of(a, 5, tu_unregister_tagged(reg, name, SHMREG_KIND_CUDA, tag));
    assert_null(ref);
}

/* Another tag's region answers byte for byte as an absent one,
 * on acquire, status and unregister, whatever the kind asked, and whether
 * the region is idle, busy or pending. */
static void test_other_tags_region_answers_byte_for_byte_as_absent(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ, 5);
    struct answers absent, idle, busy, pending;
    ask_all_verbs(t->reg, "tenant-b", "secret", &absent);
    for (int i = 0; i < 6; i++)
        assert_non_null(strstr(absent.text[i], "SHMREG_ERR_NOT_FOUND"));

    assert_ok(tu_register_system_tagged(t->reg, "secret", key, 0, OBJ, 0, "tenant-a"));
    ask_all_verbs(t->reg, "tenant-b", "secret", &idle);
    shmreg_region *ref = NULL;
    shmreg_view view;
    assert_ok(acquire_as(t->reg, "tenant-a", "secret", SHMREG_KIND_ANY, 0, 1, &ref, &view));
    ask_all_verbs(t->reg, "tenant-b", "secret", &busy);
    assert_ok(tu_unregister_tagged(t->reg, "secret", SHMREG_KIND_ANY, "tenant-a"));
    ask_all_verbs(t->reg, "tenant-b", "secret", &pending);
    for (int i = 0; i < 6; i++) {
        assert_string_equal(idle.text[i], absent.text[i]);
        assert_string_equal(busy.text[i], absent.text[i]);
        assert_string_equal(pending.text[i], absent.text[i]);
    }
    /* tenant-a's region was untouched by all of it. */
    shmreg_region_status *st = ut_status_of(t->reg, "secret");
    assert_int_equal(st->references, 1);
    assert_int_equal(st->pending_unregister, 1);
    shmreg_status_free(st, 1);
    shmreg_release(ref);
}

/* An untagged region's name cannot be taken by a tag (an untagged caller
 * would find the untagged one instead), and the tag hears only that the
 * name is taken, never its state; the untagged caller (the server) still
 * hears why. An untagged registration needs the name free under every tag,
 * as in 1.1's one namespace. */
static void test_untagged_names_stay_one_namespace(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ, 6);
    assert_ok(shmreg_register_system(t->reg, "shared", key, 0, OBJ, 0));
    shmreg_region *ref = NULL;
    shmreg_view view;
    assert_ok(shmreg_acquire(t->reg, "shared", 0, 1, &ref, &view));
    assert_ok(shmreg_unregister(t->reg, "shared", SHMREG_KIND_ANY));
    const char *plain = "shared memory region 'shared' already in manager";
    assert_fails(tu_register_system_tagged(t->reg, "shared", key, 0, OBJ, 0, "tenant-b"),
                 SHMREG_ERR_ALREADY_EXISTS, plain);
    assert_fails_containing(shmreg_register_system(t->reg, "shared", key, 0, OBJ, 0), SHMREG_ERR_ALREADY_EXISTS,
                            "pending unregister");
    shmreg_release(ref);
    assert_ok(tu_register_system_tagged(t->reg, "shared", key, 0, OBJ, 0, "tenant-b"));

    /* The tag holds it: an untagged registration of the name is refused
     * with its state, and an untagged acquire finds the one region. */
    assert_ok(acquire_as(t->reg, "tenant-b", "shared", SHMREG_KIND_ANY, 0, 1, &ref, &view));
    assert_ok(tu_unregister_tagged(t->reg, "shared", SHMREG_KIND_ANY, "tenant-b"));
    assert_fails_containing(shmreg_register_system(t->reg, "shared", key, 0, OBJ, 0), SHMREG_ERR_ALREADY_EXISTS,
                            "pending unregister");
    /* The owner itself hears why too. */
    assert_fails_containing(tu_register_system_tagged(t->reg, "shared", key, 0, OBJ, 0, "tenant-b"),
                            SHMREG_ERR_ALREADY_EXISTS, "pending unregister");
    shmreg_release(ref);
    assert_ok(shmreg_register_system(t->reg, "shared", key, 0, OBJ, 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        UT_TEST(test_other_tag_answers_as_absent),
        UT_TEST(test_own_tag_acquires),
        UT_TEST(test_bad_filters),
        UT_TEST(test_two_tags_hold_the_same_name),
        UT_TEST(test_other_tags_region_answers_byte_for_byte_as_absent),
        UT_TEST(test_untagged_names_stay_one_namespace),
    };
    return cmocka_run_group_tests_name("tag_scope", tests, ut_group_setup, NULL);
}
