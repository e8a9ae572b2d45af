/* The build without UCX (SHMREG_WITH_UCX=OFF): the remote backend and the
 * client calls, each answering SHMREG_ERR_UNSUPPORTED, so the core, the
 * exported symbols and the ABI are those of a build with UCX. A malformed
 * descriptor and a refused transport are still INVALID_ARG (remote/args.c,
 * remote/transports.c). */
#include "backends/backend.h"
#include "base/err.h"
#include "remote/transports.h"

#define SHMREG_NO_UCX_ "libshmreg was built without UCX (SHMREG_WITH_UCX=OFF)"

static shmreg_err remote_open(const struct shmreg__open_args *a, struct shmreg__opened *out)
{
    return shmreg__fail(SHMREG_ERR_UNSUPPORTED, "cannot register remote region '%s': %s", a->r->name,
                        SHMREG_NO_UCX_);
}

static shmreg_err nothing_to_close(struct shmreg__opened *m, const char *region_name)
{
    return shmreg__fail(SHMREG_ERR_UNSUPPORTED, "cannot close remote region '%s': %s", region_name, SHMREG_NO_UCX_);
}

const struct shmreg__backend shmreg__backend_remote = {
    .name = "remote",
    .kind = SHMREG_KIND_REMOTE,
    .prepare = shmreg__remote_prepare,
    .open = remote_open,
    .close = nothing_to_close,
};

static shmreg_err unsupported(const char *what)
{
    return shmreg__fail(SHMREG_ERR_UNSUPPORTED, "%s: %s", what, SHMREG_NO_UCX_);
}

shmreg_err shmreg_remote_available(void)
{
    return unsupported("remote regions are unavailable");
}

shmreg_err shmreg_remote_client_create(shmreg_remote_client **out)
{
    return shmreg_remote_client_create_with(NULL, out);
}

shmreg_err shmreg_remote_client_create_with(const shmreg_remote_client_config *config, shmreg_remote_client **out)
{
    if (out)
        *out = NULL;
    struct shmreg__remote_transports t;
    if (shmreg__remote_client_transports(config, &t) != SHMREG_OK)
        return SHMREG_ERR_INVALID_ARG;
    return unsupported("cannot create a remote client");
}

void shmreg_remote_client_destroy(shmreg_remote_client *c)
{
    /* None can have been created in this build. */
}

shmreg_err shmreg_remote_export(shmreg_remote_client *c, void *addr, size_t length, shmreg_remote_window **out)
{
    if (out)
        *out = NULL;
    return unsupported("cannot export memory");
}

shmreg_err shmreg_remote_alloc(shmreg_remote_client *c, size_t length, void **addr, shmreg_remote_window **out)
{
    if (out)
        *out = NULL;
    return unsupported("cannot allocate memory to export");
}

shmreg_err shmreg_remote_descriptor(const shmreg_remote_window *w, const void **bytes, size_t *size)
{
    return unsupported("remote_descriptor");
}

void shmreg_remote_unexport(shmreg_remote_window *w)
{
    /* None can have been exported in this build. */
}

shmreg_err shmreg_remote_configure(const shmreg_remote_config *config)
{
    struct shmreg__remote_transports t;
    if (shmreg__remote_server_transports(config, &t) != SHMREG_OK)
        return SHMREG_ERR_INVALID_ARG;
    return unsupported("remote_configure");
}

shmreg_err shmreg_remote_server_address(const char **address)
{
    return unsupported("remote_server_address");
}

shmreg_err shmreg_remote_invite(shmreg_registry *reg, const char *tag,
                                unsigned char secret[SHMREG_REMOTE_SECRET_SIZE])
{
    return unsupported("remote_invite");
}

shmreg_err shmreg_remote_client_connect(shmreg_remote_client *c, const char *server_address,
                                        const unsigned char secret[SHMREG_REMOTE_SECRET_SIZE])
{
    return unsupported("cannot connect to the server");
}

