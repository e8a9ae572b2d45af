/* The state blob's two halves: the writer and the reader (state_blob.h has
 * the format). The reader treats the blob as untrusted: every length and
 * index is checked against what is left before it is used, and a blob
 * refused leaves nothing allocated. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "base/err.h"
#include "base/names.h"
#include "base/sys.h"
#include "handover/state_blob.h"

static const char magic[8] = {'S', 'H', 'M', 'R', 'E', 'G', 'S', 'T'};

struct header {
    char magic[8];
    uint32_t version, header_size;
    uint64_t body_size;
    uint32_t records, region_fds, extras, zero;
    uint64_t app_len, checksum, zero2;
};

struct record_head {
    uint32_t size, source, flags;
    int32_t fd_index;
    uint64_t offset, byte_size, device, inode;
    uint16_t name_len, tag_len, key_len, bits;
};

/* A CUDA record's part after its strings (state_blob.h). */
struct cuda_part {
    int32_t device_id;
    uint32_t chunks, bits, zero;
    unsigned char uuid[16];
    unsigned char handle[SHMREG__STATE_HANDLE];
};

_Static_assert(sizeof(struct header) == 64, "the blob's header is 64 bytes");
_Static_assert(sizeof(struct record_head) == 56, "a record's head is 56 bytes");
_Static_assert(sizeof(struct cuda_part) == 96, "a CUDA record's part is 96 bytes");

#define EXTRA_NAME sizeof(((shmreg_handover_fd *)0)->name)
#define OBJECT_KNOWN 1u
#define UUID_KNOWN 1u
#define UUID_MIG 2u
#define SOURCE_LAST SHMREG_SOURCE_CUDA_POOL

bool shmreg__state_is_cuda(shmreg_source source)
{
    return source == SHMREG_SOURCE_CUDA_IPC || source == SHMREG_SOURCE_CUDA_FD ||
           source == SHMREG_SOURCE_CUDA_VMM_RANGE || source == SHMREG_SOURCE_CUDA_POOL;
}

size_t shmreg__state_record_fds(const struct shmreg__state_record *rec)
{
    if (rec->source == SHMREG_SOURCE_FD)
        return 1;
    return shmreg__state_is_cuda(rec->source) ? rec->cuda.chunks : 0;
}

uint64_t shmreg__state_chunk_size(const struct shmreg__state_record *rec, size_t i)
{
    uint64_t size;
    memcpy(&size, rec->cuda.chunk_sizes + i * sizeof size, sizeof size);
    return size;
}

/* The bytes of the CUDA part and chunk sizes a record of `source` with
 * `chunks` descriptors has after its strings (chunks is at most
 * SHMREG_CUDA_CHUNKS_MAX: no overflow). */
static size_t cuda_room(shmreg_source source, size_t chunks)
{
    if (!shmreg__state_is_cuda(source))
        return 0;
    return sizeof(struct cuda_part) + (source == SHMREG_SOURCE_CUDA_VMM_RANGE ? chunks * sizeof(uint64_t) : 0);
}

/* ------------------------------------------------------------- writing */

void shmreg__state_writer_init(struct shmreg__state_writer *w)
{
    static const struct header room;
    memset(w, 0, sizeof *w);
    /* The header's room, filled by finish once the counts are known. */
    shmreg__state_writer_put(w, &room, sizeof room);
}

void shmreg__state_writer_free(struct shmreg__state_writer *w)
{
    shmreg__free(w->buf);
    memset(w, 0, sizeof *w);
}

/* No realloc in the system seam (sys.h): grow by a new allocation. */
static bool grow(struct shmreg__state_writer *w, size_t need)
{
    size_t cap = w->cap ? w->cap : 4096;
    while (cap < need)
        cap *= 2;
    unsigned char *b = shmreg__malloc(cap);
    if (!b)
        return false;
    if (w->len)
        memcpy(b, w->buf, w->len);
    shmreg__free(w->buf);
    w->buf = b;
    w->cap = cap;
    return true;
}

void shmreg__state_writer_put(struct shmreg__state_writer *w, const void *p, size_t n)
{
    /* n 0 comes with p NULL (no tag, no app_state): memcpy wants neither. */
    if (w->failed || n == 0)
        return;
    if (n > SHMREG_STATE_BLOB_MAX - w->len || (w->len + n > w->cap && !grow(w, w->len + n))) {
        w->failed = true;
        return;
    }
    memcpy(w->buf + w->len, p, n);
    w->len += n;
}

static size_t string_room(const char *s)
{
    return s ? strlen(s) + 1 : 0;
}

static void write_cuda_part(struct shmreg__state_writer *w, const struct shmreg__state_record *rec)
{
    const struct shmreg__state_cuda *c = &rec->cuda;
    struct cuda_part p = {
        .device_id = c->device_id,
        .chunks = (uint32_t)c->chunks,
        .bits = (c->uuid_known ? UUID_KNOWN : 0) | (c->uuid_known && c->mig ? UUID_MIG : 0),
    };
    if (c->uuid_known)
        memcpy(p.uuid, c->uuid, sizeof p.uuid);
    memcpy(p.handle, c->handle, sizeof p.handle);
    shmreg__state_writer_put(w, &p, sizeof p);
    if (rec->source == SHMREG_SOURCE_CUDA_VMM_RANGE)
        shmreg__state_writer_put(w, c->chunk_sizes, c->chunks * sizeof(uint64_t));
}

void shmreg__state_write_record(struct shmreg__state_writer *w, const struct shmreg__state_record *rec)
{
    size_t name = string_room(rec->name), tag = string_room(rec->tag), key = string_room(rec->key);
    size_t fds = shmreg__state_record_fds(rec);
    if (name > UINT16_MAX || tag > UINT16_MAX || key > UINT16_MAX || fds > SHMREG_CUDA_CHUNKS_MAX ||
        w->region_fds + fds > SHMREG_HANDOVER_FDS_MAX) {
        w->failed = true;
        return;
    }
    struct record_head h = {
        .size = (uint32_t)(sizeof h + name + tag + key + cuda_room(rec->source, fds)),
        .source = (uint32_t)rec->source,
        .flags = rec->flags,
        .fd_index = fds ? (int32_t)w->region_fds : -1,
        .offset = rec->offset,
        .byte_size = rec->byte_size,
        .device = rec->object.device,
        .inode = rec->object.inode,
        .name_len = (uint16_t)(name ? name - 1 : 0),
        .tag_len = (uint16_t)(tag ? tag - 1 : 0),
        .key_len = (uint16_t)(key ? key - 1 : 0),
        .bits = rec->object_known ? OBJECT_KNOWN : 0,
    };
    shmreg__state_writer_put(w, &h, sizeof h);
    shmreg__state_writer_put(w, rec->name, name);
    shmreg__state_writer_put(w, rec->tag, tag);
    shmreg__state_writer_put(w, rec->key, key);
    if (shmreg__state_is_cuda(rec->source))
        write_cuda_part(w, rec);
    w->region_fds += (uint32_t)fds;
    w->records++;
}

shmreg_err shmreg__state_write_finish(struct shmreg__state_writer *w, const shmreg_handover_fd *extra,
                                      size_t n_extra, const void *app, size_t app_len)
{
    for (size_t i = 0; i < n_extra; i++)
        shmreg__state_writer_put(w, extra[i].name, EXTRA_NAME);
    shmreg__state_writer_put(w, app, app_len);
    if (w->failed)
        return shmreg__fail(SHMREG_ERR_NO_MEMORY,
                            "cannot save the registry's state: out of memory, or past the %zu-byte limit of a "
                            "state blob", SHMREG_STATE_BLOB_MAX);
    struct header h = {
        .version = SHMREG_STATE_VERSION,
        .header_size = sizeof h,
        .body_size = w->len - sizeof h,
        .records = w->records,
        .region_fds = w->region_fds,
        .extras = (uint32_t)n_extra,
        .app_len = app_len,
    };
    memcpy(h.magic, magic, sizeof magic);
    memcpy(w->buf, &h, sizeof h);
    h.checksum = XXH3_64bits(w->buf, w->len);
    memcpy(w->buf, &h, sizeof h);
    return SHMREG_OK;
}

/* ------------------------------------------------------------- reading */

static shmreg_err malformed(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static shmreg_err malformed(const char *fmt, ...)
{
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return shmreg__fail(SHMREG_ERR_INVALID_ARG, "cannot restore the registry's state: the state blob %s", why);
}

/* The rest of the blob still to read. */
struct cursor {
    const unsigned char *p;
    size_t left;
};

static bool take(struct cursor *c, void *dst, size_t n)
{
    if (n > c->left)
        return false;
    if (dst)
        memcpy(dst, c->p, n);
    c->p += n;
    c->left -= n;
    return true;
}

/* A string of len bytes and its NUL, or NULL for len 0. false when it runs
 * past the blob or is not exactly len bytes long. */
static bool take_string(struct cursor *c, size_t len, const char **out)
{
    *out = NULL;
    if (len == 0)
        return true;
    const char *s = (const char *)c->p;
    if (!take(c, NULL, len + 1))
        return false;
    *out = s;
    return s[len] == '\0' && memchr(s, '\0', len) == NULL;
}

/* The CUDA part of record `i`, after its strings: the descriptor count
 * its source has, the bits, and a VMM range's chunk sizes (none 0, their
 * sum within size_t, as registration adds them). */
static shmreg_err read_cuda_part(struct cursor *c, shmreg_source source, size_t i, struct shmreg__state_cuda *out)
{
    struct cuda_part p;
    if (!take(c, &p, sizeof p))
        return malformed("is cut short in the CUDA part of record %zu", i);
    bool range = source == SHMREG_SOURCE_CUDA_VMM_RANGE;
    size_t want = source == SHMREG_SOURCE_CUDA_IPC ? 0 : 1;
    if (range ? p.chunks == 0 || p.chunks > SHMREG_CUDA_CHUNKS_MAX : p.chunks != want)
        return malformed("has CUDA record %zu of source %d with %u descriptors", i, (int)source, p.chunks);
    if (p.device_id < 0 || (p.bits & ~(UUID_KNOWN | UUID_MIG)) || p.bits == UUID_MIG || p.zero != 0)
        return malformed("has CUDA record %zu with device %d, bits 0x%x or a field not zero", i, (int)p.device_id,
                         p.bits);
    *out = (struct shmreg__state_cuda){.device_id = p.device_id, .uuid_known = p.bits & UUID_KNOWN,
                                       .mig = p.bits & UUID_MIG, .chunks = p.chunks};
    memcpy(out->uuid, p.uuid, sizeof out->uuid);
    memcpy(out->handle, p.handle, sizeof out->handle);
    if (!range)
        return SHMREG_OK;
    out->chunk_sizes = c->p;
    if (!take(c, NULL, p.chunks * sizeof(uint64_t)))
        return malformed("is cut short in the chunk sizes of record %zu", i);
    uint64_t total = 0;
    for (size_t k = 0; k < p.chunks; k++) {
        uint64_t size;
        memcpy(&size, out->chunk_sizes + k * sizeof size, sizeof size);
        if (size == 0 || size > SIZE_MAX - total)
            return malformed("has VMM range record %zu whose chunk %zu is of size %llu: zero, or past what the "
                             "chunks before it leave of size_t", i, k, (unsigned long long)size);
        total += size;
    }
    return SHMREG_OK;
}

/* Record `i`'s fields after its parts: its descriptor index against the
 * next expected one, the strings' own rules. */
static shmreg_err check_record(const struct record_head *h, size_t i, size_t *next_fd,
                               struct shmreg__state_record *rec)
{
    rec->source = (shmreg_source)h->source;
    size_t fds = shmreg__state_record_fds(rec);
    if (fds ? h->fd_index < 0 || (size_t)h->fd_index != *next_fd : h->fd_index != -1)
        return malformed("has record %zu with descriptor index %d where %ld was due", i, (int)h->fd_index,
                         fds ? (long)*next_fd : -1L);
    *next_fd += fds;
    if (shmreg__check_name(rec->name) != SHMREG_OK || shmreg__check_tag(rec->tag) != SHMREG_OK)
        return malformed("has record %zu with a name or tag registration refuses (%s)", i, shmreg_last_error());
    rec->flags = h->flags;
    rec->fd_index = h->fd_index;
    rec->offset = h->offset;
    rec->byte_size = h->byte_size;
    rec->object_known = h->bits & OBJECT_KNOWN;
    rec->object = (struct shmreg__object_id){h->device, h->inode};
    return SHMREG_OK;
}

/* A record: its head, its strings, a CUDA source's part, all within the
 * blob, and its size exactly what they took. */
static shmreg_err read_record(struct cursor *c, size_t i, size_t *next_fd, struct shmreg__state_record *rec)
{
    struct record_head h;
    size_t left = c->left;
    if (!take(c, &h, sizeof h))
        return malformed("is cut short in record %zu", i);
    if (h.source > SOURCE_LAST || (h.bits & ~OBJECT_KNOWN) || h.name_len == 0)
        return malformed("has record %zu of unknown source %u or bits 0x%x, or without a name", i, h.source,
                         h.bits);
    if (!take_string(c, h.name_len, &rec->name) || !take_string(c, h.tag_len, &rec->tag) ||
        !take_string(c, h.key_len, &rec->key))
        return malformed("has record %zu with a string cut short or without its NUL", i);
    shmreg_err err = SHMREG_OK;
    if (shmreg__state_is_cuda((shmreg_source)h.source))
        err = read_cuda_part(c, (shmreg_source)h.source, i, &rec->cuda);
    if (err != SHMREG_OK)
        return err;
    if (h.size != left - c->left)
        return malformed("has record %zu of size %u, not the %zu its parts take", i, h.size, left - c->left);
    return check_record(&h, i, next_fd, rec);
}

/* The header: magic first (is it a state at all), then the version (a
 * newer one is refused, never guessed at), then every count against the
 * blob's size, then the checksum. */
static shmreg_err read_header(const unsigned char *buf, size_t len, struct header *h)
{
    if (len < sizeof *h)
        return malformed("is %zu bytes, shorter than its %zu-byte header", len, sizeof *h);
    memcpy(h, buf, sizeof *h);
    if (memcmp(h->magic, magic, sizeof magic) != 0)
        return malformed("does not start with a state blob's magic");
    if (h->version != SHMREG_STATE_VERSION)
        return shmreg__fail(SHMREG_ERR_UNSUPPORTED,
                            "cannot restore the registry's state: the state blob is version %u, and this library "
                            "(libshmreg %s) reads version %d only",
                            (unsigned)h->version, SHMREG_VERSION_STRING, SHMREG_STATE_VERSION);
    if (h->header_size != sizeof *h || h->zero != 0 || h->zero2 != 0)
        return malformed("has a header of another layout");
    if (h->body_size != len - sizeof *h)
        return malformed("is truncated or extended: its header says %llu body bytes, it holds %zu",
                         (unsigned long long)h->body_size, len - sizeof *h);
    struct header zeroed = *h;
    zeroed.checksum = 0;
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    XXH3_64bits_update(&st, &zeroed, sizeof zeroed);
    XXH3_64bits_update(&st, buf + sizeof zeroed, len - sizeof zeroed);
    if (XXH3_64bits_digest(&st) != h->checksum)
        return malformed("fails its checksum: it was altered or damaged");
    return SHMREG_OK;
}

/* The extra descriptors' names (each NUL-terminated and not empty in its
 * slot) and the app_state, which must end the blob exactly. */
static shmreg_err read_tail(struct cursor *c, const struct header *h, struct shmreg__state *s)
{
    s->extra_names = (const char *)c->p;
    for (size_t i = 0; i < h->extras; i++) {
        const char *name = (const char *)c->p;
        if (!take(c, NULL, EXTRA_NAME))
            return malformed("is cut short in the name of extra descriptor %zu", i);
        if (name[0] == '\0' || memchr(name, '\0', EXTRA_NAME) == NULL)
            return malformed("has extra descriptor %zu with an empty name or one without its NUL", i);
    }
    if (h->app_len != c->left)
        return malformed("holds %zu bytes of app_state where its header says %llu", c->left,
                         (unsigned long long)h->app_len);
    s->app = c->p;
    s->app_len = c->left;
    s->extra_count = h->extras;
    return SHMREG_OK;
}

static shmreg_err parse(struct shmreg__state *s, size_t len)
{
    struct header h = {.version = 0};
    shmreg_err err = read_header(s->buf, len, &h);
    if (err != SHMREG_OK)
        return err;
    struct cursor c = {s->buf + sizeof h, len - sizeof h};
    /* A record takes at least its head and a name: a count that cannot fit
     * is refused before anything is allocated for it. */
    if (h.records > c.left / (sizeof(struct record_head) + 2) ||
        (size_t)h.region_fds + h.extras > SHMREG_HANDOVER_FDS_MAX)
        return malformed("counts %u records and %u descriptors (and %u extra), more than its %zu bytes or a "
                         "handover hold", h.records, h.region_fds, h.extras, c.left);
    if (h.records && !(s->records = shmreg__calloc(h.records, sizeof *s->records)))
        return shmreg__fail(SHMREG_ERR_NO_MEMORY, "cannot restore the registry's state: out of memory");
    size_t next_fd = 0;
    for (size_t i = 0; i < h.records && err == SHMREG_OK; i++)
        err = read_record(&c, i, &next_fd, &s->records[i]);
    if (err == SHMREG_OK && next_fd != h.region_fds)
        err = malformed("refers to %zu region descriptors where its header says %u", next_fd, h.region_fds);
    if (err == SHMREG_OK)
        err = read_tail(&c, &h, s);
    s->record_count = h.records;
    s->region_fds = h.region_fds;
    return err;
}

/* The blob's descriptor: a regular file within the size limit, sealed so
 * that its writer can change nothing while (or after) it is read. */
static shmreg_err check_blob_fd(int fd, size_t *len)
{
    struct stat st;
    if (shmreg__sys.fstat(fd, &st) != 0)
        return shmreg__fail_errno(SHMREG_ERR_SYSTEM, errno, "cannot restore the registry's state: fstat of the "
                                                            "state blob's descriptor %d", fd);
    if (!S_ISREG(st.st_mode))
        return malformed("descriptor %d is not a memfd (not a regular file)", fd);
    if (st.st_size < 0 || (uint64_t)st.st_size > SHMREG_STATE_BLOB_MAX)
        return malformed("is %lld bytes, past the limit of %zu", (long long)st.st_size, SHMREG_STATE_BLOB_MAX);
    int seals = shmreg__sys.fcntl(fd, F_GET_SEALS, 0);
    int want = F_SEAL_WRITE | F_SEAL_SHRINK;
    if (seals < 0 || (seals & want) != want)
        return malformed("descriptor %d is not sealed against writing and shrinking (F_SEAL_WRITE, "
                         "F_SEAL_SHRINK): not what shmreg_state_save makes", fd);
    *len = (size_t)st.st_size;
    return SHMREG_OK;
}

static shmreg_err read_all(int fd, unsigned char *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread(fd, buf + got, len - got, (off_t)got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return shmreg__fail_errno(SHMREG_ERR_SYSTEM, errno,
                                      "cannot restore the registry's state: reading the state blob");
        if (n == 0)
            return malformed("ended after %zu of its %zu bytes", got, len);
        got += (size_t)n;
    }
    return SHMREG_OK;
}

shmreg_err shmreg__state_read(int fd, struct shmreg__state *out)
{
    memset(out, 0, sizeof *out);
    size_t len = 0;
    shmreg_err err = check_blob_fd(fd, &len);
    if (err != SHMREG_OK)
        return err;
    if (!(out->buf = shmreg__malloc(len ? len : 1)))
        return shmreg__fail(SHMREG_ERR_NO_MEMORY, "cannot restore the registry's state: out of memory");
    out->len = len;
    if ((err = read_all(fd, out->buf, len)) == SHMREG_OK)
        err = parse(out, len);
    if (err != SHMREG_OK)
        shmreg__state_free(out);
    return err;
}

void shmreg__state_free(struct shmreg__state *s)
{
    shmreg__free(s->records);
    shmreg__free(s->buf);
    memset(s, 0, sizeof *s);
}
