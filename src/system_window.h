/* What the two system backends share (backend_system.c: a POSIX shm key,
 * backend_system_fd.c: a descriptor): the checks of the object behind a
 * descriptor, the pin decision, and the rule that pinning never faults in a
 * page the client has not populated. */
#ifndef SHMREG_SYSTEM_WINDOW_H
#define SHMREG_SYSTEM_WINDOW_H

#include <stdbool.h>
#include <sys/stat.h>

#include "backend.h"
#include "table.h"

/* Whether to page-lock a new system region (a->pin, a->pin_optional,
 * a->pinned_bytes): a flag decides, else the policy; AUTO pins only where
 * the CUDA layer says pinning can work, and only optionally. */
void shmreg__system_decide_pin(struct shmreg__open_args *a);

/* Under the table's lock: whether an optional (AUTO) pin of `bytes` fits
 * the AUTO budget, max_pinned_bytes or SHMREG_AUTO_PIN_BUDGET when that is
 * 0. A demanded pin is checked against max_pinned_bytes alone (table.c). */
bool shmreg__system_auto_pin_fits_locked(const struct shmreg__table *t, size_t bytes);

/* Room for "shm key '<key>'" or "descriptor <fd> (inode <n>)". */
#define SHMREG_KEY_WHAT_MAX 320

/* The object behind a descriptor must be a regular file (a shm object or a
 * memfd is one): a FIFO, socket or device is refused before anything can
 * block on it. `what` names it in the message ("shm key '/x'"). */
shmreg_err shmreg__system_check_regular(const char *region_name, const char *what, const struct stat *st);

/* Before pinning [offset, offset + len) of fd (an object of object_size
 * bytes): every page of it must be populated (lseek SEEK_HOLE finds no
 * hole), since page-locking would allocate the missing ones, charged to the
 * server. *pin is the decision: an optional pin of a window with holes is
 * dropped (false, OK); a demanded one is refused (INVALID_ARG), where
 * pinning can work at all (elsewhere the pin itself answers UNSUPPORTED). */
shmreg_err shmreg__system_check_populated(const struct shmreg__open_args *a, int fd, size_t offset, size_t len,
                                          const struct stat *st, bool *pin);

#endif
