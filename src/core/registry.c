/* The registry handle: its configuration, create and destroy, and acquire. */
#include <string.h>

#include "base/err.h"
#include "base/names.h"
#include "base/sys.h"
#include "core/mapping.h"
#include "core/region.h"
#include "core/registry.h"

/* The public structs keep their 1.0 size: new fields come out of their
 * reserved tails (LP64, the only ABI built). */
_Static_assert(sizeof(void *) != 8 || sizeof(shmreg_config) == 168, "shmreg_config changed size");
_Static_assert(sizeof(void *) != 8 || sizeof(shmreg_stats) == 200, "shmreg_stats changed size");
_Static_assert(sizeof(void *) != 8 || sizeof(shmreg_region_status) == 128, "shmreg_region_status changed size");

/* ------------------------------------------------ shared by the verbs */

bool shmreg__kind_valid(shmreg_kind kind)
{
    return kind == SHMREG_KIND_ANY || kind == SHMREG_KIND_SYSTEM || kind == SHMREG_KIND_CUDA ||
           kind == SHMREG_KIND_REMOTE;
}

const void *shmreg__source_settings(const shmreg_registry *reg, shmreg_source source)
{
    return source == SHMREG_SOURCE_REMOTE ? &reg->remote : NULL;
}

const char *shmreg__kind_word(shmreg_kind kind)
{
    switch (kind) {
    case SHMREG_KIND_SYSTEM:
        return "system ";
    case SHMREG_KIND_CUDA:
        return "cuda ";
    case SHMREG_KIND_REMOTE:
        return "remote ";
    case SHMREG_KIND_ANY:
        break;
    }
    return "";
}

static const char *kind_title(shmreg_kind kind)
{
    return kind == SHMREG_KIND_CUDA ? "CUDA" : kind == SHMREG_KIND_REMOTE ? "remote" : "system";
}

void shmreg_filter_init(shmreg_filter *f)
{
    if (f)
        memset(f, 0, sizeof *f);
}

shmreg_err shmreg__filter_check(const shmreg_filter *f, shmreg_filter *out)
{
    shmreg_filter_init(out);
    if (!f)
        return SHMREG_OK;
    if (!shmreg__kind_valid(f->kind))
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "invalid region kind %d", (int)f->kind);
    shmreg_err err = shmreg__check_tag(f->tag);
    if (err == SHMREG_OK && f->name)
        err = shmreg__check_name(f->name);
    if (err == SHMREG_OK)
        *out = *f;
    return err;
}

static shmreg_err not_found(const char *name, shmreg_kind kind)
{
    return shmreg__fail(SHMREG_ERR_NOT_FOUND, "Unable to find %sshared memory region: '%s'",
                        shmreg__kind_word(kind), name);
}

/* An untagged caller named a name that several tags hold, and no untagged
 * region: it cannot mean one of them more than another. */
static shmreg_err ambiguous(const char *name, shmreg_kind kind)
{
    return shmreg__fail(SHMREG_ERR_NOT_FOUND,
                        "Unable to find %sshared memory region: '%s' (several owner tags hold that name: name the "
                        "tag)",
                        shmreg__kind_word(kind), name);
}

shmreg_err shmreg__lookup_locked(struct shmreg__table *t, const char *name, shmreg_kind kind, const char *tag,
                                 struct shmreg_region **out)
{
    bool several = false;
    struct shmreg__entry *e = tag ? shmreg__table_find_locked(t, name, tag)
                                  : shmreg__table_resolve(t, shmreg__table_hash(t, name, strlen(name)), name,
                                                          &several);
    struct shmreg_region *r = shmreg__region_of(e);
    /* Another tenant's region is reported exactly as an absent one: it is
     * in another namespace. */
    if (!r)
        return several ? ambiguous(name, kind) : not_found(name, kind);
    if (!shmreg__region_matches(r, kind, NULL))
        return shmreg__fail(SHMREG_ERR_WRONG_KIND,
                            "The region named '%s' is registered as %s shared memory, not %s shared memory",
                            name, kind_title(shmreg__region_kind(r)), kind_title(kind));
    *out = r;
    return SHMREG_OK;
}

/* ------------------------------------------------------ create, destroy */

void shmreg_config_init(shmreg_config *cfg)
{
    if (cfg)
        memset(cfg, 0, sizeof *cfg);
}

static void free_prefixes(char **prefixes)
{
    for (char **p = prefixes; p && *p; p++)
        shmreg__free(*p);
    shmreg__free(prefixes);
}

static shmreg_err copy_prefixes(const char *const *in, char ***out)
{
    *out = NULL;
    if (!in)
        return SHMREG_OK;
    size_t n = 0;
    while (in[n]) {
        /* A prefix that is empty once its slashes go would reserve every key. */
        if (*shmreg__key_body(in[n]) == '\0')
            return shmreg__fail(SHMREG_ERR_INVALID_ARG, "reserved key prefix %zu ('%s') is empty", n, in[n]);
        n++;
    }
    char **copy = shmreg__calloc(n + 1, sizeof *copy);
    for (size_t i = 0; copy && i < n; i++) {
        if (!(copy[i] = shmreg__strdup(in[i]))) {
            free_prefixes(copy);
            copy = NULL;
        }
    }
    if (!copy)
        return shmreg__fail(SHMREG_ERR_NO_MEMORY, "out of memory copying reserved key prefixes");
    *out = copy;
    return SHMREG_OK;
}

static shmreg_err copy_uids(const shmreg_config *cfg, struct shmreg_registry *reg)
{
    size_t n = cfg->allowed_owner_uid_count;
    if (n == 0)
        return SHMREG_OK;
    if (!cfg->allowed_owner_uids)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "allowed_owner_uids is NULL but its count is %zu", n);
    reg->allowed_uids = shmreg__calloc(n, sizeof *reg->allowed_uids);
    if (!reg->allowed_uids)
        return shmreg__fail(SHMREG_ERR_NO_MEMORY, "out of memory copying the owner allow-list");
    memcpy(reg->allowed_uids, cfg->allowed_owner_uids, n * sizeof *reg->allowed_uids);
    reg->allowed_uid_count = n;
    return SHMREG_OK;
}

static shmreg_err check_config(const shmreg_config *cfg)
{
    if (cfg->busy_policy < SHMREG_POLICY_DEFER || cfg->busy_policy > SHMREG_POLICY_REFUSE)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "invalid busy policy %d", (int)cfg->busy_policy);
    if (cfg->pin_policy < SHMREG_PIN_AUTO || cfg->pin_policy > SHMREG_PIN_ALWAYS)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "invalid pin policy %d", (int)cfg->pin_policy);
    if (cfg->reclaim < SHMREG_RECLAIM_BACKGROUND || cfg->reclaim > SHMREG_RECLAIM_INLINE)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "invalid reclaim mode %d", (int)cfg->reclaim);
    return SHMREG_OK;
}

/* The handle's own memory (the table is released separately). */
static void handle_free(struct shmreg_registry *reg)
{
    free_prefixes(reg->reserved_prefixes);
    shmreg__free(reg->allowed_uids);
    shmreg__free(reg);
}

shmreg_err shmreg_registry_create(const shmreg_config *cfg, shmreg_registry **out)
{
    if (!out)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "registry_create: out is NULL");
    *out = NULL;
    shmreg_config defaults;
    shmreg_config_init(&defaults);
    if (!cfg)
        cfg = &defaults;
    shmreg_err err = check_config(cfg);
    if (err != SHMREG_OK)
        return err;

    struct shmreg_registry *reg = shmreg__calloc(1, sizeof *reg);
    if (!reg)
        return shmreg__fail(SHMREG_ERR_NO_MEMORY, "out of memory creating a registry");
    reg->accept_unsealed_fds = cfg->accept_unsealed_fds != 0;
    /* Bounded so that milliseconds fit the engine's nanosecond clock. */
    size_t timeout = cfg->remote_timeout_ms ? cfg->remote_timeout_ms : SHMREG_REMOTE_TIMEOUT_MS;
    reg->remote.timeout_ms = timeout > 24u * 3600 * 1000 ? 24u * 3600 * 1000 : (unsigned)timeout;
    reg->remote.registry = reg;
    const struct shmreg__table_config tc = {
        .limits = {cfg->max_regions, cfg->max_mapped_bytes, cfg->max_pinned_bytes},
        .tag_limits = {cfg->max_regions_per_tag, cfg->max_mapped_bytes_per_tag, cfg->max_pinned_bytes_per_tag},
        .cache_bytes = cfg->cache_bytes,
        .background_reclaim = cfg->reclaim == SHMREG_RECLAIM_BACKGROUND,
        .log_fn = cfg->log_fn,
        .log_user = cfg->log_user,
    };
    if ((err = copy_prefixes(cfg->reserved_key_prefixes, &reg->reserved_prefixes)) != SHMREG_OK ||
        (err = copy_uids(cfg, reg)) != SHMREG_OK || (err = shmreg__table_new(&tc, &reg->table)) != SHMREG_OK) {
        handle_free(reg);
        return err;
    }
    reg->busy_policy = cfg->busy_policy;
    reg->pin_policy = cfg->pin_policy;
    *out = reg;
    return SHMREG_OK;
}

void shmreg_registry_destroy(shmreg_registry *reg)
{
    if (!reg)
        return;
    struct shmreg__table *t = reg->table;
    struct shmreg_region *batch = NULL;
    size_t busy = 0;
    struct cds_lfht_iter iter;
    struct shmreg__entry *e;
    shmreg__table_lock(t);
    shmreg__table_for_each(t, &iter, e) {
        struct shmreg_region *r = shmreg__region_of(e);
        /* A dead entry is its deleter's business. */
        if (!shmreg__entry_alive(e))
            continue;
        if (shmreg__region_in_use(r) > 0)
            busy++;
        shmreg__table_unlink_locked(t, e);
        /* Pending regions already gave up the registry's reference. */
        if (!r->pending) {
            shmreg__region_disown(r);
            r->next_batch = batch;
            batch = r;
        }
    }
    shmreg__table_unlock(t);
    /* The registry's references: idle regions are unmapped here, busy ones by
     * their last release. Then what callers released before (the reclaim
     * thread's queue), and the cache, which is off from now on. */
    shmreg__region_put_batch(batch);
    shmreg__reclaim_wait_idle(&t->reclaim);
    shmreg__table_lock(t);
    t->cache.limit = 0;
    struct shmreg__mapping *cached = shmreg__mapping_evict_all_locked(&t->cache);
    shmreg__table_unlock(t);
    shmreg__mapping_close_list(t, cached);
    if (busy > 0)
        shmreg__table_log(t, SHMREG_LOG_WARNING,
                          "registry destroyed while callers still hold references to %zu regions: each is "
                          "unmapped by its last shmreg_release",
                          busy);
    handle_free(reg);
    /* When this was the last reference, wait for the regions' deferred
     * frees, so that nothing of the registry outlives its destroy (leak
     * checkers, servers that create and destroy registries). Only here, in
     * the caller's explicit teardown: a grace period costs milliseconds, and
     * a last release after destroy may run in a request thread. */
    if (shmreg__table_put(t))
        shmreg__sys.rcu_barrier();
}

shmreg_err shmreg_registry_trim(shmreg_registry *reg)
{
    if (!reg)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "registry_trim: registry is NULL");
    struct shmreg__table *t = reg->table;
    shmreg__reclaim_wait_idle(&t->reclaim);
    shmreg__table_lock(t);
    struct shmreg__mapping *cached = shmreg__mapping_evict_all_locked(&t->cache);
    shmreg__table_unlock(t);
    shmreg__mapping_close_list(t, cached);
    return SHMREG_OK;
}

/* -------------------------------------------------------------- acquire */

/* [offset, offset + byte_size) inside a region of size bytes; the messages
 * are Triton's, which its clients already know. */
static inline __attribute__((always_inline)) shmreg_err check_view(const char *name, size_t size, size_t offset,
                                                                    size_t byte_size)
{
    if (offset >= size)
        return shmreg__fail(SHMREG_ERR_OUT_OF_BOUNDS, "Invalid offset for shared memory region: '%s'", name);
    if (byte_size > SIZE_MAX - offset)
        return shmreg__fail(SHMREG_ERR_OUT_OF_BOUNDS,
                            "Integer overflow detected: byte_size (%zu) + offset (%zu) exceeds maximum value (%zu) "
                            "for region '%s'",
                            byte_size, offset, (size_t)SIZE_MAX, name);
    if (offset + byte_size > size)
        return shmreg__fail(SHMREG_ERR_OUT_OF_BOUNDS, "Invalid offset + byte size for shared memory region: '%s'",
                            name);
    return SHMREG_OK;
}

/* The end of an acquire: r holds the reference the lookup took; check the
 * window and hand that reference and a view to the caller, or drop it.
 * Inline, so that shmreg_acquire's path is what it was. */
static inline __attribute__((always_inline)) shmreg_err hand_over(struct shmreg_region *r, const char *name, size_t offset, size_t byte_size,
                                   shmreg_region **out, shmreg_view *view)
{
    shmreg_err err = check_view(name, r->win.byte_size, offset, byte_size);
    if (err != SHMREG_OK) {
        shmreg__region_release(r);
        return err;
    }
    /* A remote region has no address here (win.addr NULL): its view
     * neither, and the copies reach it through region_offset. */
    view->addr = r->win.addr ? (char *)r->win.addr + offset : NULL;
    view->region_offset = offset;
    view->byte_size = byte_size;
    view->kind = shmreg__region_kind(r);
    view->device_id = r->win.device_id;
    view->pinned = r->win.pinned;
    view->writable = !(r->flags & SHMREG_READONLY);
    /* Hand-off: the reference the table took now belongs to the caller, who
     * drops it with shmreg_release. */
    *out = r;
    return SHMREG_OK;
}

/* Not found: now, off the hot path, refuse a name that could not have been
 * registered before quoting it in the message, and tell an untagged caller
 * when the name is several tags'. */
static __attribute__((noinline)) shmreg_err acquire_missed(shmreg_registry *reg, const char *name,
                                                           shmreg_kind kind, const char *tag)
{
    shmreg_err err = shmreg__check_name(name);
    if (err != SHMREG_OK)
        return err;
    bool several = false;
    if (!tag) {
        shmreg__table_lock(reg->table);
        (void)shmreg__table_resolve(reg->table, shmreg__table_hash(reg->table, name, strlen(name)), name,
                                    &several);
        shmreg__table_unlock(reg->table);
    }
    return several ? ambiguous(name, kind) : not_found(name, kind);
}

shmreg_err shmreg_acquire(shmreg_registry *reg, const char *name, size_t offset, size_t byte_size,
                          shmreg_region **out, shmreg_view *view)
{
    if (out)
        *out = NULL;
    if (!reg || !name || !out || !view)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "acquire: %s is NULL",
                            !reg ? "registry" : !name ? "region name" : !out ? "out" : "view");
    /* Only the length is checked here: a name the table cannot hold is simply
     * not found, and the hot path stays short. */
    size_t len = strnlen(name, SHMREG_NAME_MAX + 1);
    if (len == 0 || len > SHMREG_NAME_MAX)
        return shmreg__check_name(name);

    struct shmreg_region *r = shmreg__region_of(shmreg__table_acquire(reg->table, name, len, NULL));
    if (!r)
        return acquire_missed(reg, name, SHMREG_KIND_ANY, NULL);
    return hand_over(r, name, offset, byte_size, out, view);
}

shmreg_err shmreg_acquire_matching(shmreg_registry *reg, const shmreg_filter *filter, size_t offset,
                                   size_t byte_size, shmreg_region **out, shmreg_view *view)
{
    if (out)
        *out = NULL;
    if (!reg || !filter || !out || !view)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "acquire: %s is NULL",
                            !reg ? "registry" : !filter ? "filter" : !out ? "out" : "view");
    shmreg_filter f;
    shmreg_err err = shmreg__filter_check(filter, &f);
    if (err == SHMREG_OK && !f.name)
        err = shmreg__check_name(f.name);
    if (err != SHMREG_OK)
        return err;
    /* The lookup of (tag, name): another tag's region is in another
     * namespace, so it answers exactly as an absent one, before the bounds
     * are looked at, which would tell its size. */
    struct shmreg_region *r =
        shmreg__region_of(shmreg__table_acquire(reg->table, f.name, strlen(f.name), f.tag));
    if (!r)
        return acquire_missed(reg, f.name, f.kind, f.tag);
    if (!shmreg__region_matches(r, f.kind, NULL)) {
        shmreg_kind kind = shmreg__region_kind(r);
        shmreg__region_release(r);
        return shmreg__fail(SHMREG_ERR_WRONG_KIND,
                            "The region named '%s' is registered as %s shared memory, not %s shared memory",
                            f.name, kind_title(kind), kind_title(f.kind));
    }
    return hand_over(r, f.name, offset, byte_size, out, view);
}
