/* Restoring a registry's state: the blob checked whole (state_blob.c) and
 * the descriptors against it before anything is registered, then each
 * region registered again through registration's own checks, failing
 * alone. Every descriptor given is closed on every path, but those handed
 * on as the application's own. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "base/err.h"
#include "base/sys.h"
#include "core/registry.h"
#include "handover/state.h"
#include "handover/state_blob.h"

static shmreg_err refuse_fd(size_t i, const char *why, const char *name)
{
    return shmreg__fail(SHMREG_ERR_INVALID_ARG,
                        "cannot restore the registry's state: descriptor %zu (of region '%s') %s; nothing was "
                        "restored",
                        i, name, why);
}

/* The descriptors against the blob: as many as it refers to, none
 * negative, and each descriptor region's a regular file (a memfd), so that
 * a wrong one is refused before any region is registered. A CUDA
 * descriptor is whatever the driver exported (no regular file): its
 * import checks it, for its region alone. */
static shmreg_err check_fds(const struct shmreg__state *s, const int *fds, size_t nfds)
{
    size_t want = s->region_fds + s->extra_count;
    if (nfds != want)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG,
                            "cannot restore the registry's state: %zu descriptors given, the state blob refers to "
                            "%zu (%zu of regions, %zu extra); nothing was restored",
                            nfds, want, s->region_fds, s->extra_count);
    for (size_t i = 0; i < nfds; i++)
        if (fds[i] < 0)
            return shmreg__fail(SHMREG_ERR_INVALID_ARG,
                                "cannot restore the registry's state: descriptor %zu is %d; nothing was restored", i,
                                fds[i]);
    for (size_t r = 0; r < s->record_count; r++) {
        const struct shmreg__state_record *rec = &s->records[r];
        if (rec->source != SHMREG_SOURCE_FD)
            continue;
        struct stat st;
        if (shmreg__sys.fstat(fds[rec->fd_index], &st) != 0)
            return shmreg__fail_errno(SHMREG_ERR_SYSTEM, errno,
                                      "cannot restore the registry's state: fstat of descriptor %ld (of region "
                                      "'%s')", rec->fd_index, rec->name);
        if (!S_ISREG(st.st_mode))
            return refuse_fd((size_t)rec->fd_index, "is not a memfd or regular file", rec->name);
    }
    return SHMREG_OK;
}

/* ------------------------------------------------------------ the report */

static shmreg_err report_new(const struct shmreg__state *s, shmreg_restore_report **out)
{
    shmreg_restore_report *rep = shmreg__calloc(1, sizeof *rep);
    if (rep && s->record_count)
        rep->entries = shmreg__calloc(s->record_count, sizeof *rep->entries);
    if (rep && s->app_len && (rep->app_state = shmreg__malloc(s->app_len)))
        memcpy(rep->app_state, s->app, s->app_len);
    if (!rep || (s->record_count && !rep->entries) || (s->app_len && !rep->app_state)) {
        shmreg_restore_report_free(rep);
        return shmreg__fail(SHMREG_ERR_NO_MEMORY, "cannot restore the registry's state: out of memory");
    }
    rep->app_len = s->app_len;
    *out = rep;
    return SHMREG_OK;
}

/* One region not restored, with its own copies of the strings (NULL only
 * when out of memory: the region's registration is done or refused by
 * then, and the count still says so). */
static void note(shmreg_restore_report *rep, const struct shmreg__state_record *rec, shmreg_err err, bool skipped)
{
    shmreg_restore_entry *e = &rep->entries[rep->entry_count++];
    e->name = shmreg__strdup(rec->name);
    e->tag = rec->tag ? shmreg__strdup(rec->tag) : NULL;
    e->message = shmreg__strdup(shmreg_last_error());
    e->err = err;
    e->skipped = skipped;
    if (skipped)
        rep->skipped++;
    else
        rep->failed++;
}

void shmreg_restore_report_free(shmreg_restore_report *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->entry_count; i++) {
        shmreg__free((char *)r->entries[i].name);
        shmreg__free((char *)r->entries[i].tag);
        shmreg__free((char *)r->entries[i].message);
    }
    shmreg__free(r->entries);
    shmreg__free(r->app_state);
    shmreg__free(r);
}

/* ----------------------------------------------------------- the regions */

/* Remote regions are not carried: their connections cannot be. */
static void not_carried(shmreg_restore_report *rep, const struct shmreg__state_record *rec)
{
    shmreg__fail(SHMREG_ERR_UNSUPPORTED,
                 "cannot restore remote region '%s': remote regions are not carried by a saved state (their "
                 "client's connection cannot be); the client registers it again",
                 rec->name);
    note(rep, rec, SHMREG_ERR_UNSUPPORTED, true);
}

/* Where a CUDA region goes: the device of the saved UUID, in this process's
 * numbering (which another CUDA_VISIBLE_DEVICES may change), so that it
 * lands on the GPU it was saved on or fails naming that GPU; by ordinal
 * only when the UUID was not known. */
struct cuda_target {
    char uuid[SHMREG__CUDA_UUID_TEXT];
    size_t sizes[SHMREG_CUDA_CHUNKS_MAX];
};

static void cuda_registration(const struct shmreg__state_record *rec, const int *fds, struct cuda_target *t,
                              shmreg_registration *r)
{
    const struct shmreg__state_cuda *c = &rec->cuda;
    r->device_id = c->device_id;
    if (c->uuid_known) {
        shmreg__cuda_format_uuid(c->uuid, c->mig, t->uuid);
        r->device_uuid = t->uuid;
    }
    if (rec->source == SHMREG_SOURCE_CUDA_IPC || rec->source == SHMREG_SOURCE_CUDA_POOL) {
        r->raw_handle = c->handle;
        r->raw_handle_size = sizeof c->handle;
    }
    if (rec->source == SHMREG_SOURCE_CUDA_VMM_RANGE) {
        for (size_t i = 0; i < c->chunks; i++)
            t->sizes[i] = (size_t)shmreg__state_chunk_size(rec, i); /* each within size_t: state_blob.c */
        r->fds = fds + rec->fd_index;
        r->chunk_sizes = t->sizes;
        r->chunk_count = c->chunks;
    }
}

/* A CUDA region that did not come back: its registration's message, with
 * the GPU it was saved on; for legacy IPC, what a refused handle most
 * often means after a restart. */
static shmreg_err cuda_failed(const struct shmreg__state_record *rec, const struct cuda_target *t, shmreg_err err)
{
    char why[2048];
    snprintf(why, sizeof why, "%s", shmreg_last_error());
    bool ipc = rec->source == SHMREG_SOURCE_CUDA_IPC && err == SHMREG_ERR_CUDA;
    return shmreg__fail(err, "cannot restore CUDA region '%s', saved on device %d (%s): %s%s", rec->name,
                        rec->cuda.device_id, rec->cuda.uuid_known ? t->uuid : "UUID unknown", why,
                        ipc ? "; a legacy CUDA IPC handle opens only while the process that exported it lives: "
                              "it may have exited since the save"
                            : "");
}

static void restore_one(shmreg_registry *reg, const struct shmreg__state_record *rec, const int *fds,
                        shmreg_restore_report *rep)
{
    if (rec->source == SHMREG_SOURCE_REMOTE) {
        not_carried(rep, rec);
        return;
    }
    shmreg_registration r;
    shmreg_registration_init(&r);
    r.source = rec->source;
    r.name = rec->name;
    r.tag = rec->tag;
    r.key = rec->key;
    r.offset = rec->offset;
    r.byte_size = rec->byte_size;
    r.flags = rec->flags;
    r.fd = rec->fd_index >= 0 ? fds[rec->fd_index] : -1;
    bool cuda = shmreg__state_is_cuda(rec->source);
    struct cuda_target t = {.uuid = ""};
    if (cuda)
        cuda_registration(rec, fds, &t, &r);
    shmreg_err err = shmreg__register_restoring(reg, &r, rec->object_known ? &rec->object : NULL);
    if (err != SHMREG_OK && cuda)
        (void)cuda_failed(rec, &t, err);
    if (err == SHMREG_OK)
        rep->restored++;
    else
        note(rep, rec, err, false);
}

/* The application's descriptors, after the regions' in fds, with their
 * names: the caller's from here on. */
static shmreg_err take_extras(const struct shmreg__state *s, const int *fds, shmreg_handover_fd **extra,
                              size_t *n_extra)
{
    *extra = NULL;
    *n_extra = 0;
    if (s->extra_count == 0)
        return SHMREG_OK;
    shmreg_handover_fd *x = shmreg__calloc(s->extra_count, sizeof *x);
    if (!x)
        return shmreg__fail(SHMREG_ERR_NO_MEMORY, "cannot restore the registry's state: out of memory");
    for (size_t i = 0; i < s->extra_count; i++) {
        memcpy(x[i].name, s->extra_names + i * sizeof x[i].name, sizeof x[i].name);
        x[i].fd = fds[s->region_fds + i];
    }
    *extra = x;
    *n_extra = s->extra_count;
    return SHMREG_OK;
}

/* Everything checked and allocated before the first registration, so a
 * refusal changes nothing. */
static shmreg_err prepare(int blob_fd, const int *fds, size_t nfds, struct shmreg__state *s,
                          shmreg_restore_report **rep, shmreg_handover_fd **extra, size_t *n_extra)
{
    shmreg_err err = shmreg__state_read(blob_fd, s);
    if (err == SHMREG_OK && (err = check_fds(s, fds, nfds)) == SHMREG_OK)
        err = report_new(s, rep);
    if (err == SHMREG_OK && extra && (err = take_extras(s, fds, extra, n_extra)) != SHMREG_OK) {
        shmreg_restore_report_free(*rep);
        *rep = NULL;
    }
    if (err != SHMREG_OK)
        shmreg__state_free(s);
    return err;
}

shmreg_err shmreg__state_restore(shmreg_registry *reg, int blob_fd, const int *fds, size_t nfds,
                                 shmreg_restore_report **out, shmreg_handover_fd **extra, size_t *n_extra)
{
    struct shmreg__state s;
    shmreg_restore_report *rep = NULL;
    shmreg_err err = prepare(blob_fd, fds, nfds, &s, &rep, extra, n_extra);
    /* The descriptors the caller gave are closed whatever happens, but the
     * application's own, when handed on: a restored descriptor region
     * holds a duplicate of its own. */
    size_t kept = err == SHMREG_OK && extra ? s.extra_count : 0;
    for (size_t i = 0; err == SHMREG_OK && i < s.record_count; i++)
        restore_one(reg, &s.records[i], fds, rep);
    shmreg__close_all(fds, nfds - kept);
    (void)shmreg__sys.close(blob_fd);
    if (err == SHMREG_OK)
        shmreg__state_free(&s);
    *out = rep;
    return err;
}

shmreg_err shmreg_state_restore(shmreg_registry *reg, int blob_fd, const int *fds, size_t nfds,
                                shmreg_restore_report **out)
{
    if (out)
        *out = NULL;
    if (!reg || !out || blob_fd < 0 || (!fds && nfds > 0)) {
        shmreg__close_all(fds, nfds);
        if (blob_fd >= 0)
            (void)shmreg__sys.close(blob_fd);
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "state_restore: %s",
                            !reg ? "registry is NULL" : !out ? "out is NULL" : blob_fd < 0 ? "blob_fd is negative"
                                                                                         : "fds is NULL");
    }
    return shmreg__state_restore(reg, blob_fd, fds, nfds, out, NULL, NULL);
}
