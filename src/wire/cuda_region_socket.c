/* The CUDA-region wire format, both halves (the format is in shmreg.h):
 * the client's encoding of a request and its wait for the answer, used by
 * shmreg_send_cuda_region once the CUDA backend has found what holds the
 * memory, and the server's receiving and checking of it. The round trip is
 * tested in tests/fd_passing/test_cuda_region_socket.c.
 *
 * Descriptors and bytes travel in one frame of fd_passing.c, so a request
 * is whole or refused, never half taken. */
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "base/err.h"
#include "base/names.h"
#include "shmreg/shmreg.h"
#include "wire/cuda_region_socket.h"
#include "wire/fd_passing.h"
#include "wire/region_socket.h"

#define UUID_LEN 40
#define HANDLE_LEN 64
#define REQUEST_MAX (SHMREG_CUDA_REGION_REQUEST_HEADER + 8 * SHMREG_CUDA_CHUNKS_MAX + SHMREG_NAME_MAX)

_Static_assert(REQUEST_MAX <= SHMREG_FD_PAYLOAD_MAX, "a request fits one frame");

/* The descriptors a request of this source and chunk count carries. */
static size_t fds_of(uint32_t source, uint32_t chunks)
{
    return source == SHMREG_SOURCE_CUDA_VMM_RANGE ? chunks : source == SHMREG_SOURCE_CUDA_POOL ? 1 : 0;
}

/* The body after the header: the handle's bytes, or the chunks' sizes. */
static size_t body_of(uint32_t source, uint32_t chunks)
{
    return source == SHMREG_SOURCE_CUDA_VMM_RANGE ? 8 * (size_t)chunks : HANDLE_LEN;
}

static void put32(unsigned char *p, uint32_t v)
{
    memcpy(p, &v, 4);
}

static void put64(unsigned char *p, uint64_t v)
{
    memcpy(p, &v, 8);
}

/* --------------------------------------------------------- client half */

shmreg_err shmreg__send_cuda_request(int sock, const shmreg_cuda_region_request *q)
{
    unsigned char p[REQUEST_MAX];
    size_t name_len = strlen(q->name);
    uint32_t chunks = q->source == SHMREG_SOURCE_CUDA_VMM_RANGE ? (uint32_t)q->fd_count : 0;
    put32(p, SHMREG_CUDA_REGION_REQUEST_MAGIC);
    put32(p + 4, q->flags);
    put32(p + 8, (uint32_t)q->source);
    put32(p + 12, chunks);
    put64(p + 16, q->offset);
    put64(p + 24, q->byte_size);
    memset(p + 32, 0, UUID_LEN);
    memcpy(p + 32, q->device_uuid, strnlen(q->device_uuid, UUID_LEN));
    put32(p + 72, (uint32_t)name_len);
    put32(p + 76, 0);
    size_t at = SHMREG_CUDA_REGION_REQUEST_HEADER;
    if (q->source == SHMREG_SOURCE_CUDA_VMM_RANGE) {
        for (size_t i = 0; i < chunks; i++, at += 8)
            put64(p + at, q->chunk_sizes[i]);
    } else {
        memcpy(p + at, q->handle, HANDLE_LEN);
        at += HANDLE_LEN;
    }
    memcpy(p + at, q->name, name_len);
    shmreg_err err = shmreg__send_fds_frame(sock, q->fds, q->fd_count, p, at + name_len, "shmreg_send_cuda_region");
    if (err != SHMREG_OK)
        return err;
    return shmreg__read_answer(sock, q->name, "shmreg_send_cuda_region");
}

/* --------------------------------------------------------- server half */

static shmreg_err refuse(const char *why)
{
    return shmreg__fail(SHMREG_ERR_INVALID_ARG, "not a CUDA register request: %s (see shmreg.h)", why);
}

/* The payload p[0, len) that came with fd_count descriptors, as a request. */
static shmreg_err parse_request(const unsigned char *p, size_t len, size_t fd_count, shmreg_cuda_region_request *out)
{
    if (len < SHMREG_CUDA_REGION_REQUEST_HEADER)
        return refuse("shorter than its header");
    uint32_t magic, flags, source, chunks, name_len, zero;
    uint64_t offset, byte_size;
    memcpy(&magic, p, 4);
    memcpy(&flags, p + 4, 4);
    memcpy(&source, p + 8, 4);
    memcpy(&chunks, p + 12, 4);
    memcpy(&offset, p + 16, 8);
    memcpy(&byte_size, p + 24, 8);
    memcpy(&name_len, p + 72, 4);
    memcpy(&zero, p + 76, 4);
    if (magic != SHMREG_CUDA_REGION_REQUEST_MAGIC || zero != 0)
        return refuse("its magic or its zero field");
    if (flags & ~(uint32_t)SHMREG_READONLY)
        return refuse("flags other than SHMREG_READONLY");
    if (source != SHMREG_SOURCE_CUDA_IPC && source != SHMREG_SOURCE_CUDA_VMM_RANGE && source != SHMREG_SOURCE_CUDA_POOL)
        return refuse("a source that is not CUDA IPC, a VMM range or a pool");
    if ((source == SHMREG_SOURCE_CUDA_VMM_RANGE) != (chunks != 0) || chunks > SHMREG_CUDA_CHUNKS_MAX)
        return refuse("a chunk count that does not fit its source");
    if (fd_count != fds_of(source, chunks))
        return shmreg__fail(fd_count < fds_of(source, chunks) ? SHMREG_ERR_NOT_FOUND : SHMREG_ERR_OUT_OF_BOUNDS,
                            "a CUDA register request of this kind carries %zu descriptors, this one %zu",
                            fds_of(source, chunks), fd_count);
    if (name_len == 0 || name_len > SHMREG_NAME_MAX ||
        len != SHMREG_CUDA_REGION_REQUEST_HEADER + body_of(source, chunks) + name_len)
        return refuse("a name length or a size that does not match the payload");
    const unsigned char *body = p + SHMREG_CUDA_REGION_REQUEST_HEADER, *name = body + body_of(source, chunks);
    if (memchr(name, 0, name_len) || memchr(p + 32, 0, UUID_LEN))
        return refuse("a NUL inside the name or the UUID");
    memcpy(out->name, name, name_len);
    out->name[name_len] = 0;
    shmreg_err err = shmreg__check_name(out->name);
    if (err != SHMREG_OK)
        return err;
    memcpy(out->device_uuid, p + 32, UUID_LEN);
    out->device_uuid[UUID_LEN] = 0;
    out->source = (shmreg_source)source;
    out->flags = flags;
    out->offset = (size_t)offset; /* size_t is 64 bits on every ABI built (LP64) */
    out->byte_size = (size_t)byte_size;
    if (source == SHMREG_SOURCE_CUDA_VMM_RANGE) {
        for (uint32_t i = 0; i < chunks; i++) {
            uint64_t size;
            memcpy(&size, body + 8 * (size_t)i, 8);
            out->chunk_sizes[i] = (size_t)size;
        }
    } else {
        memcpy(out->handle, body, HANDLE_LEN);
    }
    return SHMREG_OK;
}

SHMREG_API shmreg_err shmreg_recv_cuda_region(int sock, shmreg_cuda_region_request *out)
{
    if (out)
        memset(out, 0, sizeof *out);
    if (sock < 0 || out == NULL)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "shmreg_recv_cuda_region: needs a socket (%d) and out%s", sock,
                            out ? "" : " (NULL)");
    unsigned char payload[REQUEST_MAX];
    size_t len = 0, count = 0;
    shmreg_err err = shmreg__recv_fds_frame(sock, out->fds, SHMREG_CUDA_CHUNKS_MAX, &count, payload, sizeof payload,
                                            &len, true);
    if (err != SHMREG_OK) /* nothing the message carried is left open */
        return err;
    out->fd_count = count;
    if ((err = parse_request(payload, len, count, out)) != SHMREG_OK) {
        shmreg_cuda_region_request_close(out);
        return err;
    }
    /* Hand-off: the received descriptors are the caller's from here on. */
    return SHMREG_OK;
}

SHMREG_API void shmreg_cuda_region_registration(const shmreg_cuda_region_request *q, shmreg_registration *r)
{
    if (!q || !r)
        return;
    r->source = q->source;
    r->name = q->name;
    r->flags = q->flags;
    r->offset = q->offset;
    r->byte_size = q->byte_size;
    r->device_uuid = q->device_uuid[0] ? q->device_uuid : NULL;
    if (q->source == SHMREG_SOURCE_CUDA_VMM_RANGE) {
        r->fds = q->fds;
        r->chunk_sizes = q->chunk_sizes;
        r->chunk_count = q->fd_count;
    } else {
        r->raw_handle = q->handle;
        r->raw_handle_size = HANDLE_LEN;
        if (q->source == SHMREG_SOURCE_CUDA_POOL)
            r->fd = q->fd_count ? q->fds[0] : -1;
    }
}

SHMREG_API void shmreg_cuda_region_request_close(shmreg_cuda_region_request *q)
{
    if (!q)
        return;
    for (size_t i = 0; i < q->fd_count && i < SHMREG_CUDA_CHUNKS_MAX; i++)
        close(q->fds[i]);
    q->fd_count = 0;
}
