/* See ops_model.h. */
#include "ops_model.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "shm_rules.h"

#define KNOWN_FLAGS (SHMREG_READONLY | SHMREG_PIN | SHMREG_NO_PIN)

void model_reset(struct model *m)
{
    m->nregions = 0;
}

void model_create(struct model *m, const struct model_config *cfg)
{
    m->policy = cfg->policy;
    m->reserved_prefixes = cfg->reserved_prefixes;
    m->max_regions = cfg->max_regions;
    m->max_mapped_bytes = cfg->max_mapped_bytes;
    m->owner_accepted = cfg->owner_accepted;
    m->accept_unsealed_fds = cfg->accept_unsealed_fds;
    m->registry++;
}

bool model_tag_matches(const struct model_region *r, const char *tag)
{
    return !tag || (r->tagged && strcmp(r->tag, tag) == 0);
}

bool model_listed(const struct model_region *r)
{
    return r->state == MODEL_REGISTERED || r->state == MODEL_PENDING;
}

/* The listed region of this name registered with exactly this tag (NULL:
 * untagged). */
struct model_region *model_find_exact(struct model *m, const char *name, const char *tag)
{
    for (size_t i = 0; i < m->nregions; i++) {
        struct model_region *r = &m->regions[i];
        if (model_listed(r) && strcmp(r->name, name) == 0 &&
            (tag ? r->tagged && strcmp(r->tag, tag) == 0 : !r->tagged))
            return r;
    }
    return NULL;
}

/* A tag is a namespace: a tagged caller finds its own tag's region only;
 * an untagged one finds the untagged region, else the one region of that
 * name, and nothing when several tags hold it. */
struct model_region *model_lookup(struct model *m, const char *name, const char *tag)
{
    struct model_region *r = model_find_exact(m, name, tag);
    if (r || tag)
        return r;
    struct model_region *only = NULL;
    for (size_t i = 0; i < m->nregions; i++)
        if (model_listed(&m->regions[i]) && strcmp(m->regions[i].name, name) == 0) {
            if (only)
                return NULL;
            only = &m->regions[i];
        }
    return only;
}

/* Whether registering name under tag collides: a tagged registration with
 * its own tag's region or an untagged one; an untagged registration with
 * any region of that name. */
static bool name_taken(struct model *m, const char *name, const char *tag)
{
    if (tag)
        return model_find_exact(m, name, tag) || model_find_exact(m, name, NULL);
    for (size_t i = 0; i < m->nregions; i++)
        if (model_listed(&m->regions[i]) && strcmp(m->regions[i].name, name) == 0)
            return true;
    return false;
}

static bool kind_valid(shmreg_kind kind)
{
    return kind == SHMREG_KIND_ANY || kind == SHMREG_KIND_SYSTEM || kind == SHMREG_KIND_CUDA;
}

/* want more on top of used stays within limit (0: no limit), without overflow. */
static bool within(size_t used, size_t want, size_t limit)
{
    return limit == 0 || (used <= limit && want <= limit - used);
}

/* The limits count every region of this registry still mapped, pending and
 * detached ones included. */
static bool limits_allow(const struct model *m, size_t size)
{
    size_t regions = 0, mapped = 0;
    for (size_t i = 0; i < m->nregions; i++) {
        const struct model_region *r = &m->regions[i];
        if (r->registry == m->registry && r->state != MODEL_GONE) {
            regions++;
            mapped += r->size;
        }
    }
    return within(regions, 1, m->max_regions) && within(mapped, size, m->max_mapped_bytes);
}

/* [offset, offset + size) inside [0, limit), with no wrap-around. */
static bool window_fits(size_t offset, size_t size, size_t limit)
{
    return offset <= SIZE_MAX - size && offset + size <= limit;
}

static shmreg_err check_register(struct model *m, const struct model_register_args *a)
{
    if (!a->name || !rule_name_valid(a->name))
        return SHMREG_ERR_INVALID_ARG;
    if ((a->flags & ~KNOWN_FLAGS) || ((a->flags & SHMREG_PIN) && (a->flags & SHMREG_NO_PIN)))
        return SHMREG_ERR_INVALID_ARG;
    if (a->tag && !rule_name_valid(a->tag))
        return SHMREG_ERR_INVALID_ARG;
    if (a->size == 0)
        return SHMREG_ERR_OUT_OF_BOUNDS;
    if (a->via_fd ? a->object < 0
                  : !a->key || !rule_key_valid(a->key) || rule_key_reserved(a->key, m->reserved_prefixes))
        return SHMREG_ERR_INVALID_ARG; /* the source's own argument: the key, or the descriptor */
    if (name_taken(m, a->name, a->tag))
        return SHMREG_ERR_ALREADY_EXISTS;
    /* A descriptor is looked at when it is mapped, after the limits; a
     * shm key's object before them (its checks answer first). */
    if (a->via_fd && !limits_allow(m, a->size))
        return SHMREG_ERR_NO_MEMORY;
    if (a->object < 0)
        return SHMREG_ERR_SYSTEM; /* shm_open: no such object */
    if (!m->owner_accepted)
        return SHMREG_ERR_INVALID_ARG;
    if (a->via_fd && !m->accept_unsealed_fds)
        return SHMREG_ERR_INVALID_ARG; /* no F_SEAL_SHRINK */
    if (!window_fits(a->offset, a->size, a->object_size))
        return SHMREG_ERR_OUT_OF_BOUNDS;
    if (!a->via_fd && !limits_allow(m, a->size))
        return SHMREG_ERR_NO_MEMORY;
    if ((a->flags & SHMREG_PIN) && !a->pin_usable)
        return SHMREG_ERR_UNSUPPORTED;
    if (m->nregions == MODEL_MAX_REGIONS)
        return SHMREG_ERR_NO_MEMORY; /* the harness never gets here */
    return SHMREG_OK;
}

shmreg_err model_register(struct model *m, const struct model_register_args *a,
                          struct model_region **out)
{
    shmreg_err err = check_register(m, a);
    if (err != SHMREG_OK)
        return err;
    struct model_region *r = &m->regions[m->nregions++];
    memset(r, 0, sizeof *r);
    strcpy(r->name, a->name);
    snprintf(r->key, sizeof r->key, "%s", a->via_fd ? "" : a->key);
    r->from_fd = a->via_fd;
    r->tagged = a->tag != NULL;
    snprintf(r->tag, sizeof r->tag, "%s", a->tag ? a->tag : "");
    r->registry = m->registry;
    r->object = a->object;
    r->offset = a->offset;
    r->size = a->size;
    r->flags = a->flags;
    r->state = MODEL_REGISTERED;
    *out = r;
    return SHMREG_OK;
}

shmreg_err model_register_cuda(struct model *m, const char *name, size_t size, unsigned flags,
                               const char *tag, bool bad_source)
{
    if (!name || !rule_name_valid(name) || (flags & ~KNOWN_FLAGS) ||
        ((flags & SHMREG_PIN) && (flags & SHMREG_NO_PIN)) || (tag && !rule_name_valid(tag)))
        return SHMREG_ERR_INVALID_ARG;
    if (size == 0)
        return SHMREG_ERR_OUT_OF_BOUNDS;
    if (bad_source)
        return SHMREG_ERR_INVALID_ARG;
    if (name_taken(m, name, tag))
        return SHMREG_ERR_ALREADY_EXISTS;
    if (!limits_allow(m, size))
        return SHMREG_ERR_NO_MEMORY;
    return SHMREG_ERR_UNSUPPORTED;
}

shmreg_err model_acquire(struct model *m, const char *name, size_t offset, size_t size,
                         struct model_region **out)
{
    /* acquire checks the length only: a name with a control character can
     * never have been registered, so it is simply not found. */
    if (!name || strlen(name) == 0 || strlen(name) > 255)
        return SHMREG_ERR_INVALID_ARG;
    struct model_region *r = model_lookup(m, name, NULL);
    if (!r)
        return SHMREG_ERR_NOT_FOUND;
    if (offset >= r->size || !window_fits(offset, size, r->size))
        return SHMREG_ERR_OUT_OF_BOUNDS;
    r->refs++;
    *out = r;
    return SHMREG_OK;
}

void model_retain(struct model_region *r)
{
    r->refs++;
}

void model_release(struct model_region *r)
{
    r->refs--;
    if (r->refs == 0 && r->state != MODEL_REGISTERED)
        r->state = MODEL_GONE;
}

/* The busy policy applied to one listed region; false: REFUSE kept it. */
static bool unregister_one(struct model *m, struct model_region *r)
{
    if (r->state == MODEL_PENDING)
        return true;
    if (r->refs == 0) {
        r->state = MODEL_GONE;
        return true;
    }
    switch (m->policy) {
    case SHMREG_POLICY_REFUSE:
        return false;
    case SHMREG_POLICY_DETACH:
        r->state = MODEL_DETACHED;
        return true;
    case SHMREG_POLICY_DEFER:
        break;
    }
    r->state = MODEL_PENDING;
    return true;
}

static bool tag_valid(const char *tag)
{
    return !tag || rule_name_valid(tag);
}

shmreg_err model_unregister(struct model *m, const char *name, shmreg_kind kind, const char *tag)
{
    if (!name || !rule_name_valid(name) || !kind_valid(kind) || !tag_valid(tag))
        return SHMREG_ERR_INVALID_ARG;
    /* another tenant's region is as absent as a missing one */
    struct model_region *r = model_lookup(m, name, tag);
    if (!r)
        return SHMREG_ERR_NOT_FOUND;
    if (kind == SHMREG_KIND_CUDA)
        return SHMREG_ERR_WRONG_KIND;
    return unregister_one(m, r) ? SHMREG_OK : SHMREG_ERR_BUSY;
}

shmreg_err model_unregister_all(struct model *m, shmreg_kind kind, const char *tag)
{
    if (!kind_valid(kind) || !tag_valid(tag))
        return SHMREG_ERR_INVALID_ARG;
    if (kind == SHMREG_KIND_CUDA)
        return SHMREG_OK;
    bool busy = false;
    for (size_t i = 0; i < m->nregions; i++) {
        struct model_region *r = &m->regions[i];
        if (model_listed(r) && model_tag_matches(r, tag) && !unregister_one(m, r))
            busy = true;
    }
    return busy ? SHMREG_ERR_BUSY : SHMREG_OK;
}

shmreg_err model_status(struct model *m, const char *name, shmreg_kind kind, const char *tag,
                        size_t *count)
{
    *count = 0;
    if (!kind_valid(kind) || !tag_valid(tag) || (name && !rule_name_valid(name)))
        return SHMREG_ERR_INVALID_ARG;
    if (name) {
        struct model_region *r = model_lookup(m, name, tag);
        if (!r)
            return SHMREG_ERR_NOT_FOUND;
        if (kind == SHMREG_KIND_CUDA)
            return SHMREG_ERR_WRONG_KIND;
        *count = 1;
        return SHMREG_OK;
    }
    if (kind == SHMREG_KIND_CUDA)
        return SHMREG_OK;
    for (size_t i = 0; i < m->nregions; i++)
        *count += model_listed(&m->regions[i]) && model_tag_matches(&m->regions[i], tag);
    return SHMREG_OK;
}

void model_destroy(struct model *m)
{
    for (size_t i = 0; i < m->nregions; i++) {
        struct model_region *r = &m->regions[i];
        if (r->state == MODEL_GONE)
            continue;
        r->state = r->refs > 0 ? MODEL_ORPHANED : MODEL_GONE;
    }
}

size_t model_mapped_in(const struct model *m, unsigned registry)
{
    size_t n = 0;
    for (size_t i = 0; i < m->nregions; i++)
        n += m->regions[i].state != MODEL_GONE && m->regions[i].registry == registry;
    return n;
}

size_t model_mapped(const struct model *m)
{
    size_t n = 0;
    for (size_t i = 0; i < m->nregions; i++)
        n += m->regions[i].state != MODEL_GONE;
    return n;
}
