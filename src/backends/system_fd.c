/* Host memory from a descriptor the caller holds (SHMREG_SOURCE_FD): a
 * window of a memfd or any regular file, mapped MAP_SHARED, optionally
 * page-locked. The descriptor is the caller's: it is never closed here.
 *
 * A memfd can be sealed: F_SEAL_SHRINK means its owner can never shrink it
 * under the mapping, so no access to the registered window can raise
 * SIGBUS. Unsealed descriptors are refused unless the configuration accepts
 * them (accept_unsealed_fds). */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backends/backend.h"
#include "backends/system_window.h"
#include "base/err.h"
#include "base/sys.h"

static shmreg_err fd_prepare(struct shmreg__open_args *a);
static shmreg_err fd_open(const struct shmreg__open_args *a, struct shmreg__opened *out);
static shmreg_err fd_close(struct shmreg__opened *m, const char *region_name);
static void fd_carried(const struct shmreg__opened *m, struct shmreg__carried *out);

/* No inspect: a descriptor names nothing the registration cache could look
 * up again (a memfd has no key, and a descriptor number says nothing), so
 * a descriptor region's mapping is its own, never shared or cached. */
const struct shmreg__backend shmreg__backend_system_fd = {
    .name = "system_fd",
    .kind = SHMREG_KIND_SYSTEM,
    .prepare = fd_prepare,
    .open = fd_open,
    .close = fd_close,
    .carried = fd_carried,
};

static shmreg_err fd_prepare(struct shmreg__open_args *a)
{
    const shmreg_registration *r = a->r;
    if (r->fd < 0)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG,
                            "cannot register shared memory region '%s': descriptor %d is negative", r->name, r->fd);
    /* The key belongs to SHMREG_SOURCE_SHM; one here is a caller's mix-up,
     * and status would report a key the region does not come from. */
    if (r->key)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG,
                            "cannot register shared memory region '%s': a descriptor region takes no shm key",
                            r->name);
    shmreg__system_decide_pin(a);
    /* Before register.c reserves, whether a demanded pin would
     * allocate holes (the pin budget then bounds it). Only then is the
     * descriptor looked at here; open checks the object in full. */
    if (!a->pin || a->pin_optional)
        return SHMREG_OK;
    struct stat st;
    if (shmreg__sys.fstat(r->fd, &st) != 0)
        return shmreg__fail_errno(SHMREG_ERR_SYSTEM, errno,
                                  "Unable to fstat shared memory region '%s' (descriptor %d)", r->name, r->fd);
    if (S_ISREG(st.st_mode))
        shmreg__system_note_holes(a, r->fd, &st);
    return SHMREG_OK;
}

/* Type, owner, seals and size of the object behind the descriptor, before
 * anything maps it. */
static shmreg_err check_object(const struct shmreg__open_args *a, const struct stat *st, const char *what)
{
    const shmreg_registration *r = a->r;
    shmreg_err err = shmreg__system_check_regular(r->name, what, st);
    if (err != SHMREG_OK)
        return err;
    if (a->allowed_uid_count > 0) {
        size_t i = 0;
        while (i < a->allowed_uid_count && a->allowed_uids[i] != st->st_uid)
            i++;
        if (i == a->allowed_uid_count)
            return shmreg__fail(SHMREG_ERR_INVALID_ARG,
                                "cannot register shared memory region '%s': %s is owned by uid %u, which this "
                                "registry does not accept",
                                r->name, what, (unsigned)st->st_uid);
    }
    if (!a->accept_unsealed_fds) {
        /* A file system without seals answers EINVAL: that is "no seal". */
        int seals = shmreg__sys.fcntl(r->fd, F_GET_SEALS, 0);
        if (seals < 0 && errno != EINVAL)
            return shmreg__fail_errno(SHMREG_ERR_SYSTEM, errno,
                                      "cannot register shared memory region '%s': reading the seals of %s",
                                      r->name, what);
        if (seals < 0 || !(seals & F_SEAL_SHRINK))
            return shmreg__fail(SHMREG_ERR_INVALID_ARG,
                                "cannot register shared memory region '%s': %s is not sealed against "
                                "shrinking (F_SEAL_SHRINK); its owner could truncate it under the server. "
                                "Seal it (fcntl F_ADD_SEALS), or configure accept_unsealed_fds",
                                r->name, what);
    }
    size_t object_size = st->st_size < 0 ? 0 : (size_t)st->st_size;
    if (r->offset > SIZE_MAX - r->byte_size || r->offset + r->byte_size > object_size)
        return shmreg__fail(SHMREG_ERR_OUT_OF_BOUNDS,
                            "failed to register shared memory region '%s': invalid args (offset %zu + byte_size "
                            "%zu is past the end of the %zu-byte %s)",
                            r->name, r->offset, r->byte_size, object_size, what);
    return SHMREG_OK;
}

/* The registry keeps a descriptor of its own for every descriptor region
 * (priv[0]), closed with the mapping: a mapping cannot be handed to another
 * process, a descriptor can (a handover, handover/). One descriptor per
 * region is the cost. */
static shmreg_err keep_descriptor(const shmreg_registration *r, const char *what, struct shmreg__opened *m)
{
    int own = shmreg__sys.fcntl(r->fd, F_DUPFD_CLOEXEC, 0);
    if (own < 0)
        return shmreg__fail_errno(SHMREG_ERR_SYSTEM, errno,
                                  "cannot register shared memory region '%s': keeping a descriptor of %s", r->name,
                                  what);
    m->priv[0] = (uint64_t)own;
    return SHMREG_OK;
}

static shmreg_err fd_open(const struct shmreg__open_args *a, struct shmreg__opened *out)
{
    const shmreg_registration *r = a->r;
    int ro = (r->flags & SHMREG_READONLY) != 0;
    char what[SHMREG_KEY_WHAT_MAX];
    struct stat st;
    if (shmreg__sys.fstat(r->fd, &st) != 0)
        return shmreg__fail_errno(SHMREG_ERR_SYSTEM, errno,
                                  "Unable to fstat shared memory region '%s' (descriptor %d)", r->name, r->fd);
    snprintf(what, sizeof what, "descriptor %d (inode %llu)", r->fd, (unsigned long long)st.st_ino);
    shmreg_err err = check_object(a, &st, what);
    if (err != SHMREG_OK)
        return err;

    /* mmap wants a page-aligned file offset: map from the page holding the
     * first byte and point inside it, so any offset works. */
    size_t delta = r->offset % (size_t)sysconf(_SC_PAGESIZE);
    size_t length = r->byte_size + delta;
    void *base = shmreg__sys.mmap(NULL, length, ro ? PROT_READ : PROT_READ | PROT_WRITE, MAP_SHARED, r->fd,
                                  (off_t)(r->offset - delta));
    if (base == MAP_FAILED)
        return shmreg__fail_errno(SHMREG_ERR_SYSTEM, errno, "Unable to map shared memory region '%s' (%s)",
                                  r->name, what);
    struct shmreg__opened m = {.backend = &shmreg__backend_system_fd, .device_id = -1, .base = base,
                               .length = length, .object_offset = r->offset - delta,
                               .addr = (char *)base + delta, .byte_size = r->byte_size};
    if (a->pin) {
        err = shmreg__host_pinning.pin(r->name, m.base, m.length, ro != 0);
        m.pinned = err == SHMREG_OK;
    }
    if (err == SHMREG_OK && (err = keep_descriptor(r, what, &m)) != SHMREG_OK && m.pinned)
        (void)shmreg__host_pinning.unpin(r->name, m.base);
    if (err != SHMREG_OK) {
        /* A mapping made a moment ago, with its own address and length:
         * munmap cannot fail but for EINVAL; the first error is reported. */
        (void)shmreg__sys.munmap(base, length);
        return err;
    }
    *out = m;
    return SHMREG_OK;
}

/* The same mapping as a shm key's: unpin, then unmap; then the registry's
 * own descriptor. A failing close has still released it (Linux). */
static shmreg_err fd_close(struct shmreg__opened *m, const char *region_name)
{
    shmreg_err err = shmreg__backend_system.close(m, region_name);
    if (shmreg__sys.close((int)m->priv[0]) != 0 && err == SHMREG_OK)
        err = shmreg__fail_errno(SHMREG_ERR_SYSTEM, errno, "close of shared memory region '%s' failed",
                                 region_name);
    return err;
}

static void fd_carried(const struct shmreg__opened *m, struct shmreg__carried *out)
{
    out->fd_count = 1;
    out->fds[0] = (int)m->priv[0];
}
