/* Region names (1..255 bytes, one namespace) and shm keys (POSIX naming,
 * leading slashes ignored, reserved prefixes refused). */
#include "fixture.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define OBJ_SIZE 4096

/* Register `name` over the whole of `key`, then prove it is reachable: the
 * view holds the object's bytes. */
static void register_and_read(shmreg_registry *reg, const char *name, const char *key,
                              uint8_t seed)
{
    shmreg_region *ref = NULL;
    shmreg_view view;
    assert_ok(shmreg_register_system(reg, name, key, 0, OBJ_SIZE, 0));
    assert_ok(shmreg_acquire(reg, name, 0, OBJ_SIZE, &ref, &view));
    ut_assert_pattern(view.addr, OBJ_SIZE, seed, 0);
    shmreg_release(ref);
}

static void test_name_lengths_1_and_255_work(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ_SIZE, 11);
    char longest[256];
    memset(longest, 'n', 255);
    longest[255] = '\0';

    register_and_read(t->reg, "a", key, 11);
    register_and_read(t->reg, longest, key, 11);
    shmreg_region_status *st = ut_status_of(t->reg, longest);
    assert_int_equal(strlen(st[0].name), 255);
    shmreg_status_free(st, 1);
    assert_ok(shmreg_unregister(t->reg, longest, SHMREG_KIND_SYSTEM));
    assert_ok(shmreg_unregister(t->reg, "a", SHMREG_KIND_SYSTEM));
}

static void test_bad_names_are_refused(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ_SIZE, 12);
    char too_long[257];
    memset(too_long, 'n', 256);
    too_long[256] = '\0';
    shmreg_region *ref = NULL;
    shmreg_view view;

    assert_fails_code(shmreg_register_system(t->reg, too_long, key, 0, OBJ_SIZE, 0),
                      SHMREG_ERR_INVALID_ARG);
    assert_fails_code(shmreg_register_system(t->reg, "", key, 0, OBJ_SIZE, 0),
                      SHMREG_ERR_INVALID_ARG);
    assert_fails_code(shmreg_register_system(t->reg, NULL, key, 0, OBJ_SIZE, 0),
                      SHMREG_ERR_INVALID_ARG);
    assert_int_equal(ut_status_count(t->reg, SHMREG_KIND_ANY), 0);
    assert_int_equal(tu_count_shm_maps(key), 0);

    /* The same bounds hold for every call that takes a name. */
    assert_fails_code(shmreg_acquire(t->reg, too_long, 0, 0, &ref, &view),
                      SHMREG_ERR_INVALID_ARG);
    assert_fails_code(shmreg_acquire(t->reg, "", 0, 0, &ref, &view), SHMREG_ERR_INVALID_ARG);
    assert_fails_code(shmreg_unregister(t->reg, too_long, SHMREG_KIND_ANY),
                      SHMREG_ERR_INVALID_ARG);
    assert_fails_code(shmreg_unregister(t->reg, "", SHMREG_KIND_ANY), SHMREG_ERR_INVALID_ARG);
    assert_null(ref);
}

/* Keys that are empty after their leading slashes, or that shm_open could
 * not name (an inner slash, "." or ".."), are refused before any system call. */
static void test_invalid_keys_are_refused(void **state)
{
    struct ut *t = *state;
    static const char *const keys[] = {"", "/", "///", "/a/b", "a/", "/.", "/.."};

    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        assert_fails(shmreg_register_system(t->reg, "in", keys[i], 0, 1, 0),
                     SHMREG_ERR_INVALID_ARG,
                     ut_fmt("cannot register shared memory region 'in' - invalid shm key '%s'",
                            keys[i]));
    assert_fails_code(shmreg_register_system(t->reg, "in", NULL, 0, 1, 0),
                      SHMREG_ERR_INVALID_ARG);
    assert_int_equal(ut_status_count(t->reg, SHMREG_KIND_ANY), 0);
}

/* glibc ignores leading slashes, and so does the registry: "x", "/x" and
 * "//x" name one object. */
static void test_leading_slashes_name_the_same_object(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ_SIZE, 13);
    const char *bare = key + 1;
    char doubled[80];
    snprintf(doubled, sizeof doubled, "/%s", key);

    register_and_read(t->reg, "slash", key, 13);
    register_and_read(t->reg, "bare", bare, 13);
    register_and_read(t->reg, "doubled", doubled, 13);
    assert_ok(shmreg_unregister_all(t->reg, SHMREG_KIND_ANY));
    assert_int_equal(tu_count_shm_maps(key), 0);
}

static void test_reserved_prefix_is_refused_with_or_without_slash(void **state)
{
    struct ut *t = *state;
    static const char *const prefixes[] = {"triton_", "shmreg-test-", NULL};
    const char *key = ut_object(t, OBJ_SIZE, 14);
    shmreg_config cfg;
    shmreg_registry *reg = NULL;
    char doubled[80];
    snprintf(doubled, sizeof doubled, "//%s", key + 1);

    shmreg_config_init(&cfg);
    cfg.reserved_key_prefixes = prefixes;
    assert_ok(shmreg_registry_create(&cfg, &reg));
    const char *refused[] = {key, key + 1, doubled};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        assert_fails(shmreg_register_system(reg, "in", refused[i], 0, OBJ_SIZE, 0),
                     SHMREG_ERR_INVALID_ARG,
                     ut_fmt("cannot register shared memory region 'in' with key '%s' as the key "
                            "contains the reserved prefix 'shmreg-test-'",
                            refused[i]));
    assert_fails(shmreg_register_system(reg, "in", "/triton_abc", 0, OBJ_SIZE, 0),
                 SHMREG_ERR_INVALID_ARG,
                 "cannot register shared memory region 'in' with key '/triton_abc' as the key "
                 "contains the reserved prefix 'triton_'");
    assert_int_equal(ut_status_count(reg, SHMREG_KIND_ANY), 0);
    assert_int_equal(tu_count_shm_maps(key), 0);
    shmreg_registry_destroy(reg);
}

/* A prefix is matched at the start of the key only. */
static void test_reserved_prefix_elsewhere_in_key_is_fine(void **state)
{
    struct ut *t = *state;
    static const char *const prefixes[] = {"test-", "shmreg-testx", NULL};
    const char *key = ut_object(t, OBJ_SIZE, 15);
    shmreg_config cfg;
    shmreg_registry *reg = NULL;

    shmreg_config_init(&cfg);
    cfg.reserved_key_prefixes = prefixes;
    assert_ok(shmreg_registry_create(&cfg, &reg));
    register_and_read(reg, "in", key, 15);
    shmreg_registry_destroy(reg);
}

static void test_missing_object_is_a_system_error(void **state)
{
    struct ut *t = *state;
    char key[80];
    snprintf(key, sizeof key, "/shmreg-test-missing-%ld", (long)getpid());

    assert_fails_prefix(shmreg_register_system(t->reg, "in", key, 0, 1, 0), SHMREG_ERR_SYSTEM,
                        ut_fmt("Unable to open shared memory region: '%s'", key));
    assert_non_null(strstr(shmreg_last_error(), strerror(ENOENT)));
    assert_int_equal(ut_status_count(t->reg, SHMREG_KIND_ANY), 0);
    /* The registry opens objects; it never creates one. */
    assert_int_equal(shm_open(key, O_RDONLY, 0), -1);
    assert_int_equal(errno, ENOENT);
}

/* Nor does it unlink one: the client's object outlives its registration. */
static void test_unregister_keeps_the_object(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ_SIZE, 18);

    register_and_read(t->reg, "in", key, 18);
    assert_ok(shmreg_unregister(t->reg, "in", SHMREG_KIND_SYSTEM));
    int fd = shm_open(key, O_RDONLY, 0);
    assert_true(fd >= 0);
    close(fd);
    register_and_read(t->reg, "in", key, 18);
}

static void test_taken_name_already_exists(void **state)
{
    struct ut *t = *state;
    const char *first = ut_object(t, OBJ_SIZE, 16);
    const char *second = ut_object(t, OBJ_SIZE, 17);

    register_and_read(t->reg, "in", first, 16);
    assert_fails(shmreg_register_system(t->reg, "in", second, 0, OBJ_SIZE, 0),
                 SHMREG_ERR_ALREADY_EXISTS, "shared memory region 'in' already in manager");
    assert_fails(shmreg_register_system(t->reg, "in", first, 0, OBJ_SIZE, 0),
                 SHMREG_ERR_ALREADY_EXISTS, "shared memory region 'in' already in manager");
    /* The first registration is untouched and nothing of the second stays. */
    assert_int_equal(tu_count_shm_maps(second), 0);
    shmreg_region *ref = NULL;
    shmreg_view view;
    assert_ok(shmreg_acquire(t->reg, "in", 0, OBJ_SIZE, &ref, &view));
    ut_assert_pattern(view.addr, OBJ_SIZE, 16, 0);
    shmreg_release(ref);
    assert_int_equal(ut_status_count(t->reg, SHMREG_KIND_ANY), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        UT_TEST(test_name_lengths_1_and_255_work),
        UT_TEST(test_bad_names_are_refused),
        UT_TEST(test_invalid_keys_are_refused),
        UT_TEST(test_leading_slashes_name_the_same_object),
        UT_TEST(test_reserved_prefix_is_refused_with_or_without_slash),
        UT_TEST(test_reserved_prefix_elsewhere_in_key_is_fine),
        UT_TEST(test_missing_object_is_a_system_error),
        UT_TEST(test_unregister_keeps_the_object),
        UT_TEST(test_taken_name_already_exists),
    };
    return cmocka_run_group_tests(tests, ut_group_setup, NULL);
}
