/* Remote regions through UCX: the server side's backend
 * (SHMREG_SOURCE_REMOTE), over the engine of remote/server.h.
 *
 * A region's "mapping" (struct remote_map, in shmreg__opened.priv[0]) is a
 * reference to the connection that announced its window, the window's id
 * and generation, and where the region starts in it. Made at registration,
 * after the engine found the window among the connections of the
 * registration's own tenant; released by the last reference. Nothing is
 * read at registration. */
#include <stdint.h>

#include "backends/backend.h"
#include "base/err.h"
#include "base/sys.h"
#include "remote/descriptor.h"
#include "remote/server.h"
#include "remote/settings.h"
#include "remote/ucx_calls.h"

struct remote_map {
    struct shmreg__rconn *conn; /* one reference, this map's */
    uint64_t window, generation;
    uint64_t offset; /* of the region's byte 0 in the window */
    uint64_t timeout_ns;
};

static struct remote_map *map_of(const struct shmreg__opened *o)
{
    return (struct remote_map *)(uintptr_t)o->priv[0];
}

/* The registry's settings for its remote regions: the core passes them
 * with every registration of this source. */
static const struct shmreg__remote_settings *settings_of(const struct shmreg__open_args *a)
{
    return a->source_settings;
}

/* The region's window must lie inside the one the client announced. */
static shmreg_err window_fits(const shmreg_registration *r, uint64_t length)
{
    if (r->offset <= length && r->byte_size <= length - r->offset)
        return SHMREG_OK;
    return shmreg__fail(SHMREG_ERR_OUT_OF_BOUNDS, "failed to register remote region '%s': the window [%zu, +%zu) "
                        "is past the end of the %llu bytes the client announced", r->name, r->offset, r->byte_size,
                        (unsigned long long)length);
}

/* The window against the one announced, after the name and before the
 * registry charges the tag's quota and its limits (backend.h's inspect),
 * so that a window past the announced one is OUT_OF_BOUNDS at any size,
 * 2^63 included, never a quota's refusal, as a system region's window past
 * its object is. Nothing is kept (id.valid stays false: a remote mapping
 * is never shared); open looks again, under the reference it takes. */
static shmreg_err remote_inspect(struct shmreg__open_args *a)
{
    const shmreg_registration *r = a->r;
    struct shmreg__remote_descriptor d;
    uint64_t length;
    shmreg_err err = shmreg__remote_descriptor_parse(r->raw_handle, r->raw_handle_size, r->name, &d);
    if (err == SHMREG_OK)
        err = shmreg__rconn_find(&d, settings_of(a)->registry, r->tag, r->name, NULL, &length);
    return err == SHMREG_OK ? window_fits(r, length) : err;
}

/* A client that died gives its names back before a new remote
 * registration may want them: its regions are swept here, before the
 * arguments are checked. It lives in this backend's prepare, not in the
 * generic verb, because only a registration of this source needs it, and
 * prepare is the one step of this source that runs before the registry
 * checks the name (inspect runs after it), outside every registry lock.
 * The sweep walks the registry's table, which is the core's, above this
 * layer: it is reached through its public call. */
static shmreg_err remote_prepare(struct shmreg__open_args *a)
{
    (void)shmreg_remote_sweep(settings_of(a)->registry, NULL);
    return shmreg__remote_prepare(a);
}

static shmreg_err remote_open(const struct shmreg__open_args *a, struct shmreg__opened *out)
{
    const shmreg_registration *r = a->r;
    struct shmreg__remote_descriptor d;
    shmreg_err err = shmreg__remote_descriptor_parse(r->raw_handle, r->raw_handle_size, r->name, &d);
    if (err != SHMREG_OK)
        return err;
    struct remote_map *m = shmreg__calloc(1, sizeof *m);
    if (!m)
        return shmreg__fail(SHMREG_ERR_NO_MEMORY, "out of memory registering remote region '%s'", r->name);
    uint64_t length;
    if ((err = shmreg__rconn_find(&d, settings_of(a)->registry, r->tag, r->name, &m->conn, &length)) != SHMREG_OK) {
        shmreg__free(m);
        return err;
    }
    if ((err = window_fits(r, length)) != SHMREG_OK) {
        shmreg__rconn_put(m->conn);
        shmreg__free(m);
        return err;
    }
    m->window = d.window;
    m->generation = d.generation;
    m->offset = r->offset;
    m->timeout_ns = (uint64_t)settings_of(a)->timeout_ms * 1000000u;
    *out = (struct shmreg__opened){
        .backend = &shmreg__backend_remote,
        .addr = NULL,
        .byte_size = r->byte_size,
        .device_id = -1,
        .length = r->byte_size,
        .priv = {(uint64_t)(uintptr_t)m},
    };
    return SHMREG_OK;
}

static shmreg_err remote_close(struct shmreg__opened *o, const char *region_name)
{
    struct remote_map *m = map_of(o);
    shmreg__rconn_put(m->conn);
    shmreg__free(m);
    return SHMREG_OK;
}

static shmreg_err remote_copy(const struct shmreg__opened *o, const char *name, size_t offset, void *buf, size_t n,
                              bool to_memory)
{
    struct remote_map *m = map_of(o);
    return shmreg__rconn_copy(m->conn, m->window, m->generation, m->offset + offset, buf, n, to_memory,
                              m->timeout_ns, name);
}

static bool remote_gone(const struct shmreg__opened *o)
{
    struct remote_map *m = map_of(o);
    return shmreg__rconn_gone(m->conn, m->timeout_ns);
}

static const char *remote_transports(const struct shmreg__opened *o)
{
    return shmreg__rconn_transports(map_of(o)->conn);
}

const struct shmreg__backend shmreg__backend_remote = {
    .name = "remote",
    .kind = SHMREG_KIND_REMOTE,
    .prepare = remote_prepare,
    .inspect = remote_inspect,
    .open = remote_open,
    .close = remote_close,
    .copy = remote_copy,
    .gone = remote_gone,
    .transports = remote_transports,
};

shmreg_err shmreg_remote_available(void)
{
    const struct shmreg__ucx *u;
    return shmreg__ucx_load(&u);
}
