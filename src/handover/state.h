/* A registry's state handed to another process (include/shmreg/handover.h):
 * the save and the restore that both the public transport-free pair and the
 * socket pair (handover_socket.c) are made of. The socket pair carries the
 * application's own descriptors too, so these take them: their names travel
 * in the blob, their descriptors after the regions'. */
#ifndef SHMREG_HANDOVER_STATE_H
#define SHMREG_HANDOVER_STATE_H

#include <stddef.h>

#include "shmreg/shmreg.h"

/* shmreg_state_save, with the names of n_extra descriptors of the
 * application's written into the blob (their descriptors are not in *fds:
 * the caller sends them after). */
shmreg_err shmreg__state_save(shmreg_registry *reg, const void *app, size_t app_len, const shmreg_handover_fd *extra,
                              size_t n_extra, int *blob_fd, int **fds, size_t *nfds);

/* shmreg_state_restore; with extra non-NULL, the blob's extra descriptors
 * (the last of fds) go to *extra with their names instead of being closed. */
shmreg_err shmreg__state_restore(shmreg_registry *reg, int blob_fd, const int *fds, size_t nfds,
                                 shmreg_restore_report **out, shmreg_handover_fd **extra, size_t *n_extra);

/* Close every descriptor of fds[0, n) that is not negative. */
void shmreg__close_all(const int *fds, size_t n);

#endif
