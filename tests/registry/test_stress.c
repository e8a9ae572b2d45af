/* Threads acquire, hold, retain, release, unregister and re-register at random
 * over a few names, under each busy policy, and check every view they hold:
 * still mapped and holding exactly the bytes of the registration it came from.
 * Each registration has its own object, stamped with its id and name and
 * filled with a pattern of its own, so a stale or wrong mapping shows. Short
 * and bounded (time and iterations): a test, not a benchmark. */
#include "fixture.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define STRESS_NAMES 4
#define STRESS_THREADS 4
#define STRESS_SLOTS 3            /* references one thread holds at most */
#define STRESS_REGION 4096        /* bytes of every registered window */
#define STRESS_MAX_ITERS 200000   /* per thread and policy */
#define STRESS_RUN_MS 600         /* per policy */
#define STAMP_SIZE sizeof(uint64_t)

static const char *const stress_names[STRESS_NAMES] = {"input0", "input1", "output0", "output1"};

struct stress {
    shmreg_registry *reg;
    shmreg_policy policy;
    uint64_t deadline_ns;
    atomic_uint next_id;
    atomic_bool stop;
    pthread_mutex_t fail_lock;
    int failures;
    char first_failure[512];
};

struct held {
    shmreg_region *ref;
    shmreg_view view;
    unsigned name;
};

struct worker {
    struct stress *s;
    uint64_t rng;
    struct held slots[STRESS_SLOTS];
    unsigned nheld;
    pthread_t thread;
};

static uint64_t next_random(struct worker *w)
{
    return tu_xorshift(&w->rng);
}

/* Workers cannot use cmocka's asserts (they longjmp on the main thread's
 * stack): they record the first failure and stop everyone. */
__attribute__((format(printf, 2, 3))) static void stress_fail(struct stress *s, const char *fmt,
                                                              ...)
{
    pthread_mutex_lock(&s->fail_lock);
    if (s->failures++ == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(s->first_failure, sizeof s->first_failure, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&s->fail_lock);
    atomic_store(&s->stop, true);
}

static uint8_t seed_of(unsigned id)
{
    return (uint8_t)(id * 131u + 7u);
}

/* Where registration `id`'s window starts in its object: any offset works,
 * so most are not page-aligned. */
static size_t window_offset(unsigned id)
{
    return (size_t)(id * 379u) % 9000u;
}

/* Window byte i of registration id: a stamp (id << 8 | name) in the first
 * eight bytes, then the registration's own pattern. */
static uint64_t stamp_of(unsigned id, unsigned name)
{
    return (uint64_t)id << 8 | name;
}

/* A new object for registration id of `name`, its window filled as above.
 * The key is written to key_out; false (with the failure recorded) on error. */
static bool object_create(struct stress *s, unsigned id, unsigned name, char *key_out)
{
    size_t off = window_offset(id), size = off + STRESS_REGION;
    tu_unique_key("shmreg-stress", key_out);
    int fd = shm_open(key_out, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) {
        stress_fail(s, "shm_open %s: %s", key_out, strerror(errno));
        return false;
    }
    uint8_t *p = MAP_FAILED;
    if (ftruncate(fd, (off_t)size) == 0)
        p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        stress_fail(s, "creating %s: %s", key_out, strerror(errno));
        shm_unlink(key_out);
        return false;
    }
    for (size_t i = STAMP_SIZE; i < STRESS_REGION; i++)
        p[off + i] = tu_pattern(seed_of(id), i);
    uint64_t stamp = stamp_of(id, name);
    memcpy(p + off, &stamp, sizeof stamp);
    munmap(p, size);
    return true;
}

/* The check at the heart of the test: the view is mapped (reading it does not
 * fault), belongs to a registration of the name it was acquired under, and
 * holds that registration's bytes, unchanged from start to end of the read. */
static void verify_view(struct stress *s, const struct held *h)
{
    const uint8_t *b = h->view.addr;
    uint64_t stamp, again;
    if (h->view.byte_size != STRESS_REGION || h->view.kind != SHMREG_KIND_SYSTEM) {
        stress_fail(s, "view of %s: %zu bytes of kind %d", stress_names[h->name],
                    h->view.byte_size, (int)h->view.kind);
        return;
    }
    memcpy(&stamp, b, sizeof stamp);
    unsigned id = (unsigned)(stamp >> 8);
    if ((stamp & 0xff) != h->name || id >= atomic_load(&s->next_id)) {
        stress_fail(s, "view of %s carries stamp 0x%" PRIx64 ": another region's mapping",
                    stress_names[h->name], stamp);
        return;
    }
    for (size_t i = STAMP_SIZE; i < STRESS_REGION; i++) {
        if (b[i] != tu_pattern(seed_of(id), i)) {
            stress_fail(s, "view of %s (registration %u), byte %zu: 0x%02x, expected 0x%02x",
                        stress_names[h->name], id, i, b[i], tu_pattern(seed_of(id), i));
            return;
        }
    }
    memcpy(&again, b, sizeof again);
    if (again != stamp)
        stress_fail(s, "view of %s changed under a held reference", stress_names[h->name]);
}

static void op_acquire(struct worker *w, unsigned name)
{
    struct held h = {.name = name};
    shmreg_err e = shmreg_acquire(w->s->reg, stress_names[name], 0, STRESS_REGION, &h.ref, &h.view);
    if (e == SHMREG_ERR_NOT_FOUND)
        return;
    if (e != SHMREG_OK) {
        stress_fail(w->s, "acquire %s: %s: %s", stress_names[name], shmreg_err_name(e),
                    shmreg_last_error());
        return;
    }
    verify_view(w->s, &h);
    if (w->nheld < STRESS_SLOTS)
        w->slots[w->nheld++] = h;
    else
        shmreg_release(h.ref);
}

/* Hand one held reference to a second owner (retain), as a response that
 * outlives its request would. */
static void op_retain(struct worker *w, unsigned pick)
{
    if (w->nheld == 0 || w->nheld == STRESS_SLOTS)
        return;
    struct held h = w->slots[pick % w->nheld];
    if (shmreg_retain(h.ref) != h.ref) {
        stress_fail(w->s, "retain returned another reference");
        return;
    }
    w->slots[w->nheld++] = h;
}

static void op_release(struct worker *w, unsigned pick)
{
    if (w->nheld == 0)
        return;
    unsigned i = pick % w->nheld;
    verify_view(w->s, &w->slots[i]);
    shmreg_release(w->slots[i].ref);
    w->slots[i] = w->slots[--w->nheld];
}

static void op_unregister(struct worker *w, unsigned name)
{
    shmreg_err e = shmreg_unregister(w->s->reg, stress_names[name], SHMREG_KIND_SYSTEM);
    bool expected = e == SHMREG_OK || e == SHMREG_ERR_NOT_FOUND ||
                    (e == SHMREG_ERR_BUSY && w->s->policy == SHMREG_POLICY_REFUSE);
    if (!expected)
        stress_fail(w->s, "unregister %s: %s: %s", stress_names[name], shmreg_err_name(e),
                    shmreg_last_error());
}

static void op_register(struct worker *w, unsigned name)
{
    char key[64];
    unsigned id = atomic_fetch_add(&w->s->next_id, 1u);
    if (!object_create(w->s, id, name, key))
        return;
    shmreg_err e = shmreg_register_system(w->s->reg, stress_names[name], key, window_offset(id),
                                          STRESS_REGION, 0);
    /* The registry keeps its mapping; the object's name is no longer needed. */
    shm_unlink(key);
    if (e != SHMREG_OK && e != SHMREG_ERR_ALREADY_EXISTS)
        stress_fail(w->s, "register %s: %s: %s", stress_names[name], shmreg_err_name(e),
                    shmreg_last_error());
}

/* A status snapshot taken mid-race must still make sense. */
static void op_status(struct worker *w)
{
    shmreg_region_status *st = NULL;
    size_t n = 0;
    shmreg_err e = shmreg_status(w->s->reg, NULL, SHMREG_KIND_ANY, &st, &n);
    if (e != SHMREG_OK) {
        stress_fail(w->s, "status: %s: %s", shmreg_err_name(e), shmreg_last_error());
        return;
    }
    if (n > STRESS_NAMES)
        stress_fail(w->s, "status lists %zu regions over %d names", n, STRESS_NAMES);
    for (size_t i = 0; i < n && i < STRESS_NAMES; i++) {
        if (st[i].byte_size != STRESS_REGION || st[i].kind != SHMREG_KIND_SYSTEM ||
            st[i].references > STRESS_THREADS * STRESS_SLOTS + STRESS_THREADS ||
            (st[i].pending_unregister && w->s->policy != SHMREG_POLICY_DEFER))
            stress_fail(w->s, "status of %s: %zu bytes, in_use %u, pending %d", st[i].name,
                        st[i].byte_size, st[i].references, st[i].pending_unregister);
    }
    shmreg_status_free(st, n);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    for (unsigned iter = 0; iter < STRESS_MAX_ITERS && !atomic_load(&w->s->stop); iter++) {
        if ((iter & 63) == 0 && tu_now_ns() > w->s->deadline_ns)
            break;
        uint64_t r = next_random(w);
        unsigned name = (unsigned)(r >> 32) % STRESS_NAMES, pick = (unsigned)(r >> 40);
        unsigned dice = (unsigned)(r % 100);
        if (dice < 40)
            op_acquire(w, name);
        else if (dice < 45)
            op_retain(w, pick);
        else if (dice < 70)
            op_release(w, pick);
        else if (dice < 83)
            op_unregister(w, name);
        else if (dice < 98)
            op_register(w, name);
        else
            op_status(w);
    }
    while (w->nheld > 0)
        op_release(w, 0);
    return NULL;
}

/* Once every thread let go, nothing may be in use or left pending. */
static void assert_all_idle(shmreg_registry *reg)
{
    shmreg_region_status *st = NULL;
    size_t n = 0;
    assert_ok(shmreg_status(reg, NULL, SHMREG_KIND_ANY, &st, &n));
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(st[i].references, 0);
        assert_int_equal(st[i].pending_unregister, 0);
    }
    shmreg_status_free(st, n);
}

static void run_policy(struct ut *t, shmreg_policy policy)
{
    static struct worker workers[STRESS_THREADS];
    struct stress s = {.reg = ut_registry(t, policy), .policy = policy};
    pthread_mutex_init(&s.fail_lock, NULL);
    s.deadline_ns = tu_now_ns() + (uint64_t)STRESS_RUN_MS * 1000000u;

    for (unsigned i = 0; i < STRESS_THREADS; i++) {
        memset(&workers[i], 0, sizeof workers[i]);
        workers[i].s = &s;
        workers[i].rng = 0x9e3779b97f4a7c15u * (i + 1) ^ (uint64_t)policy << 32;
        assert_int_equal(pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]), 0);
    }
    for (unsigned i = 0; i < STRESS_THREADS; i++)
        assert_int_equal(pthread_join(workers[i].thread, NULL), 0);
    pthread_mutex_destroy(&s.fail_lock);
    if (s.failures > 0)
        fail_msg("%d failure(s); first: %s", s.failures, s.first_failure);
    print_message("policy %d: %u registrations attempted\n", (int)policy,
                  atomic_load(&s.next_id));

    assert_all_idle(s.reg);
    assert_ok(shmreg_unregister_all(s.reg, SHMREG_KIND_ANY));
    assert_int_equal(ut_status_count(s.reg, SHMREG_KIND_ANY), 0);
    /* What the workers' last releases handed to the reclaim thread. */
    assert_ok(shmreg_registry_trim(s.reg));
    assert_int_equal(tu_count_shm_maps(NULL), t->base.shm_maps);
}

static void test_stress_defer(void **state)
{
    run_policy(*state, SHMREG_POLICY_DEFER);
}

static void test_stress_detach(void **state)
{
    run_policy(*state, SHMREG_POLICY_DETACH);
}

static void test_stress_refuse(void **state)
{
    run_policy(*state, SHMREG_POLICY_REFUSE);
}

/* Shutdown racing the last releases: threads holding references check and
 * drop them while the registry is destroyed, in every interleaving the
 * scheduler gives. Each region must be unmapped exactly once. */
#define DESTROY_ROUNDS 20

struct destroy_race {
    pthread_barrier_t *start;
    struct held held[STRESS_NAMES];
    struct stress *s;
};

static void *release_during_destroy(void *arg)
{
    struct destroy_race *d = arg;
    pthread_barrier_wait(d->start);
    for (unsigned i = 0; i < STRESS_NAMES; i++) {
        verify_view(d->s, &d->held[i]);
        shmreg_release(d->held[i].ref);
    }
    return NULL;
}

/* Register every name in a fresh registry of `policy` and start threads that
 * each hold a reference to every region, waiting on `start`. */
static void start_holders(struct ut *t, struct stress *s, shmreg_policy policy,
                          pthread_barrier_t *start, struct destroy_race *races,
                          pthread_t *threads)
{
    struct worker registrar = {.s = s};
    s->reg = ut_registry(t, policy);
    s->policy = policy;
    for (unsigned n = 0; n < STRESS_NAMES; n++)
        op_register(&registrar, n);
    for (unsigned i = 0; i < STRESS_THREADS; i++) {
        races[i].s = s;
        races[i].start = start;
        for (unsigned n = 0; n < STRESS_NAMES; n++) {
            races[i].held[n].name = n;
            assert_ok(shmreg_acquire(s->reg, stress_names[n], 0, STRESS_REGION,
                                     &races[i].held[n].ref, &races[i].held[n].view));
        }
        assert_int_equal(pthread_create(&threads[i], NULL, release_during_destroy, &races[i]), 0);
    }
}

static void test_destroy_races_last_releases(void **state)
{
    struct ut *t = *state;
    struct stress s = {.policy = SHMREG_POLICY_DEFER};
    static struct destroy_race races[STRESS_THREADS];
    pthread_t threads[STRESS_THREADS];
    pthread_barrier_t start;
    pthread_mutex_init(&s.fail_lock, NULL);

    for (unsigned round = 0; round < DESTROY_ROUNDS && s.failures == 0; round++) {
        assert_int_equal(pthread_barrier_init(&start, NULL, STRESS_THREADS + 1), 0);
        start_holders(t, &s, (shmreg_policy)(round % 3), &start, races, threads);
        pthread_barrier_wait(&start);
        shmreg_registry_destroy(s.reg);
        t->reg = NULL;
        for (unsigned i = 0; i < STRESS_THREADS; i++)
            assert_int_equal(pthread_join(threads[i], NULL), 0);
        pthread_barrier_destroy(&start);
        /* Releases after destroy are reclaimed by the registry's thread,
         * which then frees the table and ends: no handle is left to wait
         * on, so poll. */
        assert_int_equal(tu_wait_shm_maps(NULL, t->base.shm_maps, 10000), t->base.shm_maps);
    }
    pthread_mutex_destroy(&s.fail_lock);
    if (s.failures > 0)
        fail_msg("%d failure(s); first: %s", s.failures, s.first_failure);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        UT_TEST(test_stress_defer),
        UT_TEST(test_stress_detach),
        UT_TEST(test_stress_refuse),
        UT_TEST(test_destroy_races_last_releases),
    };
    return cmocka_run_group_tests(tests, ut_group_setup, NULL);
}
