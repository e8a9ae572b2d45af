/* The remote-region descriptor: both halves of its wire format (the
 * client's encode, the server's parse), in one room, with no UCX in it so
 * that every build parses and the fuzzer reaches it. The layout is in the
 * public header (SHMREG_REMOTE_DESCRIPTOR_*). */
#ifndef SHMREG_REMOTE_DESCRIPTOR_H
#define SHMREG_REMOTE_DESCRIPTOR_H

#include <stddef.h>
#include <stdint.h>

#include "shmreg/shmreg.h"

/* A parsed descriptor; the blobs point into the bytes parsed. */
struct shmreg__remote_descriptor {
    uint64_t address; /* of the exported range, in the client */
    uint64_t length;
    const void *worker_address;
    size_t worker_address_size;
    const void *rkey;
    size_t rkey_size;
};

/* The size encode needs for d. */
size_t shmreg__remote_descriptor_size(const struct shmreg__remote_descriptor *d);

/* Write d into out (cap bytes, at least shmreg__remote_descriptor_size);
 * INVALID_ARG when a field is out of range or cap is short. */
shmreg_err shmreg__remote_descriptor_encode(const struct shmreg__remote_descriptor *d, void *out, size_t cap);

/* Parse size bytes; every field checked. INVALID_ARG naming the field and
 * the region (`name`, for the message) when they are not a descriptor. */
shmreg_err shmreg__remote_descriptor_parse(const void *bytes, size_t size, const char *name,
                                           struct shmreg__remote_descriptor *out);

#endif
