/* issue 11 (5): pinning is bounded by default and never faults in a page
 * the client has not populated. One sparse 32 GiB object, free for a client
 * to create, made the server page-lock 32 GiB under AUTO pinning.
 *
 * The rules are reached through the static copy (src/system_window.h), so
 * that they are tried on a machine without CUDA too; the public-API cases
 * that need pinning to work skip their pinned half without CUDA. */
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fixture.h"
#include "system_window.h"

#define MIB ((size_t)1 << 20)

/* fd, made `size` bytes long with only its first `populated` bytes written. */
static int make_sparse(int fd, size_t size, size_t populated)
{
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)size), 0);
    static char page[4096];
    memset(page, 1, sizeof page);
    for (size_t done = 0; done < populated; done += sizeof page)
        assert_int_equal(pwrite(fd, page, sizeof page, (off_t)done), (ssize_t)sizeof page);
    return fd;
}

static int sparse_memfd(size_t size, size_t populated)
{
    return make_sparse(memfd_create("shmreg-sparse", MFD_CLOEXEC), size, populated);
}

static struct shmreg__open_args args_for(shmreg_registration *r, bool optional)
{
    shmreg_registration_init(r);
    r->name = "sparse";
    r->byte_size = MIB;
    struct shmreg__open_args a = {.r = r, .pin = true, .pin_optional = optional};
    return a;
}

/* A demanded pin is looked at only where pinning can work (without CUDA
 * the pin answers UNSUPPORTED, as in 1.0): this half runs on the GPU
 * machine; the optional pin below tries the same detection everywhere. */
static void test_holes_refuse_a_demanded_pin(void **state)
{
    if (!ut_cuda_usable())
        skip();
    int fd = sparse_memfd(4 * MIB, MIB);
    shmreg_registration r;
    struct shmreg__open_args a = args_for(&r, false);
    bool pin = true;
    /* The populated first MiB: pinnable, at any offset inside it. */
    assert_ok(shmreg__system_check_populated(&a, fd, 0, MIB, 4 * MIB, &pin));
    assert_ok(shmreg__system_check_populated(&a, fd, 100, 4000, 4 * MIB, &pin));
    assert_true(pin);
    /* A window that reaches the hole. */
    assert_fails(shmreg__system_check_populated(&a, fd, MIB - 10, 20, 4 * MIB, &pin), SHMREG_ERR_INVALID_ARG,
                 "cannot pin shared memory region 'sparse': its window has pages the client never populated (a "
                 "hole at byte 1048576 of the object); pinning would allocate them on the server. Write every "
                 "page first, or register without SHMREG_PIN");
    assert_true(pin);
    close(fd);
}

static void test_holes_drop_an_optional_pin(void **state)
{
    int fd = sparse_memfd(4 * MIB, MIB);
    shmreg_registration r;
    struct shmreg__open_args a = args_for(&r, true);
    bool pin = true;
    /* The populated first MiB keeps the pin, at any offset inside it. */
    assert_ok(shmreg__system_check_populated(&a, fd, 0, MIB, 4 * MIB, &pin));
    assert_ok(shmreg__system_check_populated(&a, fd, 100, 4000, 4 * MIB, &pin));
    assert_true(pin);
    /* A window that reaches the hole, by one page or by all of it. */
    assert_ok(shmreg__system_check_populated(&a, fd, MIB - 10, 20, 4 * MIB, &pin));
    assert_false(pin); /* AUTO: registered unpinned */
    pin = true;
    assert_ok(shmreg__system_check_populated(&a, fd, 2 * MIB, MIB, 4 * MIB, &pin));
    assert_false(pin);
    close(fd);
}

/* The last page of an object whose size is not a page multiple is whole:
 * the part past the end is not a hole. */
static void test_partial_last_page(void **state)
{
    int fd = sparse_memfd(4096 + 100, 4096);
    assert_int_equal(pwrite(fd, "x", 1, 4096), 1);
    shmreg_registration r;
    struct shmreg__open_args a = args_for(&r, true);
    bool pin = true;
    assert_ok(shmreg__system_check_populated(&a, fd, 0, 4196, 4196, &pin));
    assert_true(pin);
    close(fd);
}

static void test_auto_budget(void **state)
{
    static struct shmreg__table t; /* only limits and usage are read */
    memset(&t, 0, sizeof t);
    assert_true(shmreg__system_auto_pin_fits_locked(&t, SHMREG_AUTO_PIN_BUDGET));
    assert_false(shmreg__system_auto_pin_fits_locked(&t, SHMREG_AUTO_PIN_BUDGET + 1));
    assert_false(shmreg__system_auto_pin_fits_locked(&t, SIZE_MAX));
    t.usage.pinned_bytes = SHMREG_AUTO_PIN_BUDGET - 10;
    assert_true(shmreg__system_auto_pin_fits_locked(&t, 10));
    assert_false(shmreg__system_auto_pin_fits_locked(&t, 11));
    /* max_pinned_bytes, when set, is the budget. */
    t.limits.pinned_bytes = 4 * SHMREG_AUTO_PIN_BUDGET;
    assert_true(shmreg__system_auto_pin_fits_locked(&t, 2 * SHMREG_AUTO_PIN_BUDGET));
}

static void test_decide_pin(void **state)
{
    shmreg_registration r;
    shmreg_registration_init(&r);
    r.byte_size = 100;
    struct shmreg__open_args a = {.r = &r, .pin_policy = SHMREG_PIN_AUTO};
    shmreg__system_decide_pin(&a);
    assert_int_equal(a.pin, ut_cuda_usable());
    assert_int_equal(a.pin_optional, a.pin); /* AUTO's pin is optional */
    r.flags = SHMREG_PIN;
    shmreg__system_decide_pin(&a);
    assert_true(a.pin);
    assert_false(a.pin_optional);
    assert_int_equal(a.pinned_bytes, 100);
    r.flags = 0;
    a.pin_policy = SHMREG_PIN_ALWAYS;
    shmreg__system_decide_pin(&a);
    assert_true(a.pin && !a.pin_optional);
    a.pin_policy = SHMREG_PIN_NEVER;
    shmreg__system_decide_pin(&a);
    assert_false(a.pin);
    assert_int_equal(a.pinned_bytes, 0);
}

/* The registration cache's hit path starts with the backend's inspect,
 * which applies the holes rule before any mapping is looked up: an
 * optional pin of a window with holes is dropped there, and the identity a
 * hit must match says unpinned, so a pinned cached mapping is never handed
 * to it; a populated window keeps its pin, and its identity says so. */
static void test_inspect_applies_the_holes_rule(void **state)
{
    char key[64];
    tu_unique_key("shmreg-sparse", key);
    close(make_sparse(shm_open(key, O_RDWR | O_CREAT | O_EXCL, 0600), 4 * MIB, MIB));
    shmreg_registration r;
    struct shmreg__open_args a = args_for(&r, true);
    r.key = key;
    a.fd = -1;
    r.offset = 2 * MIB; /* in the hole */
    assert_ok(shmreg__backend_system.inspect(&a));
    assert_false(a.pin);
    assert_int_equal(a.id.words[3], 0);
    shmreg__backend_system.forget(&a);
    a.pin = true;
    r.offset = 0; /* populated */
    assert_ok(shmreg__backend_system.inspect(&a));
    assert_true(a.pin);
    assert_int_equal(a.id.words[3], 1);
    shmreg__backend_system.forget(&a);
    tu_shm_unlink(key);
}

/* Through the public API: with CUDA, a demanded pin of a sparse shm object
 * is refused for its holes before any pinning is tried, and the dense one is
 * pinned (before the fix the sparse one was pinned whole); without CUDA both
 * are UNSUPPORTED, as in 1.0. AUTO registers the sparse window unpinned. */
static void test_register_sparse_object_with_pin(void **state)
{
    struct ut *t = *state;
    char key[64];
    tu_unique_key("shmreg-sparse", key);
    int fd = shm_open(key, O_RDWR | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)(64 * MIB)), 0);
    assert_int_equal(pwrite(fd, "x", 1, 0), 1);
    close(fd);
    if (ut_cuda_usable())
        assert_fails_containing(shmreg_register_system(t->reg, "s", key, 0, 64 * MIB, SHMREG_PIN),
                                SHMREG_ERR_INVALID_ARG, "its window has pages the client never populated");
    else
        assert_fails_code(shmreg_register_system(t->reg, "s", key, 0, 64 * MIB, SHMREG_PIN),
                          SHMREG_ERR_UNSUPPORTED);
    assert_int_equal(tu_count_shm_maps(key), 0);
    shmreg_err dense = shmreg_register_system(t->reg, "d", key, 0, 4096, SHMREG_PIN);
    assert_int_equal(dense, ut_cuda_usable() ? SHMREG_OK : SHMREG_ERR_UNSUPPORTED);
    /* AUTO (the default) registers the sparse window, unpinned. */
    assert_ok(shmreg_register_system(t->reg, "auto", key, 0, 64 * MIB, 0));
    shmreg_region_status *st = ut_status_of(t->reg, "auto");
    assert_int_equal(st->pinned, 0);
    shmreg_status_free(st, 1);
    shmreg_stats stats;
    assert_ok(shmreg_registry_stats(t->reg, &stats));
    assert_int_equal(stats.pinned_bytes, dense == SHMREG_OK ? 4096 : 0);
    assert_ok(shmreg_unregister_all(t->reg, SHMREG_KIND_ANY));
    tu_shm_unlink(key);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        UT_TEST(test_holes_refuse_a_demanded_pin),
        UT_TEST(test_holes_drop_an_optional_pin),
        UT_TEST(test_partial_last_page),
        UT_TEST(test_auto_budget),
        UT_TEST(test_decide_pin),
        UT_TEST(test_register_sparse_object_with_pin),
        UT_TEST(test_inspect_applies_the_holes_rule),
    };
    return cmocka_run_group_tests_name("pin_rules", tests, ut_group_setup, NULL);
}
