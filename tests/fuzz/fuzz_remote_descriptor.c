/* libFuzzer harness: the remote-region descriptor parser
 * (src/remote/descriptor.c), the one place a client's bytes are read
 * before UCX sees them. Oracles:
 *  - a parse either refuses (INVALID_ARG, with a message) or accepts;
 *  - what it accepts obeys the documented layout: version 1, reserved bytes
 *    zero, blob sizes in 1..SHMREG_REMOTE_BLOB_MAX, the size exactly the
 *    header plus both blobs, a non-empty range not past 2^64, and the blobs
 *    inside the input;
 *  - encoding what it accepted gives back the input, byte for byte. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "remote/descriptor.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct shmreg__remote_descriptor d;
    shmreg_err err = shmreg__remote_descriptor_parse(data, size, "fuzz", &d);
    if (err != SHMREG_OK) {
        if (err != SHMREG_ERR_INVALID_ARG || shmreg_last_error()[0] == '\0')
            abort();
        return 0;
    }
    const uint8_t *end = data + size;
    if (size < SHMREG_REMOTE_DESCRIPTOR_HEADER || data[0] != 1 || data[1] || data[2] || data[3] || data[12] ||
        data[13] || data[14] || data[15])
        abort();
    if (d.worker_address_size < 1 || d.worker_address_size > SHMREG_REMOTE_BLOB_MAX || d.rkey_size < 1 ||
        d.rkey_size > SHMREG_REMOTE_BLOB_MAX || size != SHMREG_REMOTE_DESCRIPTOR_HEADER + d.worker_address_size + d.rkey_size)
        abort();
    if (d.length == 0 || d.address > UINT64_MAX - d.length)
        abort();
    const uint8_t *w = d.worker_address, *k = d.rkey;
    if (w < data || w + d.worker_address_size > end || k < data || k + d.rkey_size > end)
        abort();
    uint8_t *again = malloc(size);
    if (!again || shmreg__remote_descriptor_encode(&d, again, size) != SHMREG_OK || memcmp(again, data, size) != 0)
        abort();
    free(again);
    return 0;
}
