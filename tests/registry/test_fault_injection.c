/* Failure injection: for each public operation, fail its N-th failable call
 * (shm_open, fstat, mmap, munmap, close, fcntl, lseek, malloc, calloc), for every N
 * until the operation makes fewer than N calls, with each errno of a list,
 * and prove that the failure is clean:
 *  - an operation that can report the failure returns the right code and
 *    message, and leaves the registry's status, the process's descriptors and
 *    shm mappings and the library's allocations exactly as they were;
 *  - a failure inside a deleter (munmap of the last release) is reported once
 *    through the config's log_fn and frees all bookkeeping; only the mapping
 *    the failed munmap could not remove is left, and the test removes it;
 *  - the registry still registers, maps and unregisters afterwards.
 * The registries run with the tenancy settings on (an owner allow-list, owner
 * tags, and limits just large enough for each case), so those copies are
 * failed too, and a failure path that kept its reservation against the limits
 * would make a later registration of the same case fail.
 * Links the static copy of the library to reach its seam (src/base/sys.h). The
 * total of injected failures survived is printed at the end. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <urcu/urcu-bp.h>

#include "backends/backend.h"
#include "fake_pinning.h"
#include "faultinject.h"
#include "fixture.h"
#include "core/registry.h"
#include "shmreg/shmreg.h"
#include "testutil.h"

#define OBJ_SIZE 8192
#define NOBJECTS 3
#define MAX_NAMES 4
#define MAX_REGIONS 3 /* the most any case holds at once */
#define TAG "tenant-a"

/* Each injection runs once per errno: the message must carry its text. */
static const int injected_errnos[] = {EACCES, EIO, ENOMEM, EMFILE, EINTR};

static unsigned long survived;
static char keys[NOBJECTS][64];

/* A sealed memfd for the SHMREG_SOURCE_FD cases, open for the whole run;
 * and one never written (all holes), for the pins of windows with holes. */
static int memfd = -1;
static int holes_memfd = -1;
static char holes_key[64]; /* a shm object never written, the same size */

static void open_memfd(void)
{
    memfd = memfd_create("fi-memfd", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    assert_true(memfd >= 0);
    static char page[4096];
    for (size_t done = 0; done < OBJ_SIZE; done += sizeof page)
        assert_int_equal(pwrite(memfd, page, sizeof page, (off_t)done), (ssize_t)sizeof page);
    assert_int_equal(fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
    holes_memfd = memfd_create("fi-holes", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    assert_true(holes_memfd >= 0);
    assert_int_equal(ftruncate(holes_memfd, OBJ_SIZE), 0);
    assert_int_equal(fcntl(holes_memfd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
    tu_unique_key("fi-holes", holes_key);
    int fd = shm_open(holes_key, O_RDWR | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, OBJ_SIZE), 0);
    close(fd);
}

/* ------------------------------------------------------------ fixture */

struct log_capture {
    int count; /* ERROR lines: what a failure may leave */
    shmreg_log_level level;
    char last[1024];
    int warnings; /* WARNING lines: the caller's own misuse, checked apart */
};

struct fx {
    shmreg_policy policy;
    shmreg_reclaim reclaim; /* INLINE unless a case below says otherwise */
    size_t cache_bytes;
    shmreg_registry *reg;    /* the registry the operations run on */
    shmreg_registry *other;  /* one a case creates or destroys */
    shmreg_region *held;     /* a reference the case holds */
    shmreg_region_status *st;
    size_t count;
    struct log_capture log;
    bool pin_demanded; /* the register_system_fd case with SHMREG_PIN */
    int fd;            /* the descriptor the register_system_fd cases register */
};

/* Must not call into the registry (see shmreg_log_fn). */
static void capture_log(void *user, shmreg_log_level level, const char *msg)
{
    struct log_capture *log = user;
    if (level == SHMREG_LOG_WARNING) {
        log->warnings++;
        return;
    }
    log->count++;
    log->level = level;
    snprintf(log->last, sizeof log->last, "%s", msg);
}

/* The fixture's config: its policy, pinning off, two reserved prefixes and
 * an owner allow-list (so create has copies to make), tight limits, and the
 * log captured. */
static void fill_config(struct fx *f, shmreg_config *cfg)
{
    static const char *const prefixes[] = {"triton_", "//internal", NULL};
    static uid_t owners[1];
    owners[0] = geteuid();
    shmreg_config_init(cfg);
    cfg->allowed_owner_uids = owners;
    cfg->allowed_owner_uid_count = 1;
    cfg->max_regions = MAX_REGIONS;
    cfg->max_mapped_bytes = MAX_REGIONS * OBJ_SIZE;
    cfg->busy_policy = f->policy;
    cfg->pin_policy = SHMREG_PIN_NEVER;
    cfg->reserved_key_prefixes = prefixes;
    cfg->log_fn = capture_log;
    cfg->log_user = &f->log;
    /* Deleters run in the thread that armed the injection; the reclaim
     * thread's own calls are failed by the cases at the end. */
    cfg->reclaim = f->reclaim;
    cfg->cache_bytes = f->cache_bytes;
}

static shmreg_registry *new_registry(struct fx *f)
{
    shmreg_config cfg;
    fill_config(f, &cfg);
    shmreg_registry *reg = NULL;
    assert_int_equal(shmreg_registry_create(&cfg, &reg), SHMREG_OK);
    return reg;
}

static void check_ok(shmreg_err err)
{
    if (err != SHMREG_OK)
        print_error("%s: %s\n", shmreg_err_name(err), shmreg_last_error());
    assert_string_equal(shmreg_err_name(err), "SHMREG_OK");
}

/* Allocations still live once every queued RCU free has run. */
static long settled_allocations(void)
{
    urcu_bp_barrier();
    return fi_live_allocations();
}

static int group_setup(void **state)
{
    fi_install();
    for (int i = 0; i < NOBJECTS; i++)
        tu_shm_create(OBJ_SIZE, (uint8_t)(40 + i), keys[i]);
    open_memfd();
    /* One whole lifecycle first: liburcu's once-per-process set-up (its
     * worker thread, the reader registry) is not a leak of any test. */
    struct fx warm = {.policy = SHMREG_POLICY_DEFER};
    shmreg_registry *reg = new_registry(&warm);
    check_ok(shmreg_register_system(reg, "warm-up", keys[0], 0, OBJ_SIZE, 0));
    shmreg_registry_destroy(reg);
    (void)shmreg_cuda_available();
    urcu_bp_barrier();
    return 0;
}

static int group_teardown(void **state)
{
    for (int i = 0; i < NOBJECTS; i++)
        tu_shm_unlink(keys[i]);
    close(memfd);
    close(holes_memfd);
    tu_shm_unlink(holes_key);
    fi_remove();
    printf("fault injection: %lu injected failures survived\n", survived);
    return 0;
}

static int setup_mode(void **state, shmreg_policy policy, shmreg_reclaim reclaim, size_t cache_bytes)
{
    struct fx *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    f->policy = policy;
    f->reclaim = reclaim;
    f->cache_bytes = cache_bytes;
    f->reg = new_registry(f);
    *state = f;
    return 0;
}

static int setup_policy(void **state, shmreg_policy policy)
{
    return setup_mode(state, policy, SHMREG_RECLAIM_INLINE, 0);
}

/* The cache on, room for one object's mapping. */
static int setup_cached(void **state)
{
    return setup_mode(state, SHMREG_POLICY_DEFER, SHMREG_RECLAIM_INLINE, OBJ_SIZE);
}

static int setup_background_defer(void **state)
{
    return setup_mode(state, SHMREG_POLICY_DEFER, SHMREG_RECLAIM_BACKGROUND, 0);
}

static int setup_background_detach(void **state)
{
    return setup_mode(state, SHMREG_POLICY_DETACH, SHMREG_RECLAIM_BACKGROUND, 0);
}

static int setup_background_cached(void **state)
{
    return setup_mode(state, SHMREG_POLICY_DEFER, SHMREG_RECLAIM_BACKGROUND, OBJ_SIZE);
}

static int setup_defer(void **state)
{
    return setup_policy(state, SHMREG_POLICY_DEFER);
}

static int setup_detach(void **state)
{
    return setup_policy(state, SHMREG_POLICY_DETACH);
}

static int setup_refuse(void **state)
{
    return setup_policy(state, SHMREG_POLICY_REFUSE);
}

static int teardown(void **state)
{
    struct fx *f = *state;
    (void)fi_disarm();
    shmreg_release(f->held);
    shmreg_registry_destroy(f->other);
    shmreg_registry_destroy(f->reg);
    free(f);
    return 0;
}

/* ------------------------------------------------------------ checks */

static int by_generation(const void *a, const void *b)
{
    const shmreg_region_status *x = a, *y = b;
    return x->generation < y->generation ? -1 : x->generation > y->generation;
}

/* The registry's status as one comparable string. */
static void status_text(shmreg_registry *reg, char *buf, size_t cap)
{
    shmreg_region_status *st = NULL;
    size_t n = 0;
    check_ok(shmreg_status(reg, NULL, SHMREG_KIND_ANY, &st, &n));
    if (n > 1)
        qsort(st, n, sizeof *st, by_generation);
    size_t len = (size_t)snprintf(buf, cap, "%zu regions;", n);
    for (size_t i = 0; i < n && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, " %s=%s@%zu+%zu use %u pend %d gen %llu fl %u;",
                                st[i].name, st[i].key ? st[i].key : "-", st[i].offset,
                                st[i].byte_size, st[i].references, st[i].pending_unregister,
                                (unsigned long long)st[i].generation, st[i].flags);
    shmreg_status_free(st, n);
}

/* Register, map, read, write and unregister a probe region. */
static void assert_registry_works(shmreg_registry *reg)
{
    shmreg_region *ref = NULL;
    shmreg_view view;
    check_ok(shmreg_register_system(reg, "fi-probe", keys[2], 4095, 100, 0));
    check_ok(shmreg_acquire(reg, "fi-probe", 1, 99, &ref, &view));
    const uint8_t *bytes = view.addr;
    for (size_t i = 0; i < 99; i++)
        assert_int_equal(bytes[i], tu_pattern(42, 4096 + i));
    shmreg_release(ref);
    check_ok(shmreg_unregister(reg, "fi-probe", SHMREG_KIND_SYSTEM));
    check_ok(shmreg_registry_trim(reg)); /* the reclaim thread, the cache */
    assert_int_equal(tu_count_shm_maps(keys[2]), 0);
}

static void register_idle(shmreg_registry *reg, const char *name, int object)
{
    check_ok(shmreg_register_system(reg, name, keys[object], 0, OBJ_SIZE, 0));
}

/* "resident": a tagged region in use, so that status has something to keep. */
static void add_resident(struct fx *f)
{
    shmreg_view view;
    check_ok(tu_register_system_tagged(f->reg, "resident", keys[1], 10, 1000, 0, TAG));
    check_ok(shmreg_acquire(f->reg, "resident", 0, 16, &f->held, &view));
}

static void drop_resident(struct fx *f)
{
    shmreg_release(f->held);
    f->held = NULL;
    check_ok(shmreg_unregister(f->reg, "resident", SHMREG_KIND_ANY));
}

/* ------------------------------------------------------------ the driver */

/* One public operation under injection. prepare builds the state it runs
 * from; run is the operation; expect says what it must return for a shot
 * (fired or not) and, for a failure it reports, the message; cleanup undoes
 * prepare and a successful run. A deleter case's only failable calls run in
 * deleters: its failures go to the log and the operation completes. */
struct op_case {
    void (*prepare)(struct fx *f);
    shmreg_err (*run)(struct fx *f);
    shmreg_err (*expect)(struct fx *f, const struct fi_shot *shot, char *msg, size_t cap);
    void (*cleanup)(struct fx *f);
    bool deleter;
    const char *names[MAX_NAMES]; /* deleter cases: the regions that may log */
};

/* The deleter's log line for a munmap of region `name`, mapped by the
 * backend called `backend`, that failed. */
static void deleter_message(const char *backend, const char *name, int errnum, char *buf, size_t cap)
{
    snprintf(buf, cap,
             "closing the %s mapping of shared memory region '%s' (SHMREG_ERR_SYSTEM): munmap of "
             "shared memory region '%s' failed: %s",
             backend, name, name, strerror(errnum));
}

/* One log line, at ERROR, naming one of the case's regions; the mapping the
 * failed munmap left is removed here. */
static void check_deleter_failure(struct fx *f, const struct op_case *c, const struct fi_shot *shot)
{
    assert_string_equal(fi_call_name(shot->call), "munmap");
    assert_int_equal(f->log.count, 1);
    assert_int_equal(f->log.level, SHMREG_LOG_ERROR);
    bool named = false;
    for (int i = 0; i < MAX_NAMES && c->names[i] && !named; i++) {
        char want[1024];
        deleter_message("system", c->names[i], shot->errnum, want, sizeof want);
        named = strcmp(f->log.last, want) == 0;
    }
    if (!named)
        print_error("unexpected log line: %s\n", f->log.last);
    assert_true(named);
    assert_int_equal(munmap(shot->addr, shot->len), 0);
}

/* A failure the operation reports: code, message, and nothing changed. */
static void check_reported_failure(struct fx *f, shmreg_err err, shmreg_err want,
                                   const char *want_msg, const char *status_before,
                                   struct tu_baseline before, long allocations_before)
{
    assert_string_equal(shmreg_err_name(err), shmreg_err_name(want));
    assert_string_equal(shmreg_last_error(), want_msg);
    char status_after[4096];
    status_text(f->reg, status_after, sizeof status_after);
    assert_string_equal(status_after, status_before);
    tu_check_baseline(before);
    assert_int_equal(settled_allocations(), allocations_before);
    assert_int_equal(f->log.count, 0);
}

/* Run attempt n with errnum; false once the operation made fewer than n
 * failable calls (nothing was injected: it must then simply succeed). */
static bool attempt(struct fx *f, const struct op_case *c, unsigned n, int errnum)
{
    long allocations_start = settled_allocations();
    struct tu_baseline start = tu_take_baseline();
    c->prepare(f);
    char status_before[4096];
    status_text(f->reg, status_before, sizeof status_before);
    struct tu_baseline before = tu_take_baseline();
    long allocations_before = settled_allocations();
    f->log.count = 0;
    f->log.warnings = 0;

    fi_arm(n, errnum);
    shmreg_err err = c->run(f);
    struct fi_shot shot = fi_disarm();

    char want_msg[1024] = "";
    shmreg_err want = c->expect(f, &shot, want_msg, sizeof want_msg);
    if (!shot.fired || c->deleter || want == SHMREG_OK) {
        if (want != err)
            print_error("%s (%s) with call %u (%s) failing\n", shmreg_err_name(err),
                        shmreg_last_error(), n, shot.fired ? fi_call_name(shot.call) : "none");
        assert_string_equal(shmreg_err_name(err), shmreg_err_name(want));
        if (want_msg[0])
            assert_string_equal(shmreg_last_error(), want_msg);
        if (shot.fired && c->deleter)
            check_deleter_failure(f, c, &shot);
        else
            assert_int_equal(f->log.count, 0);
    } else {
        check_reported_failure(f, err, want, want_msg, status_before, before, allocations_before);
    }

    c->cleanup(f);
    tu_check_baseline(start);
    assert_int_equal(settled_allocations(), allocations_start);
    assert_registry_works(f->reg);
    if (shot.fired)
        survived++;
    return shot.fired;
}

/* Every N, every errno; returns how many calls the operation makes. */
static unsigned inject_every_call(struct fx *f, const struct op_case *c)
{
    unsigned calls = 0;
    for (size_t e = 0; e < sizeof injected_errnos / sizeof *injected_errnos; e++) {
        unsigned n = 1;
        while (attempt(f, c, n, injected_errnos[e]))
            n++;
        calls = n - 1;
    }
    return calls;
}

/* ------------------------------------------------------------ create */

static void prepare_nothing(struct fx *f)
{
}

static void cleanup_other(struct fx *f)
{
    shmreg_registry_destroy(f->other);
    f->other = NULL;
}

static shmreg_err run_create(struct fx *f)
{
    shmreg_config cfg;
    fill_config(f, &cfg);
    return shmreg_registry_create(&cfg, &f->other);
}

/* Call 1 allocates the handle, 2-4 copy the prefixes, 5 the allow-list, 6
 * the table; the hash table comes from liburcu's own allocator, outside the
 * seam. */
static shmreg_err expect_create(struct fx *f, const struct fi_shot *shot, char *msg, size_t cap)
{
    if (!shot->fired)
        return SHMREG_OK;
    assert_null(f->other);
    snprintf(msg, cap, "%s",
             shot->calls == 1 || shot->calls == 6 ? "out of memory creating a registry"
             : shot->calls <= 4                   ? "out of memory copying reserved key prefixes"
                                                  : "out of memory copying the owner allow-list");
    return SHMREG_ERR_NO_MEMORY;
}

static void test_create(void **state)
{
    static const struct op_case c = {.prepare = prepare_nothing,
                                     .run = run_create,
                                     .expect = expect_create,
                                     .cleanup = cleanup_other};
    /* registry, prefix array, two prefix copies, allow-list */
    assert_int_equal(inject_every_call(*state, &c), 6);
}

/* ------------------------------------------------------------ register */

#define REG_NAME "fi-region"
#define REG_OFFSET 100
#define REG_SIZE 5000

static shmreg_err run_register(struct fx *f)
{
    return tu_register_system_tagged(f->reg, REG_NAME, keys[0], REG_OFFSET, REG_SIZE, 0, TAG);
}

/* What each failing call must come back as, registering `key`. A failing
 * close still released the descriptor, and the mapping does not need it:
 * registration succeeds. */
static shmreg_err expect_register_key(const struct fi_shot *shot, const char *key, char *msg, size_t cap)
{
    if (!shot->fired)
        return SHMREG_OK;
    const char *why = strerror(shot->errnum);
    switch (shot->call) {
    case FI_SHM_OPEN:
        snprintf(msg, cap, "Unable to open shared memory region: '%s': %s", key, why);
        return SHMREG_ERR_SYSTEM;
    case FI_FSTAT:
        snprintf(msg, cap, "Unable to fstat shared memory region '%s' (key '%s'): %s", REG_NAME, key, why);
        return SHMREG_ERR_SYSTEM;
    case FI_MMAP:
        snprintf(msg, cap, "Unable to map shared memory region '%s' (key '%s'): %s", REG_NAME, key, why);
        return SHMREG_ERR_SYSTEM;
    case FI_CLOSE:
        return SHMREG_OK;
    case FI_MALLOC:
    case FI_CALLOC:
        snprintf(msg, cap, "out of memory registering shared memory region '%s'", REG_NAME);
        return SHMREG_ERR_NO_MEMORY;
    default:
        fail_msg("register called %s", fi_call_name(shot->call));
    }
    return SHMREG_ERR_UNSUPPORTED;
}

static shmreg_err expect_register(struct fx *f, const struct fi_shot *shot, char *msg, size_t cap)
{
    return expect_register_key(shot, keys[0], msg, cap);
}

static void cleanup_register(struct fx *f)
{
    shmreg_err err = shmreg_unregister(f->reg, REG_NAME, SHMREG_KIND_ANY);
    assert_true(err == SHMREG_OK || err == SHMREG_ERR_NOT_FOUND);
    drop_resident(f);
}

static void test_register_system(void **state)
{
    static const struct op_case c = {.prepare = add_resident,
                                     .run = run_register,
                                     .expect = expect_register,
                                     .cleanup = cleanup_register};
    /* shm_open, fstat, mmap, close, then the region (its tag inside) and
     * its key; the tag's quota account exists (the resident region's) */
    assert_true(inject_every_call(*state, &c) >= 6);
}

/* The first region of a tag allocates the tag's quota account;
 * failing that allocation refuses the registration and leaves nothing. */
static shmreg_err run_register_new_tag(struct fx *f)
{
    return tu_register_system_tagged(f->reg, REG_NAME, keys[0], REG_OFFSET, REG_SIZE, 0, "fi-new-tag");
}

static void cleanup_register_alone(struct fx *f)
{
    shmreg_err err = shmreg_unregister(f->reg, REG_NAME, SHMREG_KIND_ANY);
    assert_true(err == SHMREG_OK || err == SHMREG_ERR_NOT_FOUND);
}

static void test_register_first_of_its_tag(void **state)
{
    static const struct op_case c = {.prepare = prepare_nothing,
                                     .run = run_register_new_tag,
                                     .expect = expect_register,
                                     .cleanup = cleanup_register_alone};
    /* shm_open, fstat, mmap, close, the tag's account, the region, its key */
    assert_true(inject_every_call(*state, &c) >= 7);
}

/* ---------------------------------------------- register a descriptor */

/* SHMREG_SOURCE_FD: a sealed memfd the test keeps open; the
 * registry never closes it, so no close is counted. It keeps a duplicate of
 * its own (a second fcntl, after the mapping). With SHMREG_PIN the holes
 * check (lseek) runs, then pinning, which needs CUDA. */
#define FD_NAME "fi-fd"

static shmreg_err run_register_fd_flags(struct fx *f, unsigned flags)
{
    shmreg_registration r;
    shmreg_registration_init(&r);
    r.source = SHMREG_SOURCE_FD;
    r.name = FD_NAME;
    r.fd = f->fd;
    r.offset = REG_OFFSET;
    r.byte_size = REG_SIZE;
    r.flags = flags;
    r.tag = TAG;
    return shmreg_register(f->reg, &r);
}

static shmreg_err run_register_fd(struct fx *f)
{
    return run_register_fd_flags(f, 0);
}

static shmreg_err run_register_fd_pinned(struct fx *f)
{
    return run_register_fd_flags(f, SHMREG_PIN);
}

static shmreg_err expect_register_fd(struct fx *f, const struct fi_shot *shot, char *msg, size_t cap)
{
    /* Where pinning cannot work, a demanded pin ends in UNSUPPORTED once
     * the checks pass. */
    bool pinned = f->pin_demanded;
    bool pinning = shmreg__host_pinning.usable();
    if (!shot->fired)
        return pinned && !pinning ? SHMREG_ERR_UNSUPPORTED : SHMREG_OK;
    const char *why = strerror(shot->errnum);
    struct stat st;
    assert_int_equal(fstat(f->fd, &st), 0);
    char what[64];
    snprintf(what, sizeof what, "descriptor %d (inode %llu)", f->fd, (unsigned long long)st.st_ino);
    switch (shot->call) {
    case FI_FSTAT:
        snprintf(msg, cap, "Unable to fstat shared memory region '%s' (descriptor %d): %s", FD_NAME, f->fd, why);
        return SHMREG_ERR_SYSTEM;
    case FI_FCNTL:
        /* Two fcntl calls: the seals, then the duplicate the registry
         * keeps; the shot does not say which failed, the message does. */
        snprintf(msg, cap, "cannot register shared memory region '%s': %s %s: %s", FD_NAME,
                 strstr(shmreg_last_error(), "keeping a descriptor") ? "keeping a descriptor of"
                                                                      : "reading the seals of",
                 what, why);
        return SHMREG_ERR_SYSTEM;
    case FI_MMAP:
        snprintf(msg, cap, "Unable to map shared memory region '%s' (%s): %s", FD_NAME, what, why);
        return SHMREG_ERR_SYSTEM;
    case FI_LSEEK:
        /* A failed walk counts as holes: within the budget, still pinned. */
        return SHMREG_OK;
    case FI_PIN:
        assert_int_equal(fp_counts().live, 0);
        snprintf(msg, cap, "cannot pin system shared memory region '%s' (%d bytes): %s", FD_NAME,
                 REG_OFFSET + REG_SIZE, why);
        return SHMREG_ERR_CUDA;
    case FI_MALLOC:
    case FI_CALLOC:
        snprintf(msg, cap, "out of memory registering shared memory region '%s'", FD_NAME);
        return SHMREG_ERR_NO_MEMORY;
    case FI_MUNMAP:
        /* Without CUDA: the pin failed and the munmap undoing the mapping
         * failed too; the pin's error is the one reported, and the test
         * removes the mapping the failed munmap left. */
        assert_true(pinned && !pinning);
        assert_int_equal(munmap(shot->addr, shot->len), 0);
        snprintf(msg, cap, "%s", shmreg_last_error());
        return SHMREG_ERR_UNSUPPORTED;
    default:
        fail_msg("register_system_fd called %s", fi_call_name(shot->call));
    }
    return SHMREG_ERR_UNSUPPORTED;
}

static void prepare_fd(struct fx *f)
{
    f->pin_demanded = false;
    f->fd = memfd;
    add_resident(f);
}

/* Where pinning works (the GPU machine), the process's first pin makes
 * CUDA's context, which opens descriptors (the driver's, pipes, eventfds)
 * that stay for the process: make it before the case takes its baseline,
 * with a pin of a page of our own, once, before any case takes a baseline,
 * so that only what a case itself opens is counted. */
static void warm_up_pinning(void)
{
    if (!shmreg__host_pinning.usable())
        return;
    /* Outside any test: a failure here only leaves the warm-up undone,
     * which the pinned case's own checks then report. */
    size_t len = (size_t)sysconf(_SC_PAGESIZE);
    void *page = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED)
        return;
    memset(page, 1, len);
    if (shmreg__host_pinning.pin("warm-up", page, len, false) == SHMREG_OK)
        (void)shmreg__host_pinning.unpin("warm-up", page);
    (void)munmap(page, len);
}

static void prepare_fd_pinned(struct fx *f)
{
    f->pin_demanded = true;
    f->fd = memfd;
    add_resident(f);
}

static void cleanup_register_fd(struct fx *f)
{
    shmreg_err err = shmreg_unregister(f->reg, FD_NAME, SHMREG_KIND_ANY);
    assert_true(err == SHMREG_OK || err == SHMREG_ERR_NOT_FOUND);
    drop_resident(f);
    /* The caller's descriptor survives every path. */
    assert_true(fcntl(f->fd, F_GETFD) >= 0);
    /* Every pin the registration made was undone, by its own unpin. */
    assert_int_equal(fp_counts().live, 0);
}

static void test_register_system_fd(void **state)
{
    static const struct op_case c = {.prepare = prepare_fd,
                                     .run = run_register_fd,
                                     .expect = expect_register_fd,
                                     .cleanup = cleanup_register_fd};
    /* fstat, fcntl (seals), mmap, then the region (its tag inside) */
    assert_true(inject_every_call(*state, &c) >= 5);
}

static void test_register_system_fd_pinned(void **state)
{
    static const struct op_case c = {.prepare = prepare_fd_pinned,
                                     .run = run_register_fd_pinned,
                                     .expect = expect_register_fd,
                                     .cleanup = cleanup_register_fd};
    /* fstat, fcntl, mmap, lseek (holes), then pinning (CUDA) */
    assert_true(inject_every_call(*state, &c) >= 4);
}

/* ---------------------------------- pin a window with holes
 *
 * A demanded pin of a window the client never wrote is pinned, within the
 * pin budget, with fake_pinning.h's pinning (so this runs without a GPU):
 * every failing call, the pin's own included, leaves the registry as it
 * was and nothing pinned. A failed holes walk (lseek) counts as holes. */

/* inject_every_call with the fake pinning in place; the registrations that
 * succeeded pinned, and every unpin matched a pin. */
static unsigned inject_with_fake_pinning(struct fx *f, const struct op_case *c)
{
    fp_install();
    unsigned calls = inject_every_call(f, c);
    struct fp_counts pins = fp_counts();
    fp_remove();
    assert_true(pins.pins > 0);
    assert_int_equal(pins.unmatched, 0);
    return calls;
}

static void prepare_fd_holes(struct fx *f)
{
    f->pin_demanded = true;
    f->fd = holes_memfd;
    add_resident(f);
}

static void test_register_fd_holes_pinned(void **state)
{
    static const struct op_case c = {.prepare = prepare_fd_holes,
                                     .run = run_register_fd_pinned,
                                     .expect = expect_register_fd,
                                     .cleanup = cleanup_register_fd};
    /* fstat and lseek (holes), fstat, fcntl, mmap, pin, then the region and its tag */
    assert_true(inject_with_fake_pinning(*state, &c) >= 8);
}

static shmreg_err run_register_holes(struct fx *f)
{
    return tu_register_system_tagged(f->reg, REG_NAME, holes_key, REG_OFFSET, REG_SIZE, SHMREG_PIN, TAG);
}

/* The pin's own failure, and a failed walk (lseek: counted as holes, so
 * still pinned), beside what every registration of a key may meet. */
static shmreg_err expect_register_holes(struct fx *f, const struct fi_shot *shot, char *msg, size_t cap)
{
    if (shot->fired && shot->call == FI_LSEEK)
        return SHMREG_OK;
    if (shot->fired && shot->call == FI_PIN) {
        assert_int_equal(fp_counts().live, 0);
        snprintf(msg, cap, "cannot pin system shared memory region '%s' (%d bytes): %s", REG_NAME,
                 REG_OFFSET + REG_SIZE, strerror(shot->errnum));
        return SHMREG_ERR_CUDA;
    }
    return expect_register_key(shot, holes_key, msg, cap);
}

static void cleanup_register_holes(struct fx *f)
{
    cleanup_register(f);
    assert_int_equal(fp_counts().live, 0);
}

static void test_register_holes_pinned(void **state)
{
    static const struct op_case c = {.prepare = add_resident,
                                     .run = run_register_holes,
                                     .expect = expect_register_holes,
                                     .cleanup = cleanup_register_holes};
    /* shm_open, fstat, lseek (holes), close, mmap, pin, then the region,
     * its key and its tag */
    assert_true(inject_with_fake_pinning(*state, &c) >= 9);
}

/* ------------------------------------------------------------ status */

static shmreg_err run_status_all(struct fx *f)
{
    return shmreg_status(f->reg, NULL, SHMREG_KIND_ANY, &f->st, &f->count);
}

static shmreg_err run_status_one(struct fx *f)
{
    return tu_status_tagged(f->reg, "resident", SHMREG_KIND_SYSTEM, TAG, &f->st, &f->count);
}

/* The array first, then the copies of the name, key and tag; a failed status
 * hands back nothing. */
static shmreg_err expect_status(struct fx *f, const struct fi_shot *shot, char *msg, size_t cap)
{
    if (!shot->fired)
        return SHMREG_OK;
    assert_null(f->st);
    assert_int_equal(f->count, 0);
    return SHMREG_ERR_NO_MEMORY;
}

static shmreg_err expect_status_all(struct fx *f, const struct fi_shot *shot, char *msg, size_t cap)
{
    shmreg_err want = expect_status(f, shot, msg, cap);
    if (shot->fired)
        snprintf(msg, cap, shot->calls == 1 ? "out of memory reporting the status of 1 regions"
                                            : "out of memory reporting the status of region 'resident'");
    return want;
}

static shmreg_err expect_status_one(struct fx *f, const struct fi_shot *shot, char *msg, size_t cap)
{
    shmreg_err want = expect_status(f, shot, msg, cap);
    if (shot->fired)
        snprintf(msg, cap, "out of memory reporting the status of region 'resident'");
    return want;
}

static void cleanup_status(struct fx *f)
{
    if (f->st) {
        assert_int_equal(f->count, 1);
        assert_string_equal(f->st[0].name, "resident");
        assert_string_equal(f->st[0].key, keys[1]);
        assert_string_equal(f->st[0].tag, TAG);
        assert_int_equal(f->st[0].references, 1);
    }
    shmreg_status_free(f->st, f->count);
    f->st = NULL;
    f->count = 0;
    drop_resident(f);
}

static void test_status(void **state)
{
    static const struct op_case all = {.prepare = add_resident,
                                       .run = run_status_all,
                                       .expect = expect_status_all,
                                       .cleanup = cleanup_status};
    static const struct op_case one = {.prepare = add_resident,
                                       .run = run_status_one,
                                       .expect = expect_status_one,
                                       .cleanup = cleanup_status};
    /* the array, the name, the key, the tag */
    assert_int_equal(inject_every_call(*state, &all), 4);
    assert_int_equal(inject_every_call(*state, &one), 4);
}

/* ------------------------------------------------------------ acquire */

static shmreg_err run_acquire(struct fx *f)
{
    shmreg_region *ref = NULL;
    shmreg_view view;
    shmreg_err err = shmreg_acquire(f->reg, "resident", 5, 50, &ref, &view);
    if (err != SHMREG_OK)
        return err;
    assert_int_equal(((uint8_t *)view.addr)[0], tu_pattern(41, 15));
    shmreg_region *second = shmreg_retain(ref);
    shmreg_release(ref);
    assert_int_equal(((uint8_t *)view.addr)[49], tu_pattern(41, 64));
    shmreg_release(second);
    return SHMREG_OK;
}

static shmreg_err expect_success(struct fx *f, const struct fi_shot *shot, char *msg, size_t cap)
{
    return SHMREG_OK;
}

/* The hot path makes no system call and no allocation: nothing can fail. */
static void test_acquire_and_retain(void **state)
{
    static const struct op_case c = {.prepare = add_resident,
                                     .run = run_acquire,
                                     .expect = expect_success,
                                     .cleanup = drop_resident};
    assert_int_equal(inject_every_call(*state, &c), 0);
}

/* ------------------------------------------------------------ deleters */

static shmreg_err run_unregister(struct fx *f)
{
    return shmreg_unregister(f->reg, REG_NAME, SHMREG_KIND_SYSTEM);
}

static void prepare_idle(struct fx *f)
{
    register_idle(f->reg, REG_NAME, 0);
}

static void cleanup_gone(struct fx *f)
{
    assert_int_equal(shmreg_unregister(f->reg, REG_NAME, SHMREG_KIND_ANY), SHMREG_ERR_NOT_FOUND);
}

/* An idle region is unmapped by unregister itself, under every policy. */
static void test_unregister_idle(void **state)
{
    static const struct op_case c = {.prepare = prepare_idle,
                                     .run = run_unregister,
                                     .expect = expect_success,
                                     .cleanup = cleanup_gone,
                                     .deleter = true,
                                     .names = {REG_NAME}};
    assert_int_equal(inject_every_call(*state, &c), 1);
}

static void prepare_held(struct fx *f)
{
    shmreg_view view;
    register_idle(f->reg, REG_NAME, 0);
    check_ok(shmreg_acquire(f->reg, REG_NAME, 0, 1, &f->held, &view));
}

/* Unregistering a region in use unmaps nothing: no failable call at all. */
static shmreg_err expect_unregister_busy(struct fx *f, const struct fi_shot *shot, char *msg, size_t cap)
{
    if (f->policy != SHMREG_POLICY_REFUSE)
        return SHMREG_OK;
    snprintf(msg, cap,
             "Cannot unregister shared memory region '%s', it is currently in use by 1 reference (views "
             "acquired and not yet released).",
             REG_NAME);
    return SHMREG_ERR_BUSY;
}

static void cleanup_held(struct fx *f)
{
    shmreg_release(f->held);
    f->held = NULL;
    if (f->policy == SHMREG_POLICY_REFUSE)
        check_ok(shmreg_unregister(f->reg, REG_NAME, SHMREG_KIND_ANY));
    cleanup_gone(f);
}

/* The last release runs the deleter: after unregister under DEFER or DETACH;
 * under REFUSE the release leaves the region idle and unregister unmaps it. */
static shmreg_err run_release_last(struct fx *f)
{
    if (f->policy != SHMREG_POLICY_REFUSE)
        check_ok(shmreg_unregister(f->reg, REG_NAME, SHMREG_KIND_ANY));
    shmreg_release(f->held);
    f->held = NULL;
    if (f->policy == SHMREG_POLICY_REFUSE)
        return shmreg_unregister(f->reg, REG_NAME, SHMREG_KIND_ANY);
    return SHMREG_OK;
}

static void test_unregister_busy_then_release_last(void **state)
{
    static const struct op_case busy = {.prepare = prepare_held,
                                        .run = run_unregister,
                                        .expect = expect_unregister_busy,
                                        .cleanup = cleanup_held};
    static const struct op_case last = {.prepare = prepare_held,
                                        .run = run_release_last,
                                        .expect = expect_success,
                                        .cleanup = cleanup_gone,
                                        .deleter = true,
                                        .names = {REG_NAME}};
    assert_int_equal(inject_every_call(*state, &busy), 0);
    assert_int_equal(inject_every_call(*state, &last), 1);
}

static void prepare_three_idle(struct fx *f)
{
    register_idle(f->reg, "fi-a", 0);
    register_idle(f->reg, "fi-b", 1);
    register_idle(f->reg, "fi-c", 0);
}

static shmreg_err run_unregister_all(struct fx *f)
{
    return shmreg_unregister_all(f->reg, SHMREG_KIND_ANY);
}

static void cleanup_none_left(struct fx *f)
{
    char text[4096];
    status_text(f->reg, text, sizeof text);
    assert_string_equal(text, "0 regions;");
}

/* Each of the three unmaps fails in turn; the other two still happen. */
static void test_unregister_all(void **state)
{
    static const struct op_case c = {.prepare = prepare_three_idle,
                                     .run = run_unregister_all,
                                     .expect = expect_success,
                                     .cleanup = cleanup_none_left,
                                     .deleter = true,
                                     .names = {"fi-a", "fi-b", "fi-c"}};
    assert_int_equal(inject_every_call(*state, &c), 3);
}

/* A second registry with two idle regions and one held: destroy unmaps the
 * idle ones, the held one waits for its release. */
static void prepare_other(struct fx *f)
{
    shmreg_view view;
    f->other = new_registry(f);
    register_idle(f->other, "fi-a", 0);
    register_idle(f->other, "fi-b", 1);
    register_idle(f->other, "fi-held", 2);
    check_ok(shmreg_acquire(f->other, "fi-held", 0, 8, &f->held, &view));
}

static shmreg_err run_destroy(struct fx *f)
{
    shmreg_registry_destroy(f->other);
    f->other = NULL;
    return SHMREG_OK;
}

static void cleanup_destroyed(struct fx *f)
{
    /* The held region outlived destroy, which warned about it once. */
    assert_int_equal(f->log.warnings, 1);
    assert_int_equal(tu_count_shm_maps(keys[2]), 1);
    shmreg_release(f->held);
    f->held = NULL;
}

static void test_destroy(void **state)
{
    static const struct op_case c = {.prepare = prepare_other,
                                     .run = run_destroy,
                                     .expect = expect_success,
                                     .cleanup = cleanup_destroyed,
                                     .deleter = true,
                                     .names = {"fi-a", "fi-b"}};
    assert_int_equal(inject_every_call(*state, &c), 2);
}

/* ------------------------------------------------------------ the cache */

/* A registration that reuses a cached mapping: shm_open, fstat, close, then
 * the region's allocations; no mmap. A failure gives the mapping back to
 * the cache. */
static void prepare_cached(struct fx *f)
{
    add_resident(f);
    register_idle(f->reg, "fi-cached", 0);
    check_ok(shmreg_unregister(f->reg, "fi-cached", SHMREG_KIND_ANY));
    shmreg_stats s;
    check_ok(shmreg_registry_stats(f->reg, &s));
    assert_int_equal(s.cached_mappings, 1);
}

static void cleanup_cached(struct fx *f)
{
    cleanup_register(f);
    check_ok(shmreg_registry_trim(f->reg));
}

static void test_register_cache_hit(void **state)
{
    static const struct op_case c = {.prepare = prepare_cached,
                                     .run = run_register,
                                     .expect = expect_register,
                                     .cleanup = cleanup_cached};
    /* shm_open, fstat, close, the region (its tag inside) and its key; the
     * tag's quota account exists (the resident region's) */
    assert_int_equal(inject_every_call(*state, &c), 5);
}

/* ------------------------------------------------------------ the reclaim thread
 *
 * Its calls are failed in turn (fi_arm_thread): the munmap of a region
 * whose last release it took, of a mapping its caching evicted, and of a
 * region released after destroy. Each failure is logged once, naming the
 * region; all bookkeeping is freed, the limits are given back, and the
 * registry works after. */

static void check_reclaim_failure(struct fx *f, const struct fi_shot *shot, const char *backend, const char *name)
{
    if (!shot->fired) {
        assert_int_equal(f->log.count, 0);
        return;
    }
    assert_int_equal(f->log.count, 1);
    char want[1024];
    if (shot->call == FI_CLOSE) {
        /* A descriptor region's own descriptor, closed after the munmap:
         * a failing close has still released it. */
        assert_string_equal(backend, "system_fd");
        snprintf(want, sizeof want,
                 "closing the %s mapping of shared memory region '%s' (SHMREG_ERR_SYSTEM): close of shared memory "
                 "region '%s' failed: %s",
                 backend, name, name, strerror(shot->errnum));
        assert_string_equal(f->log.last, want);
        return;
    }
    assert_string_equal(fi_call_name(shot->call), "munmap");
    deleter_message(backend, name, shot->errnum, want, sizeof want);
    assert_string_equal(f->log.last, want);
    assert_int_equal(munmap(shot->addr, shot->len), 0);
}

static void assert_nothing_counted(shmreg_registry *reg)
{
    shmreg_stats s;
    check_ok(shmreg_registry_stats(reg, &s));
    assert_int_equal(s.mapped_regions, 0);
    assert_int_equal(s.mapped_bytes, 0);
    assert_int_equal(s.reclaim_waiting_bytes, 0);
    assert_int_equal(s.cached_mappings, 0);
}

/* What the reclaim thread is given: a region's last release, after a
 * mapping was cached for it to evict, or of a descriptor region (never
 * cached, reclaimed all the same). */
enum reclaimed { RECLAIM_REGION, RECLAIM_EVICTING, RECLAIM_FD_REGION };

static void register_released(struct fx *f, enum reclaimed what)
{
    if (what == RECLAIM_EVICTING) { /* a mapping in the cache, for the release to evict */
        register_idle(f->reg, "fi-old", 1);
        check_ok(shmreg_unregister(f->reg, "fi-old", SHMREG_KIND_ANY));
    }
    if (what == RECLAIM_FD_REGION)
        check_ok(shmreg_register_system_fd(f->reg, REG_NAME, memfd, 0, OBJ_SIZE, 0));
    else
        register_idle(f->reg, REG_NAME, 0);
}

/* One shot at the reclaim thread's call n; whether it fired. */
static bool reclaim_attempt(struct fx *f, unsigned n, int errnum, enum reclaimed what)
{
    long allocations_start = settled_allocations();
    struct tu_baseline start = tu_take_baseline();
    shmreg_view view;
    register_released(f, what);
    check_ok(shmreg_acquire(f->reg, REG_NAME, 0, 1, &f->held, &view));
    check_ok(shmreg_unregister(f->reg, REG_NAME, SHMREG_KIND_ANY));
    f->log.count = 0;

    fi_arm_thread("shmreg-reclaim", n, errnum);
    shmreg_release(f->held); /* the hand-off */
    f->held = NULL;
    check_ok(shmreg_registry_trim(f->reg)); /* waits for the thread */
    struct fi_shot shot = fi_disarm_thread();

    check_reclaim_failure(f, &shot, what == RECLAIM_FD_REGION ? "system_fd" : "system",
                          what == RECLAIM_EVICTING ? "fi-old" : REG_NAME);
    check_ok(shmreg_registry_trim(f->reg)); /* the cache, in this thread */
    assert_nothing_counted(f->reg);
    tu_check_baseline(start);
    assert_int_equal(settled_allocations(), allocations_start);
    assert_registry_works(f->reg);
    if (shot.fired)
        survived++;
    return shot.fired;
}

static unsigned reclaim_every_call(struct fx *f, enum reclaimed what)
{
    unsigned calls = 0;
    for (size_t e = 0; e < sizeof injected_errnos / sizeof *injected_errnos; e++) {
        unsigned n = 1;
        while (reclaim_attempt(f, n, injected_errnos[e], what))
            n++;
        calls = n - 1;
    }
    return calls;
}

static void test_reclaim_thread_unmaps(void **state)
{
    assert_int_equal(reclaim_every_call(*state, RECLAIM_REGION), 1);
}

static void test_reclaim_thread_evicts(void **state)
{
    assert_int_equal(reclaim_every_call(*state, RECLAIM_EVICTING), 1);
}

/* The munmap, then the close of the registry's own descriptor. */
static void test_reclaim_thread_unmaps_descriptor_regions(void **state)
{
    assert_int_equal(reclaim_every_call(*state, RECLAIM_FD_REGION), 2);
}

/* The last release after destroy: the thread tears the region down, fails,
 * logs, frees the registry's remains and ends. */
static void test_reclaim_thread_after_destroy(void **state)
{
    struct fx *f = *state;
    for (size_t e = 0; e < sizeof injected_errnos / sizeof *injected_errnos; e++) {
        long allocations_start = settled_allocations();
        struct tu_baseline start = tu_take_baseline();
        shmreg_view view;
        f->other = new_registry(f);
        register_idle(f->other, REG_NAME, 0);
        check_ok(shmreg_acquire(f->other, REG_NAME, 0, 1, &f->held, &view));
        shmreg_registry_destroy(f->other);
        f->other = NULL;
        f->log.count = 0;
        fi_arm_thread("shmreg-reclaim", 1, injected_errnos[e]);
        shmreg_release(f->held);
        f->held = NULL;
        /* No handle to wait on: wait for the thread to free what it held. */
        for (int ms = 0; ms < 5000 && settled_allocations() != allocations_start; ms++)
            usleep(1000);
        struct fi_shot shot = fi_disarm_thread();
        assert_true(shot.fired);
        check_reclaim_failure(f, &shot, "system", REG_NAME);
        tu_check_baseline(start);
        assert_int_equal(settled_allocations(), allocations_start);
        survived++;
    }
}

/* A reclaim thread held up in munmap: a registration that needs the room
 * waits for it (a second), then is refused, and says how many bytes wait. */
static void test_refusal_names_bytes_waiting_for_reclaim(void **state)
{
    struct fx *f = *state;
    shmreg_view view;
    fi_hold_munmap("shmreg-reclaim", true);
    register_idle(f->reg, "a", 0);
    register_idle(f->reg, "b", 1);
    register_idle(f->reg, REG_NAME, 2); /* the limit: 3 objects' bytes */
    check_ok(shmreg_acquire(f->reg, REG_NAME, 0, 1, &f->held, &view));
    check_ok(shmreg_unregister(f->reg, REG_NAME, SHMREG_KIND_ANY));
    shmreg_release(f->held); /* the thread now waits at the gate */
    f->held = NULL;
    shmreg_err err = shmreg_register_system(f->reg, "c", keys[2], 0, OBJ_SIZE, 0);
    assert_string_equal(shmreg_err_name(err), "SHMREG_ERR_NO_MEMORY");
    char want[512];
    snprintf(want, sizeof want,
             "cannot register shared memory region 'c': %d more mapped bytes would pass this registry's "
             "limit of %d (%d in use, %d bytes waiting for reclaim)",
             OBJ_SIZE, MAX_REGIONS * OBJ_SIZE, MAX_REGIONS * OBJ_SIZE, OBJ_SIZE);
    assert_string_equal(shmreg_last_error(), want);
    shmreg_stats s;
    check_ok(shmreg_registry_stats(f->reg, &s));
    assert_int_equal(s.reclaim_waiting_bytes, OBJ_SIZE);
    fi_hold_munmap("shmreg-reclaim", false);
    check_ok(shmreg_register_system(f->reg, "c", keys[2], 0, OBJ_SIZE, 0));
    check_ok(shmreg_unregister_all(f->reg, SHMREG_KIND_ANY));
}

/* ------------------------------------------------------------ the releasing thread
 *
 * Under BACKGROUND a last release hands the region over, and a release past
 * zero is caught, without a failable call (no munmap, no close) and without
 * the lock that register and unregister hold: both finish on a thread of
 * their own while this one holds that lock. */

struct releases {
    shmreg_region *refs[2];
    struct fi_shot shot;
};

static void *release_both(void *arg)
{
    struct releases *r = arg;
    fi_arm(1, EIO); /* counts this thread's calls; fails the first */
    shmreg_release(r->refs[0]);
    shmreg_release(r->refs[1]);
    r->shot = fi_disarm();
    return NULL;
}

static struct fi_shot release_under_lock(shmreg_registry *reg, shmreg_region *a, shmreg_region *b)
{
    struct releases r = {.refs = {a, b}};
    pthread_t th;
    struct timespec deadline;
    shmreg__table_lock(reg->table);
    assert_int_equal(pthread_create(&th, NULL, release_both, &r), 0);
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 5;
    int waited = pthread_timedjoin_np(th, NULL, &deadline);
    shmreg__table_unlock(reg->table);
    if (waited != 0)
        pthread_join(th, NULL);
    assert_int_equal(waited, 0); /* ETIMEDOUT: a release waited for the lock */
    assert_false(r.shot.fired);
    assert_int_equal(r.shot.calls, 0);
    return r.shot;
}

static void test_release_takes_no_lock_and_makes_no_call(void **state)
{
    struct fx *f = *state;
    shmreg_region *a, *b;
    shmreg_view view;
    for (enum reclaimed what = RECLAIM_REGION; what <= RECLAIM_FD_REGION; what += 2) {
        register_released(f, what);
        check_ok(shmreg_acquire(f->reg, REG_NAME, 0, 1, &a, &view));
        check_ok(shmreg_acquire(f->reg, REG_NAME, 0, 1, &b, &view));
        check_ok(shmreg_unregister(f->reg, REG_NAME, SHMREG_KIND_ANY)); /* DEFER: b's release is the last */
        release_under_lock(f->reg, a, b);
        check_ok(shmreg_registry_trim(f->reg));
        assert_nothing_counted(f->reg);
    }
    assert_int_equal(tu_count_shm_maps(keys[0]), 0);
    assert_int_equal(f->log.count, 0);

    register_idle(f->reg, REG_NAME, 0);
    check_ok(shmreg_acquire(f->reg, REG_NAME, 0, 1, &a, &view));
    release_under_lock(f->reg, a, a); /* the second is past zero */
    assert_int_equal(f->log.count, 1);
    assert_non_null(strstr(f->log.last, "past zero"));
    check_ok(shmreg_registry_trim(f->reg));
    assert_int_equal(tu_count_shm_maps(keys[0]), 1); /* kept for the registry */
    check_ok(shmreg_unregister(f->reg, REG_NAME, SHMREG_KIND_ANY));
    assert_int_equal(tu_count_shm_maps(keys[0]), 0);
    f->log.count = 0;
}

/* ------------------------------------------------------------ main */

#define FOR_EACH_POLICY(fn)                                    \
    cmocka_unit_test_setup_teardown(fn, setup_defer, teardown),  \
    cmocka_unit_test_setup_teardown(fn, setup_detach, teardown), \
    cmocka_unit_test_setup_teardown(fn, setup_refuse, teardown)

int main(void)
{
    warm_up_pinning();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_create, setup_defer, teardown),
        FOR_EACH_POLICY(test_register_system),
        cmocka_unit_test_setup_teardown(test_register_system_fd, setup_defer, teardown),
        cmocka_unit_test_setup_teardown(test_register_system_fd_pinned, setup_defer, teardown),
        cmocka_unit_test_setup_teardown(test_register_fd_holes_pinned, setup_defer, teardown),
        cmocka_unit_test_setup_teardown(test_register_holes_pinned, setup_defer, teardown),
        cmocka_unit_test_setup_teardown(test_status, setup_defer, teardown),
        cmocka_unit_test_setup_teardown(test_acquire_and_retain, setup_defer, teardown),
        FOR_EACH_POLICY(test_unregister_idle),
        FOR_EACH_POLICY(test_unregister_busy_then_release_last),
        FOR_EACH_POLICY(test_unregister_all),
        FOR_EACH_POLICY(test_destroy),
        cmocka_unit_test_setup_teardown(test_register_cache_hit, setup_cached, teardown),
        cmocka_unit_test_setup_teardown(test_register_first_of_its_tag, setup_defer, teardown),
        cmocka_unit_test_setup_teardown(test_reclaim_thread_unmaps, setup_background_defer, teardown),
        cmocka_unit_test_setup_teardown(test_reclaim_thread_unmaps, setup_background_detach, teardown),
        cmocka_unit_test_setup_teardown(test_reclaim_thread_evicts, setup_background_cached, teardown),
        cmocka_unit_test_setup_teardown(test_reclaim_thread_unmaps_descriptor_regions, setup_background_cached,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_reclaim_thread_after_destroy, setup_background_defer, teardown),
        cmocka_unit_test_setup_teardown(test_refusal_names_bytes_waiting_for_reclaim, setup_background_defer,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_release_takes_no_lock_and_makes_no_call, setup_background_defer,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
