/* A client registers its own shm object, truncates it and
 * sends a request that reads it. With guarded copies the server gets
 * SHMREG_ERR_FAULT for that request instead of dying of SIGBUS; the host
 * program's own SIGBUS handler still gets every fault that is not a guarded
 * copy's. The first group runs before shmreg_guard_install, the second
 * after it.
 *
 * cmocka puts its own SIGBUS handler in place around every test and fixture
 * (and restores the one before after it), so main keeps the disposition the
 * guard installed and each test of the second group puts it back first: as
 * in a host program, the library's handler is on top and chains to the
 * host's. */
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fixture.h"

#define PAGE 4096
#define OBJ (4 * PAGE)

/* The host program's own handler, installed before the guard: it records
 * and jumps back to the test (a real host would do its own recovery). */
static sigjmp_buf host_jump;
static volatile sig_atomic_t host_calls;
static void host_handler(int sig, siginfo_t *info, void *ctx)
{
    host_calls++;
    siglongjmp(host_jump, 1);
}

static struct sigaction guard_action; /* what shmreg_guard_install left */

static void use_guard(void)
{
    assert_int_equal(sigaction(SIGBUS, &guard_action, NULL), 0);
}

static void shrink(const char *key, off_t size)
{
    int fd = shm_open(key, O_RDWR, 0);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, size), 0);
    close(fd);
}

static void acquire_all(struct ut *t, const char *key, shmreg_region **ref, shmreg_view *view)
{
    assert_ok(shmreg_register_system(t->reg, "victim", key, 0, OBJ, 0));
    assert_ok(shmreg_acquire(t->reg, "victim", 0, OBJ, ref, view));
}

static void test_refused_before_install(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ, 1);
    shmreg_region *ref;
    shmreg_view view;
    acquire_all(t, key, &ref, &view);
    char buf[16];
    assert_fails(shmreg_copy_from_view(ref, &view, 0, buf, sizeof buf), SHMREG_ERR_UNSUPPORTED,
                 "shmreg_copy_from_view: region 'victim': call shmreg_guard_install once before guarded copies");
    shmreg_release(ref);
}

/* The host's handler goes in first; the guard chains to it. */
static void install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = host_handler;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGBUS, &sa, NULL) != 0 || shmreg_guard_install() != SHMREG_OK ||
        shmreg_guard_install() != SHMREG_OK || /* once; a second call changes nothing */
        sigaction(SIGBUS, NULL, &guard_action) != 0 || guard_action.sa_sigaction == host_handler)
        abort();
}

static void test_truncated_object_gives_fault(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ, 2);
    use_guard();
    shmreg_region *ref;
    shmreg_view view;
    acquire_all(t, key, &ref, &view);
    shrink(key, PAGE); /* the hostile client */

    static char buf[OBJ];
    assert_ok(shmreg_copy_from_view(ref, &view, 10, buf, PAGE - 10)); /* what is left still reads */
    ut_assert_pattern(buf, PAGE - 10, 2, 10);
    host_calls = 0;
    /* Twice each way: the fault path leaves SIGBUS unblocked for the next. */
    for (int i = 0; i < 2; i++) {
        /* memcpy may touch the lost pages in any order: the byte named is
         * the first one that faulted, somewhere past the first page. */
        assert_fails_prefix(shmreg_copy_from_view(ref, &view, 0, buf, OBJ), SHMREG_ERR_FAULT,
                            "shared memory region 'victim': byte ");
        assert_true(strstr(shmreg_last_error(), "of it is gone (its object was truncated under the mapping); "
                                                "the copy was stopped") != NULL);
        size_t at = 0;
        assert_int_equal(sscanf(shmreg_last_error(), "shared memory region 'victim': byte %zu", &at), 1);
        assert_true(at >= PAGE && at < OBJ);
        assert_fails_prefix(shmreg_copy_to_view(ref, &view, 2 * PAGE + 5, buf, 100), SHMREG_ERR_FAULT,
                            "shared memory region 'victim': byte 8");
    }
    assert_int_equal(host_calls, 0);
    shmreg_release(ref);
    assert_ok(shmreg_unregister(t->reg, "victim", SHMREG_KIND_ANY));
}

/* A SIGBUS outside a guarded copy (here: the server reading the view
 * directly, or a signal sent with kill) goes to the host's handler. */
static void test_other_faults_reach_the_host_handler(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ, 3);
    use_guard();
    shmreg_region *ref;
    shmreg_view view;
    acquire_all(t, key, &ref, &view);
    shrink(key, 0);
    host_calls = 0;
    if (sigsetjmp(host_jump, 1) == 0) {
        volatile char c = ((volatile char *)view.addr)[PAGE];
        (void)c;
        fail_msg("reading a truncated page did not fault");
    }
    assert_int_equal(host_calls, 1);
    if (sigsetjmp(host_jump, 1) == 0) {
        raise(SIGBUS);
        fail_msg("SIGBUS was not delivered");
    }
    assert_int_equal(host_calls, 2);
    /* And the guard still works after the host's handler jumped. */
    char buf[8];
    assert_fails_code(shmreg_copy_from_view(ref, &view, 0, buf, sizeof buf), SHMREG_ERR_FAULT);
    assert_int_equal(host_calls, 2);
    shmreg_release(ref);
}

static void test_arguments(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ, 4);
    assert_ok(shmreg_register_system(t->reg, "ro", key, 0, OBJ, SHMREG_READONLY));
    assert_ok(shmreg_register_system(t->reg, "rw", key, 0, OBJ, 0));
    shmreg_region *ro, *rw;
    shmreg_view vro, vrw;
    assert_ok(shmreg_acquire(t->reg, "ro", PAGE, 100, &ro, &vro));
    assert_ok(shmreg_acquire(t->reg, "rw", PAGE, 100, &rw, &vrw));
    char buf[200];
    assert_ok(shmreg_copy_from_view(ro, &vro, 0, buf, 100));
    ut_assert_pattern(buf, 100, 4, PAGE);
    assert_ok(shmreg_copy_from_view(ro, &vro, 100, buf, 0));
    assert_ok(shmreg_copy_to_view(rw, &vrw, 50, "hello", 5));
    assert_ok(shmreg_copy_from_view(ro, &vro, 50, buf, 5)); /* the same object */
    assert_memory_equal(buf, "hello", 5);
    assert_fails(shmreg_copy_from_view(ro, &vro, 1, buf, 100), SHMREG_ERR_OUT_OF_BOUNDS,
                 "shmreg_copy_from_view: offset 1 + 100 bytes is past the end of the 100-byte view of region 'ro'");
    assert_fails_code(shmreg_copy_from_view(ro, &vro, SIZE_MAX, buf, 2), SHMREG_ERR_OUT_OF_BOUNDS);
    assert_fails(shmreg_copy_to_view(ro, &vro, 0, "x", 1), SHMREG_ERR_INVALID_ARG,
                 "shmreg_copy_to_view: region 'ro' is registered read-only");
    assert_fails_containing(shmreg_copy_from_view(ro, &vrw, 0, buf, 1), SHMREG_ERR_INVALID_ARG,
                            "the view is not one of region 'ro'");
    assert_fails_code(shmreg_copy_from_view(NULL, &vro, 0, buf, 1), SHMREG_ERR_INVALID_ARG);
    assert_fails_code(shmreg_copy_from_view(ro, NULL, 0, buf, 1), SHMREG_ERR_INVALID_ARG);
    assert_fails_code(shmreg_copy_from_view(ro, &vro, 0, NULL, 1), SHMREG_ERR_INVALID_ARG);
    shmreg_view cuda = vro;
    cuda.kind = SHMREG_KIND_CUDA;
    assert_fails_containing(shmreg_copy_from_view(ro, &cuda, 0, buf, 1), SHMREG_ERR_INVALID_ARG,
                            "is not host memory");
    shmreg_release(ro);
    shmreg_release(rw);
}

int main(void)
{
    const struct CMUnitTest before[] = {
        UT_TEST(test_refused_before_install),
    };
    if (cmocka_run_group_tests_name("guarded_copy_before_install", before, ut_group_setup, NULL))
        return 1;
    install();
    const struct CMUnitTest tests[] = {
        UT_TEST(test_truncated_object_gives_fault),
        UT_TEST(test_other_faults_reach_the_host_handler),
        UT_TEST(test_arguments),
    };
    return cmocka_run_group_tests_name("guarded_copy", tests, ut_group_setup, NULL);
}
