/* The messages of a remote connection (remote/messages.h). */
#include <string.h>

#include "base/bytes.h"
#include "remote/messages.h"

void shmreg__rmsg_encode(const struct shmreg__rmsg *m, unsigned char out[SHMREG__RMSG_SIZE])
{
    memset(out, 0, SHMREG__RMSG_SIZE);
    out[0] = SHMREG__RMSG_VERSION;
    out[1] = m->kind;
    shmreg__put32(out + 4, m->status);
    shmreg__put64(out + 8, m->request);
    shmreg__put64(out + 16, m->window);
    shmreg__put64(out + 24, m->generation);
    shmreg__put64(out + 32, m->offset);
    shmreg__put64(out + 40, m->length);
    memcpy(out + 48, m->token, SHMREG__RMSG_TOKEN);
}

static bool kind_from_client(unsigned kind)
{
    return kind >= SHMREG__RMSG_HELLO && kind <= SHMREG__RMSG_BYE;
}

static bool kind_from_server(unsigned kind)
{
    return kind >= SHMREG__RMSG_WELCOME && kind <= SHMREG__RMSG_PING;
}

/* The kinds that answer a request, and so carry its status. */
static bool kind_answers(unsigned kind)
{
    return kind == SHMREG__RMSG_WELCOME || kind == SHMREG__RMSG_ANSWER || kind == SHMREG__RMSG_DATA ||
           kind == SHMREG__RMSG_STORED || kind == SHMREG__RMSG_PONG;
}

/* How many leading bytes of the token a kind carries: HELLO the whole
 * secret, WELCOME the connection id; the rest must be zero. */
static size_t token_size(unsigned kind)
{
    if (kind == SHMREG__RMSG_HELLO)
        return SHMREG__RMSG_TOKEN;
    if (kind == SHMREG__RMSG_WELCOME)
        return SHMREG__RMSG_CONNECTION_ID;
    return 0;
}

static bool all_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return false;
    return true;
}

/* The range a kind names: ANNOUNCE's window in the client's address space,
 * FETCH's and STORE's part of a window. */
static const char *range_check(const struct shmreg__rmsg *m)
{
    bool ranged = m->kind == SHMREG__RMSG_ANNOUNCE || m->kind == SHMREG__RMSG_FETCH ||
                  m->kind == SHMREG__RMSG_STORE;
    if (!ranged)
        return NULL;
    if (m->length == 0)
        return "an empty range";
    if (m->offset > UINT64_MAX - m->length)
        return "a range that runs past 2^64";
    return NULL;
}

const char *shmreg__rmsg_parse(const void *bytes, size_t size, bool to_server, struct shmreg__rmsg *out)
{
    const unsigned char *p = bytes;
    if (!bytes || size != SHMREG__RMSG_SIZE)
        return "not the size of a message";
    if (p[0] != SHMREG__RMSG_VERSION)
        return "an unknown version";
    if (!(to_server ? kind_from_client(p[1]) : kind_from_server(p[1])))
        return "a kind this side does not take";
    if (p[2] || p[3])
        return "reserved bytes are not zero";
    struct shmreg__rmsg m = {
        .kind = p[1],
        .status = shmreg__get32(p + 4),
        .request = shmreg__get64(p + 8),
        .window = shmreg__get64(p + 16),
        .generation = shmreg__get64(p + 24),
        .offset = shmreg__get64(p + 32),
        .length = shmreg__get64(p + 40),
    };
    memcpy(m.token, p + 48, SHMREG__RMSG_TOKEN);
    if (m.status != 0 && !kind_answers(m.kind))
        return "a status in a message that answers nothing";
    size_t carried = token_size(m.kind);
    if (!all_zero(m.token + carried, SHMREG__RMSG_TOKEN - carried))
        return carried ? "bytes past the token are not zero" : "a token in a message that carries none";
    const char *why = range_check(&m);
    if (why)
        return why;
    *out = m;
    return NULL;
}
