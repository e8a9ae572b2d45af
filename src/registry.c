/* The registry API: register, acquire, unregister, status, destroy. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "backend.h"
#include "err.h"
#include "names.h"
#include "region.h"
#include "registry.h"
#include "sys.h"

#define SHMREG_KNOWN_FLAGS (SHMREG_READONLY | SHMREG_PIN | SHMREG_NO_PIN)

/* ------------------------------------------------------------ helpers */

static unsigned long name_hash(const struct shmreg_registry *reg, const char *name, size_t len)
{
    return (unsigned long)XXH3_64bits_withSeed(name, len, reg->hash_seed);
}

static int match_name(struct cds_lfht_node *node, const void *key)
{
    const struct shmreg_region *r = caa_container_of(node, struct shmreg_region, node);
    return strcmp(r->name, (const char *)key) == 0;
}

static const char *kind_word(shmreg_kind kind)
{
    switch (kind) {
    case SHMREG_KIND_SYSTEM:
        return "system ";
    case SHMREG_KIND_CUDA:
        return "cuda ";
    case SHMREG_KIND_ANY:
        break;
    }
    return "";
}

static const char *kind_title(shmreg_kind kind)
{
    return kind == SHMREG_KIND_CUDA ? "CUDA" : "system";
}

static bool kind_valid(shmreg_kind kind)
{
    return kind == SHMREG_KIND_ANY || kind == SHMREG_KIND_SYSTEM || kind == SHMREG_KIND_CUDA;
}

/* A region counts as registered while someone holds it: a node whose count
 * reached zero is being torn down and is about to leave the table. */
static bool region_alive(struct shmreg_region *r)
{
    return shmreg__ref_read(&r->refs) > 0;
}

/* The live region called name. Caller holds reg->lock (so the result stays
 * in the table) and is inside an RCU read-side section. */
static struct shmreg_region *find_locked(struct shmreg_registry *reg, const char *name)
{
    struct cds_lfht_iter iter;
    cds_lfht_lookup(reg->table, name_hash(reg, name, strlen(name)), match_name, name, &iter);
    for (struct cds_lfht_node *n = cds_lfht_iter_get_node(&iter); n;
         cds_lfht_next_duplicate(reg->table, match_name, name, &iter), n = cds_lfht_iter_get_node(&iter)) {
        struct shmreg_region *r = caa_container_of(n, struct shmreg_region, node);
        if (region_alive(r))
            return r;
    }
    return NULL;
}

static shmreg_err not_found(const char *name, shmreg_kind kind)
{
    return shmreg__fail(SHMREG_ERR_NOT_FOUND, "Unable to find %sshared memory region: '%s'",
                        kind_word(kind), name);
}

static shmreg_err wrong_kind(const char *name, shmreg_kind actual, shmreg_kind wanted)
{
    return shmreg__fail(SHMREG_ERR_NOT_FOUND,
                        "The region named '%s' is registered as %s shared memory, not %s shared memory",
                        name, kind_title(actual), kind_title(wanted));
}

/* The region called name, checked against kind. Caller holds reg->lock and
 * is inside an RCU read-side section. */
static shmreg_err lookup_locked(struct shmreg_registry *reg, const char *name, shmreg_kind kind,
                                struct shmreg_region **out)
{
    struct shmreg_region *r = find_locked(reg, name);
    if (!r)
        return not_found(name, kind);
    if (kind != SHMREG_KIND_ANY && r->map.backend->kind != kind)
        return wrong_kind(name, r->map.backend->kind, kind);
    *out = r;
    return SHMREG_OK;
}

void shmreg__log(struct shmreg_registry *reg, shmreg_log_level level, const char *fmt, ...)
{
    if (!reg->log_fn)
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    reg->log_fn(reg->log_user, level, msg);
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
    if (!copy)
        return shmreg__fail(SHMREG_ERR_NO_MEMORY, "out of memory copying reserved key prefixes");
    for (size_t i = 0; i < n; i++) {
        copy[i] = shmreg__strdup(in[i]);
        if (!copy[i]) {
            free_prefixes(copy);
            return shmreg__fail(SHMREG_ERR_NO_MEMORY, "out of memory copying reserved key prefixes");
        }
    }
    *out = copy;
    return SHMREG_OK;
}

static shmreg_err check_config(const shmreg_config *cfg)
{
    if (cfg->busy_policy < SHMREG_POLICY_DEFER || cfg->busy_policy > SHMREG_POLICY_REFUSE)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "invalid busy policy %d", (int)cfg->busy_policy);
    if (cfg->pin_policy < SHMREG_PIN_AUTO || cfg->pin_policy > SHMREG_PIN_ALWAYS)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "invalid pin policy %d", (int)cfg->pin_policy);
    return SHMREG_OK;
}

static uint64_t random_seed(void)
{
    uint64_t seed;
    if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) == (ssize_t)sizeof seed)
        return seed;
    /* No entropy yet (early boot): still differ per registry and run. */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull ^ (uint64_t)(uintptr_t)&seed;
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
    err = copy_prefixes(cfg->reserved_key_prefixes, &reg->reserved_prefixes);
    if (err != SHMREG_OK) {
        shmreg__free(reg);
        return err;
    }
    reg->table = cds_lfht_new_flavor(64, 64, 0, CDS_LFHT_AUTO_RESIZE | CDS_LFHT_ACCOUNTING,
                                     &urcu_bp_flavor, NULL);
    if (!reg->table) {
        free_prefixes(reg->reserved_prefixes);
        shmreg__free(reg);
        return shmreg__fail(SHMREG_ERR_NO_MEMORY, "out of memory creating the registry's hash table");
    }
    pthread_mutex_init(&reg->lock, NULL);
    shmreg__ref_init(&reg->refs, 1); /* the handle's reference */
    reg->hash_seed = random_seed();
    reg->busy_policy = cfg->busy_policy;
    reg->pin_policy = cfg->pin_policy;
    reg->log_fn = cfg->log_fn;
    reg->log_user = cfg->log_user;
    *out = reg;
    return SHMREG_OK;
}

void shmreg__registry_put(struct shmreg_registry *reg)
{
    if (!shmreg__ref_put(&reg->refs))
        return;
    /* Every region is gone and the handle was destroyed: no lookup can run. */
    if (cds_lfht_destroy(reg->table, NULL) != 0)
        shmreg__log(reg, SHMREG_LOG_ERROR, "registry teardown: hash table not empty");
    pthread_mutex_destroy(&reg->lock);
    free_prefixes(reg->reserved_prefixes);
    shmreg__free(reg);
}

/* Drop, outside the lock, the registry references collected under it. */
static void put_batch(struct shmreg_region *batch)
{
    while (batch) {
        struct shmreg_region *next = batch->next_batch;
        shmreg__region_put(batch);
        batch = next;
    }
}

static void unlink_locked(struct shmreg_registry *reg, struct shmreg_region *r)
{
    cds_lfht_del(reg->table, &r->node);
    r->linked = false;
}

void shmreg_registry_destroy(shmreg_registry *reg)
{
    if (!reg)
        return;
    struct shmreg_region *batch = NULL;
    pthread_mutex_lock(&reg->lock);
    shmreg__rcu_read_lock();
    struct cds_lfht_iter iter;
    struct shmreg_region *r;
    cds_lfht_for_each_entry(reg->table, &iter, r, node) {
        unlink_locked(reg, r);
        /* Pending regions already gave up the registry's reference, and a
         * dead node (count zero) is its deleter's business. */
        if (!r->pending && region_alive(r)) {
            r->next_batch = batch;
            batch = r;
        }
    }
    shmreg__rcu_read_unlock();
    pthread_mutex_unlock(&reg->lock);
    /* The registry's references: idle regions are unmapped here, busy ones by
     * their last release. */
    put_batch(batch);
    shmreg__registry_put(reg);
}

/* ------------------------------------------------------------- register */

static shmreg_err check_register_args(shmreg_registry *reg, const char *name, unsigned flags)
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
    return SHMREG_OK;
}

static shmreg_err already_exists(const char *name)
{
    return shmreg__fail(SHMREG_ERR_ALREADY_EXISTS, "shared memory region '%s' already in manager", name);
}

/* Fail early, before the costly open, if the name is taken. The insert
 * checks again: another register may take it meanwhile. */
static shmreg_err check_name_free(struct shmreg_registry *reg, const char *name)
{
    pthread_mutex_lock(&reg->lock);
    shmreg__rcu_read_lock();
    bool taken = find_locked(reg, name) != NULL;
    shmreg__rcu_read_unlock();
    pthread_mutex_unlock(&reg->lock);
    return taken ? already_exists(name) : SHMREG_OK;
}

/* Publish a region that a backend opened. On failure the mapping is closed. */
static shmreg_err insert_region(struct shmreg_registry *reg, const char *name, const char *key,
                                size_t offset, unsigned flags, struct shmreg__mapping *map)
{
    struct shmreg_region *r;
    shmreg_err err = shmreg__region_new(reg, name, key, offset, flags, map, &r);
    if (err != SHMREG_OK) {
        map->backend->close(map, name);
        return shmreg__fail(err, "out of memory registering shared memory region '%s'", name);
    }
    size_t len = strlen(name);
    pthread_mutex_lock(&reg->lock);
    shmreg__rcu_read_lock();
    bool taken = find_locked(reg, name) != NULL;
    if (!taken) {
        r->generation = ++reg->next_generation;
        r->linked = true;
        cds_lfht_add(reg->table, name_hash(reg, name, len), &r->node);
    }
    shmreg__rcu_read_unlock();
    pthread_mutex_unlock(&reg->lock);
    if (taken) {
        shmreg__region_put(r); /* never published: the deleter closes the mapping */
        return already_exists(name);
    }
    return SHMREG_OK;
}

shmreg_err shmreg_register_system(shmreg_registry *reg, const char *name, const char *key,
                                  size_t offset, size_t byte_size, unsigned flags)
{
    shmreg_err err = check_register_args(reg, name, flags);
    if (err == SHMREG_OK)
        err = shmreg__check_key(name, key, (const char *const *)reg->reserved_prefixes);
    if (err == SHMREG_OK)
        err = check_name_free(reg, name);
    if (err != SHMREG_OK)
        return err;
    struct shmreg__system_args args = {
        .name = name, .key = key, .offset = offset, .byte_size = byte_size,
        .flags = flags, .pin_policy = reg->pin_policy,
    };
    struct shmreg__mapping map;
    err = shmreg__system_open(&args, &map);
    if (err != SHMREG_OK)
        return err;
    return insert_region(reg, name, key, offset, flags, &map);
}

shmreg_err shmreg_register_cuda_ipc(shmreg_registry *reg, const char *name, const void *raw_handle,
                                    size_t raw_handle_size, int device_id, size_t byte_size,
                                    unsigned flags)
{
    shmreg_err err = check_register_args(reg, name, flags);
    if (err == SHMREG_OK && !raw_handle)
        err = shmreg__fail(SHMREG_ERR_INVALID_ARG, "cannot register CUDA shared memory region '%s': raw handle is NULL",
                           name);
    if (err == SHMREG_OK)
        err = check_name_free(reg, name);
    if (err != SHMREG_OK)
        return err;
    struct shmreg__mapping map;
    err = shmreg__cuda_ipc_open(name, raw_handle, raw_handle_size, device_id, byte_size, flags, &map);
    if (err != SHMREG_OK)
        return err;
    return insert_region(reg, name, NULL, 0, flags, &map);
}

shmreg_err shmreg_register_cuda_fd(shmreg_registry *reg, const char *name, int fd, int device_id,
                                   size_t byte_size, unsigned flags)
{
    shmreg_err err = check_register_args(reg, name, flags);
    if (err == SHMREG_OK)
        err = check_name_free(reg, name);
    if (err != SHMREG_OK)
        return err;
    struct shmreg__mapping map;
    err = shmreg__cuda_vmm_open(name, fd, device_id, byte_size, flags, &map);
    if (err != SHMREG_OK)
        return err;
    return insert_region(reg, name, NULL, 0, flags, &map);
}

/* -------------------------------------------------------------- acquire */

/* [offset, offset + byte_size) inside a region of size bytes; the messages
 * are Triton's, which its clients already know. */
static shmreg_err check_view(const char *name, size_t size, size_t offset, size_t byte_size)
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

/* The hot path: no lock, one RCU read-side section, one CAS on the region's
 * own count. Duplicates of a name exist only while a dead node waits to be
 * unlinked; they are skipped because their count is zero. */
static struct shmreg_region *lookup_and_get(struct shmreg_registry *reg, const char *name, size_t len)
{
    struct shmreg_region *found = NULL;
    struct cds_lfht_iter iter;
    shmreg__rcu_read_lock();
    cds_lfht_lookup(reg->table, name_hash(reg, name, len), match_name, name, &iter);
    for (struct cds_lfht_node *n = cds_lfht_iter_get_node(&iter); n;
         cds_lfht_next_duplicate(reg->table, match_name, name, &iter), n = cds_lfht_iter_get_node(&iter)) {
        struct shmreg_region *r = caa_container_of(n, struct shmreg_region, node);
        if (shmreg__ref_get_unless_zero(&r->refs)) {
            found = r;
            break;
        }
    }
    shmreg__rcu_read_unlock();
    return found;
}

shmreg_err shmreg_acquire(shmreg_registry *reg, const char *name, size_t offset, size_t byte_size,
                          shmreg_region **out, shmreg_view *view)
{
    if (out)
        *out = NULL;
    if (!reg || !name || !out || !view)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "acquire: %s is NULL",
                            !reg ? "registry" : !name ? "region name" : !out ? "out" : "view");
    size_t len = strnlen(name, SHMREG_NAME_MAX + 1);
    if (len == 0 || len > SHMREG_NAME_MAX)
        return shmreg__check_name(name);

    struct shmreg_region *r = lookup_and_get(reg, name, len);
    if (!r)
        return not_found(name, SHMREG_KIND_ANY);
    shmreg_err err = check_view(name, r->map.byte_size, offset, byte_size);
    if (err != SHMREG_OK) {
        shmreg__region_put(r);
        return err;
    }
    view->addr = (char *)r->map.addr + offset;
    view->byte_size = byte_size;
    view->kind = r->map.backend->kind;
    view->device_id = r->map.device_id;
    view->pinned = r->map.pinned;
    /* Hand-off: the reference taken in lookup_and_get now belongs to the
     * caller, who drops it with shmreg_release. */
    *out = r;
    return SHMREG_OK;
}

/* ----------------------------------------------------------- unregister */

static shmreg_err busy_error(const char *name, unsigned long in_use)
{
    return shmreg__fail(SHMREG_ERR_BUSY,
                        "Cannot unregister shared memory region '%s', it is currently in use by %lu requests.",
                        name, in_use);
}

/* Apply the busy policy to one region, under reg->lock. Returns true when
 * the registry's reference must be dropped (after the lock); false when
 * REFUSE keeps a busy region. A region already pending has nothing to drop. */
static bool unregister_locked(struct shmreg_registry *reg, struct shmreg_region *r)
{
    if (r->pending)
        return false;
    switch (reg->busy_policy) {
    case SHMREG_POLICY_REFUSE:
        if (shmreg__region_in_use(r) > 0)
            return false;
        unlink_locked(reg, r);
        return true;
    case SHMREG_POLICY_DETACH:
        unlink_locked(reg, r);
        return true;
    case SHMREG_POLICY_DEFER:
        break;
    }
    /* DEFER: the name stays until the last reference goes. Dropping the
     * registry's reference makes that atomic: whichever release brings the
     * count to zero (ours below, if idle, or the last caller's) runs the one
     * deleter, which unlinks this very node. No flag is checked later, so no
     * interleaving can strand a pending region or hit a re-registered one. */
    r->pending = true;
    return true;
}

shmreg_err shmreg_unregister(shmreg_registry *reg, const char *name, shmreg_kind kind)
{
    if (!reg)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "registry is NULL");
    shmreg_err err = shmreg__check_name(name);
    if (err != SHMREG_OK)
        return err;
    if (!kind_valid(kind))
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "invalid region kind %d", (int)kind);

    struct shmreg_region *r = NULL;
    bool drop = false;
    unsigned long in_use = 0;
    pthread_mutex_lock(&reg->lock);
    shmreg__rcu_read_lock();
    err = lookup_locked(reg, name, kind, &r);
    if (err == SHMREG_OK) {
        in_use = shmreg__region_in_use(r);
        drop = unregister_locked(reg, r);
        if (!drop && !r->pending)
            err = SHMREG_ERR_BUSY;
    }
    shmreg__rcu_read_unlock();
    pthread_mutex_unlock(&reg->lock);
    if (err == SHMREG_ERR_BUSY)
        return busy_error(name, in_use);
    if (drop)
        shmreg__region_put(r); /* unmaps now if idle */
    return err;
}

/* "a, b, " as Triton lists them, bounded: a long list ends in "...". */
static void append_name(char *buf, size_t cap, size_t *len, const char *name)
{
    if (*len >= cap)
        return;
    int n = snprintf(buf + *len, cap - *len, "%s, ", name);
    if (n < 0 || (size_t)n >= cap - *len) {
        snprintf(buf + (cap > 4 ? cap - 4 : 0), cap > 4 ? 4 : cap, "...");
        *len = cap;
        return;
    }
    *len += (size_t)n;
}

shmreg_err shmreg_unregister_all(shmreg_registry *reg, shmreg_kind kind)
{
    if (!reg)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "registry is NULL");
    if (!kind_valid(kind))
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "invalid region kind %d", (int)kind);

    char busy[2048];
    size_t busy_len = 0;
    busy[0] = '\0';
    struct shmreg_region *batch = NULL;
    struct cds_lfht_iter iter;
    struct shmreg_region *r;
    pthread_mutex_lock(&reg->lock);
    shmreg__rcu_read_lock();
    cds_lfht_for_each_entry(reg->table, &iter, r, node) {
        if (!region_alive(r) || (kind != SHMREG_KIND_ANY && r->map.backend->kind != kind))
            continue;
        if (unregister_locked(reg, r)) {
            r->next_batch = batch;
            batch = r;
        } else if (!r->pending) {
            append_name(busy, sizeof busy, &busy_len, r->name);
        }
    }
    shmreg__rcu_read_unlock();
    pthread_mutex_unlock(&reg->lock);
    put_batch(batch);
    if (busy_len > 0)
        return shmreg__fail(SHMREG_ERR_BUSY, "Failed to unregister the following %sshared memory regions: %s",
                            kind_word(kind), busy);
    return SHMREG_OK;
}

/* --------------------------------------------------------------- status */

static shmreg_err fill_status(struct shmreg_region *r, shmreg_region_status *st)
{
    st->name = shmreg__strdup(r->name);
    st->key = r->key ? shmreg__strdup(r->key) : NULL;
    if (!st->name || (r->key && !st->key))
        return shmreg__fail(SHMREG_ERR_NO_MEMORY, "out of memory reporting the status of region '%s'", r->name);
    st->kind = r->map.backend->kind;
    st->offset = r->offset;
    st->byte_size = r->map.byte_size;
    st->device_id = r->map.device_id;
    unsigned long in_use = shmreg__region_in_use(r);
    st->in_use = in_use > UINT32_MAX ? UINT32_MAX : (unsigned)in_use;
    st->pending_unregister = r->pending;
    st->generation = r->generation;
    st->pinned = r->map.pinned;
    st->flags = r->flags;
    return SHMREG_OK;
}

static bool status_wants(struct shmreg_region *r, shmreg_kind kind)
{
    return region_alive(r) && (kind == SHMREG_KIND_ANY || r->map.backend->kind == kind);
}

/* Under reg->lock and RCU: every region of kind into a new array. */
static shmreg_err status_all_locked(struct shmreg_registry *reg, shmreg_kind kind,
                                    shmreg_region_status **out, size_t *count)
{
    struct cds_lfht_iter iter;
    struct shmreg_region *r;
    size_t n = 0;
    cds_lfht_for_each_entry(reg->table, &iter, r, node) {
        if (status_wants(r, kind))
            n++;
    }
    if (n == 0)
        return SHMREG_OK;
    shmreg_region_status *st = shmreg__calloc(n, sizeof *st);
    if (!st)
        return shmreg__fail(SHMREG_ERR_NO_MEMORY, "out of memory reporting the status of %zu regions", n);
    size_t i = 0;
    shmreg_err err = SHMREG_OK;
    cds_lfht_for_each_entry(reg->table, &iter, r, node) {
        if (!status_wants(r, kind))
            continue;
        if ((err = fill_status(r, &st[i++])) != SHMREG_OK)
            break;
    }
    if (err != SHMREG_OK) {
        shmreg_status_free(st, i);
        return err;
    }
    *out = st;
    *count = n;
    return SHMREG_OK;
}

static shmreg_err status_one_locked(struct shmreg_registry *reg, const char *name, shmreg_kind kind,
                                    shmreg_region_status **out, size_t *count)
{
    struct shmreg_region *r;
    shmreg_err err = lookup_locked(reg, name, kind, &r);
    if (err != SHMREG_OK)
        return err;
    shmreg_region_status *st = shmreg__calloc(1, sizeof *st);
    if (!st)
        return shmreg__fail(SHMREG_ERR_NO_MEMORY, "out of memory reporting the status of region '%s'", name);
    if ((err = fill_status(r, st)) != SHMREG_OK) {
        shmreg_status_free(st, 1);
        return err;
    }
    *out = st;
    *count = 1;
    return SHMREG_OK;
}

shmreg_err shmreg_status(shmreg_registry *reg, const char *name, shmreg_kind kind,
                         shmreg_region_status **out, size_t *count)
{
    if (!reg || !out || !count)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "status: %s is NULL",
                            !reg ? "registry" : !out ? "out" : "count");
    *out = NULL;
    *count = 0;
    if (!kind_valid(kind))
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "invalid region kind %d", (int)kind);
    shmreg_err err;
    if (name && (err = shmreg__check_name(name)) != SHMREG_OK)
        return err;
    pthread_mutex_lock(&reg->lock);
    shmreg__rcu_read_lock();
    err = name ? status_one_locked(reg, name, kind, out, count) : status_all_locked(reg, kind, out, count);
    shmreg__rcu_read_unlock();
    pthread_mutex_unlock(&reg->lock);
    return err;
}

void shmreg_status_free(shmreg_region_status *st, size_t count)
{
    if (!st)
        return;
    for (size_t i = 0; i < count; i++) {
        shmreg__free((char *)st[i].name);
        shmreg__free((char *)st[i].key);
    }
    shmreg__free(st);
}
