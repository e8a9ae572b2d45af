/* Tenant namespaces over the registry (region_scope.h says what and why). */
#include "core/region_scope.h"

#include <stdio.h>
#include <string.h>

#include "core/tenants.h"

/* The library's longest region name. */
#define REGION_NAME_MAX 255

/* The library's message in the client's names: the library's message is
 * per thread, and so is this copy of it. */
static _Thread_local char message[1024];

int scope_refused(const region_scope *s)
{
    return s->per_tenant && !s->tenant;
}

const char *scope_client_name(const region_scope *s, const char *registry_name)
{
    size_t n = s->per_tenant && s->tenant ? strlen(s->tenant) : 0;
    if (n && strncmp(registry_name, s->tenant, n) == 0 && registry_name[n] == '/')
        return registry_name + n + 1;
    return registry_name;
}

const char *scope_message(const region_scope *s)
{
    /* The prefix goes wherever a name starts: after a quote (the library
     * quotes names) or a space (its lists of names). */
    const char *msg = shmreg_last_error();
    size_t n = s->per_tenant && s->tenant ? strlen(s->tenant) : 0, out = 0;
    for (const char *p = msg; *p && out + 1 < sizeof message;) {
        message[out++] = *p++;
        if (n && (p[-1] == '\'' || p[-1] == ' ') && strncmp(p, s->tenant, n) == 0 && p[n] == '/')
            p += n + 1;
    }
    message[out] = 0;
    return message;
}

/* The registry's name for the client's name: "<tenant>/<name>" within a
 * tenant. Names the library refuses whatever the prefix (empty, too long)
 * pass unchanged, so that its message is about the client's own name. */
typedef struct scoped_name {
    char buf[TENANT_NAME_MAX + 1 + REGION_NAME_MAX + 1];
} scoped_name;

static const char *registry_name(const region_scope *s, const char *name, scoped_name *out)
{
    if (!s->per_tenant || !s->tenant || !name || !name[0] ||
        strnlen(name, REGION_NAME_MAX + 1) > REGION_NAME_MAX)
        return name;
    snprintf(out->buf, sizeof out->buf, "%s/%s", s->tenant, name);
    return out->buf;
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
    scoped_name buf;
    const char *client = r->name;
    r->name = registry_name(s, client, &buf);
    if (s->per_tenant)
        r->tag = tag_of(s);
    shmreg_err e = shmreg_register(reg, r);
    r->name = client;
    return e;
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

shmreg_err scope_acquire(shmreg_registry *reg, const region_scope *s, const char *name,
                         size_t offset, size_t byte_size, shmreg_region **out, shmreg_view *view)
{
    scoped_name buf;
    shmreg_filter f = filter_of(s, registry_name(s, name, &buf), SHMREG_KIND_ANY);
    return shmreg_acquire_matching(reg, &f, offset, byte_size, out, view);
}

shmreg_err scope_status(shmreg_registry *reg, const region_scope *s, const char *name,
                        shmreg_kind kind, shmreg_region_status **out, size_t *count)
{
    scoped_name buf;
    shmreg_filter f = filter_of(s, registry_name(s, name, &buf), kind);
    return shmreg_status_matching(reg, &f, out, count);
}

shmreg_err scope_unregister(shmreg_registry *reg, const region_scope *s, const char *name,
                            shmreg_kind kind)
{
    scoped_name buf;
    shmreg_filter f = filter_of(s, registry_name(s, name, &buf), kind);
    return shmreg_unregister_matching(reg, &f);
}
