/* The several-descriptor frame (fd_passing.c) for the wire formats built on
 * it: shmreg_send_fds / shmreg_recv_fds with their public rules, except
 * that a frame may carry no descriptor at all when the format says so (a
 * CUDA IPC region request: its handle is bytes). who names the calling
 * function in messages. */
#ifndef SHMREG_WIRE_FD_PASSING_H
#define SHMREG_WIRE_FD_PASSING_H

#include <stdbool.h>
#include <stddef.h>

#include "shmreg/shmreg.h"

shmreg_err shmreg__send_fds_frame(int sock, const int *fds, size_t count, const void *payload, size_t payload_size,
                                  const char *who);

/* allow_none: a frame without descriptors is received (*count 0), not
 * NOT_FOUND. */
shmreg_err shmreg__recv_fds_frame(int sock, int *fds, size_t fd_cap, size_t *count, void *payload, size_t cap,
                                  size_t *payload_size, bool allow_none);

#endif
