/* The registration cache (shmreg_config.cache_bytes): a registration of
 * memory already mapped, cached or live under another name, reuses the
 * mapping; a reuse passes every check a new mapping passes, in the same
 * order and with the same errors. Each check is run on the hit path here,
 * with the same registration run against a registry without the cache for
 * the expected code and message. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "fixture.h"

#define OBJ 8192
#define CACHE (1u << 20)

/* A config with this cache, limit and owner allow-list, and the same
 * reserved prefix in every test. */
static void cache_config(shmreg_config *cfg, size_t cache_bytes, size_t max_mapped, const uid_t *owners,
                         size_t nowners)
{
    static const char *const prefixes[] = {"reserved-", NULL};
    shmreg_config_init(cfg);
    cfg->pin_policy = SHMREG_PIN_NEVER;
    cfg->cache_bytes = cache_bytes;
    cfg->max_mapped_bytes = max_mapped;
    cfg->allowed_owner_uids = owners;
    cfg->allowed_owner_uid_count = nowners;
    cfg->reserved_key_prefixes = prefixes;
}

static shmreg_registry *new_registry(size_t cache_bytes, size_t max_mapped, const uid_t *owners,
                                     size_t nowners)
{
    shmreg_config cfg;
    cache_config(&cfg, cache_bytes, max_mapped, owners, nowners);
    shmreg_registry *reg = NULL;
    assert_ok(shmreg_registry_create(&cfg, &reg));
    return reg;
}

/* The fixture's registry, replaced by one with the cache. */
static shmreg_registry *cached_registry(struct ut *t, size_t cache_bytes, size_t max_mapped,
                                        const uid_t *owners, size_t nowners)
{
    shmreg_config cfg;
    cache_config(&cfg, cache_bytes, max_mapped, owners, nowners);
    return ut_registry_config(t, &cfg);
}

/* One without the cache: what a miss answers. */
static shmreg_registry *plain_registry(const uid_t *owners, size_t nowners)
{
    return new_registry(0, 0, owners, nowners);
}

static shmreg_stats stats_of(shmreg_registry *reg)
{
    shmreg_stats s;
    assert_ok(shmreg_registry_stats(reg, &s));
    return s;
}

/* Status of name: whether its registration reused a mapping, and how many
 * regions are on that mapping. */
static void assert_mapping(shmreg_registry *reg, const char *name, int reused, unsigned regions)
{
    shmreg_region_status *st = ut_status_of(reg, name);
    assert_int_equal(st->mapping_reused, reused);
    assert_int_equal(st->mapping_regions, regions);
    shmreg_status_free(st, 1);
}

/* name's first size bytes, acquired, are tu_pattern(seed, first + i). */
static void assert_reads(shmreg_registry *reg, const char *name, size_t size, uint8_t seed, size_t first)
{
    shmreg_region *ref;
    shmreg_view v;
    assert_ok(shmreg_acquire(reg, name, 0, size, &ref, &v));
    ut_assert_pattern(v.addr, size, seed, first);
    shmreg_release(ref);
}

/* Register name on key's [off, off+size), unregister it: its mapping is
 * left in the cache. */
static void leave_cached(shmreg_registry *reg, const char *name, const char *key, size_t off, size_t size,
                         unsigned flags)
{
    assert_ok(shmreg_register_system(reg, name, key, off, size, flags));
    assert_ok(shmreg_unregister(reg, name, SHMREG_KIND_SYSTEM));
}

/* A registry with the cache holding key's whole object (region "a" left
 * it there), and *plain, one without the cache: what a miss answers. */
static shmreg_registry *hit_candidate(struct ut *t, const char *key, const uid_t *owners, size_t nowners,
                                      shmreg_registry **plain)
{
    shmreg_registry *reg = cached_registry(t, CACHE, 0, owners, nowners);
    *plain = plain_registry(owners, nowners);
    leave_cached(reg, "a", key, 0, OBJ, 0);
    return reg;
}

/* The same registration on a registry with the cache (where it is a hit
 * candidate) and one without: the same code and the same message. */
static void assert_same_refusal(shmreg_registry *cached, shmreg_registry *plain, const char *name, const char *key,
                                size_t off, size_t size, unsigned flags, shmreg_err want)
{
    shmreg_err a = shmreg_register_system(plain, name, key, off, size, flags);
    char plain_msg[1024];
    snprintf(plain_msg, sizeof plain_msg, "%s", shmreg_last_error());
    assert_string_equal(shmreg_err_name(a), shmreg_err_name(want));
    shmreg_err b = shmreg_register_system(cached, name, key, off, size, flags);
    assert_string_equal(shmreg_err_name(b), shmreg_err_name(want));
    assert_string_equal(shmreg_last_error(), plain_msg);
}

static void test_reregistration_reuses_the_cached_mapping(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ, 11);
    shmreg_registry *reg = cached_registry(t, CACHE, 0, NULL, 0);

    leave_cached(reg, "a", key, 0, OBJ, 0);
    shmreg_stats s = stats_of(reg);
    assert_int_equal(s.cached_mappings, 1);
    assert_int_equal(s.cached_bytes, OBJ);
    assert_int_equal(s.mapped_bytes, OBJ); /* cached bytes count */
    assert_int_equal(s.cache_misses, 1);
    assert_int_equal(tu_count_shm_maps(key), 1);

    /* Another name, a window inside: the same mapping. */
    assert_ok(shmreg_register_system(reg, "b", key, 100, 4000, 0));
    s = stats_of(reg);
    assert_int_equal(s.cache_hits, 1);
    assert_int_equal(s.cached_mappings, 0);
    assert_int_equal(s.cached_bytes, 0);
    assert_int_equal(s.mapped_bytes, 4000);
    assert_int_equal(tu_count_shm_maps(key), 1);
    assert_mapping(reg, "b", 1, 1);
    shmreg_region_status *st = ut_status_of(reg, "b");
    assert_int_equal(st->offset, 100);
    shmreg_status_free(st, 1);
    assert_reads(reg, "b", 4000, 11, 100);

    assert_ok(shmreg_unregister(reg, "b", SHMREG_KIND_SYSTEM));
    assert_ok(shmreg_registry_trim(reg));
    s = stats_of(reg);
    assert_int_equal(s.cached_mappings, 0);
    assert_int_equal(s.mapped_bytes, 0);
    assert_int_equal(s.cache_evictions, 1);
    assert_int_equal(tu_count_shm_maps(key), 0);
}

static void test_live_registrations_share_a_mapping(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ, 12);
    shmreg_registry *reg = cached_registry(t, CACHE, 0, NULL, 0);

    assert_ok(shmreg_register_system(reg, "whole", key, 0, OBJ, 0));
    assert_ok(shmreg_register_system(reg, "part", key, 5000, 3000, 0));
    assert_int_equal(tu_count_shm_maps(key), 1);
    assert_mapping(reg, "whole", 0, 2);
    assert_mapping(reg, "part", 1, 2);

    shmreg_region *r1, *r2;
    shmreg_view v1, v2;
    assert_ok(shmreg_acquire(reg, "whole", 5000, 3000, &r1, &v1));
    assert_ok(shmreg_acquire(reg, "part", 0, 3000, &r2, &v2));
    assert_ptr_equal(v1.addr, v2.addr);
    ut_assert_pattern(v2.addr, 3000, 12, 5000);
    /* The first name goes; the mapping stays for the second. */
    assert_ok(shmreg_unregister(reg, "whole", SHMREG_KIND_SYSTEM));
    shmreg_release(r1);
    assert_ok(shmreg_registry_trim(reg));
    assert_int_equal(tu_count_shm_maps(key), 1);
    ut_assert_pattern(v2.addr, 3000, 12, 5000);
    shmreg_release(r2);
    assert_ok(shmreg_unregister(reg, "part", SHMREG_KIND_SYSTEM));
    assert_int_equal(stats_of(reg).cached_mappings, 1);
}

/* A window the cached mapping does not cover, another access or another
 * object: a new mapping. */
static void test_what_is_not_a_hit(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ, 13);
    shmreg_registry *reg = cached_registry(t, CACHE, 0, NULL, 0);

    leave_cached(reg, "a", key, 0, 4096, 0);
    assert_ok(shmreg_register_system(reg, "beyond", key, 4000, 200, 0)); /* past the window */
    assert_ok(shmreg_register_system(reg, "ro", key, 0, 100, SHMREG_READONLY)); /* other access */
    shmreg_stats s = stats_of(reg);
    assert_int_equal(s.cache_hits, 0);
    assert_int_equal(s.cache_misses, 3);
    assert_int_equal(tu_count_shm_maps(key), 3);
    shmreg_region *ref;
    shmreg_view v;
    assert_ok(shmreg_acquire(reg, "ro", 0, 100, &ref, &v));
    assert_int_equal(v.writable, 0);
    shmreg_release(ref);
    assert_reads(reg, "beyond", 200, 13, 4000);
}

/* Unlinked and created again under the same key: another inode, a miss,
 * and the new object's bytes. */
static void test_a_recreated_object_is_a_miss(void **state)
{
    struct ut *t = *state;
    char key[64];
    tu_shm_create(OBJ, 14, key);
    shmreg_registry *reg = cached_registry(t, CACHE, 0, NULL, 0);
    leave_cached(reg, "a", key, 0, OBJ, 0);
    tu_shm_unlink(key);
    /* The key is gone: the cached mapping does not make it register. */
    shmreg_registry *plain = plain_registry(NULL, 0);
    assert_same_refusal(reg, plain, "a", key, 0, OBJ, 0, SHMREG_ERR_SYSTEM);

    int fd = shm_open(key, O_CREAT | O_EXCL | O_RDWR, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, OBJ), 0);
    uint8_t *p = mmap(NULL, OBJ, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    assert_true(p != MAP_FAILED);
    for (size_t i = 0; i < OBJ; i++)
        p[i] = tu_pattern(15, i);
    munmap(p, OBJ);
    close(fd);

    assert_ok(shmreg_register_system(reg, "a", key, 0, OBJ, 0));
    assert_int_equal(stats_of(reg).cache_hits, 0);
    assert_reads(reg, "a", OBJ, 15, 0);
    shmreg_registry_destroy(plain);
    assert_ok(shmreg_unregister(reg, "a", SHMREG_KIND_SYSTEM));
    shmreg_registry_destroy(t->reg);
    t->reg = NULL;
    tu_shm_unlink(key);
}

/* The object shrank after it was cached: the bounds are checked against
 * its size now, not the cached window (a cache elsewhere shipped without). */
static void test_hit_checks_the_current_size(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ, 16);
    shmreg_registry *plain;
    shmreg_registry *reg = hit_candidate(t, key, NULL, 0, &plain);

    int fd = shm_open(key, O_RDWR, 0);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, 4096), 0);
    close(fd);
    assert_same_refusal(reg, plain, "b", key, 0, OBJ, 0, SHMREG_ERR_OUT_OF_BOUNDS);
    assert_same_refusal(reg, plain, "b", key, 4000, 97, 0, SHMREG_ERR_OUT_OF_BOUNDS);
    assert_int_equal(stats_of(reg).cache_hits, 0);
    /* What still fits is a hit. */
    assert_ok(shmreg_register_system(reg, "b", key, 0, 4096, 0));
    assert_int_equal(stats_of(reg).cache_hits, 1);
    shmreg_registry_destroy(plain);
}

/* Name, flags, key validity, reserved prefixes, name taken: refused before
 * the object is looked at, on the hit path as on the miss path. */
static void test_hit_path_checks_arguments_first(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ, 17);
    shmreg_registry *plain;
    shmreg_registry *reg = hit_candidate(t, key, NULL, 0, &plain);

    assert_same_refusal(reg, plain, "", key, 0, 10, 0, SHMREG_ERR_INVALID_ARG);
    assert_same_refusal(reg, plain, "bad\nname", key, 0, 10, 0, SHMREG_ERR_INVALID_ARG);
    assert_same_refusal(reg, plain, "b", key, 0, 10, 0x80, SHMREG_ERR_INVALID_ARG);
    assert_same_refusal(reg, plain, "b", key, 0, 0, 0, SHMREG_ERR_OUT_OF_BOUNDS);
    assert_same_refusal(reg, plain, "b", "/reserved-x", 0, 10, 0, SHMREG_ERR_INVALID_ARG);
    assert_same_refusal(reg, plain, "b", "a/b", 0, 10, 0, SHMREG_ERR_INVALID_ARG);
    assert_same_refusal(reg, plain, "b", key, SIZE_MAX - 5, 10, 0, SHMREG_ERR_OUT_OF_BOUNDS);
    /* The name taken, by a region that shares the mapping. */
    assert_ok(shmreg_register_system(reg, "taken", key, 0, 10, 0));
    assert_ok(shmreg_register_system(plain, "taken", key, 0, 10, 0));
    assert_same_refusal(reg, plain, "taken", key, 0, 10, 0, SHMREG_ERR_ALREADY_EXISTS);
    shmreg_stats s = stats_of(reg);
    assert_int_equal(s.cache_hits, 1); /* "taken" only */
    assert_int_equal(s.refusals, 8);
    shmreg_registry_destroy(plain);
}

/* The owner allow-list, against the owner the object has now. */
static void test_hit_checks_the_owner(void **state)
{
    struct ut *t = *state;
    if (geteuid() != 0)
        skip(); /* changing an object's owner needs root */
    const char *key = ut_object(t, OBJ, 18);
    const uid_t owners[] = {0};
    shmreg_registry *plain;
    shmreg_registry *reg = hit_candidate(t, key, owners, 1, &plain);
    int fd = shm_open(key, O_RDWR, 0);
    assert_true(fd >= 0);
    assert_int_equal(fchown(fd, 4242, (gid_t)-1), 0);
    assert_same_refusal(reg, plain, "b", key, 0, 10, 0, SHMREG_ERR_INVALID_ARG);
    assert_int_equal(fchown(fd, 0, (gid_t)-1), 0);
    close(fd);
    assert_ok(shmreg_register_system(reg, "b", key, 0, 10, 0));
    assert_int_equal(stats_of(reg).cache_hits, 1);
    shmreg_registry_destroy(plain);
}

/* Cached bytes give way before a limit refuses. */
static void test_cached_bytes_give_way_to_a_registration(void **state)
{
    struct ut *t = *state;
    const char *k1 = ut_object(t, OBJ, 19);
    const char *k2 = ut_object(t, OBJ, 20);
    shmreg_registry *reg = cached_registry(t, CACHE, OBJ, NULL, 0);
    leave_cached(reg, "a", k1, 0, OBJ, 0);
    assert_int_equal(stats_of(reg).mapped_bytes, OBJ);
    assert_ok(shmreg_register_system(reg, "b", k2, 0, OBJ, 0));
    shmreg_stats s = stats_of(reg);
    assert_int_equal(s.cache_evictions, 1);
    assert_int_equal(s.cached_mappings, 0);
    assert_int_equal(tu_count_shm_maps(k1), 0);
    /* Still over with nothing cached: refused, as without a cache. */
    assert_fails(shmreg_register_system(reg, "c", k1, 0, 1, 0), SHMREG_ERR_NO_MEMORY,
                 "cannot register shared memory region 'c': 1 more mapped bytes would pass this registry's "
                 "limit of 8192 (8192 in use)");
}

/* cache_bytes bounds the cache: least recently used out first. */
static void test_cache_bytes_evicts_least_recently_used(void **state)
{
    struct ut *t = *state;
    const char *k1 = ut_object(t, OBJ, 21);
    const char *k2 = ut_object(t, OBJ, 22);
    const char *k3 = ut_object(t, OBJ, 23);
    shmreg_registry *reg = cached_registry(t, 2 * OBJ, 0, NULL, 0);
    leave_cached(reg, "a", k1, 0, OBJ, 0);
    leave_cached(reg, "b", k2, 0, OBJ, 0);
    leave_cached(reg, "c", k3, 0, OBJ, 0);
    shmreg_stats s = stats_of(reg);
    assert_int_equal(s.cached_mappings, 2);
    assert_int_equal(s.cache_evictions, 1);
    assert_int_equal(tu_count_shm_maps(k1), 0);
    assert_int_equal(tu_count_shm_maps(k2), 1);
    /* Bigger than the whole cache: never cached. */
    shmreg_registry *small = cached_registry(t, 100, 0, NULL, 0);
    leave_cached(small, "a", k1, 0, OBJ, 0);
    assert_int_equal(stats_of(small).cached_mappings, 0);
    assert_int_equal(tu_count_shm_maps(k1), 0);
}

/* Destroy leaves nothing cached behind. */
static void test_destroy_empties_the_cache(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ, 24);
    shmreg_registry *reg = cached_registry(t, CACHE, 0, NULL, 0);
    leave_cached(reg, "a", key, 0, OBJ, 0);
    assert_int_equal(tu_count_shm_maps(key), 1);
    shmreg_registry_destroy(reg);
    t->reg = NULL;
    assert_int_equal(tu_count_shm_maps(key), 0);
}

/* A FIFO created under a key whose object was cached is refused
 * as on a miss, and without blocking: the hit path, too, opens the key
 * non-blocking and checks the object's type before anything else. */
static void test_hit_path_refuses_a_fifo_without_blocking(void **state)
{
    struct ut *t = *state;
    char key[64], path[100];
    tu_shm_create(OBJ, 27, key);
    shmreg_registry *plain;
    shmreg_registry *reg = hit_candidate(t, key, NULL, 0, &plain);
    tu_shm_unlink(key);
    snprintf(path, sizeof path, "/dev/shm%s", key);
    assert_int_equal(mkfifo(path, 0600), 0);
    alarm(10); /* a blocking open would hang here: SIGALRM ends the test */
    assert_same_refusal(reg, plain, "f", key, 0, 1, SHMREG_READONLY, SHMREG_ERR_INVALID_ARG);
    assert_same_refusal(reg, plain, "f", key, 0, 1, 0, SHMREG_ERR_INVALID_ARG);
    alarm(0);
    unlink(path);
    assert_int_equal(stats_of(reg).cache_hits, 0);
    shmreg_registry_destroy(plain);
}

/* The pin decision is part of what a hit must match: a demanded pin is
 * never served by an unpinned cached mapping, and answers as a miss does
 * (UNSUPPORTED without CUDA; with it, pinned in a mapping of its own). */
static void test_a_demanded_pin_is_not_an_unpinned_hit(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ, 28);
    shmreg_registry *plain;
    shmreg_registry *reg = hit_candidate(t, key, NULL, 0, &plain); /* cached unpinned (PIN_NEVER) */
    if (!ut_cuda_usable()) {
        assert_same_refusal(reg, plain, "p", key, 0, OBJ, SHMREG_PIN, SHMREG_ERR_UNSUPPORTED);
    } else {
        assert_ok(shmreg_register_system(reg, "p", key, 0, OBJ, SHMREG_PIN));
        shmreg_region_status *st = ut_status_of(reg, "p");
        assert_int_equal(st->pinned, 1);
        assert_int_equal(st->mapping_reused, 0);
        shmreg_status_free(st, 1);
        assert_ok(shmreg_unregister(reg, "p", SHMREG_KIND_SYSTEM));
    }
    assert_int_equal(stats_of(reg).cache_hits, 0);
    shmreg_registry_destroy(plain);
}

/* SHMREG_SOURCE_FD: a descriptor names nothing the cache could find again,
 * so a descriptor registration neither reuses a mapping (not even one of
 * the same object, cached under its key) nor leaves its own cached. */
static void test_descriptors_neither_hit_nor_fill_the_cache(void **state)
{
    struct ut *t = *state;
    const char *key = ut_object(t, OBJ, 29);
    shmreg_config cfg;
    cache_config(&cfg, CACHE, 0, NULL, 0);
    cfg.accept_unsealed_fds = 1; /* a shm object cannot be sealed */
    shmreg_registry *reg = ut_registry_config(t, &cfg);
    leave_cached(reg, "a", key, 0, OBJ, 0);
    int fd = shm_open(key, O_RDWR, 0);
    assert_true(fd >= 0);
    assert_ok(shmreg_register_system_fd(reg, "fd1", fd, 0, OBJ, 0));
    assert_ok(shmreg_register_system_fd(reg, "fd2", fd, 100, 4000, 0));
    close(fd); /* the registry keeps its own mappings */
    shmreg_stats s = stats_of(reg);
    assert_int_equal(s.cache_hits, 0);
    assert_int_equal(s.cache_misses, 1); /* a's: descriptors are not looked up */
    assert_int_equal(s.cached_mappings, 1);
    assert_int_equal(tu_count_shm_maps(key), 3);
    assert_mapping(reg, "fd2", 0, 1);
    assert_reads(reg, "fd2", 4000, 29, 100);
    assert_ok(shmreg_unregister(reg, "fd1", SHMREG_KIND_SYSTEM));
    assert_ok(shmreg_unregister(reg, "fd2", SHMREG_KIND_SYSTEM));
    s = stats_of(reg);
    assert_int_equal(s.cached_mappings, 1); /* still only a's */
    assert_int_equal(s.cached_bytes, OBJ);
    assert_int_equal(s.mapped_bytes, OBJ);
    assert_int_equal(tu_count_shm_maps(key), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        UT_TEST(test_reregistration_reuses_the_cached_mapping),
        UT_TEST(test_live_registrations_share_a_mapping),
        UT_TEST(test_what_is_not_a_hit),
        UT_TEST(test_a_recreated_object_is_a_miss),
        UT_TEST(test_hit_checks_the_current_size),
        UT_TEST(test_hit_path_checks_arguments_first),
        UT_TEST(test_hit_checks_the_owner),
        UT_TEST(test_cached_bytes_give_way_to_a_registration),
        UT_TEST(test_cache_bytes_evicts_least_recently_used),
        UT_TEST(test_destroy_empties_the_cache),
        UT_TEST(test_hit_path_refuses_a_fifo_without_blocking),
        UT_TEST(test_a_demanded_pin_is_not_an_unpinned_hit),
        UT_TEST(test_descriptors_neither_hit_nor_fill_the_cache),
    };
    return cmocka_run_group_tests(tests, ut_group_setup, NULL);
}
