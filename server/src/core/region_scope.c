/* Tenant namespaces over the registry (region_scope.h says what and why). */
#include "core/region_scope.h"

#include <stddef.h>

int scope_refused(const region_scope *s)
{
    return s->per_tenant && !s->tenant;
}

size_t scope_stats_book(const region_scope *s)
{
    return s->per_tenant && s->tenant ? s->tenant_no + 1 : 0;
}

/* The owner tag of s's regions (NULL: no tenants). A caller without a
 * tenant gets a tag no registration can hold ("" is not a valid tag), so
 * that a missed scope_refused check finds, or registers, nothing rather
 * than everything. */
static const char *tag_of(const region_scope *s)
{
    if (!s->per_tenant)
        return NULL;
    return s->tenant ? s->tenant : "";
}

/* The filter of name (NULL: all) and kind within s. */
static shmreg_filter filter_of(const region_scope *s, const char *name, shmreg_kind kind)
{
    shmreg_filter f;
    shmreg_filter_init(&f);
    f.name = name;
    f.kind = kind;
    f.tag = tag_of(s);
    return f;
}

shmreg_err scope_register(shmreg_registry *reg, const region_scope *s, shmreg_registration *r)
{
    if (s->per_tenant)
        r->tag = tag_of(s);
    return shmreg_register(reg, r);
}

/* A registration of name from source, the rest at its defaults. */
static shmreg_registration registration(shmreg_source source, const char *name, size_t byte_size)
{
    shmreg_registration r;
    shmreg_registration_init(&r);
    r.source = source;
    r.name = name;
    r.byte_size = byte_size;
    return r;
}

shmreg_err scope_register_system(shmreg_registry *reg, const region_scope *s, const char *name,
                                 const char *key, size_t offset, size_t byte_size)
{
    shmreg_registration r = registration(SHMREG_SOURCE_SHM, name, byte_size);
    r.key = key;
    r.offset = offset;
    return scope_register(reg, s, &r);
}

shmreg_err scope_register_cuda_ipc(shmreg_registry *reg, const region_scope *s, const char *name,
                                   const void *handle, size_t handle_size, int device_id,
                                   size_t byte_size)
{
    shmreg_registration r = registration(SHMREG_SOURCE_CUDA_IPC, name, byte_size);
    r.raw_handle = handle;
    r.raw_handle_size = handle_size;
    r.device_id = device_id;
    return scope_register(reg, s, &r);
}

shmreg_err scope_remote_invite(shmreg_registry *reg, const region_scope *s,
                               unsigned char secret[SHMREG_REMOTE_SECRET_SIZE])
{
    return shmreg_remote_invite(reg, tag_of(s), secret);
}

shmreg_err scope_acquire(shmreg_registry *reg, const region_scope *s, const char *name,
                         size_t offset, size_t byte_size, shmreg_region **out, shmreg_view *view)
{
    shmreg_filter f = filter_of(s, name, SHMREG_KIND_ANY);
    return shmreg_acquire_matching(reg, &f, offset, byte_size, out, view);
}

shmreg_err scope_status(shmreg_registry *reg, const region_scope *s, const char *name,
                        shmreg_kind kind, shmreg_region_status **out, size_t *count)
{
    shmreg_filter f = filter_of(s, name, kind);
    return shmreg_status_matching(reg, &f, out, count);
}

shmreg_err scope_unregister(shmreg_registry *reg, const region_scope *s, const char *name,
                            shmreg_kind kind)
{
    shmreg_filter f = filter_of(s, name, kind);
    return shmreg_unregister_matching(reg, &f);
}
