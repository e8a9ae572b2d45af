/* What both system backends share: object checks, the pin decision and the
 * holes check (system_window.h). */
#include <linux/magic.h>
#include <stdint.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "backends/system_window.h"
#include "base/err.h"
#include "base/sys.h"

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

bool shmreg__system_window_has_holes(int fd, size_t offset, size_t len, const struct stat *st)
{
    /* Pages are the unit of page-locking: check every page the window
     * touches, up to the end of the object (past it a page is zero-filled,
     * not allocated in the object). */
    if (fully_allocated_tmpfs(fd, st))
        return false;
    size_t object_size = st->st_size < 0 ? 0 : (size_t)st->st_size;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t start = offset - offset % page;
    size_t end = offset + len;
    end = end > SIZE_MAX - (page - 1) ? object_size : (end + page - 1) / page * page;
    if (end > object_size)
        end = object_size;
    /* A failed walk is taken as a hole: the pin is then bounded by the
     * budget, which is never wrong, only stricter. */
    off_t hole = shmreg__sys.lseek(fd, (off_t)start, SEEK_HOLE);
    return hole < 0 || (size_t)hole < end;
}

void shmreg__system_note_holes(struct shmreg__open_args *a, int fd, const struct stat *st)
{
    /* AUTO's pin is bounded by the budget whatever the window holds, and
     * where pinning cannot work a demanded pin answers UNSUPPORTED before
     * any budget (the more basic answer, and 1.0's): no need to look. */
    a->holes = a->pin && !a->pin_optional && shmreg__host_pinning.usable() &&
               shmreg__system_window_has_holes(fd, a->r->offset, a->r->byte_size, st);
}
