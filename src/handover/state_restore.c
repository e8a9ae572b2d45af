/* Restoring a registry's state: the blob checked whole (state_blob.c) and
 * the descriptors against it before anything is registered, then each
 * region registered again through registration's own checks, failing
 * alone. Every descriptor given is closed on every path, but those handed
 * on as the application's own. */
#include <errno.h>
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
 * negative, and each region's a regular file (a memfd), so that a wrong
 * one is refused before any region is registered. */
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
        if (rec->fd_index < 0)
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

/* A kind the state does not carry: remote regions on purpose (their
 * connections cannot be), CUDA regions not yet. Neither touches CUDA. */
static void not_carried(shmreg_restore_report *rep, const struct shmreg__state_record *rec)
{
    bool remote = rec->source == SHMREG_SOURCE_REMOTE;
    shmreg__fail(SHMREG_ERR_UNSUPPORTED,
                 remote ? "cannot restore remote region '%s': remote regions are not carried by a saved state (their "
                          "client's connection cannot be); the client registers it again"
                        : "cannot restore CUDA region '%s': CUDA regions are not carried by a saved state yet; the "
                          "client registers it again",
                 rec->name);
    note(rep, rec, SHMREG_ERR_UNSUPPORTED, remote);
}

static void restore_one(shmreg_registry *reg, const struct shmreg__state_record *rec, const int *fds,
                        shmreg_restore_report *rep)
{
    if (rec->source != SHMREG_SOURCE_SHM && rec->source != SHMREG_SOURCE_FD) {
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
    shmreg_err err = shmreg__register_restoring(reg, &r, rec->object_known ? &rec->object : NULL);
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
