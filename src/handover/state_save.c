/* Saving a registry's state: its regions, read in one pass under the
 * table's lock, written as a blob (state_blob.h) into a sealed memfd, with
 * a duplicate of every descriptor the blob refers to. Nothing here calls a
 * backend but through its `carried`, which makes no call (a CUDA region's
 * device, UUID, handle and descriptors were kept by its open): saving never
 * reaches CUDA. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/err.h"
#include "base/sys.h"
#include "core/region.h"
#include "core/registry.h"
#include "handover/state.h"
#include "handover/state_blob.h"

/* What a save has in hand: the blob so far and the descriptors it owns. */
struct saving {
    struct shmreg__state_writer w;
    int *fds;
    size_t nfds, cap, room; /* room: what the extra descriptors leave of the limit */
    shmreg_err err;
};

void shmreg__close_all(const int *fds, size_t n)
{
    /* A failing close has still released the descriptor (Linux). */
    for (size_t i = 0; fds && i < n; i++)
        if (fds[i] >= 0)
            (void)shmreg__sys.close(fds[i]);
}

/* The source whose backend r has: a region keeps its backend, and the
 * backend table is the one map between them. */
static bool source_of(const struct shmreg__backend *b, shmreg_source *out)
{
    for (int s = SHMREG_SOURCE_SHM; s <= SHMREG_SOURCE_CUDA_POOL; s++) {
        if (shmreg__backend_of((shmreg_source)s) == b) {
            *out = (shmreg_source)s;
            return true;
        }
    }
    return false;
}

/* A duplicate of the registry's descriptor fd for the caller, who will own
 * it; under the lock, so the region's mapping (and its descriptor) cannot
 * be closed meanwhile. */
static bool keep_fd(struct saving *s, int fd, const char *name)
{
    if (s->nfds == s->room) {
        s->err = shmreg__fail(SHMREG_ERR_NO_MEMORY, "cannot save the registry's state: more than %d descriptors",
                              SHMREG_HANDOVER_FDS_MAX);
        return false;
    }
    if (s->nfds == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        int *fds = shmreg__malloc(cap * sizeof *fds);
        if (!fds) {
            s->err = shmreg__fail(SHMREG_ERR_NO_MEMORY, "cannot save the registry's state: out of memory");
            return false;
        }
        if (s->nfds)
            memcpy(fds, s->fds, s->nfds * sizeof *fds);
        shmreg__free(s->fds);
        s->fds = fds;
        s->cap = cap;
    }
    int own = shmreg__sys.fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (own < 0) {
        s->err = shmreg__fail_errno(SHMREG_ERR_SYSTEM, errno,
                                    "cannot save the registry's state: duplicating the descriptor of region '%s'",
                                    name);
        return false;
    }
    s->fds[s->nfds++] = own;
    return true;
}

/* A CUDA region's device, by ordinal and UUID (parsed from the text its
 * open recorded: no CUDA call), its handle bytes and chunk sizes. */
static void cuda_fields(const struct shmreg__carried *c, struct shmreg__state_cuda *out)
{
    out->device_id = c->device_id;
    out->uuid_known = c->device_uuid && shmreg__cuda_parse_uuid(c->device_uuid, out->uuid, &out->mig) == 0;
    if (c->handle)
        memcpy(out->handle, c->handle, sizeof out->handle);
    out->chunks = c->fd_count;
    out->chunk_sizes = (const unsigned char *)c->chunk_sizes;
}

static void save_region_locked(struct saving *s, struct shmreg_region *r)
{
    const struct shmreg__backend *b = r->win.backend;
    struct shmreg__state_record rec = {
        .flags = r->flags, .fd_index = -1, .offset = r->offset, .byte_size = r->win.byte_size,
        .name = r->name, .tag = r->tag, .key = r->key,
    };
    if (!source_of(b, &rec.source))
        return;
    /* Zeroed: a backend fills only what its kind has. */
    struct shmreg__carried c;
    memset(&c, 0, sizeof c);
    if (b->carried)
        b->carried(&r->mapping->opened, &c);
    for (size_t i = 0; i < c.fd_count; i++)
        if (!keep_fd(s, c.fds[i], r->name))
            return;
    rec.object_known = c.object_known;
    rec.object = c.object;
    if (shmreg__state_is_cuda(rec.source))
        cuda_fields(&c, &rec.cuda);
    shmreg__state_write_record(&s->w, &rec);
}

/* Every region registered (not pending: those are unregistered already),
 * in one lock hold, so the state is one moment's. */
static void save_regions(shmreg_registry *reg, struct saving *s)
{
    struct shmreg__table *t = reg->table;
    struct cds_lfht_iter iter;
    struct shmreg__entry *e;
    shmreg__table_lock(t);
    shmreg__table_for_each(t, &iter, e) {
        struct shmreg_region *r = shmreg__region_of(e);
        if (shmreg__entry_alive(e) && !r->pending)
            save_region_locked(s, r);
        if (s->err != SHMREG_OK)
            break;
    }
    shmreg__table_unlock(t);
}

/* The blob into a new memfd, sealed against every change, so that the
 * reader can trust that what it checked is what it reads. */
static shmreg_err blob_memfd(const unsigned char *buf, size_t len, int *out)
{
    int fd = memfd_create("shmreg-state", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return shmreg__fail_errno(SHMREG_ERR_SYSTEM, errno, "cannot save the registry's state: memfd_create");
    size_t done = 0;
    while (done < len) {
        ssize_t n = write(fd, buf + done, len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int errnum = n < 0 ? errno : EIO;
            (void)shmreg__sys.close(fd);
            return shmreg__fail_errno(SHMREG_ERR_SYSTEM, errnum, "cannot save the registry's state: writing the "
                                                                 "state blob");
        }
        done += (size_t)n;
    }
    int seals = F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
    if (shmreg__sys.fcntl(fd, F_ADD_SEALS, seals) != 0) {
        int errnum = errno;
        (void)shmreg__sys.close(fd);
        return shmreg__fail_errno(SHMREG_ERR_SYSTEM, errnum, "cannot save the registry's state: sealing the "
                                                             "state blob");
    }
    *out = fd;
    return SHMREG_OK;
}

shmreg_err shmreg__state_save(shmreg_registry *reg, const void *app, size_t app_len, const shmreg_handover_fd *extra,
                              size_t n_extra, int *blob_fd, int **fds, size_t *nfds)
{
    if (n_extra > SHMREG_HANDOVER_FDS_MAX)
        return shmreg__fail(SHMREG_ERR_NO_MEMORY, "cannot save the registry's state: %zu extra descriptors, more "
                                                  "than %d", n_extra, SHMREG_HANDOVER_FDS_MAX);
    struct saving s = {.room = SHMREG_HANDOVER_FDS_MAX - n_extra};
    shmreg__state_writer_init(&s.w);
    save_regions(reg, &s);
    shmreg_err err = s.err;
    if (err == SHMREG_OK)
        err = shmreg__state_write_finish(&s.w, extra, n_extra, app, app_len);
    if (err == SHMREG_OK)
        err = blob_memfd(s.w.buf, s.w.len, blob_fd);
    shmreg__state_writer_free(&s.w);
    if (err != SHMREG_OK) {
        shmreg__close_all(s.fds, s.nfds);
        shmreg__free(s.fds);
        return err;
    }
    *fds = s.fds;
    *nfds = s.nfds;
    return SHMREG_OK;
}

shmreg_err shmreg_state_save(shmreg_registry *reg, const void *app_state, size_t app_len, int *blob_fd, int **fds,
                             size_t *nfds)
{
    if (blob_fd)
        *blob_fd = -1;
    if (fds)
        *fds = NULL;
    if (nfds)
        *nfds = 0;
    if (!reg || !blob_fd || !fds || !nfds || (!app_state && app_len > 0))
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "state_save: %s is NULL",
                            !reg ? "registry" : !blob_fd ? "blob_fd" : !fds ? "fds" : !nfds ? "nfds" : "app_state");
    return shmreg__state_save(reg, app_state, app_len, NULL, 0, blob_fd, fds, nfds);
}
