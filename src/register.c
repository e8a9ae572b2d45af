/* Registration: validate, reserve against the limits, let a backend open the
 * memory (outside every lock), then publish the region under its name. */
#include <string.h>

#include "backend.h"
#include "err.h"
#include "names.h"
#include "region.h"
#include "registry.h"

#define SHMREG_KNOWN_FLAGS (SHMREG_READONLY | SHMREG_PIN | SHMREG_NO_PIN)

/* One registration in flight, whatever its kind. */
struct registration {
    struct shmreg__region_args region;
    /* The backend's open, given ctx; it must leave nothing behind on failure. */
    shmreg_err (*open)(const void *ctx, struct shmreg__mapping *out);
    const void *ctx;
};

static shmreg_err check_common(shmreg_registry *reg, const char *name, unsigned flags,
                               const shmreg_register_opts *opts)
{
    if (!reg)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "registry is NULL");
    shmreg_err err = shmreg__check_name(name);
    if (err != SHMREG_OK)
        return err;
    if (flags & ~SHMREG_KNOWN_FLAGS)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "cannot register shared memory region '%s': unknown flags 0x%x",
                            name, flags & ~SHMREG_KNOWN_FLAGS);
    if ((flags & SHMREG_PIN) && (flags & SHMREG_NO_PIN))
        return shmreg__fail(SHMREG_ERR_INVALID_ARG,
                            "cannot register shared memory region '%s': SHMREG_PIN and SHMREG_NO_PIN together",
                            name);
    return shmreg__check_tag(opts ? opts->tag : NULL);
}

static shmreg_err already_exists(const char *name)
{
    return shmreg__fail(SHMREG_ERR_ALREADY_EXISTS, "shared memory region '%s' already in manager", name);
}

static shmreg_err over_limit(const char *name, const char *what, size_t want, size_t limit, size_t used)
{
    return shmreg__fail(SHMREG_ERR_NO_MEMORY,
                        "cannot register shared memory region '%s': %zu more %s would pass this registry's "
                        "limit of %zu (%zu in use)",
                        name, want, what, limit, used);
}

static bool passes(size_t used, size_t want, size_t limit)
{
    return limit == 0 || (used <= limit && want <= limit - used);
}

/* Under reg->lock: the name must be free and the limits must leave room;
 * then the usage is taken, so concurrent registrations cannot together map
 * more than the limits allow. */
static shmreg_err reserve_locked(struct shmreg_registry *reg, const char *name, const struct shmreg__usage *want)
{
    const struct shmreg__usage *used = &reg->usage, *lim = &reg->limits;
    if (shmreg__find_locked(reg, name))
        return already_exists(name);
    if (!passes(used->regions, want->regions, lim->regions))
        return shmreg__fail(SHMREG_ERR_NO_MEMORY,
                            "cannot register shared memory region '%s': this registry holds its limit of %zu regions",
                            name, lim->regions);
    if (!passes(used->mapped_bytes, want->mapped_bytes, lim->mapped_bytes))
        return over_limit(name, "mapped bytes", want->mapped_bytes, lim->mapped_bytes, used->mapped_bytes);
    if (!passes(used->pinned_bytes, want->pinned_bytes, lim->pinned_bytes))
        return over_limit(name, "pinned bytes", want->pinned_bytes, lim->pinned_bytes, used->pinned_bytes);
    reg->usage.regions += want->regions;
    reg->usage.mapped_bytes += want->mapped_bytes;
    reg->usage.pinned_bytes += want->pinned_bytes;
    return SHMREG_OK;
}

static shmreg_err reserve(struct shmreg_registry *reg, const char *name, const struct shmreg__usage *want)
{
    pthread_mutex_lock(&reg->lock);
    shmreg__rcu_read_lock();
    shmreg_err err = reserve_locked(reg, name, want);
    shmreg__rcu_read_unlock();
    pthread_mutex_unlock(&reg->lock);
    return err;
}

static void unreserve(struct shmreg_registry *reg, const struct shmreg__usage *want)
{
    pthread_mutex_lock(&reg->lock);
    shmreg__usage_release_locked(reg, want);
    pthread_mutex_unlock(&reg->lock);
}

/* Publish the region under its name, checking the name again: another
 * registration may have taken it while the backend was opening. On failure
 * the mapping is closed and the reservation returned. */
static shmreg_err publish(struct shmreg_registry *reg, const struct shmreg__region_args *args,
                          struct shmreg__mapping *map)
{
    struct shmreg_region *r;
    shmreg_err err = shmreg__region_new(reg, args, map, &r);
    if (err != SHMREG_OK) {
        map->backend->close(map, args->name);
        unreserve(reg, &args->charged);
        return shmreg__fail(err, "out of memory registering shared memory region '%s'", args->name);
    }
    const char *name = args->name;
    pthread_mutex_lock(&reg->lock);
    shmreg__rcu_read_lock();
    bool taken = shmreg__find_locked(reg, name) != NULL;
    if (!taken) {
        r->generation = ++reg->next_generation;
        shmreg__link_locked(reg, r);
    }
    shmreg__rcu_read_unlock();
    pthread_mutex_unlock(&reg->lock);
    if (taken) {
        /* Never published: its deleter closes the mapping and returns the
         * reservation it was charged with. */
        shmreg__region_put(r);
        return already_exists(name);
    }
    return SHMREG_OK;
}

static shmreg_err register_region(struct shmreg_registry *reg, const struct registration *rg)
{
    const struct shmreg__region_args *args = &rg->region;
    shmreg_err err = reserve(reg, args->name, &args->charged);
    if (err != SHMREG_OK)
        return err;
    struct shmreg__mapping map;
    if ((err = rg->open(rg->ctx, &map)) != SHMREG_OK) {
        unreserve(reg, &args->charged);
        return err;
    }
    return publish(reg, args, &map);
}

/* ---------------------------------------------------------------- system */

/* Whether to page-lock a new system region: a flag decides, else the
 * policy; AUTO pins only where CUDA is usable in this process. */
static bool decide_pin(const struct shmreg_registry *reg, unsigned flags)
{
    if (flags & (SHMREG_PIN | SHMREG_NO_PIN))
        return (flags & SHMREG_PIN) != 0;
    switch (reg->pin_policy) {
    case SHMREG_PIN_ALWAYS:
        return true;
    case SHMREG_PIN_NEVER:
        return false;
    case SHMREG_PIN_AUTO:
        break;
    }
    const unsigned usable = SHMREG_CUDA_BUILT | SHMREG_CUDA_DRIVER | SHMREG_CUDA_DEVICE;
    return (shmreg__cuda_caps() & usable) == usable;
}

static shmreg_err open_system(const void *ctx, struct shmreg__mapping *out)
{
    return shmreg__system_open(ctx, out);
}

shmreg_err shmreg_register_system_opts(shmreg_registry *reg, const char *name, const char *key,
                                       size_t offset, size_t byte_size, unsigned flags,
                                       const shmreg_register_opts *opts)
{
    shmreg_err err = check_common(reg, name, flags, opts);
    if (err == SHMREG_OK)
        err = shmreg__check_key(name, key, (const char *const *)reg->reserved_prefixes);
    if (err != SHMREG_OK)
        return err;
    struct shmreg__system_args sys = {
        .name = name, .key = key, .offset = offset, .byte_size = byte_size, .flags = flags,
        .pin = decide_pin(reg, flags),
        .allowed_uids = reg->allowed_uids, .allowed_uid_count = reg->allowed_uid_count,
    };
    struct registration rg = {
        .region = {.name = name, .key = key, .tag = opts ? opts->tag : NULL, .offset = offset,
                   .flags = flags,
                   .charged = {1, byte_size, sys.pin ? byte_size : 0}},
        .open = open_system,
        .ctx = &sys,
    };
    return register_region(reg, &rg);
}

shmreg_err shmreg_register_system(shmreg_registry *reg, const char *name, const char *key,
                                  size_t offset, size_t byte_size, unsigned flags)
{
    return shmreg_register_system_opts(reg, name, key, offset, byte_size, flags, NULL);
}

/* ------------------------------------------------------------------ CUDA */

struct cuda_ipc_args {
    const char *name;
    const void *handle;
    size_t handle_size;
    int device_id;
    size_t byte_size;
    unsigned flags;
};

static shmreg_err open_cuda_ipc(const void *ctx, struct shmreg__mapping *out)
{
    const struct cuda_ipc_args *a = ctx;
    return shmreg__cuda_ipc_open(a->name, a->handle, a->handle_size, a->device_id, a->byte_size, a->flags,
                                 out);
}

shmreg_err shmreg_register_cuda_ipc_opts(shmreg_registry *reg, const char *name, const void *raw_handle,
                                         size_t raw_handle_size, int device_id, size_t byte_size,
                                         unsigned flags, const shmreg_register_opts *opts)
{
    shmreg_err err = check_common(reg, name, flags, opts);
    if (err == SHMREG_OK && !raw_handle)
        err = shmreg__fail(SHMREG_ERR_INVALID_ARG,
                           "cannot register CUDA shared memory region '%s': raw handle is NULL", name);
    if (err != SHMREG_OK)
        return err;
    struct cuda_ipc_args ipc = {name, raw_handle, raw_handle_size, device_id, byte_size, flags};
    struct registration rg = {
        .region = {.name = name, .tag = opts ? opts->tag : NULL, .flags = flags,
                   .charged = {1, byte_size, 0}},
        .open = open_cuda_ipc,
        .ctx = &ipc,
    };
    return register_region(reg, &rg);
}

shmreg_err shmreg_register_cuda_ipc(shmreg_registry *reg, const char *name, const void *raw_handle,
                                    size_t raw_handle_size, int device_id, size_t byte_size,
                                    unsigned flags)
{
    return shmreg_register_cuda_ipc_opts(reg, name, raw_handle, raw_handle_size, device_id, byte_size,
                                         flags, NULL);
}

struct cuda_fd_args {
    const char *name;
    int fd;
    int device_id;
    size_t byte_size;
    unsigned flags;
};

static shmreg_err open_cuda_fd(const void *ctx, struct shmreg__mapping *out)
{
    const struct cuda_fd_args *a = ctx;
    return shmreg__cuda_vmm_open(a->name, a->fd, a->device_id, a->byte_size, a->flags, out);
}

shmreg_err shmreg_register_cuda_fd_opts(shmreg_registry *reg, const char *name, int fd, int device_id,
                                        size_t byte_size, unsigned flags, const shmreg_register_opts *opts)
{
    shmreg_err err = check_common(reg, name, flags, opts);
    if (err != SHMREG_OK)
        return err;
    struct cuda_fd_args vmm = {name, fd, device_id, byte_size, flags};
    struct registration rg = {
        .region = {.name = name, .tag = opts ? opts->tag : NULL, .flags = flags,
                   .charged = {1, byte_size, 0}},
        .open = open_cuda_fd,
        .ctx = &vmm,
    };
    return register_region(reg, &rg);
}

shmreg_err shmreg_register_cuda_fd(shmreg_registry *reg, const char *name, int fd, int device_id,
                                   size_t byte_size, unsigned flags)
{
    return shmreg_register_cuda_fd_opts(reg, name, fd, device_id, byte_size, flags, NULL);
}
