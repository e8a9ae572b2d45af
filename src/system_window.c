/* What both system backends share: object checks, the pin decision and the
 * holes rule (system_window.h). */
#include <errno.h>
#include <linux/magic.h>
#include <stdint.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "err.h"
#include "sys.h"
#include "system_window.h"

void shmreg__system_decide_pin(struct shmreg__open_args *a)
{
    unsigned flags = a->r->flags;
    a->pin_optional = false;
    if (flags & (SHMREG_PIN | SHMREG_NO_PIN))
        a->pin = (flags & SHMREG_PIN) != 0;
    else if (a->pin_policy == SHMREG_PIN_ALWAYS)
        a->pin = true;
    else if (a->pin_policy == SHMREG_PIN_NEVER)
        a->pin = false;
    else
        a->pin = a->pin_optional = shmreg__host_pinning.usable();
    a->pinned_bytes = a->pin ? a->r->byte_size : 0;
}

bool shmreg__system_auto_pin_fits_locked(const struct shmreg__table *t, size_t bytes)
{
    size_t budget = t->limits.pinned_bytes ? t->limits.pinned_bytes : SHMREG_AUTO_PIN_BUDGET;
    return bytes <= budget && t->usage.pinned_bytes <= budget - bytes;
}

shmreg_err shmreg__system_check_regular(const char *region_name, const char *what, const struct stat *st)
{
    if (S_ISREG(st->st_mode))
        return SHMREG_OK;
    return shmreg__fail(SHMREG_ERR_INVALID_ARG,
                        "cannot register shared memory region '%s': %s is not a regular file or memfd "
                        "(a FIFO, socket or device is refused)",
                        region_name, what);
}

/* Whether every page of the object behind fd is allocated, told by fstat
 * alone: on tmpfs (named POSIX shm, memfds) st_blocks counts the object's
 * allocated pages, swapped ones included, so blocks covering the whole size
 * leave no hole anywhere. That is the common case, a client that wrote its
 * tensor, and it spares the page-by-page walk of SEEK_HOLE (about 2 ms per
 * 256 MiB, paid by every registration, cache hits included). Elsewhere
 * st_blocks may count metadata as well, so only tmpfs is trusted. fstatfs
 * is not a failure point: if it fails, the walk runs as before. */
static bool fully_allocated_tmpfs(int fd, const struct stat *st)
{
    struct statfs fs;
    if (st->st_size <= 0 || (unsigned long long)st->st_blocks * 512 < (unsigned long long)st->st_size)
        return false;
    return fstatfs(fd, &fs) == 0 && fs.f_type == TMPFS_MAGIC;
}

shmreg_err shmreg__system_check_populated(const struct shmreg__open_args *a, int fd, size_t offset, size_t len,
                                          const struct stat *st, bool *pin)
{
    /* Where pinning cannot work, a demanded pin fails as UNSUPPORTED right
     * after this (the more basic answer, and 1.0's); no need to look. */
    if (!*pin || (!a->pin_optional && !shmreg__host_pinning.usable()))
        return SHMREG_OK;
    /* Pages are the unit of page-locking: check every page the window
     * touches, up to the end of the object (past it a page is zero-filled,
     * not allocated in the object). */
    if (fully_allocated_tmpfs(fd, st))
        return SHMREG_OK;
    size_t object_size = (size_t)st->st_size;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t start = offset - offset % page;
    size_t end = offset + len;
    end = end > SIZE_MAX - (page - 1) ? object_size : (end + page - 1) / page * page;
    if (end > object_size)
        end = object_size;
    off_t hole = shmreg__sys.lseek(fd, (off_t)start, SEEK_HOLE);
    if (hole >= 0 && (size_t)hole >= end)
        return SHMREG_OK;
    int errnum = errno;
    if (a->pin_optional) {
        /* AUTO: register unpinned; the caller gives the pin's share back. */
        *pin = false;
        return SHMREG_OK;
    }
    if (hole < 0)
        return shmreg__fail_errno(SHMREG_ERR_SYSTEM, errnum,
                                  "cannot pin shared memory region '%s': looking for holes in its window failed",
                                  a->r->name);
    return shmreg__fail(SHMREG_ERR_INVALID_ARG,
                        "cannot pin shared memory region '%s': its window has pages the client never populated "
                        "(a hole at byte %lld of the object); pinning would allocate them on the server. "
                        "Write every page first, or register without SHMREG_PIN",
                        a->r->name, (long long)hole);
}
