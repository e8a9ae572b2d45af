/* libFuzzer harness: the remote-region descriptor parser
 * (src/remote/descriptor.c), which reads a client's bytes at registration.
 * Oracles:
 *  - a parse either refuses (INVALID_ARG, with a message) or accepts;
 *  - what it accepts obeys the documented layout (shmreg.h): 40 bytes,
 *    version 2, bytes 1..7 zero, a connection id that is not all zero;
 *  - the fields it returns are the input's bytes: the connection id from
 *    bytes 8..23, window and generation little-endian from 24..39;
 *  - encoding what it accepted gives back the input, byte for byte. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "remote/descriptor.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const uint8_t zeros[16];

static bool zero(const uint8_t *p, size_t n)
{
    return memcmp(p, zeros, n) == 0;
}

static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct shmreg__remote_descriptor d;
    shmreg_err err = shmreg__remote_descriptor_parse(data, size, "fuzz", &d);
    if (err != SHMREG_OK) {
        if (err != SHMREG_ERR_INVALID_ARG || shmreg_last_error()[0] == '\0')
            abort();
        return 0;
    }
    if (size != SHMREG_REMOTE_DESCRIPTOR_SIZE || data[0] != SHMREG_REMOTE_DESCRIPTOR_VERSION || !zero(data + 1, 7) ||
        zero(data + 8, sizeof d.connection))
        abort();
    if (memcmp(d.connection, data + 8, sizeof d.connection) != 0 || d.window != le64(data + 24) ||
        d.generation != le64(data + 32))
        abort();
    unsigned char again[SHMREG_REMOTE_DESCRIPTOR_SIZE];
    shmreg__remote_descriptor_encode(&d, again);
    if (memcmp(again, data, size) != 0)
        abort();
    return 0;
}
