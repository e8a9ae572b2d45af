/* libFuzzer harness: the parser of a remote connection's messages
 * (src/remote/messages.c), which reads every byte a peer sends before
 * either side acts on it. Each input is parsed twice, as arriving at a
 * server and as arriving at a client. Oracles, from the layout in
 * remote/messages.h rather than from the parser's own code:
 *  - a refusal returns a reason (a non-empty string) and leaves the output
 *    untouched;
 *  - what a side accepts is 80 bytes, version 1, a kind that side takes
 *    (HELLO..BYE at a server, WELCOME..PING at a client), bytes 2..3 zero,
 *    a status only in an answer (WELCOME, ANSWER, DATA, STORED, PONG), no
 *    token bytes but HELLO's 32 and WELCOME's first 16, and for ANNOUNCE,
 *    FETCH and STORE a non-empty range whose end is a uint64;
 *  - no input is accepted by both sides (their kinds are disjoint);
 *  - the fields it returns are the input's bytes, little-endian;
 *  - encoding what it accepted gives back the input, byte for byte. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "remote/messages.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const uint8_t zeros[32];

static bool zero(const uint8_t *p, size_t n)
{
    return memcmp(p, zeros, n) == 0;
}

static uint64_t le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* Whether data, accepted as m by the side named by to_server, obeys the
 * documented layout. */
static bool obeys_layout(const uint8_t *data, size_t size, bool to_server, const struct shmreg__rmsg *m)
{
    if (size != SHMREG__RMSG_SIZE || data[0] != 1 || data[2] || data[3])
        return false;
    unsigned k = data[1];
    bool from_client = k >= SHMREG__RMSG_HELLO && k <= SHMREG__RMSG_BYE;
    bool from_server = k >= SHMREG__RMSG_WELCOME && k <= SHMREG__RMSG_PING;
    if (!(to_server ? from_client : from_server))
        return false;
    bool answer = k == SHMREG__RMSG_WELCOME || k == SHMREG__RMSG_ANSWER || k == SHMREG__RMSG_DATA ||
                  k == SHMREG__RMSG_STORED || k == SHMREG__RMSG_PONG;
    if (!answer && !zero(data + 4, 4))
        return false;
    size_t token = k == SHMREG__RMSG_HELLO ? 32 : k == SHMREG__RMSG_WELCOME ? 16 : 0;
    if (!zero(data + 48 + token, 32 - token))
        return false;
    uint64_t offset = le(data + 32, 8), length = le(data + 40, 8);
    bool ranged = k == SHMREG__RMSG_ANNOUNCE || k == SHMREG__RMSG_FETCH || k == SHMREG__RMSG_STORE;
    if (ranged && (length == 0 || offset > UINT64_MAX - length))
        return false;
    return m->kind == k && m->status == le(data + 4, 4) && m->request == le(data + 8, 8) &&
           m->window == le(data + 16, 8) && m->generation == le(data + 24, 8) && m->offset == offset &&
           m->length == length && memcmp(m->token, data + 48, 32) == 0;
}

/* Parse as one side; abort on any oracle broken. Whether it accepted. */
static bool parse_as(const uint8_t *data, size_t size, bool to_server)
{
    struct shmreg__rmsg m, untouched;
    memset(&m, 0xa5, sizeof m);
    memcpy(&untouched, &m, sizeof m);
    const char *why = shmreg__rmsg_parse(data, size, to_server, &m);
    if (why) {
        if (why[0] == '\0' || memcmp(&m, &untouched, sizeof m) != 0)
            abort();
        return false;
    }
    if (!obeys_layout(data, size, to_server, &m))
        abort();
    unsigned char again[SHMREG__RMSG_SIZE];
    shmreg__rmsg_encode(&m, again);
    if (memcmp(again, data, size) != 0)
        abort();
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    bool at_server = parse_as(data, size, true);
    bool at_client = parse_as(data, size, false);
    if (at_server && at_client)
        abort();
    return 0;
}
