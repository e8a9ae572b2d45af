/* shmreg_registry_stats is one snapshot taken under the registry's lock:
 * while threads register, release (handing regions to the reclaim thread),
 * unregister and trim, another thread takes snapshots without pause and
 * checks what must hold in every one of them:
 *   - reclaim_waiting_bytes + cached_bytes <= mapped_bytes (bytes waiting
 *     for the reclaim thread, and cached mappings, are still mapped; a
 *     waiting region is on no cached mapping),
 *   - pinned_bytes <= mapped_bytes,
 *   - regions + detached_regions <= mapped_regions (a region released for
 *     the last time leaves regions before its teardown leaves
 *     mapped_regions), pending_regions <= regions,
 *   - cached_mappings is 0 exactly when cached_bytes is,
 *   - the counters since create never go back.
 * A snapshot once showed mapped_bytes 0 with reclaim_waiting_bytes 128: the reclaim
 * thread took the waiting bytes off after the teardown had given back the
 * mapped ones, outside the lock. Run with the cache off and on, under
 * ThreadSanitizer too (label "stress"). */
#include "fixture.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define OBJ_SIZE 8192
#define WINDOW 128
#define WORKERS 2
#define RUN_MS 700
#define MAX_ITERS 200000

struct shared {
    shmreg_registry *reg;
    const char *key;
    uint64_t deadline;
    atomic_bool stop;
    atomic_int worker_failures;
};

struct worker {
    struct shared *sh;
    int id;
    pthread_t thread;
};

/* Register, acquire, unregister while held (DEFER: pending), release: the
 * release is the last one and hands the region to the reclaim thread. Now
 * and then a trim, which waits for the thread and empties the cache. */
static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct shared *sh = w->sh;
    char name[32];
    for (unsigned i = 0; i < MAX_ITERS && tu_now_ns() < sh->deadline; i++) {
        snprintf(name, sizeof name, "w%d-%u", w->id, i % 4);
        size_t offset = (size_t)(w->id * 2 + (int)(i % 2)) * WINDOW;
        shmreg_region *ref;
        shmreg_view v;
        if (shmreg_register_system(sh->reg, name, sh->key, offset, WINDOW, SHMREG_NO_PIN) != SHMREG_OK ||
            shmreg_acquire(sh->reg, name, 0, WINDOW, &ref, &v) != SHMREG_OK) {
            atomic_fetch_add(&sh->worker_failures, 1);
            fprintf(stderr, "worker %d: %s\n", w->id, shmreg_last_error());
            break;
        }
        if (shmreg_unregister(sh->reg, name, SHMREG_KIND_SYSTEM) != SHMREG_OK)
            atomic_fetch_add(&sh->worker_failures, 1);
        shmreg_release(ref);
        if (i % 64 == 63)
            (void)shmreg_registry_trim(sh->reg);
    }
    return NULL;
}

/* Why s breaks an invariant (prev: the snapshot before it), or NULL. */
static const char *broken(const shmreg_stats *s, const shmreg_stats *prev)
{
    if (s->reclaim_waiting_bytes > s->mapped_bytes ||
        s->cached_bytes > s->mapped_bytes - s->reclaim_waiting_bytes)
        return "reclaim_waiting_bytes + cached_bytes > mapped_bytes";
    if (s->pinned_bytes > s->mapped_bytes)
        return "pinned_bytes > mapped_bytes";
    if (s->detached_regions > s->mapped_regions || s->regions > s->mapped_regions - s->detached_regions)
        return "regions + detached_regions > mapped_regions";
    if (s->pending_regions > s->regions)
        return "pending_regions > regions";
    if ((s->cached_mappings == 0) != (s->cached_bytes == 0))
        return "cached_mappings and cached_bytes disagree";
    if (s->registrations < prev->registrations || s->refusals < prev->refusals ||
        s->cache_hits < prev->cache_hits || s->cache_misses < prev->cache_misses ||
        s->cache_evictions < prev->cache_evictions)
        return "a counter since create went back";
    return NULL;
}

static void run(struct ut *t, size_t cache_bytes)
{
    shmreg_config cfg;
    shmreg_config_init(&cfg);
    cfg.reclaim = SHMREG_RECLAIM_BACKGROUND;
    cfg.cache_bytes = cache_bytes;
    cfg.pin_policy = SHMREG_PIN_NEVER;
    struct shared sh = {
        .reg = ut_registry_config(t, &cfg),
        .key = ut_object(t, OBJ_SIZE, 31),
        .deadline = tu_now_ns() + (uint64_t)RUN_MS * 1000000u,
    };
    atomic_init(&sh.stop, false);
    atomic_init(&sh.worker_failures, 0);
    struct worker workers[WORKERS];
    for (int i = 0; i < WORKERS; i++) {
        workers[i] = (struct worker){.sh = &sh, .id = i};
        assert_int_equal(pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]), 0);
    }

    shmreg_stats prev, s;
    memset(&prev, 0, sizeof prev);
    unsigned long snapshots = 0, bad = 0, waiting_seen = 0;
    const char *first = NULL;
    shmreg_stats first_bad;
    memset(&first_bad, 0, sizeof first_bad);
    while (tu_now_ns() < sh.deadline) {
        assert_ok(shmreg_registry_stats(sh.reg, &s));
        snapshots++;
        waiting_seen += s.reclaim_waiting_bytes > 0;
        const char *why = broken(&s, &prev);
        if (why && bad++ == 0) {
            first = why;
            first_bad = s;
        }
        prev = s;
    }
    for (int i = 0; i < WORKERS; i++)
        pthread_join(workers[i].thread, NULL);
    assert_ok(shmreg_registry_trim(sh.reg));
    assert_ok(shmreg_registry_stats(sh.reg, &s));
    printf("stats snapshot, cache_bytes %zu: %lu snapshots (%lu with bytes waiting for reclaim), %lu broken; "
           "%llu registrations\n",
           cache_bytes, snapshots, waiting_seen, bad, (unsigned long long)s.registrations);
    if (first)
        fprintf(stderr,
                "first broken snapshot: %s: mapped_bytes %zu, reclaim_waiting_bytes %llu, cached_bytes %llu, "
                "mapped_regions %zu, regions %zu\n",
                first, first_bad.mapped_bytes, (unsigned long long)first_bad.reclaim_waiting_bytes,
                (unsigned long long)first_bad.cached_bytes, first_bad.mapped_regions, first_bad.regions);
    assert_int_equal(atomic_load(&sh.worker_failures), 0);
    assert_int_equal(bad, 0);
    /* Quiet again: nothing waits, nothing but the cache is mapped. */
    assert_int_equal(s.reclaim_waiting_bytes, 0);
    assert_int_equal(s.cached_bytes, 0);
    assert_int_equal(s.mapped_bytes, 0);
    assert_int_equal(s.mapped_regions, 0);
    assert_true(s.registrations > 0);
}

static void test_snapshot_without_cache(void **state)
{
    run(*state, 0);
}

static void test_snapshot_with_cache(void **state)
{
    run(*state, 4 * WINDOW);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        UT_TEST(test_snapshot_without_cache),
        UT_TEST(test_snapshot_with_cache),
    };
    return cmocka_run_group_tests(tests, ut_group_setup, NULL);
}
