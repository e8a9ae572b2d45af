/* The function tables of designs.h: thin adapters from each registry's own
 * calling convention to the bench's. */
#include "designs.h"

static void *shmreg_design_create(void)
{
    shmreg_config cfg;
    shmreg_config_init(&cfg);
    cfg.pin_policy = SHMREG_PIN_NEVER;
    shmreg_registry *reg = NULL;
    return shmreg_registry_create(&cfg, &reg) == SHMREG_OK ? reg : NULL;
}

static void shmreg_design_destroy(void *reg)
{
    shmreg_registry_destroy(reg);
}

static int shmreg_design_register(void *reg, const char *name, const char *key, size_t offset,
                                  size_t byte_size)
{
    return shmreg_register_system(reg, name, key, offset, byte_size, 0) == SHMREG_OK ? 0 : -1;
}

static int shmreg_design_acquire(void *reg, const char *name, size_t offset, size_t byte_size,
                                 bench_ref *ref, void **addr)
{
    shmreg_view view;
    if (shmreg_acquire(reg, name, offset, byte_size, &ref->region, &view) != SHMREG_OK)
        return -1;
    *addr = view.addr;
    return 0;
}

static void shmreg_design_release(bench_ref *ref)
{
    shmreg_release(ref->region);
}

static int shmreg_design_unregister(void *reg, const char *name)
{
    return shmreg_unregister(reg, name, SHMREG_KIND_SYSTEM) == SHMREG_OK ? 0 : -1;
}

const bench_design bench_design_shmreg = {
    .name = "shmreg",
    .create = shmreg_design_create,
    .destroy = shmreg_design_destroy,
    .register_system = shmreg_design_register,
    .acquire = shmreg_design_acquire,
    .release = shmreg_design_release,
    .unregister = shmreg_design_unregister,
    .last_error = shmreg_last_error,
    .releases_last = 1,
};

static void *triton_design_create(void)
{
    return triton_manager_create();
}

static void triton_design_destroy(void *reg)
{
    triton_manager_destroy(reg);
}

static int triton_design_register(void *reg, const char *name, const char *key, size_t offset,
                                  size_t byte_size)
{
    return triton_register_system(reg, name, key, offset, byte_size);
}

static int triton_design_acquire(void *reg, const char *name, size_t offset, size_t byte_size,
                                 bench_ref *ref, void **addr)
{
    return triton_acquire(reg, name, offset, byte_size, &ref->triton, addr);
}

static void triton_design_release(bench_ref *ref)
{
    triton_release(&ref->triton);
}

static int triton_design_unregister(void *reg, const char *name)
{
    return triton_unregister(reg, name);
}

const bench_design bench_design_triton = {
    .name = "triton-style",
    .create = triton_design_create,
    .destroy = triton_design_destroy,
    .register_system = triton_design_register,
    .acquire = triton_design_acquire,
    .release = triton_design_release,
    .unregister = triton_design_unregister,
    .last_error = triton_last_error,
};
