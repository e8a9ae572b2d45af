/* Registration, in a straight line: validate, reserve against the limits,
 * let the source's backend open the memory (outside every lock), publish
 * the region under its name. */
#include <string.h>

#include "backend.h"
#include "err.h"
#include "names.h"
#include "region.h"
#include "registry.h"
#include "system_window.h"

#define SHMREG_KNOWN_FLAGS (SHMREG_READONLY | SHMREG_PIN | SHMREG_NO_PIN)

void shmreg_registration_init(shmreg_registration *r)
{
    if (!r)
        return;
    memset(r, 0, sizeof *r);
    r->source = SHMREG_SOURCE_SHM;
    r->fd = -1;
}

/* What every source shares, checked once: the name, flags, tag, size and a
 * source some backend serves. */
static shmreg_err validate(const shmreg_registration *r, const struct shmreg__backend **backend)
{
    shmreg_err err = shmreg__check_name(r->name);
    if (err != SHMREG_OK)
        return err;
    if (r->flags & ~SHMREG_KNOWN_FLAGS)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "cannot register shared memory region '%s': unknown flags 0x%x",
                            r->name, r->flags & ~SHMREG_KNOWN_FLAGS);
    if ((r->flags & SHMREG_PIN) && (r->flags & SHMREG_NO_PIN))
        return shmreg__fail(SHMREG_ERR_INVALID_ARG,
                            "cannot register shared memory region '%s': SHMREG_PIN and SHMREG_NO_PIN together",
                            r->name);
    if ((err = shmreg__check_tag(r->tag)) != SHMREG_OK)
        return err;
    if (!(*backend = shmreg__backend_of(r->source)))
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "cannot register shared memory region '%s': unknown source %d",
                            r->name, (int)r->source);
    if (r->byte_size == 0)
        return shmreg__fail(SHMREG_ERR_OUT_OF_BOUNDS,
                            "failed to register shared memory region '%s': invalid args (byte_size is 0)", r->name);
    return SHMREG_OK;
}

/* The name is free, in the message Triton's clients know; a pending name
 * says so, since it frees itself when its last reference is released.
 * issue 11: a registration with a tag learns nothing of a region that is not
 * its tag's beyond the one fact a shared namespace cannot hide (the name is
 * taken): the same message whoever holds it, without its state. */
static shmreg_err name_free_locked(struct shmreg__table *t, const char *name, const char *tag)
{
    struct shmreg_region *r = shmreg__region_of(shmreg__table_find_locked(t, name));
    if (!r)
        return SHMREG_OK;
    if (tag && !shmreg__region_matches(r, SHMREG_KIND_ANY, tag))
        return shmreg__fail(SHMREG_ERR_ALREADY_EXISTS, "shared memory region '%s' already in manager", name);
    if (r->pending) {
        unsigned long held = shmreg__region_in_use(r);
        return shmreg__fail(SHMREG_ERR_ALREADY_EXISTS,
                            "shared memory region '%s' already in manager (pending unregister: the name is freed "
                            "when the %lu reference%s still held %s released)",
                            name, held, held == 1 ? "" : "s", held == 1 ? "is" : "are");
    }
    return shmreg__fail(SHMREG_ERR_ALREADY_EXISTS, "shared memory region '%s' already in manager", name);
}

/* Under the lock, so that concurrent registrations cannot together map more
 * than the limits allow: the name must be free, then the usage is taken.
 * issue 11: an optional (AUTO) pin that would pass the AUTO budget is
 * dropped here (a->pin and want->pinned_bytes), and the region is
 * registered unpinned. */
static shmreg_err reserve(struct shmreg__table *t, const char *name, const char *tag,
                          struct shmreg__open_args *a, struct shmreg__usage *want)
{
    shmreg__table_lock(t);
    shmreg_err err = name_free_locked(t, name, tag);
    if (err == SHMREG_OK && a->pin_optional && !shmreg__system_auto_pin_fits_locked(t, want->pinned_bytes)) {
        a->pin = false;
        a->pinned_bytes = want->pinned_bytes = 0;
    }
    if (err == SHMREG_OK)
        err = shmreg__usage_take_locked(t, name, want);
    shmreg__table_unlock(t);
    return err;
}

static void unreserve(struct shmreg__table *t, const struct shmreg__usage *want)
{
    shmreg__table_lock(t);
    shmreg__usage_give_back_locked(t, want);
    shmreg__table_unlock(t);
}

/* Publish the region under its name, checking the name again: another
 * registration may have taken it while the backend was opening. On failure
 * the mapping is closed and the reservation returned. */
static shmreg_err publish(struct shmreg__table *t, const struct shmreg__region_args *args,
                          struct shmreg__mapping *map)
{
    struct shmreg_region *r;
    shmreg_err err = shmreg__region_new(t, args, map, &r);
    if (err != SHMREG_OK) {
        map->backend->close(map, args->name);
        unreserve(t, &args->charged);
        return shmreg__fail(err, "out of memory registering shared memory region '%s'", args->name);
    }
    shmreg__table_lock(t);
    err = name_free_locked(t, args->name, args->tag);
    if (err == SHMREG_OK) {
        r->generation = ++t->next_generation;
        shmreg__table_link_locked(t, &r->entry);
    }
    shmreg__table_unlock(t);
    /* Never published: its deleter closes the mapping and returns the
     * reservation it was charged with. */
    if (err != SHMREG_OK)
        shmreg__region_put(r);
    return err;
}

static shmreg_err register_region(shmreg_registry *reg, const shmreg_registration *r)
{
    const struct shmreg__backend *backend = NULL;
    shmreg_err err = validate(r, &backend);
    if (err != SHMREG_OK)
        return err;
    struct shmreg__open_args a = {
        .r = r,
        .pin_policy = reg->pin_policy,
        .reserved_key_prefixes = (const char *const *)reg->reserved_prefixes,
        .allowed_uids = reg->allowed_uids,
        .allowed_uid_count = reg->allowed_uid_count,
        .accept_unsealed_fds = reg->accept_unsealed_fds,
    };
    if ((err = backend->prepare(&a)) != SHMREG_OK)
        return err;

    struct shmreg__region_args args = {
        .name = r->name, .key = backend->kind == SHMREG_KIND_SYSTEM ? r->key : NULL, .tag = r->tag,
        .offset = backend->kind == SHMREG_KIND_SYSTEM ? r->offset : 0, .flags = r->flags,
        .charged = {1, r->byte_size, a.pinned_bytes},
    };
    if ((err = reserve(reg->table, r->name, r->tag, &a, &args.charged)) != SHMREG_OK)
        return err;
    struct shmreg__mapping map;
    if ((err = backend->open(&a, &map)) != SHMREG_OK) {
        unreserve(reg->table, &args.charged);
        return err;
    }
    /* issue 11: open dropped an optional pin (a window with holes): give
     * its share of the limits back, so the region counts what it holds. */
    if (args.charged.pinned_bytes > 0 && !map.pinned) {
        const struct shmreg__usage unpinned = {0, 0, args.charged.pinned_bytes};
        unreserve(reg->table, &unpinned);
        args.charged.pinned_bytes = 0;
    }
    return publish(reg->table, &args, &map);
}

static void count(struct shmreg__table *t, shmreg_err err)
{
    pthread_mutex_lock(&t->lock);
    if (err == SHMREG_OK)
        t->registrations++;
    else
        t->refusals++;
    pthread_mutex_unlock(&t->lock);
}

shmreg_err shmreg_register(shmreg_registry *reg, const shmreg_registration *r)
{
    if (!reg || !r)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "register: %s is NULL", !reg ? "registry" : "registration");
    shmreg_err err = register_region(reg, r);
    count(reg->table, err);
    return err;
}

/* ---- the plain verbs: one registration each */

/* What every plain verb fills: the source, the name, the size and flags,
 * the rest as shmreg_registration_init leaves it (no tag). */
static shmreg_registration plain(shmreg_source source, const char *name, size_t byte_size, unsigned flags)
{
    shmreg_registration r;
    shmreg_registration_init(&r);
    r.source = source;
    r.name = name;
    r.byte_size = byte_size;
    r.flags = flags;
    return r;
}

shmreg_err shmreg_register_system(shmreg_registry *reg, const char *name, const char *key, size_t offset,
                                  size_t byte_size, unsigned flags)
{
    shmreg_registration r = plain(SHMREG_SOURCE_SHM, name, byte_size, flags);
    r.key = key;
    r.offset = offset;
    return shmreg_register(reg, &r);
}

shmreg_err shmreg_register_system_fd(shmreg_registry *reg, const char *name, int fd, size_t offset,
                                     size_t byte_size, unsigned flags)
{
    shmreg_registration r = plain(SHMREG_SOURCE_FD, name, byte_size, flags);
    r.fd = fd;
    r.offset = offset;
    return shmreg_register(reg, &r);
}

shmreg_err shmreg_register_cuda_ipc(shmreg_registry *reg, const char *name, const void *raw_handle,
                                    size_t raw_handle_size, int device_id, size_t byte_size, unsigned flags)
{
    shmreg_registration r = plain(SHMREG_SOURCE_CUDA_IPC, name, byte_size, flags);
    r.raw_handle = raw_handle;
    r.raw_handle_size = raw_handle_size;
    r.device_id = device_id;
    return shmreg_register(reg, &r);
}

shmreg_err shmreg_register_cuda_fd(shmreg_registry *reg, const char *name, int fd, int device_id,
                                   size_t byte_size, unsigned flags)
{
    shmreg_registration r = plain(SHMREG_SOURCE_CUDA_FD, name, byte_size, flags);
    r.fd = fd;
    r.device_id = device_id;
    return shmreg_register(reg, &r);
}
