/* The remote source's own arguments, checked in every build: a malformed
 * descriptor is INVALID_ARG whether or not this library or machine has
 * UCX, so callers see one behaviour. The window's bounds need the announced
 * window, which only the engine knows (remote/backend.c). The backend's
 * prepare is this (remote/stub.c), or this after a sweep of the registry's
 * unreachable remote regions (remote/backend.c). */
#include "backends/backend.h"
#include "base/err.h"
#include "remote/descriptor.h"

shmreg_err shmreg__remote_prepare(struct shmreg__open_args *a)
{
    const shmreg_registration *r = a->r;
    if (r->flags & (SHMREG_PIN | SHMREG_NO_PIN))
        return shmreg__fail(SHMREG_ERR_INVALID_ARG,
                            "cannot register remote region '%s': pinning flags do not apply to remote memory",
                            r->name);
    if (r->key || r->fd != -1)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "cannot register remote region '%s': a key or descriptor "
                            "was given; a remote region takes only its descriptor bytes", r->name);
    struct shmreg__remote_descriptor d;
    shmreg_err err = shmreg__remote_descriptor_parse(r->raw_handle, r->raw_handle_size, r->name, &d);
    if (err != SHMREG_OK)
        return err;
    a->pin = false;
    a->pinned_bytes = 0;
    return SHMREG_OK;
}
