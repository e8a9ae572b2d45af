/* What the two system backends share (backends/system.c: a POSIX shm key,
 * backends/system_fd.c: a descriptor): the checks of the object behind a
 * descriptor, the pin decision, and the holes check that tells register.c
 * a demanded pin would allocate pages on the server (such a pin is bounded
 * by the pin budget, table.h). */
#ifndef SHMREG_SYSTEM_WINDOW_H
#define SHMREG_SYSTEM_WINDOW_H

#include <stdbool.h>
#include <sys/stat.h>

#include "backends/backend.h"

/* Whether to page-lock a new system region (a->pin, a->pin_optional,
 * a->pinned_bytes): a flag decides, else the policy; AUTO pins only where
 * the CUDA layer says pinning can work, and only optionally. */
void shmreg__system_decide_pin(struct shmreg__open_args *a);

/* Room for "shm key '<key>'" or "descriptor <fd> (inode <n>)". */
#define SHMREG_KEY_WHAT_MAX 320

/* The object behind a descriptor must be a regular file (a shm object or a
 * memfd is one): a FIFO, socket or device is refused before anything can
 * block on it. `what` names it in the message ("shm key '/x'"). */
shmreg_err shmreg__system_check_regular(const char *region_name, const char *what, const struct stat *st);

/* Whether [offset, offset + len) of fd (st: its fstat) has a page the
 * client never populated, which page-locking would allocate on the server:
 * fstat's block count on tmpfs, else lseek(SEEK_HOLE) over the window's
 * pages. A failed lseek counts as a hole. */
bool shmreg__system_window_has_holes(int fd, size_t offset, size_t len, const struct stat *st);

/* Set a->holes for the window a->r describes in fd: true only for a
 * demanded pin (SHMREG_PIN, PIN_ALWAYS) where pinning can work and the
 * window has holes. AUTO's pin is always within the budget, so its window
 * is not walked. */
void shmreg__system_note_holes(struct shmreg__open_args *a, int fd, const struct stat *st);

#endif
