/* Error codes, their name and description tables, the thread-local message,
 * and the run-time version. */
#include "fixture.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static void test_err_names_follow_the_code_list(void **state)
{
#define UT_CHECK_NAME_(name, value, desc)                                                     \
    assert_int_equal(SHMREG_##name, value);                                                  \
    assert_string_equal(shmreg_err_name(SHMREG_##name), "SHMREG_" #name);                   \
    assert_string_equal(shmreg_err_description(SHMREG_##name), desc);
    SHMREG_ERR_MAP(UT_CHECK_NAME_)
#undef UT_CHECK_NAME_
    assert_string_equal(shmreg_err_name(SHMREG_ERR_BUSY), "SHMREG_ERR_BUSY");
}

static void test_err_name_of_unknown_code(void **state)
{
    /* The first value past the list. */
#define UT_COUNT_(name, value, desc) +1
    assert_string_equal(shmreg_err_name((shmreg_err)(0 SHMREG_ERR_MAP(UT_COUNT_))), "SHMREG_ERR_UNKNOWN");
#undef UT_COUNT_
    assert_string_equal(shmreg_err_name((shmreg_err)-1), "SHMREG_ERR_UNKNOWN");
    assert_string_equal(shmreg_err_name((shmreg_err)12345), "SHMREG_ERR_UNKNOWN");
    assert_non_null(shmreg_err_description((shmreg_err)12345));
    assert_non_null(shmreg_err_description((shmreg_err)-1));
}

static void test_version_matches_header(void **state)
{
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", SHMREG_VERSION_MAJOR, SHMREG_VERSION_MINOR,
             SHMREG_VERSION_PATCH);
    assert_string_equal(SHMREG_VERSION_STRING, want);
    assert_non_null(shmreg_version());
    assert_string_equal(shmreg_version(), SHMREG_VERSION_STRING);
}

/* A thread that never failed sees "", whatever other threads did. */
static void *last_error_of_fresh_thread(void *arg)
{
    const char *msg = shmreg_last_error();
    snprintf(arg, 256, "%s", msg ? msg : "(null)");
    return NULL;
}

static void *fail_one_acquire(void *arg)
{
    shmreg_region *ref = NULL;
    shmreg_view view;
    shmreg_err e = shmreg_acquire(arg, "other-thread", 0, 0, &ref, &view);
    return e == SHMREG_ERR_NOT_FOUND ? arg : NULL;
}

static void test_last_error_is_per_thread(void **state)
{
    struct ut *t = *state;
    char seen[256];
    pthread_t th;

    assert_int_equal(pthread_create(&th, NULL, last_error_of_fresh_thread, seen), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_string_equal(seen, "");

    shmreg_region *ref = NULL;
    shmreg_view view;
    assert_fails(shmreg_acquire(t->reg, "mine", 0, 0, &ref, &view), SHMREG_ERR_NOT_FOUND,
                 "Unable to find shared memory region: 'mine'");

    /* Another thread's failure leaves this thread's message alone. */
    void *res = NULL;
    assert_int_equal(pthread_create(&th, NULL, fail_one_acquire, t->reg), 0);
    assert_int_equal(pthread_join(th, &res), 0);
    assert_ptr_equal(res, t->reg);
    assert_string_equal(shmreg_last_error(), "Unable to find shared memory region: 'mine'");
}

static void test_success_keeps_last_error(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, 4096, 3);
    shmreg_region *ref = NULL;
    shmreg_view view;

    assert_fails(shmreg_acquire(t->reg, "x", 0, 0, &ref, &view), SHMREG_ERR_NOT_FOUND,
                 "Unable to find shared memory region: 'x'");
    assert_ok(shmreg_register_system(t->reg, "x", key, 0, 4096, 0));
    assert_ok(shmreg_acquire(t->reg, "x", 0, 0, &ref, &view));
    shmreg_release(ref);
    assert_ok(shmreg_unregister(t->reg, "x", SHMREG_KIND_SYSTEM));
    assert_string_equal(shmreg_last_error(), "Unable to find shared memory region: 'x'");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_err_names_follow_the_code_list),
        cmocka_unit_test(test_err_name_of_unknown_code),
        cmocka_unit_test(test_version_matches_header),
        UT_TEST(test_last_error_is_per_thread),
        UT_TEST(test_success_keeps_last_error),
    };
    return cmocka_run_group_tests(tests, ut_group_setup, NULL);
}
