/* Registration, in a straight line: validate, reserve against the limits,
 * let the source's backend open the memory (outside every lock), publish
 * the region under its name. */
#include <string.h>

#include "backends/backend.h"
#include "base/err.h"
#include "base/names.h"
#include "base/sys.h"
#include "core/mapping.h"
#include "core/region.h"
#include "core/registry.h"

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
 * Names are per tag (table.h): a tagged registration needs its own tag's
 * name free, and the untagged one, which untagged callers would otherwise
 * find instead of it; an untagged registration needs the name free under
 * every tag, as in 1.1's one namespace. A registration with a
 * tag learns nothing of a region that is not its tag's beyond the fact
 * that the name is taken: the same message whoever holds it, without its
 * state. */
static shmreg_err name_free_locked(struct shmreg__table *t, const char *name, const char *tag)
{
    struct shmreg__entry *e = shmreg__table_find_locked(t, name, tag);
    if (!e)
        e = tag ? shmreg__table_find_locked(t, name, NULL) : shmreg__table_find_any_locked(t, name);
    struct shmreg_region *r = shmreg__region_of(e);
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
 * Cached mappings give way first: while the limits refuse and the cache
 * holds something, the least recently used mapping is closed (here, outside
 * the lock: registration is the slow path anyway) and the usage tried
 * again. Then regions released but not yet unmapped by the reclaim thread:
 * a client that unregisters and registers again expects the room back, so
 * the registration waits for the reclaim thread, once and for at most
 * SHMREG__RESERVE_WAIT_MS, before it is refused (the message then counts
 * the bytes still waiting).
 * The pin budget (table.h) bounds AUTO's pin and a demanded
 * pin of a window with holes, before any page is touched. Past it, AUTO's
 * pin is dropped here (a->pin and want->pinned_bytes) and the region is
 * registered unpinned; the demanded one is refused. Cached mappings and
 * regions waiting for reclaim give way first, so that the cache never
 * leaves unpinned what would have been pinned without it. */
#define SHMREG__RESERVE_WAIT_MS 1000

/* The tag's quota (quota.h) is checked before the registry's limits, so
 * that a tenant hears of its own limit first, and taken after them. Cached
 * mappings count against no tag: evicting them cannot make room in a
 * quota, only the reclaim thread unmapping the tag's released regions can
 * (may_wait). True: try again. */
static bool check_quota_locked(struct shmreg__table *t, const char *name, const char *tag,
                               struct shmreg__open_args *a, struct shmreg__usage *want, bool may_wait,
                               shmreg_err *err)
{
    *err = SHMREG_OK;
    if (a->pin && a->pin_optional && !shmreg__quota_pin_fits_locked(&t->quotas, tag, want->pinned_bytes)) {
        if (may_wait)
            return true;
        a->pin = false;
        a->pinned_bytes = want->pinned_bytes = 0;
    }
    *err = shmreg__quota_check_locked(&t->quotas, tag, name, want);
    return *err != SHMREG_OK && may_wait;
}

/* The registry's limits taken, the tag's quota now (it was checked under
 * this same lock hold, so only its allocation can fail). */
static shmreg_err take_quota_locked(struct shmreg__table *t, const char *name, const char *tag,
                                    const struct shmreg__usage *want)
{
    shmreg_err err = shmreg__quota_take_locked(&t->quotas, tag, name, want);
    if (err != SHMREG_OK)
        shmreg__usage_give_back_locked(t, want);
    return err;
}

/* One try of reserve, under the lock, once the name is free. Short of room
 * (a budgeted pin past the pin budget, or a limit), the cache's least
 * recently used mapping gives way (*evicted, for the caller to close
 * outside the lock), or, with none, the reclaim thread may (may_wait):
 * true, try again. Only then is AUTO's pin dropped, or the registration
 * refused (*err). */
static bool try_reserve_locked(struct shmreg__table *t, const char *name, const char *tag,
                               struct shmreg__open_args *a, struct shmreg__usage *want, bool may_wait,
                               shmreg_err *err, struct shmreg__mapping **evicted)
{
    bool again = check_quota_locked(t, name, tag, a, want, may_wait, err);
    if (again || *err != SHMREG_OK)
        return again;
    /* AUTO's pin always; a demanded pin of a window with holes where no
     * max_pinned_bytes bounds it already (usage_take refuses it then, with
     * the limit's own message, which servers and clients know). */
    bool budgeted = a->pin && (a->pin_optional || (a->holes && t->limits.pinned_bytes == 0));
    if (budgeted && !shmreg__usage_pin_fits_budget_locked(t, want->pinned_bytes)) {
        if ((*evicted = shmreg__mapping_evict_one_locked(&t->cache)) != NULL || may_wait)
            return true;
        if (!a->pin_optional) {
            *err = shmreg__usage_refuse_pin_locked(t, name, tag, want->pinned_bytes);
            return false;
        }
        a->pin = false;
        a->pinned_bytes = want->pinned_bytes = 0;
    }
    if ((*err = shmreg__usage_take_locked(t, name, tag, want)) == SHMREG_OK) {
        *err = take_quota_locked(t, name, tag, want);
        return false;
    }
    return (*evicted = shmreg__mapping_evict_one_locked(&t->cache)) != NULL || may_wait;
}

static shmreg_err reserve(struct shmreg__table *t, const char *name, const char *tag,
                          struct shmreg__open_args *a, struct shmreg__usage *want)
{
    bool waited = false;
    for (;;) {
        bool may_wait = !waited && shmreg__reclaim_busy(&t->reclaim);
        struct shmreg__mapping *evicted = NULL;
        bool again = false;
        shmreg__table_lock(t);
        shmreg_err err = name_free_locked(t, name, tag);
        if (err == SHMREG_OK)
            again = try_reserve_locked(t, name, tag, a, want, may_wait, &err, &evicted);
        shmreg__table_unlock(t);
        if (!again)
            return err;
        if (evicted) {
            shmreg__mapping_close_list(t, evicted);
        } else {
            waited = true;
            shmreg__reclaim_wait_idle_for(&t->reclaim, SHMREG__RESERVE_WAIT_MS);
        }
    }
}

static void unreserve(struct shmreg__table *t, const char *tag, const struct shmreg__usage *want)
{
    shmreg__table_lock(t);
    shmreg__usage_give_back_locked(t, want);
    shmreg__quota_give_back_locked(&t->quotas, tag, want);
    shmreg__table_unlock(t);
}

/* What one registration has in hand between its steps. */
struct pending_registration {
    struct shmreg__region_args args;
    const struct shmreg__backend *backend;
    struct shmreg__open_args open;
    struct shmreg__mapping *mapping; /* reused (counted) or new (not yet attached) */
    bool reused;
};

/* Give back what a registration that cannot be published holds: its share
 * of a reused mapping, or the whole new one, and its reservation. */
static void abandon(struct shmreg__table *t, struct pending_registration *p)
{
    struct shmreg__mapping *m = p->mapping;
    if (p->reused) {
        shmreg__table_lock(t);
        struct shmreg__mapping *close = shmreg__mapping_leave_locked(t, m, &p->args.charged);
        shmreg__quota_give_back_locked(&t->quotas, p->args.tag, &p->args.charged);
        shmreg__table_unlock(t);
        shmreg__mapping_close_list(t, close);
        return;
    }
    /* A mapping opened a moment ago closes cleanly; report the failure that
     * brought us here, not a close's. */
    (void)m->opened.backend->close(&m->opened, p->args.name);
    shmreg__free(m);
    unreserve(t, p->args.tag, &p->args.charged);
}

/* Publish the region under its name, checking the name again: another
 * registration may have taken it while the backend was opening. On failure
 * the mapping is closed (or left) and the reservation returned. */
static shmreg_err publish(struct shmreg__table *t, struct pending_registration *p)
{
    const shmreg_registration *reg = p->open.r;
    /* A remote region has no address here: its window is reached by offset. */
    size_t window_offset = p->backend->kind != SHMREG_KIND_REMOTE ? reg->offset : 0;
    struct shmreg_region *r;
    shmreg_err err = shmreg__region_new(t, &p->args, p->mapping, window_offset, reg->byte_size, &r);
    if (err != SHMREG_OK) {
        abandon(t, p);
        return shmreg__fail(err, "out of memory registering shared memory region '%s'", p->args.name);
    }
    r->reused = p->reused;
    shmreg__table_lock(t);
    if (!p->reused)
        shmreg__mapping_attach_locked(&t->cache, p->mapping);
    shmreg__region_own_locked(t, r);
    err = name_free_locked(t, p->args.name, p->args.tag);
    if (err == SHMREG_OK) {
        r->generation = ++t->next_generation;
        shmreg__table_link_locked(t, &r->entry);
    }
    shmreg__table_unlock(t);
    /* Never published: its deleter leaves the mapping and returns the
     * reservation it was charged with. */
    if (err != SHMREG_OK) {
        shmreg__region_disown(r);
        shmreg__region_put(r);
    }
    return err;
}

/* Close what inspect opened (a shm object's descriptor), on every path. */
static void forget(struct pending_registration *p)
{
    if (p->backend->forget)
        p->backend->forget(&p->open);
}

/* The memory, reused when the cache is on and a mapping of the same memory
 * covers the window (inspect ran every check a new mapping runs), else
 * opened; either way the backend then forgets what inspect opened. */
static shmreg_err open_memory(struct shmreg__table *t, struct pending_registration *p)
{
    const struct shmreg__backend *b = p->backend;
    const shmreg_registration *r = p->open.r;
    shmreg_err err = SHMREG_OK;
    /* The cache's limit changes only in destroy, which no other call may
     * race. register_region ran inspect already; an identity it left
     * invalid names memory that is never shared. */
    if (t->cache.limit > 0 && b->inspect && p->open.id.valid) {
        shmreg__table_lock(t);
        p->mapping = shmreg__mapping_reuse_locked(t, b, &p->open.id, p->open.object_offset, r->byte_size);
        shmreg__table_unlock(t);
        p->reused = p->mapping != NULL;
    }
    /* A reused mapping is pinned as this registration decided (the pin is
     * part of the identity it matched); a new one pins exactly when
     * p->open.pin, outside every lock: pinning a window with holes may take
     * half a second per GiB, and only this registration waits for it. */
    if (!p->mapping) {
        struct shmreg__opened opened;
        if ((err = b->open(&p->open, &opened)) == SHMREG_OK) {
            if (!(p->mapping = shmreg__mapping_new(&opened, &p->open.id, &p->args.charged, r->name))) {
                (void)b->close(&opened, r->name);
                err = shmreg__fail(SHMREG_ERR_NO_MEMORY, "out of memory registering shared memory region '%s'",
                                   r->name);
            }
        }
    }
    forget(p);
    return err;
}

/* Inspect, then reserve: after the name, every check of the memory itself (a shm object's
 * type, owner, its size against the window) answers before the limits do,
 * so that a window past the end of a small object is refused as such, not
 * as a limit it would also pass (a server's byte limit must not change
 * Triton's answers). Reserving may drop AUTO's pin (its budget);
 * the memory's identity says how it is mapped, so it is inspected again.
 * On success what inspect opened stays open for open_memory. */
static shmreg_err inspect_and_reserve(struct shmreg__table *t, struct pending_registration *p)
{
    /* A taken name first, as Triton answers it (reserve checks it again,
     * under the lock that publishing it takes). */
    shmreg__table_lock(t);
    shmreg_err err = name_free_locked(t, p->args.name, p->args.tag);
    shmreg__table_unlock(t);
    if (err == SHMREG_OK && p->backend->inspect)
        err = p->backend->inspect(&p->open);
    if (err != SHMREG_OK)
        return err;
    bool pin = p->open.pin;
    if ((err = reserve(t, p->args.name, p->args.tag, &p->open, &p->args.charged)) != SHMREG_OK) {
        forget(p);
        return err;
    }
    if (p->backend->inspect && p->open.pin != pin) {
        forget(p);
        if ((err = p->backend->inspect(&p->open)) != SHMREG_OK)
            unreserve(t, p->args.tag, &p->args.charged);
    }
    return err;
}

static shmreg_err register_region(shmreg_registry *reg, const shmreg_registration *r,
                                  const struct shmreg__object_id *expect)
{
    struct pending_registration p = {.open = {.fd = -1}};
    shmreg_err err = validate(r, &p.backend);
    if (err != SHMREG_OK)
        return err;
    p.open = (struct shmreg__open_args){
        .r = r,
        .pin_policy = reg->pin_policy,
        .reserved_key_prefixes = (const char *const *)reg->reserved_prefixes,
        .allowed_uids = reg->allowed_uids,
        .allowed_uid_count = reg->allowed_uid_count,
        .accept_unsealed_fds = reg->accept_unsealed_fds,
        .source_settings = shmreg__source_settings(reg, r->source),
        .fd = -1,
        .expect_object = expect,
    };
    if ((err = p.backend->prepare(&p.open)) != SHMREG_OK)
        return err;

    bool system = p.backend->kind == SHMREG_KIND_SYSTEM;
    p.args = (struct shmreg__region_args){
        .name = r->name, .key = system ? r->key : NULL, .tag = r->tag,
        .offset = r->offset, .flags = r->flags,
        .charged = {1, r->byte_size, p.open.pinned_bytes},
    };
    /* Before the first region exists: its last release may need the thread. */
    shmreg__table_start_reclaim(reg->table);
    if ((err = inspect_and_reserve(reg->table, &p)) != SHMREG_OK)
        return err;
    if ((err = open_memory(reg->table, &p)) != SHMREG_OK) {
        unreserve(reg->table, p.args.tag, &p.args.charged);
        return err;
    }
    return publish(reg->table, &p);
}

static void count(struct shmreg__table *t, shmreg_err err)
{
    shmreg__table_lock(t);
    if (err == SHMREG_OK)
        t->registrations++;
    else
        t->refusals++;
    shmreg__table_unlock(t);
}

shmreg_err shmreg_register(shmreg_registry *reg, const shmreg_registration *r)
{
    if (!reg || !r)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "register: %s is NULL", !reg ? "registry" : "registration");
    shmreg_err err = register_region(reg, r, NULL);
    count(reg->table, err);
    return err;
}

shmreg_err shmreg__register_restoring(shmreg_registry *reg, const shmreg_registration *r,
                                      const struct shmreg__object_id *expect)
{
    shmreg_err err = register_region(reg, r, expect);
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

shmreg_err shmreg_register_cuda_vmm_range(shmreg_registry *reg, const char *name, const int *fds,
                                          const size_t *chunk_sizes, size_t chunk_count, size_t offset,
                                          size_t byte_size, int device_id, unsigned flags)
{
    shmreg_registration r = plain(SHMREG_SOURCE_CUDA_VMM_RANGE, name, byte_size, flags);
    r.fds = fds;
    r.chunk_sizes = chunk_sizes;
    r.chunk_count = chunk_count;
    r.offset = offset;
    r.device_id = device_id;
    return shmreg_register(reg, &r);
}

shmreg_err shmreg_register_cuda_pool(shmreg_registry *reg, const char *name, int pool_fd, const void *export_data,
                                     size_t export_size, size_t offset, size_t byte_size, int device_id,
                                     unsigned flags)
{
    shmreg_registration r = plain(SHMREG_SOURCE_CUDA_POOL, name, byte_size, flags);
    r.fd = pool_fd;
    r.raw_handle = export_data;
    r.raw_handle_size = export_size;
    r.offset = offset;
    r.device_id = device_id;
    return shmreg_register(reg, &r);
}

shmreg_err shmreg_register_remote(shmreg_registry *reg, const char *name, const void *descriptor, size_t size,
                                  size_t offset, size_t byte_size, unsigned flags)
{
    shmreg_registration r = plain(SHMREG_SOURCE_REMOTE, name, byte_size, flags);
    r.raw_handle = descriptor;
    r.raw_handle_size = size;
    r.offset = offset;
    return shmreg_register(reg, &r);
}
