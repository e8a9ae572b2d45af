/* Pinning is bounded by the pin budget, and
 * a window with holes (an output region the client never wrote, an input
 * registered before it is written) is pinned within it.
 *
 * Pinning a hole makes the server allocate the page, so the window is
 * counted against the budget (max_pinned_bytes, or SHMREG_AUTO_PIN_BUDGET
 * when that is 0) before a page is touched: one sparse 32 GiB object, free
 * for a client to create, must not make the server allocate 32 GiB.
 *
 * Reached through the static copy: the rules themselves (src/backends/system_window.h,
 * src/core/table.h), and the public API with fake_pinning.h's pinning, which
 * works without a GPU, so that every case runs on the CPU in CI. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fake_pinning.h"
#include "fixture.h"
#include "base/sys.h"
#include "backends/system_window.h"
#include "core/table.h"

#define MIB ((size_t)1 << 20)
#define GIB ((size_t)1 << 30)

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
    return make_sparse(memfd_create("shmreg-sparse", MFD_CLOEXEC | MFD_ALLOW_SEALING), size, populated);
}

/* A POSIX shm object of `size` bytes, its first `populated` written; the
 * key is written to key (64 bytes). */
static void sparse_object(char *key, size_t size, size_t populated)
{
    tu_unique_key("shmreg-sparse", key);
    close(make_sparse(shm_open(key, O_RDWR | O_CREAT | O_EXCL, 0600), size, populated));
}

/* fstat of fd, for the holes check (valid until the next call). */
static const struct stat *stat_of(int fd)
{
    static struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    return &st;
}

static int setup_fake(void **state)
{
    fp_install();
    return ut_setup(state);
}

static int teardown_fake(void **state)
{
    int rc = ut_teardown(state);
    /* Every pin the library made was undone, each by its own unpin. */
    struct fp_counts c = fp_counts();
    fp_remove();
    assert_int_equal(c.live, 0);
    assert_int_equal(c.unmatched, 0);
    assert_int_equal(c.unpins, c.pins);
    return rc;
}

#define FAKE_TEST(fn) cmocka_unit_test_setup_teardown(fn, setup_fake, teardown_fake)

static int pinned_of(shmreg_registry *reg, const char *name)
{
    shmreg_region_status *st = ut_status_of(reg, name);
    int pinned = st->pinned;
    shmreg_status_free(st, 1);
    return pinned;
}

static size_t pinned_bytes_of(shmreg_registry *reg)
{
    shmreg_stats stats;
    assert_ok(shmreg_registry_stats(reg, &stats));
    return stats.pinned_bytes;
}

static shmreg_registry *registry_with(struct ut *t, shmreg_pin_policy pin, size_t max_pinned)
{
    shmreg_config cfg;
    shmreg_config_init(&cfg);
    cfg.pin_policy = pin;
    cfg.max_pinned_bytes = max_pinned;
    cfg.accept_unsealed_fds = 1;
    return ut_registry_config(t, &cfg);
}

/* ---- the holes check (system_window.h) */

static void test_holes_are_found(void **state)
{
    int fd = sparse_memfd(4 * MIB, MIB);
    /* The populated first MiB, at any offset inside it. */
    assert_false(shmreg__system_window_has_holes(fd, 0, MIB, stat_of(fd)));
    assert_false(shmreg__system_window_has_holes(fd, 100, 4000, stat_of(fd)));
    /* A window that reaches the hole, by one page or by all of it. */
    assert_true(shmreg__system_window_has_holes(fd, MIB - 10, 20, stat_of(fd)));
    assert_true(shmreg__system_window_has_holes(fd, 2 * MIB, MIB, stat_of(fd)));
    close(fd);
}

/* The last page of an object whose size is not a page multiple is whole:
 * the part past the end is not a hole. */
static void test_partial_last_page(void **state)
{
    int fd = sparse_memfd(4096 + 100, 4096);
    assert_int_equal(pwrite(fd, "x", 1, 4096), 1);
    assert_false(shmreg__system_window_has_holes(fd, 0, 4196, stat_of(fd)));
    close(fd);
}

static off_t lseek_calls;
static off_t counting_lseek(int fd, off_t off, int whence)
{
    lseek_calls++;
    return lseek(fd, off, whence);
}

static off_t failing_lseek(int fd, off_t off, int whence)
{
    (void)fd, (void)off, (void)whence;
    errno = EIO;
    return -1;
}

/* A tmpfs object whose every page is allocated has no hole, which fstat's
 * block count says without the page walk of SEEK_HOLE (milliseconds for a
 * large object, on every registration and cache hit); a sparse one still
 * gets the walk, and a walk that fails counts as a hole (the pin is then
 * bounded by the budget: stricter, never wrong). */
static void test_fully_written_object_skips_the_walk(void **state)
{
    off_t (*saved)(int, off_t, int) = shmreg__sys.lseek;
    shmreg__sys.lseek = counting_lseek;
    int full = sparse_memfd(4 * MIB, 4 * MIB), sparse = sparse_memfd(4 * MIB, MIB);
    lseek_calls = 0;
    assert_false(shmreg__system_window_has_holes(full, MIB, MIB, stat_of(full)));
    assert_int_equal(lseek_calls, 0);
    assert_false(shmreg__system_window_has_holes(sparse, 0, MIB, stat_of(sparse)));
    assert_int_equal(lseek_calls, 1);
    shmreg__sys.lseek = failing_lseek;
    assert_true(shmreg__system_window_has_holes(sparse, 0, MIB, stat_of(sparse)));
    shmreg__sys.lseek = saved;
    close(full);
    close(sparse);
}

/* Only a demanded pin where pinning works is looked at: AUTO's pin is
 * bounded by the budget whatever the window holds (no walk), and without
 * pinning a demanded pin answers UNSUPPORTED before any budget. */
static void test_only_demanded_pins_are_walked(void **state)
{
    int fd = sparse_memfd(4 * MIB, MIB);
    shmreg_registration r;
    shmreg_registration_init(&r);
    r.name = "sparse";
    r.offset = 2 * MIB;
    r.byte_size = MIB;
    off_t (*saved)(int, off_t, int) = shmreg__sys.lseek;
    shmreg__sys.lseek = counting_lseek;
    lseek_calls = 0;
    struct shmreg__open_args a = {.r = &r, .pin = true, .pin_optional = true};
    shmreg__system_note_holes(&a, fd, stat_of(fd));
    assert_false(a.holes);
    assert_int_equal(lseek_calls, 0);
    a.pin = false;
    a.pin_optional = false;
    shmreg__system_note_holes(&a, fd, stat_of(fd));
    assert_false(a.holes);
    a.pin = true;
    shmreg__system_note_holes(&a, fd, stat_of(fd));
    assert_int_equal(a.holes, shmreg__host_pinning.usable());
    fp_install();
    shmreg__system_note_holes(&a, fd, stat_of(fd));
    assert_true(a.holes);
    r.offset = 0; /* populated */
    shmreg__system_note_holes(&a, fd, stat_of(fd));
    assert_false(a.holes);
    fp_remove();
    shmreg__sys.lseek = saved;
    close(fd);
}

/* ---- the pin budget (table.h) */

static void test_pin_budget(void **state)
{
    static struct shmreg__table t; /* only limits and usage are read */
    memset(&t, 0, sizeof t);
    assert_int_equal(shmreg__usage_pin_budget(&t), SHMREG_AUTO_PIN_BUDGET);
    assert_true(shmreg__usage_pin_fits_budget_locked(&t, SHMREG_AUTO_PIN_BUDGET));
    assert_false(shmreg__usage_pin_fits_budget_locked(&t, SHMREG_AUTO_PIN_BUDGET + 1));
    assert_false(shmreg__usage_pin_fits_budget_locked(&t, SIZE_MAX));
    t.usage.pinned_bytes = SHMREG_AUTO_PIN_BUDGET - 10;
    assert_true(shmreg__usage_pin_fits_budget_locked(&t, 10));
    assert_false(shmreg__usage_pin_fits_budget_locked(&t, 11));
    assert_fails(shmreg__usage_refuse_pin_locked(&t, "out", NULL, 11), SHMREG_ERR_NO_MEMORY,
                 "cannot pin shared memory region 'out': its window has pages the client never populated, which "
                 "pinning would allocate on the server, and 11 more pinned bytes would pass the pin budget, a "
                 "limit of 1073741824 (SHMREG_AUTO_PIN_BUDGET; 1073741814 pinned). Write every page first, raise "
                 "max_pinned_bytes, or register without SHMREG_PIN");
    /* To a tagged registration (a tenant): its own tag's usage, not what every owner
     * has pinned. */
    assert_fails_containing(shmreg__usage_refuse_pin_locked(&t, "out", "tenant", 11), SHMREG_ERR_NO_MEMORY,
                            "a limit of 1073741824 (SHMREG_AUTO_PIN_BUDGET). Write every page first");
    /* max_pinned_bytes, when set, is the budget. */
    t.limits.pinned_bytes = 4 * SHMREG_AUTO_PIN_BUDGET;
    assert_int_equal(shmreg__usage_pin_budget(&t), 4 * SHMREG_AUTO_PIN_BUDGET);
    assert_true(shmreg__usage_pin_fits_budget_locked(&t, 2 * SHMREG_AUTO_PIN_BUDGET));
    assert_fails_containing(shmreg__usage_refuse_pin_locked(&t, "out", NULL, 4 * SHMREG_AUTO_PIN_BUDGET),
                            SHMREG_ERR_NO_MEMORY, "pin budget, a limit of 4294967296 (max_pinned_bytes;");
}

static void test_decide_pin(void **state)
{
    shmreg_registration r;
    shmreg_registration_init(&r);
    r.byte_size = 100;
    struct shmreg__open_args a = {.r = &r, .pin_policy = SHMREG_PIN_AUTO};
    shmreg__system_decide_pin(&a);
    assert_int_equal(a.pin, shmreg__host_pinning.usable());
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
 * which finds the holes before any mapping is looked up, and the pin
 * decision is part of the identity a hit must match. */
static void test_inspect_notes_holes(void **state)
{
    char key[64];
    sparse_object(key, 4 * MIB, MIB);
    shmreg_registration r;
    shmreg_registration_init(&r);
    r.name = "sparse";
    r.key = key;
    r.byte_size = MIB;
    r.offset = 2 * MIB; /* in the hole */
    struct shmreg__open_args a = {.r = &r, .pin = true, .fd = -1};
    assert_ok(shmreg__backend_system.inspect(&a));
    assert_true(a.pin);
    assert_true(a.holes);
    assert_int_equal(a.id.words[3], 1);
    shmreg__backend_system.forget(&a);
    r.offset = 0; /* populated */
    assert_ok(shmreg__backend_system.inspect(&a));
    assert_false(a.holes);
    shmreg__backend_system.forget(&a);
    tu_shm_unlink(key);
}

/* ---- through the public API, with the fake pinning */

/* Register `name` on the window [0, size) of the sparse key, and say how. */
static void assert_pinned(shmreg_registry *reg, const char *name, size_t size, bool pinned)
{
    assert_int_equal(pinned_of(reg, name), pinned);
    shmreg_region *ref = NULL;
    shmreg_view view;
    assert_ok(shmreg_acquire(reg, name, 0, size, &ref, &view));
    assert_int_equal(view.pinned, pinned);
    shmreg_release(ref);
}

/* An output region the client never wrote, and an input
 * registered before it is written, are pinned under AUTO, ALWAYS and
 * SHMREG_PIN, each counted whole against the budget; SHMREG_NO_PIN is
 * respected under every policy. */
static void test_windows_with_holes_are_pinned(void **state)
{
    struct ut *t = *state;
    char key[64];
    sparse_object(key, 8 * MIB, 0); /* never written */
    for (int policy = SHMREG_PIN_AUTO; policy <= SHMREG_PIN_ALWAYS; policy++) {
        shmreg_registry *reg = registry_with(t, (shmreg_pin_policy)policy, 0);
        struct fp_counts before = fp_counts();
        assert_ok(shmreg_register_system(reg, "out", key, 0, 4 * MIB, 0));
        assert_ok(shmreg_register_system(reg, "in", key, 4 * MIB, MIB, SHMREG_PIN));
        assert_ok(shmreg_register_system(reg, "never", key, 5 * MIB, MIB, SHMREG_NO_PIN));
        bool pins = policy != SHMREG_PIN_NEVER;
        assert_pinned(reg, "out", 4 * MIB, pins);
        assert_pinned(reg, "in", MIB, true);
        assert_pinned(reg, "never", MIB, false);
        assert_int_equal(pinned_bytes_of(reg), (pins ? 4 * MIB : 0) + MIB);
        assert_int_equal(fp_counts().pins - before.pins, pins ? 2 : 1);
        assert_ok(shmreg_unregister_all(reg, SHMREG_KIND_ANY));
        assert_int_equal(fp_counts().live, 0);
        assert_int_equal(pinned_bytes_of(reg), 0);
    }
    tu_shm_unlink(key);
}

/* Past the budget: AUTO registers the window unpinned, a demanded pin is
 * refused with the budget in its message, and neither pins anything. The
 * budget counts what is already pinned. With max_pinned_bytes set, that is
 * the budget, and the demanded pin gets the limit's own refusal; with it 0,
 * SHMREG_AUTO_PIN_BUDGET is, named as such. */
static void test_budget_bounds_windows_with_holes(void **state)
{
    struct ut *t = *state;
    char key[64];
    sparse_object(key, 16 * MIB, 0);
    shmreg_registry *reg = registry_with(t, SHMREG_PIN_AUTO, 8 * MIB);
    assert_ok(shmreg_register_system(reg, "a", key, 0, 6 * MIB, 0));
    assert_ok(shmreg_register_system(reg, "b", key, 6 * MIB, 4 * MIB, 0)); /* 10 MiB > 8 */
    assert_pinned(reg, "a", 6 * MIB, true);
    assert_pinned(reg, "b", 4 * MIB, false);
    /* max_pinned_bytes is the budget: its own refusal. */
    assert_fails(shmreg_register_system(reg, "c", key, 6 * MIB, 4 * MIB, SHMREG_PIN), SHMREG_ERR_NO_MEMORY,
                 "cannot register shared memory region 'c': 4194304 more pinned bytes would pass this registry's "
                 "limit of 8388608 (6291456 in use)");
    assert_int_equal(fp_counts().pins, 1);
    assert_int_equal(pinned_bytes_of(reg), 6 * MIB);
    assert_ok(shmreg_unregister_all(reg, SHMREG_KIND_ANY));
    tu_shm_unlink(key);

    /* The default budget: the fake pins nothing, so a 1 GiB window costs
     * nothing here. */
    sparse_object(key, GIB + 4 * MIB, 0);
    reg = registry_with(t, SHMREG_PIN_AUTO, 0);
    assert_ok(shmreg_register_system(reg, "a", key, 0, GIB - MIB, 0));
    assert_pinned(reg, "a", GIB - MIB, true);
    assert_ok(shmreg_register_system(reg, "b", key, GIB, 2 * MIB, 0));
    assert_pinned(reg, "b", 2 * MIB, false);
    assert_fails(shmreg_register_system(reg, "c", key, GIB, 2 * MIB, SHMREG_PIN), SHMREG_ERR_NO_MEMORY,
                 "cannot pin shared memory region 'c': its window has pages the client never populated, which "
                 "pinning would allocate on the server, and 2097152 more pinned bytes would pass the pin budget, a "
                 "limit of 1073741824 (SHMREG_AUTO_PIN_BUDGET; 1072693248 pinned). Write every page first, raise "
                 "max_pinned_bytes, or register without SHMREG_PIN");
    assert_ok(shmreg_register_system(reg, "d", key, GIB, MIB, SHMREG_PIN)); /* fits exactly */
    assert_pinned(reg, "d", MIB, true);
    assert_int_equal(pinned_bytes_of(reg), GIB);
    assert_ok(shmreg_unregister_all(reg, SHMREG_KIND_ANY));
    tu_shm_unlink(key);
}

/* A populated window with a demanded pin is bounded by max_pinned_bytes
 * alone, as before: it allocates nothing on the server. */
static void test_populated_demanded_pin_is_not_budgeted(void **state)
{
    struct ut *t = *state;
    char key[64];
    sparse_object(key, 4 * MIB, 4 * MIB);
    shmreg_registry *reg = registry_with(t, SHMREG_PIN_ALWAYS, 0);
    assert_ok(shmreg_register_system(reg, "full", key, 0, 4 * MIB, 0));
    assert_pinned(reg, "full", 4 * MIB, true);
    assert_ok(shmreg_unregister_all(reg, SHMREG_KIND_ANY));
    tu_shm_unlink(key);
}

static double ms_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

/* Register the whole sparse object and print how long the answer took
 * (a figure, not a check: speed is the benches' business). */
static shmreg_err timed_register(shmreg_registry *reg, const shmreg_registration *r, const char *how)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    shmreg_err err = shmreg_register(reg, r);
    printf("sparse 32 GiB, %-28s %-22s %.3f ms\n", how, shmreg_err_name(err), ms_since(&t0));
    return err;
}

/* The case: a sparse 32 GiB object (ftruncate, nothing written),
 * by key and by descriptor. AUTO registers it unpinned, ALWAYS and
 * SHMREG_PIN refuse it naming the budget; nothing is pinned, and the answer
 * comes from the table's counters before any page is touched. */
static void test_sparse_32_gib(void **state)
{
    struct ut *t = *state;
    const size_t size = (size_t)32 << 30;
    char key[64];
    sparse_object(key, size, 0);
    int fd = sparse_memfd(size, 0);
    for (int source = 0; source < 2; source++) {
        shmreg_registration r;
        shmreg_registration_init(&r);
        r.name = "sparse";
        r.byte_size = size;
        if (source == 0) {
            r.key = key;
        } else {
            r.source = SHMREG_SOURCE_FD;
            r.fd = fd;
        }
        const char *what = source == 0 ? "key" : "memfd";
        char how[64];
        shmreg_registry *reg = registry_with(t, SHMREG_PIN_AUTO, 0);
        snprintf(how, sizeof how, "%s, AUTO:", what);
        assert_ok(timed_register(reg, &r, how));
        assert_pinned(reg, "sparse", size, false);
        assert_ok(shmreg_unregister(reg, "sparse", SHMREG_KIND_ANY));
        r.flags = SHMREG_PIN;
        snprintf(how, sizeof how, "%s, SHMREG_PIN:", what);
        assert_int_equal(timed_register(reg, &r, how), SHMREG_ERR_NO_MEMORY);
        assert_true(strstr(shmreg_last_error(), "pin budget, a limit of 1073741824 (SHMREG_AUTO_PIN_BUDGET") != NULL);
        r.flags = 0;
        reg = registry_with(t, SHMREG_PIN_ALWAYS, 0);
        snprintf(how, sizeof how, "%s, PIN_ALWAYS:", what);
        assert_int_equal(timed_register(reg, &r, how), SHMREG_ERR_NO_MEMORY);
        assert_true(strstr(shmreg_last_error(), "pin budget, a limit of 1073741824") != NULL);
        assert_int_equal(ut_status_count(reg, SHMREG_KIND_ANY), 0);
    }
    assert_int_equal(fp_counts().pins, 0);
    /* Still sparse: no page of it was allocated. */
    assert_true(stat_of(fd)->st_blocks == 0);
    close(fd);
    tu_shm_unlink(key);
}

/* ---- a slow pin blocks no one
 *
 * Pinning a window with holes allocates every page (about 500 ms per GiB,
 * measured), inside the registering call. It runs outside every lock of
 * the registry: while one registration's pin is held inside the call, other
 * threads register (pinned too), acquire, release, list and unregister other
 * regions. Were a lock held across the pin, those calls would wait for the
 * fake's bound and the pin would be over when they return. */
struct slow_registration {
    shmreg_registry *reg;
    const char *key;
    shmreg_err err;
};

static void *register_slowly(void *arg)
{
    struct slow_registration *s = arg;
    s->err = shmreg_register_system(s->reg, "slow", s->key, 0, 4 * MIB, SHMREG_PIN);
    return NULL;
}

static void test_slow_pin_blocks_no_one(void **state)
{
    struct ut *t = *state;
    char key[64];
    sparse_object(key, 8 * MIB, 0);
    shmreg_registry *reg = registry_with(t, SHMREG_PIN_AUTO, 0);
    assert_ok(shmreg_register_system(reg, "resident", key, 7 * MIB, MIB, 0));

    fp_hold("slow");
    struct slow_registration s = {.reg = reg, .key = key};
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, register_slowly, &s), 0);
    assert_true(fp_wait_pinning());

    shmreg_region *ref = NULL;
    shmreg_view view;
    assert_ok(shmreg_register_system(reg, "other", key, 4 * MIB, MIB, 0));
    assert_pinned(reg, "other", MIB, true);
    assert_ok(shmreg_acquire(reg, "resident", 0, MIB, &ref, &view));
    shmreg_release(ref);
    assert_int_equal(ut_status_count(reg, SHMREG_KIND_ANY), 2);
    assert_int_equal(pinned_bytes_of(reg), 2 * MIB + 4 * MIB); /* slow's share is reserved */
    /* The pending registration is not a region yet: its name is not
     * found, and a registration that takes it meanwhile wins. */
    assert_fails_code(shmreg_unregister(reg, "slow", SHMREG_KIND_ANY), SHMREG_ERR_NOT_FOUND);
    assert_ok(shmreg_register_system(reg, "slow", key, 5 * MIB, MIB, SHMREG_NO_PIN));
    assert_ok(shmreg_unregister(reg, "other", SHMREG_KIND_ANY));
    assert_true(fp_pinning()); /* every call above ran while the pin was held */

    fp_hold(NULL);
    assert_int_equal(pthread_join(thread, NULL), 0);
    assert_int_equal(s.err, SHMREG_ERR_ALREADY_EXISTS);
    /* The loser's pin was undone, and its share given back. */
    assert_int_equal(fp_counts().live, 1); /* resident */
    assert_int_equal(pinned_bytes_of(reg), MIB);
    assert_pinned(reg, "slow", MIB, false);

    /* Unhindered, the slow registration publishes its pinned region. */
    assert_ok(shmreg_unregister(reg, "slow", SHMREG_KIND_ANY));
    assert_ok(shmreg_register_system(reg, "slow", key, 0, 4 * MIB, SHMREG_PIN));
    assert_pinned(reg, "slow", 4 * MIB, true);
    assert_ok(shmreg_unregister_all(reg, SHMREG_KIND_ANY));
    tu_shm_unlink(key);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        UT_TEST(test_holes_are_found),
        UT_TEST(test_partial_last_page),
        UT_TEST(test_fully_written_object_skips_the_walk),
        UT_TEST(test_only_demanded_pins_are_walked),
        UT_TEST(test_pin_budget),
        UT_TEST(test_decide_pin),
        FAKE_TEST(test_inspect_notes_holes),
        FAKE_TEST(test_windows_with_holes_are_pinned),
        FAKE_TEST(test_budget_bounds_windows_with_holes),
        FAKE_TEST(test_populated_demanded_pin_is_not_budgeted),
        FAKE_TEST(test_sparse_32_gib),
        FAKE_TEST(test_slow_pin_blocks_no_one),
    };
    return cmocka_run_group_tests_name("pin_rules", tests, ut_group_setup, NULL);
}
