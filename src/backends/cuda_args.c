/* The CUDA sources' own arguments, checked in every build: a bad handle,
 * descriptor, chunk list, window or UUID is INVALID_ARG (or OUT_OF_BOUNDS)
 * whether or not this library or process can use CUDA, so callers see one
 * behaviour. The backends' prepare (backends/cuda_*.c, or
 * backends/cuda_stub.c) call these. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "backends/backend.h"
#include "base/err.h"

/* The size of a cudaIpcMemHandle_t; backends/cuda_ipc.c checks it against
 * CUDA's own header, and backends/cuda_pool.c SHMREG_CUDA_POOL_EXPORT_SIZE. */
#define SHMREG_CUDA_IPC_HANDLE_SIZE 64

int shmreg__cuda_parse_uuid(const char *text, unsigned char bytes[16], bool *mig)
{
    if (strncmp(text, "GPU-", 4) != 0 && strncmp(text, "MIG-", 4) != 0)
        return -1;
    *mig = text[0] == 'M';
    /* 8-4-4-4-12 hex digits: dashes at these offsets after the prefix. */
    const char *p = text + 4;
    size_t nibbles = 0;
    for (size_t i = 0; i < 36; i++, p++) {
        bool dash_here = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash_here != (*p == '-'))
            return -1;
        if (dash_here)
            continue;
        int v = *p >= '0' && *p <= '9' ? *p - '0'
                : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10
                : *p >= 'A' && *p <= 'F' ? *p - 'A' + 10
                                         : -1;
        if (v < 0)
            return -1;
        if (nibbles % 2 == 0)
            bytes[nibbles / 2] = (unsigned char)(v << 4);
        else
            bytes[nibbles / 2] |= (unsigned char)v;
        nibbles++;
    }
    return *p == '\0' ? 0 : -1;
}

void shmreg__cuda_format_uuid(const unsigned char b[16], bool mig, char out[SHMREG__CUDA_UUID_TEXT])
{
    snprintf(out, SHMREG__CUDA_UUID_TEXT,
             "%s-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", mig ? "MIG" : "GPU", b[0],
             b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

/* What every CUDA source shares: a UUID that is one, and a window whose end
 * does not overflow (its end against the allocation is the source's). */
static shmreg_err check_common(const shmreg_registration *r, const char *what)
{
    unsigned char bytes[16];
    bool mig;
    if (r->device_uuid != NULL && shmreg__cuda_parse_uuid(r->device_uuid, bytes, &mig) != 0)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG,
                            "failed to register %s region '%s': device_uuid '%.60s' is not a GPU's UUID "
                            "('GPU-' or 'MIG-' and 8-4-4-4-12 hex digits, as nvidia-smi -L prints it)",
                            what, r->name, r->device_uuid);
    if (r->offset > SIZE_MAX - r->byte_size)
        return shmreg__fail(SHMREG_ERR_OUT_OF_BOUNDS,
                            "failed to register %s region '%s': invalid args (offset %zu + byte_size %zu overflows)",
                            what, r->name, r->offset, r->byte_size);
    return SHMREG_OK;
}

shmreg_err shmreg__cuda_ipc_prepare(struct shmreg__open_args *a)
{
    const shmreg_registration *r = a->r;
    if (r->raw_handle == NULL || r->raw_handle_size != SHMREG_CUDA_IPC_HANDLE_SIZE)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG,
                            "failed to register CUDA IPC region '%s': a CUDA IPC handle is %d bytes, got %zu%s",
                            r->name, SHMREG_CUDA_IPC_HANDLE_SIZE, r->raw_handle_size,
                            r->raw_handle == NULL ? " at NULL" : "");
    return check_common(r, "CUDA IPC");
}

shmreg_err shmreg__cuda_fd_prepare(struct shmreg__open_args *a)
{
    if (a->r->fd < 0)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG,
                            "failed to register CUDA VMM region '%s': descriptor %d is negative", a->r->name,
                            a->r->fd);
    return check_common(a->r, "CUDA VMM");
}

shmreg_err shmreg__cuda_vmm_range_prepare(struct shmreg__open_args *a)
{
    const shmreg_registration *r = a->r;
    if (r->fds == NULL || r->chunk_sizes == NULL || r->chunk_count == 0 || r->chunk_count > SHMREG_CUDA_CHUNKS_MAX)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG,
                            "failed to register CUDA VMM range '%s': needs fds and chunk_sizes for 1..%d chunks, "
                            "got %zu%s%s",
                            r->name, SHMREG_CUDA_CHUNKS_MAX, r->chunk_count, r->fds == NULL ? ", fds NULL" : "",
                            r->chunk_sizes == NULL ? ", chunk_sizes NULL" : "");
    size_t total = 0;
    for (size_t i = 0; i < r->chunk_count; i++) {
        if (r->fds[i] < 0 || r->chunk_sizes[i] == 0)
            return shmreg__fail(SHMREG_ERR_INVALID_ARG,
                                "failed to register CUDA VMM range '%s': chunk %zu has descriptor %d and size %zu "
                                "(a descriptor >= 0 and a size > 0 are needed)",
                                r->name, i, r->fds[i], r->chunk_sizes[i]);
        if (r->chunk_sizes[i] > SIZE_MAX - total)
            return shmreg__fail(SHMREG_ERR_OUT_OF_BOUNDS,
                                "failed to register CUDA VMM range '%s': invalid args (the chunks' sizes overflow "
                                "at chunk %zu)", r->name, i);
        total += r->chunk_sizes[i];
    }
    shmreg_err err = check_common(r, "CUDA VMM range");
    if (err == SHMREG_OK && (r->offset > total || r->byte_size > total - r->offset))
        err = shmreg__fail(SHMREG_ERR_OUT_OF_BOUNDS,
                           "failed to register CUDA VMM range '%s': invalid args (window [%zu, +%zu) is past the "
                           "%zu bytes of its %zu chunks)",
                           r->name, r->offset, r->byte_size, total, r->chunk_count);
    return err;
}

shmreg_err shmreg__cuda_pool_prepare(struct shmreg__open_args *a)
{
    const shmreg_registration *r = a->r;
    if (r->fd < 0 || r->raw_handle == NULL || r->raw_handle_size != SHMREG_CUDA_POOL_EXPORT_SIZE)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG,
                            "failed to register CUDA pool region '%s': needs the pool's descriptor (got %d) and the "
                            "allocation's %d bytes of export data (got %zu%s)",
                            r->name, r->fd, SHMREG_CUDA_POOL_EXPORT_SIZE, r->raw_handle_size,
                            r->raw_handle == NULL ? " at NULL" : "");
    return check_common(r, "CUDA pool");
}

shmreg_err shmreg__cuda_send_args(int sock, const char *name, const void *ptr, size_t byte_size, unsigned flags)
{
    size_t name_len = name ? strnlen(name, 256) : 0;
    if (sock < 0 || ptr == NULL || byte_size == 0 || name_len == 0 || name_len > 255 || (flags & ~SHMREG_READONLY))
        return shmreg__fail(SHMREG_ERR_INVALID_ARG,
                            "shmreg_send_cuda_region: needs a socket (%d), a device pointer%s, byte_size > 0 (%zu), "
                            "a name of 1..255 bytes and flags SHMREG_READONLY or 0 (0x%x)",
                            sock, ptr == NULL ? " (NULL)" : "", byte_size, flags);
    return SHMREG_OK;
}
