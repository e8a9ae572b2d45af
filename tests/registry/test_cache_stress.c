/* Threads register windows of a few shared objects under their own names,
 * acquire, check and release them, unregister, and now and then trim, on a
 * registry with a small cache and background reclaim: cache hits race the
 * evictions that unregisters, the reclaim thread and trim make, and last
 * releases race the hand-off. Every view is checked against the object's
 * bytes, so a reuse of the wrong window, or of an unmapped one, shows. Run
 * under ThreadSanitizer by the tier that selects the "stress" label. */
#include "fixture.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define OBJECTS 3
#define OBJ_SIZE 12288
#define THREADS 4
#define NAMES 3 /* per thread */
#define SLOTS 3
#define RUN_MS 600
#define MAX_ITERS 100000

static char keys[OBJECTS][64];

struct name_state {
    char name[32];
    bool registered;
    int object;
    size_t offset, size;
};

struct held {
    shmreg_region *ref;
    shmreg_view view;
    int object;
    size_t first; /* object offset of view byte 0 */
};

struct worker {
    shmreg_registry *reg;
    uint64_t rng, deadline;
    struct name_state names[NAMES];
    struct held slots[SLOTS];
    unsigned nheld;
    atomic_int *failures;
    char failure[256];
    pthread_t thread;
};

static uint64_t next_random(struct worker *w)
{
    return tu_xorshift(&w->rng);
}

static bool worker_fail(struct worker *w, const char *what)
{
    if (atomic_fetch_add(w->failures, 1) == 0 || w->failure[0] == '\0')
        snprintf(w->failure, sizeof w->failure, "%s: %s", what, shmreg_last_error());
    return false;
}

static bool view_right(const struct held *h)
{
    const uint8_t *p = h->view.addr;
    size_t n = h->view.byte_size;
    for (size_t i = 0; i < n; i += n / 8 + 1)
        if (p[i] != tu_pattern((uint8_t)(60 + h->object), h->first + i))
            return false;
    return n == 0 || p[n - 1] == tu_pattern((uint8_t)(60 + h->object), h->first + n - 1);
}

static bool step(struct worker *w)
{
    struct name_state *ns = &w->names[next_random(w) % NAMES];
    switch (next_random(w) % 8) {
    case 0:
    case 1: /* register */
        if (ns->registered)
            return true;
        ns->object = (int)(next_random(w) % OBJECTS);
        ns->offset = next_random(w) % 2 ? 0 : next_random(w) % (OBJ_SIZE - 1);
        ns->size = 1 + next_random(w) % (OBJ_SIZE - ns->offset);
        if (shmreg_register_system(w->reg, ns->name, keys[ns->object], ns->offset, ns->size, 0) != SHMREG_OK)
            return worker_fail(w, "register");
        ns->registered = true;
        return true;
    case 2:
    case 3:
    case 4: { /* acquire and check */
        if (!ns->registered || w->nheld == SLOTS)
            return true;
        struct held *h = &w->slots[w->nheld];
        size_t off = next_random(w) % ns->size;
        size_t len = next_random(w) % (ns->size - off + 1);
        if (shmreg_acquire(w->reg, ns->name, off, len, &h->ref, &h->view) != SHMREG_OK)
            return worker_fail(w, "acquire");
        h->object = ns->object;
        h->first = ns->offset + off;
        if (!view_right(h))
            return worker_fail(w, "a view holds the wrong bytes");
        w->nheld++;
        return true;
    }
    case 5: /* release, the oldest */
        if (w->nheld == 0)
            return true;
        if (!view_right(&w->slots[0]))
            return worker_fail(w, "a held view changed");
        shmreg_release(w->slots[0].ref);
        memmove(&w->slots[0], &w->slots[1], (w->nheld - 1) * sizeof w->slots[0]);
        w->nheld--;
        return true;
    case 6: /* unregister (DETACH: held views stay good) */
        if (!ns->registered)
            return true;
        if (shmreg_unregister(w->reg, ns->name, SHMREG_KIND_SYSTEM) != SHMREG_OK)
            return worker_fail(w, "unregister");
        ns->registered = false;
        return true;
    default:
        if (next_random(w) % 16 == 0 && shmreg_registry_trim(w->reg) != SHMREG_OK)
            return worker_fail(w, "trim");
        return true;
    }
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    for (unsigned i = 0; i < MAX_ITERS && tu_now_ns() < w->deadline && atomic_load(w->failures) == 0; i++)
        if (!step(w))
            break;
    while (w->nheld > 0)
        shmreg_release(w->slots[--w->nheld].ref);
    return NULL;
}

static void run(struct ut *t, size_t cache_bytes, shmreg_reclaim reclaim)
{
    shmreg_config cfg;
    shmreg_config_init(&cfg);
    cfg.cache_bytes = cache_bytes;
    cfg.reclaim = reclaim;
    cfg.pin_policy = SHMREG_PIN_NEVER;
    /* The name is free at once; held views keep the old mapping. */
    cfg.busy_policy = SHMREG_POLICY_DETACH;
    ut_registry_config(t, &cfg);
    static struct worker workers[THREADS];
    atomic_int failures = 0;
    uint64_t deadline = tu_now_ns() + (uint64_t)RUN_MS * 1000000u;
    for (unsigned i = 0; i < THREADS; i++) {
        memset(&workers[i], 0, sizeof workers[i]);
        workers[i].reg = t->reg;
        workers[i].rng = 0x9e3779b97f4a7c15u * (i + 1);
        workers[i].deadline = deadline;
        workers[i].failures = &failures;
        for (unsigned n = 0; n < NAMES; n++)
            snprintf(workers[i].names[n].name, sizeof workers[i].names[n].name, "t%u-n%u", i, n);
        assert_int_equal(pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]), 0);
    }
    for (unsigned i = 0; i < THREADS; i++)
        assert_int_equal(pthread_join(workers[i].thread, NULL), 0);
    for (unsigned i = 0; i < THREADS; i++)
        if (workers[i].failure[0])
            fail_msg("worker %u: %s", i, workers[i].failure);
    assert_int_equal(atomic_load(&failures), 0);

    shmreg_stats s;
    assert_ok(shmreg_registry_stats(t->reg, &s));
    print_message("cache %zu: %llu hits, %llu misses, %llu evictions\n", cache_bytes,
                  (unsigned long long)s.cache_hits, (unsigned long long)s.cache_misses,
                  (unsigned long long)s.cache_evictions);
    assert_ok(shmreg_unregister_all(t->reg, SHMREG_KIND_ANY));
    assert_ok(shmreg_registry_trim(t->reg));
    assert_ok(shmreg_registry_stats(t->reg, &s));
    assert_int_equal(s.mapped_regions, 0);
    assert_int_equal(s.mapped_bytes, 0);
    assert_int_equal(s.cached_mappings, 0);
    assert_int_equal(s.reclaim_waiting_bytes, 0);
    assert_int_equal(tu_count_shm_maps(NULL), t->base.shm_maps);
}

static void test_small_cache_background(void **state)
{
    run(*state, 2 * OBJ_SIZE, SHMREG_RECLAIM_BACKGROUND);
}

static void test_large_cache_inline(void **state)
{
    run(*state, 64 * OBJ_SIZE, SHMREG_RECLAIM_INLINE);
}

static void test_no_cache_background(void **state)
{
    run(*state, 0, SHMREG_RECLAIM_BACKGROUND);
}

static int group_setup(void **state)
{
    for (int i = 0; i < OBJECTS; i++)
        tu_shm_create(OBJ_SIZE, (uint8_t)(60 + i), keys[i]);
    return ut_group_setup(state);
}

static int group_teardown(void **state)
{
    for (int i = 0; i < OBJECTS; i++)
        tu_shm_unlink(keys[i]);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        UT_TEST(test_small_cache_background),
        UT_TEST(test_large_cache_inline),
        UT_TEST(test_no_cache_background),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
