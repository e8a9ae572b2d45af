/* The registry: its table of names, create and destroy, and acquire. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "err.h"
#include "names.h"
#include "region.h"
#include "registry.h"
#include "sys.h"

/* ------------------------------------------------------ shared internals */

unsigned long shmreg__name_hash(const struct shmreg_registry *reg, const char *name, size_t len)
{
    return (unsigned long)XXH3_64bits_withSeed(name, len, reg->hash_seed);
}

int shmreg__match_name(struct cds_lfht_node *node, const void *name)
{
    struct shmreg_region *r = caa_container_of(node, struct shmreg_region, node);
    SHMREG_TSAN_SUBSCRIBE(r);
    return strcmp(r->name, (const char *)name) == 0;
}

bool shmreg__kind_valid(shmreg_kind kind)
{
    return kind == SHMREG_KIND_ANY || kind == SHMREG_KIND_SYSTEM || kind == SHMREG_KIND_CUDA;
}

const char *shmreg__kind_word(shmreg_kind kind)
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

bool shmreg__region_alive(struct shmreg_region *r)
{
    return !shmreg__ref_dead(&r->refs);
}

static bool tag_matches(const struct shmreg_region *r, const char *tag)
{
    return !tag || (r->tag && strcmp(r->tag, tag) == 0);
}

bool shmreg__region_matches(struct shmreg_region *r, shmreg_kind kind, const char *tag)
{
    return (kind == SHMREG_KIND_ANY || r->map.backend->kind == kind) && tag_matches(r, tag);
}

struct shmreg_region *shmreg__find_locked(struct shmreg_registry *reg, const char *name)
{
    struct cds_lfht_iter iter;
    unsigned long hash = shmreg__name_hash(reg, name, strlen(name));
    cds_lfht_lookup(reg->table, hash, shmreg__match_name, name, &iter);
    for (struct cds_lfht_node *n = cds_lfht_iter_get_node(&iter); n;
         cds_lfht_next_duplicate(reg->table, shmreg__match_name, name, &iter),
                               n = cds_lfht_iter_get_node(&iter)) {
        struct shmreg_region *r = caa_container_of(n, struct shmreg_region, node);
        if (shmreg__region_alive(r))
            return r;
    }
    return NULL;
}

static shmreg_err not_found(const char *name, shmreg_kind kind)
{
    return shmreg__fail(SHMREG_ERR_NOT_FOUND, "Unable to find %sshared memory region: '%s'",
                        shmreg__kind_word(kind), name);
}

shmreg_err shmreg__lookup_locked(struct shmreg_registry *reg, const char *name, shmreg_kind kind,
                                 const char *tag, struct shmreg_region **out)
{
    struct shmreg_region *r = shmreg__find_locked(reg, name);
    /* Another tenant's region is reported exactly as an absent one. */
    if (!r || !tag_matches(r, tag))
        return not_found(name, kind);
    if (kind != SHMREG_KIND_ANY && r->map.backend->kind != kind)
        return shmreg__fail(SHMREG_ERR_NOT_FOUND,
                            "The region named '%s' is registered as %s shared memory, not %s shared memory",
                            name, kind_title(r->map.backend->kind), kind_title(kind));
    *out = r;
    return SHMREG_OK;
}

/* ---- the front
 *
 * Why a second index: an uncontended acquire+release is a few tens of
 * nanoseconds, and a lookup through cds_lfht_lookup (an out-of-line call, a
 * match callback through a function pointer, strcmp) was about a fifth of
 * it. The front is an array that acquire reads inline: one load, then the
 * region's own hash, length and name.
 *
 * It is only an accelerator: the table stays the authority, and a lookup that
 * misses the front (an empty slot, another name, a dead region) walks the
 * table. A region takes its slot at link time if the slot is free or holds a
 * dead region, and gives it up at unlink; both happen under reg->lock. So a
 * slot only ever holds a region that is in the table, or was until a moment
 * ago, and a region's memory is freed a grace period after its unlink: a
 * reader inside a read-side section can always dereference what it loads.
 * The release store publishes the region's fields (hash, length, name) to the
 * acquire load. */

static _Atomic(struct shmreg_region *) *front_slot(struct shmreg_registry *reg, unsigned long hash)
{
    return &reg->front[hash & (SHMREG__FRONT_SLOTS - 1)];
}

static void front_claim_locked(struct shmreg_registry *reg, struct shmreg_region *r)
{
    _Atomic(struct shmreg_region *) *slot = front_slot(reg, r->hash);
    struct shmreg_region *cur = atomic_load_explicit(slot, memory_order_relaxed);
    if (!cur || !shmreg__region_alive(cur))
        atomic_store_explicit(slot, r, memory_order_release);
}

static void front_leave_locked(struct shmreg_registry *reg, struct shmreg_region *r)
{
    _Atomic(struct shmreg_region *) *slot = front_slot(reg, r->hash);
    if (atomic_load_explicit(slot, memory_order_relaxed) == r)
        atomic_store_explicit(slot, NULL, memory_order_relaxed);
}

/* The live region called name through the front, with a reference taken, or
 * NULL (then the table decides). Inside a read-side section. */
static struct shmreg_region *front_get(struct shmreg_registry *reg, unsigned long hash, const char *name,
                                       size_t len)
{
    struct shmreg_region *r = atomic_load_explicit(front_slot(reg, hash), memory_order_acquire);
    if (r && r->hash == hash && r->name_len == len && memcmp(r->name, name, len) == 0 &&
        shmreg__ref_get_unless_dead(&r->refs))
        return r;
    return NULL;
}

void shmreg__link_locked(struct shmreg_registry *reg, struct shmreg_region *r)
{
    r->linked = true;
    SHMREG_TSAN_PUBLISH(r);
    cds_lfht_add(reg->table, r->hash, &r->node);
    front_claim_locked(reg, r);
}

void shmreg__unlink_locked(struct shmreg_registry *reg, struct shmreg_region *r)
{
    front_leave_locked(reg, r);
    cds_lfht_del(reg->table, &r->node);
    r->linked = false;
}

void shmreg__put_batch(struct shmreg_region *batch)
{
    while (batch) {
        struct shmreg_region *next = batch->next_batch;
        shmreg__region_put(batch);
        batch = next;
    }
}

void shmreg__usage_release_locked(struct shmreg_registry *reg, const struct shmreg__usage *u)
{
    reg->usage.regions -= u->regions;
    reg->usage.mapped_bytes -= u->mapped_bytes;
    reg->usage.pinned_bytes -= u->pinned_bytes;
}

shmreg_err shmreg__check_tag(const char *tag)
{
    if (!tag)
        return SHMREG_OK;
    shmreg_err err = shmreg__check_name(tag);
    if (err != SHMREG_OK)
        shmreg__error_prefix("invalid owner tag");
    return err;
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

static void registry_free(struct shmreg_registry *reg)
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
    if ((err = copy_prefixes(cfg->reserved_key_prefixes, &reg->reserved_prefixes)) != SHMREG_OK ||
        (err = copy_uids(cfg, reg)) != SHMREG_OK) {
        registry_free(reg);
        return err;
    }
    reg->table = cds_lfht_new_flavor(64, 64, 0, CDS_LFHT_AUTO_RESIZE | CDS_LFHT_ACCOUNTING,
                                     &urcu_bp_flavor, NULL);
    if (!reg->table) {
        registry_free(reg);
        return shmreg__fail(SHMREG_ERR_NO_MEMORY, "out of memory creating the registry's hash table");
    }
    pthread_mutex_init(&reg->lock, NULL);
    for (size_t i = 0; i < SHMREG__FRONT_SLOTS; i++)
        atomic_init(&reg->front[i], NULL);
    shmreg__ref_init(&reg->refs, 1); /* the handle's reference */
    reg->hash_seed = random_seed();
    reg->busy_policy = cfg->busy_policy;
    reg->pin_policy = cfg->pin_policy;
    reg->log_fn = cfg->log_fn;
    reg->log_user = cfg->log_user;
    reg->limits.regions = cfg->max_regions;
    reg->limits.mapped_bytes = cfg->max_mapped_bytes;
    reg->limits.pinned_bytes = cfg->max_pinned_bytes;
    *out = reg;
    return SHMREG_OK;
}

bool shmreg__destroy_waits = true;

bool shmreg__registry_put(struct shmreg_registry *reg)
{
    if (!shmreg__ref_put(&reg->refs))
        return false;
    /* Every region is gone and the handle was destroyed: no lookup can run. */
    if (cds_lfht_destroy(reg->table, NULL) != 0)
        shmreg__log(reg, SHMREG_LOG_ERROR, "registry teardown: hash table not empty");
    pthread_mutex_destroy(&reg->lock);
    registry_free(reg);
    return true;
}

void shmreg_registry_destroy(shmreg_registry *reg)
{
    if (!reg)
        return;
    struct shmreg_region *batch = NULL;
    struct cds_lfht_iter iter;
    struct shmreg_region *r;
    pthread_mutex_lock(&reg->lock);
    shmreg__rcu_read_lock();
    shmreg__for_each_region(reg, &iter, r) {
        shmreg__unlink_locked(reg, r);
        /* Pending regions already gave up the registry's reference, and a
         * dead node is its deleter's business. */
        if (!r->pending && shmreg__region_alive(r)) {
            r->next_batch = batch;
            batch = r;
        }
    }
    shmreg__rcu_read_unlock();
    pthread_mutex_unlock(&reg->lock);
    /* The registry's references: idle regions are unmapped here, busy ones by
     * their last release. */
    shmreg__put_batch(batch);
    /* When this was the last reference, wait for the regions' deferred
     * frees, so that nothing of the registry outlives its destroy (leak
     * checkers, servers that create and destroy registries). Only here, in
     * the caller's explicit teardown: a grace period costs milliseconds, and
     * a last release after destroy may run in a request thread. */
    if (shmreg__registry_put(reg) && shmreg__destroy_waits)
        urcu_bp_barrier();
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

/* The hot path: no lock, one RCU read-side section, one fetch_add on the
 * region's own count; the front first, the table when it misses. Duplicates
 * of a name exist only while a dead node waits to be unlinked; they are
 * skipped because their count is dead. */
static struct shmreg_region *lookup_and_get(struct shmreg_registry *reg, const char *name, size_t len)
{
    unsigned long hash = shmreg__name_hash(reg, name, len);
    shmreg__rcu_read_lock();
    struct shmreg_region *found = front_get(reg, hash, name, len);
    if (found) {
        shmreg__rcu_read_unlock();
        return found;
    }
    struct cds_lfht_iter iter;
    cds_lfht_lookup(reg->table, hash, shmreg__match_name, name, &iter);
    for (struct cds_lfht_node *n = cds_lfht_iter_get_node(&iter); n;
         cds_lfht_next_duplicate(reg->table, shmreg__match_name, name, &iter),
                               n = cds_lfht_iter_get_node(&iter)) {
        struct shmreg_region *r = caa_container_of(n, struct shmreg_region, node);
        if (shmreg__ref_get_unless_dead(&r->refs)) {
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
    /* Only the length is checked here: a name the table cannot hold is simply
     * not found, and the hot path stays short. */
    size_t len = strnlen(name, SHMREG_NAME_MAX + 1);
    if (len == 0 || len > SHMREG_NAME_MAX)
        return shmreg__check_name(name);

    struct shmreg_region *r = lookup_and_get(reg, name, len);
    if (!r) {
        /* Not found: now, off the hot path, refuse a name that could not
         * have been registered before quoting it in the message. */
        shmreg_err err = shmreg__check_name(name);
        return err != SHMREG_OK ? err : not_found(name, SHMREG_KIND_ANY);
    }
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
