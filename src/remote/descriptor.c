/* The remote-region descriptor (remote/descriptor.h). */
#include <stdbool.h>
#include <string.h>

#include "base/err.h"
#include "remote/descriptor.h"

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint64_t get64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

size_t shmreg__remote_descriptor_size(const struct shmreg__remote_descriptor *d)
{
    return SHMREG_REMOTE_DESCRIPTOR_HEADER + d->worker_address_size + d->rkey_size;
}

static bool blob_size_ok(size_t n)
{
    return n >= 1 && n <= SHMREG_REMOTE_BLOB_MAX;
}

shmreg_err shmreg__remote_descriptor_encode(const struct shmreg__remote_descriptor *d, void *out, size_t cap)
{
    if (!blob_size_ok(d->worker_address_size) || !blob_size_ok(d->rkey_size))
        return shmreg__fail(SHMREG_ERR_INVALID_ARG,
                            "remote descriptor: a worker address of %zu bytes or a key of %zu bytes is outside "
                            "1..%d", d->worker_address_size, d->rkey_size, SHMREG_REMOTE_BLOB_MAX);
    if (d->length == 0 || d->address > UINT64_MAX - d->length)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "remote descriptor: an empty range or one past 2^64");
    size_t need = shmreg__remote_descriptor_size(d);
    if (cap < need)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "remote descriptor: %zu bytes needed, %zu given", need, cap);
    unsigned char *p = out;
    memset(p, 0, SHMREG_REMOTE_DESCRIPTOR_HEADER);
    p[0] = SHMREG_REMOTE_DESCRIPTOR_VERSION;
    put32(p + 4, (uint32_t)d->worker_address_size);
    put32(p + 8, (uint32_t)d->rkey_size);
    put64(p + 16, d->address);
    put64(p + 24, d->length);
    memcpy(p + SHMREG_REMOTE_DESCRIPTOR_HEADER, d->worker_address, d->worker_address_size);
    memcpy(p + SHMREG_REMOTE_DESCRIPTOR_HEADER + d->worker_address_size, d->rkey, d->rkey_size);
    return SHMREG_OK;
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
    if (!bytes || size < SHMREG_REMOTE_DESCRIPTOR_HEADER)
        why = "shorter than its 32-byte header";
    else if (p[0] != SHMREG_REMOTE_DESCRIPTOR_VERSION)
        why = "an unknown version (byte 0 is not 1)";
    else if (!zero(p + 1, 3) || !zero(p + 12, 4))
        why = "reserved bytes are not zero";
    if (why)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "cannot register remote region '%s': the descriptor (%zu bytes) "
                            "is not one: %s", name, size, why);
    size_t worker = get32(p + 4), rkey = get32(p + 8);
    uint64_t address = get64(p + 16), length = get64(p + 24);
    if (!blob_size_ok(worker) || !blob_size_ok(rkey))
        why = "a worker address or key size outside 1..8192";
    else if (size != SHMREG_REMOTE_DESCRIPTOR_HEADER + worker + rkey)
        why = "its size is not the header plus the worker address plus the key";
    else if (length == 0)
        why = "the exported range is empty";
    else if (address > UINT64_MAX - length)
        why = "the exported range runs past 2^64";
    if (why)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "cannot register remote region '%s': the descriptor (%zu bytes) "
                            "is not one: %s", name, size, why);
    *out = (struct shmreg__remote_descriptor){
        .address = address,
        .length = length,
        .worker_address = p + SHMREG_REMOTE_DESCRIPTOR_HEADER,
        .worker_address_size = worker,
        .rkey = p + SHMREG_REMOTE_DESCRIPTOR_HEADER + worker,
        .rkey_size = rkey,
    };
    return SHMREG_OK;
}
