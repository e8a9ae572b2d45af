/* The remote-region descriptor: both halves of its wire format (the
 * client's encode, the server's parse), in one room, with no UCX in it so
 * that every build parses and the fuzzer reaches it. The layout is in the
 * public header (SHMREG_REMOTE_DESCRIPTOR_*). A descriptor names a window
 * by the connection that announced it, never by an address: what it may
 * reach is decided by what that connection announced (remote/server.h). */
#ifndef SHMREG_REMOTE_DESCRIPTOR_H
#define SHMREG_REMOTE_DESCRIPTOR_H

#include <stddef.h>
#include <stdint.h>

#include "remote/messages.h"
#include "shmreg/shmreg.h"

struct shmreg__remote_descriptor {
    unsigned char connection[SHMREG__RMSG_CONNECTION_ID];
    uint64_t window;
    uint64_t generation;
};

/* Write d into out (SHMREG_REMOTE_DESCRIPTOR_SIZE bytes). */
void shmreg__remote_descriptor_encode(const struct shmreg__remote_descriptor *d,
                                      unsigned char out[SHMREG_REMOTE_DESCRIPTOR_SIZE]);

/* Parse size bytes; every field checked. INVALID_ARG naming the field and
 * the region (`name`, for the message) when they are not a descriptor. */
shmreg_err shmreg__remote_descriptor_parse(const void *bytes, size_t size, const char *name,
                                           struct shmreg__remote_descriptor *out);

#endif
