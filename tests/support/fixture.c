#include "fixture.h"

#include <stdio.h>
#include <stdlib.h>

int ut_group_setup(void **state)
{
    char key[64];
    shmreg_registry *reg = NULL;
    shmreg_region *ref = NULL;
    shmreg_view view;

    tu_shm_create(4096, 1, key);
    assert_ok(shmreg_registry_create(NULL, &reg));
    assert_ok(shmreg_register_system(reg, "warm-up", key, 0, 4096, 0));
    assert_ok(shmreg_acquire(reg, "warm-up", 0, 16, &ref, &view));
    shmreg_release(ref);
    assert_ok(shmreg_unregister(reg, "warm-up", SHMREG_KIND_ANY));
    shmreg_registry_destroy(reg);
    tu_shm_unlink(key);
    (void)shmreg_cuda_available();
    return 0;
}

int ut_setup(void **state)
{
    struct ut *t = calloc(1, sizeof *t);
    if (!t)
        return -1;
    t->base = tu_take_baseline();
    if (shmreg_registry_create(NULL, &t->reg) != SHMREG_OK) {
        free(t);
        return -1;
    }
    *state = t;
    return 0;
}

int ut_teardown(void **state)
{
    struct ut *t = *state;
    shmreg_registry_destroy(t->reg);
    for (int i = 0; i < t->nkeys; i++)
        tu_shm_unlink(t->keys[i]);
    struct tu_baseline base = t->base;
    free(t);
    tu_check_baseline(base);
    return 0;
}

shmreg_registry *ut_registry(struct ut *t, shmreg_policy policy)
{
    shmreg_registry_destroy(t->reg);
    t->reg = NULL;
    t->reg = ut_new_registry(SHMREG_PIN_AUTO, policy); /* AUTO: the default */
    return t->reg;
}

shmreg_registry *ut_registry_config(struct ut *t, const shmreg_config *cfg)
{
    shmreg_registry_destroy(t->reg);
    t->reg = NULL;
    assert_ok(shmreg_registry_create(cfg, &t->reg));
    return t->reg;
}

shmreg_registry *ut_new_registry(shmreg_pin_policy pin, shmreg_policy busy)
{
    shmreg_config cfg;
    shmreg_config_init(&cfg);
    cfg.pin_policy = pin;
    cfg.busy_policy = busy;
    shmreg_registry *reg = NULL;
    assert_ok(shmreg_registry_create(&cfg, &reg));
    return reg;
}

const char *ut_object(struct ut *t, size_t size, uint8_t seed)
{
    assert_true(t->nkeys < UT_MAX_OBJECTS);
    char *key = t->keys[t->nkeys++];
    tu_shm_create(size, seed, key);
    return key;
}

struct ut_shm_fixture *ut_shm_fixture_new(size_t size, uint8_t seed)
{
    struct ut_shm_fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->base = tu_take_baseline();
    tu_shm_create(size, seed, f->key);
    f->reg = ut_new_registry(SHMREG_PIN_AUTO, SHMREG_POLICY_DEFER);
    return f;
}

void ut_shm_fixture_free(struct ut_shm_fixture *f)
{
    shmreg_registry_destroy(f->reg);
    tu_shm_unlink(f->key);
    tu_check_baseline(f->base);
    free(f);
}

shmreg_region_status *ut_status_of(shmreg_registry *reg, const char *name)
{
    shmreg_region_status *st = NULL;
    size_t n = 0;
    assert_ok(shmreg_status(reg, name, SHMREG_KIND_ANY, &st, &n));
    assert_int_equal(n, 1);
    assert_non_null(st);
    assert_string_equal(st[0].name, name);
    return st;
}

bool ut_cuda_usable(void)
{
    unsigned need = SHMREG_CUDA_BUILT | SHMREG_CUDA_DRIVER | SHMREG_CUDA_DEVICE;
    return (shmreg_cuda_available() & need) == need;
}

size_t ut_status_count(shmreg_registry *reg, shmreg_kind kind)
{
    shmreg_region_status *st = NULL;
    size_t n = 0;
    assert_ok(shmreg_status(reg, NULL, kind, &st, &n));
    assert_true((n == 0) == (st == NULL));
    shmreg_status_free(st, n);
    return n;
}

void ut_assert_pattern(const void *p, size_t len, uint8_t seed, size_t first)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < len; i++) {
        if (b[i] != tu_pattern(seed, first + i)) {
            print_error("byte %zu of the view: 0x%02x, expected 0x%02x (seed %u, object byte %zu)\n",
                        i, b[i], tu_pattern(seed, first + i), seed, first + i);
            fail();
        }
    }
}
