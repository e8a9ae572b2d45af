/* The remote-region descriptor (remote/descriptor.h). */
#include <stdbool.h>
#include <string.h>

#include "base/bytes.h"
#include "base/err.h"
#include "remote/descriptor.h"

void shmreg__remote_descriptor_encode(const struct shmreg__remote_descriptor *d,
                                      unsigned char out[SHMREG_REMOTE_DESCRIPTOR_SIZE])
{
    memset(out, 0, SHMREG_REMOTE_DESCRIPTOR_SIZE);
    out[0] = SHMREG_REMOTE_DESCRIPTOR_VERSION;
    memcpy(out + 8, d->connection, sizeof d->connection);
    shmreg__put64(out + 24, d->window);
    shmreg__put64(out + 32, d->generation);
}

static bool zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return false;
    return true;
}

shmreg_err shmreg__remote_descriptor_parse(const void *bytes, size_t size, const char *name,
                                           struct shmreg__remote_descriptor *out)
{
    const char *why = NULL;
    const unsigned char *p = bytes;
    /* Version 1 is told apart before the size: its descriptors were as
     * long as their worker address and remote key made them, so the size
     * alone would hide the cause. */
    if (!bytes)
        why = "the bytes are NULL";
    else if (size > 0 && p[0] == 1)
        why = "version 1, which named a worker address and is no longer accepted: export the window again "
              "over a connection (shmreg_remote_client_connect)";
    else if (size != SHMREG_REMOTE_DESCRIPTOR_SIZE)
        why = "not 40 bytes long";
    else if (p[0] != SHMREG_REMOTE_DESCRIPTOR_VERSION)
        why = "an unknown version (byte 0 is not 2)";
    else if (!zero(p + 1, 7))
        why = "reserved bytes are not zero";
    else if (zero(p + 8, SHMREG__RMSG_CONNECTION_ID))
        why = "no connection id";
    if (why)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "cannot register remote region '%s': the descriptor (%zu bytes) "
                            "is not one: %s", name, size, why);
    memcpy(out->connection, p + 8, sizeof out->connection);
    out->window = shmreg__get64(p + 24);
    out->generation = shmreg__get64(p + 32);
    return SHMREG_OK;
}
