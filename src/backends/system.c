/* System shared memory: a window of an existing POSIX shm object, mapped
 * MAP_SHARED, optionally page-locked for DMA. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backends/backend.h"
#include "backends/system_window.h"
#include "base/err.h"
#include "base/names.h"
#include "base/sys.h"

static shmreg_err system_prepare(struct shmreg__open_args *a);
static shmreg_err system_inspect(struct shmreg__open_args *a);
static void system_forget(struct shmreg__open_args *a);
static shmreg_err system_open(const struct shmreg__open_args *a, struct shmreg__opened *out);
static shmreg_err system_close(struct shmreg__opened *m, const char *region_name);
static void system_carried(const struct shmreg__opened *m, struct shmreg__carried *out);

const struct shmreg__backend shmreg__backend_system = {
    .name = "system",
    .kind = SHMREG_KIND_SYSTEM,
    .prepare = system_prepare,
    .inspect = system_inspect,
    .forget = system_forget,
    .open = system_open,
    .close = system_close,
    .carried = system_carried,
};

/* Not cached in a static: registrations run in many threads at once, and
 * sysconf reads a value the kernel gave the process at start. */
static size_t page_size(void)
{
    return (size_t)sysconf(_SC_PAGESIZE);
}

static shmreg_err system_prepare(struct shmreg__open_args *a)
{
    const shmreg_registration *r = a->r;
    shmreg_err err = shmreg__check_key(r->name, r->key, a->reserved_key_prefixes);
    if (err != SHMREG_OK)
        return err;
    /* Shared with backends/system_fd.c; AUTO's pin is optional. */
    shmreg__system_decide_pin(a);
    return SHMREG_OK;
}

/* [offset, offset + byte_size) inside an object of object_size bytes,
 * without overflow (byte_size > 0 was checked by register.c). The message
 * starts as Triton's, which its clients match, and gives the sizes. */
static shmreg_err check_window(const shmreg_registration *r, size_t object_size)
{
    if (r->offset > SIZE_MAX - r->byte_size)
        return shmreg__fail(SHMREG_ERR_OUT_OF_BOUNDS,
                            "failed to register shared memory region '%s': invalid args (offset %zu + byte_size "
                            "%zu overflows)",
                            r->name, r->offset, r->byte_size);
    if (r->offset + r->byte_size > object_size)
        return shmreg__fail(SHMREG_ERR_OUT_OF_BOUNDS,
                            "failed to register shared memory region '%s': invalid args (offset %zu + byte_size "
                            "%zu is past the end of the %zu-byte object '%s')",
                            r->name, r->offset, r->byte_size, object_size, r->key);
    return SHMREG_OK;
}

/* The tenancy rule: with an allow-list, only objects its uids own. */
static shmreg_err check_owner(const struct shmreg__open_args *a, const struct stat *st)
{
    if (a->allowed_uid_count == 0)
        return SHMREG_OK;
    for (size_t i = 0; i < a->allowed_uid_count; i++)
        if (a->allowed_uids[i] == st->st_uid)
            return SHMREG_OK;
    return shmreg__fail(SHMREG_ERR_INVALID_ARG,
                        "cannot register shared memory region '%s': shm key '%s' is owned by uid %u, "
                        "which this registry does not accept",
                        a->r->name, a->r->key, (unsigned)st->st_uid);
}

/* Every check of the object behind fd, in order: its type (a FIFO or
 * socket is refused: its open could block), its owner, the window against its size now;
 * then whether a demanded pin would allocate holes (a->holes, for the pin
 * budget register.c applies next). */
static shmreg_err check_object(struct shmreg__open_args *a, int fd, struct stat *st)
{
    const shmreg_registration *r = a->r;
    if (shmreg__sys.fstat(fd, st) != 0)
        return shmreg__fail_errno(SHMREG_ERR_SYSTEM, errno, "Unable to fstat shared memory region '%s' (key '%s')",
                                  r->name, r->key);
    char what[SHMREG_KEY_WHAT_MAX];
    snprintf(what, sizeof what, "shm key '%s'", r->key);
    shmreg_err err = shmreg__system_check_regular(r->name, what, st);
    if (err == SHMREG_OK)
        err = check_owner(a, st);
    /* fstat never reports a negative size for a shm object; 0 refuses any window. */
    size_t object_size = st->st_size < 0 ? 0 : (size_t)st->st_size;
    if (err == SHMREG_OK)
        err = check_window(r, object_size);
    /* Pinning allocates the pages the client did not populate;
     * register.c counts them against the pin budget before any is touched. */
    if (err == SHMREG_OK)
        shmreg__system_note_holes(a, fd, st);
    return err;
}

/* A restore demands the object that was saved: one unlinked and created
 * again under the same key since is another object, whatever it holds, and
 * mapping it would hand the new registry memory its clients never gave. */
static shmreg_err check_expected(const struct shmreg__open_args *a, const struct stat *st)
{
    const struct shmreg__object_id *want = a->expect_object;
    if (!want || (want->device == (uint64_t)st->st_dev && want->inode == (uint64_t)st->st_ino))
        return SHMREG_OK;
    return shmreg__fail(SHMREG_ERR_NOT_FOUND,
                        "cannot restore shared memory region '%s': shm key '%s' is no longer the object that was "
                        "saved (device %llu inode %llu then, device %llu inode %llu now): it was unlinked and "
                        "created again",
                        a->r->name, a->r->key, (unsigned long long)want->device, (unsigned long long)want->inode,
                        (unsigned long long)st->st_dev, (unsigned long long)st->st_ino);
}

/* Open the key and run every check that needs the object (check_object).
 * On success a->fd stays open (for map_window, and forget closes it) and
 * a->id says which object it is: fstat's device and inode, and how it would
 * be mapped (access, and pinning as the checks left it), so an object
 * unlinked and created again under the same key is another. Both a cache
 * hit and a miss come through here, so both answer the same.
 * Opened O_NONBLOCK (glibc's shm_open adds O_NOFOLLOW), so that a
 * FIFO someone created under the key cannot block the open; the type and
 * owner are checked before anything else touches the object. mmap ignores
 * O_NONBLOCK, and the descriptor is closed after mapping, so it stays set. */
static shmreg_err system_inspect(struct shmreg__open_args *a)
{
    const shmreg_registration *r = a->r;
    int ro = (r->flags & SHMREG_READONLY) != 0;
    a->fd = -1;
    int fd = shmreg__sys.shm_open(r->key, (ro ? O_RDONLY : O_RDWR) | O_NONBLOCK, 0);
    if (fd < 0)
        return shmreg__fail_errno(SHMREG_ERR_SYSTEM, errno, "Unable to open shared memory region: '%s'",
                                  r->key);
    struct stat st;
    shmreg_err err = check_object(a, fd, &st);
    if (err == SHMREG_OK)
        err = check_expected(a, &st);
    if (err != SHMREG_OK) {
        /* A failing close on a failed path loses nothing. */
        shmreg__sys.close(fd);
        return err;
    }
    a->fd = fd;
    a->object_offset = r->offset;
    a->id = (struct shmreg__identity){
        .valid = true,
        .words = {(uint64_t)st.st_dev, (uint64_t)st.st_ino, (uint64_t)ro, (uint64_t)a->pin},
    };
    return SHMREG_OK;
}

/* The descriptor is closed on every path, since a MAP_SHARED mapping does
 * not need it; a failing close loses nothing. */
static void system_forget(struct shmreg__open_args *a)
{
    if (a->fd >= 0)
        shmreg__sys.close(a->fd);
    a->fd = -1;
}

/* Map the window from the descriptor inspect opened. */
static shmreg_err map_window(const struct shmreg__open_args *a, struct shmreg__opened *m)
{
    const shmreg_registration *r = a->r;
    int ro = (r->flags & SHMREG_READONLY) != 0;
    /* mmap wants a page-aligned file offset: map from the page holding the
     * first byte and point inside it, so any offset works. */
    size_t delta = r->offset % page_size();
    size_t length = r->byte_size + delta;
    void *base = shmreg__sys.mmap(NULL, length, ro ? PROT_READ : PROT_READ | PROT_WRITE, MAP_SHARED,
                                  a->fd, (off_t)(r->offset - delta));
    if (base == MAP_FAILED)
        return shmreg__fail_errno(SHMREG_ERR_SYSTEM, errno,
                                  "Unable to map shared memory region '%s' (key '%s')", r->name, r->key);
    m->base = base;
    m->length = length;
    m->object_offset = r->offset - delta;
    m->addr = (char *)base + delta;
    m->byte_size = r->byte_size;
    /* The object's identity, which a saved state carries (system_carried). */
    m->priv[0] = a->id.words[0];
    m->priv[1] = a->id.words[1];
    return SHMREG_OK;
}

/* Page-lock the whole mapped window (pages are the unit of page-locking);
 * on failure the mapping is gone again. */
static shmreg_err pin_window(const struct shmreg__open_args *a, struct shmreg__opened *m)
{
    shmreg_err err = shmreg__host_pinning.pin(a->r->name, m->base, m->length,
                                              (a->r->flags & SHMREG_READONLY) != 0);
    if (err != SHMREG_OK) {
        /* munmap of a mapping made a moment ago, with its own address and
         * length, has no way to fail but EINVAL; the pin error is the one
         * to report. */
        (void)shmreg__sys.munmap(m->base, m->length);
        return err;
    }
    m->pinned = 1;
    return SHMREG_OK;
}

/* register.c runs inspect before open and forgets after; a caller that did
 * not (a->fd < 0) gets the inspection and the forgetting here. Pinned
 * exactly when a->pin (register.c's decision, budget included). */
static shmreg_err system_open(const struct shmreg__open_args *a, struct shmreg__opened *out)
{
    struct shmreg__opened m = {.backend = &shmreg__backend_system, .device_id = -1};
    struct shmreg__open_args own = *a;
    bool inspected_here = a->fd < 0;
    shmreg_err err = inspected_here ? system_inspect(&own) : SHMREG_OK;
    if (err != SHMREG_OK)
        return err;
    err = map_window(&own, &m);
    if (inspected_here)
        system_forget(&own);
    if (err == SHMREG_OK && own.pin)
        err = pin_window(&own, &m);
    if (err != SHMREG_OK)
        return err;
    *out = m;
    return SHMREG_OK;
}

static shmreg_err system_close(struct shmreg__opened *m, const char *region_name)
{
    shmreg_err err = SHMREG_OK;
    /* Unpin before unmapping: after munmap the driver no longer reports an
     * error for the stale range, and the pages would stay locked. */
    if (m->pinned)
        err = shmreg__host_pinning.unpin(region_name, m->base);
    if (shmreg__sys.munmap(m->base, m->length) != 0 && err == SHMREG_OK)
        err = shmreg__fail_errno(SHMREG_ERR_SYSTEM, errno, "munmap of shared memory region '%s' failed",
                                 region_name);
    return err;
}

/* A shm key is carried by name and identity, not by descriptor: the
 * descriptor is closed once mapped (a mapping needs none), and the receiver
 * re-opens the key under its own checks (owner, no symlink, the type). */
static void system_carried(const struct shmreg__opened *m, struct shmreg__carried *out)
{
    out->object_known = true;
    out->object = (struct shmreg__object_id){m->priv[0], m->priv[1]};
}
