/*
 * Checking a request's header block against the layout libmicrohttpd 0.9.75
 * parses it into (connection.c: get_next_header_line, process_header_line,
 * process_broken_line, MHD_connection_handle_idle).
 *
 * The block stays in the connection's read buffer, parsed in place, from
 * the request line (method) to just past the empty line that ends the
 * headers (method + MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE). Each header
 * line's CRLF (or bare LF) is overwritten with 2 (or 1) zero bytes and its
 * ':' with one; the key and value pointers handed out point into the block,
 * in the order received, the value past the blanks after the colon, and
 * their sizes are strlen's. So in a block without NULs:
 *   - between a key's end and its value: one zero, then only ' ' or '\t';
 *   - between a value's end and the next key: 1 or 2 zeros (the line end);
 *   - between the last value's end and the block's end: 2 to 4 zeros (its
 *     line end and the empty line's).
 * A NUL and more inside a value leaves a longer gap or a non-zero byte in
 * one. An obs-fold continuation line is merged by reallocating the key (its
 * pointer leaves the block) and leaves the continuation's bytes in the gap
 * after the value: refused either way.
 *
 * The one shape this cannot see: a value ending in exactly one NUL (two for
 * the last header) from a client that ends lines with a bare LF, since those
 * zeros read as a CRLF. Nothing follows the NUL in that case, so no junk
 * passes as part of a token: the value read is the value sent, less the NUL.
 */
#include "http/header_block.h"

#include <stdint.h>
#include <stdio.h>

/* Only the parser read above: another version may lay the block out
 * otherwise (newer ones rewrote the parser), and a wrong layout would refuse
 * good requests. On another version the check passes everything, and
 * server/tests/core/test_bounds_every_protocol.py shows whether that version lets
 * a NUL through. */
#if MHD_VERSION == 0x00097500

typedef struct walk {
    uintptr_t begin, end;   /* the block: [method, method + header size) */
    uintptr_t after;        /* just past the previous value; 0 before the first */
    const char *key;        /* the header to name in a refusal */
    size_t key_size;
    int broken;
} walk;

/* n bytes at p lie inside the block. */
static int inside(const walk *w, uintptr_t p, size_t n)
{
    return p >= w->begin && p <= w->end && n <= w->end - p;
}

/* [from, to) is between min and max bytes long, every byte zero. The length
 * is checked first, so that nothing far off is read. */
static int zeros(uintptr_t from, uintptr_t to, size_t min, size_t max)
{
    if (to < from || to - from < min || to - from > max)
        return 0;
    for (const char *p = (const char *)from; p < (const char *)to; p++)
        if (*p)
            return 0;
    return 1;
}

/* Between a key's end and its value: the colon's zero, then blanks. */
static int separator(const char *key_end, const char *value)
{
    if (*key_end)
        return 0;
    for (const char *p = key_end + 1; p < value; p++)
        if (*p != ' ' && *p != '\t')
            return 0;
    return 1;
}

/* The key lies in the block, past the previous line (or the request line).
 * A folded header's key does not: libmicrohttpd moved it to merge the lines. */
static int key_placed(const walk *w, const char *key, size_t key_size)
{
    uintptr_t k = (uintptr_t)key;
    return key && inside(w, k, key_size) && k > (w->after ? w->after : w->begin);
}

/* The value lies in the block, after its key and the blanks that follow. */
static int value_placed(const walk *w, const char *key, size_t key_size, const char *value,
                        size_t value_size)
{
    uintptr_t v = (uintptr_t)value;
    return value && inside(w, v, value_size) && v > (uintptr_t)key + key_size &&
           separator(key + key_size, value);
}

static enum MHD_Result check_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                    size_t key_size, const char *value, size_t value_size)
{
    walk *w = cls;
    int placed = key_placed(w, key, key_size);
    /* What lies between the previous value and this key is the previous
     * line's end: a NUL and more there is the previous header's. The first
     * header follows the request line, which is not looked at. */
    if (placed && w->after && !zeros(w->after, (uintptr_t)key, 1, 2)) {
        w->broken = 1;
        return MHD_NO; /* stop at the first header that breaks the layout */
    }
    w->key = key;
    w->key_size = key_size;
    if (!placed || !value_placed(w, key, key_size, value, value_size)) {
        w->broken = 1;
        return MHD_NO;
    }
    w->after = (uintptr_t)value + value_size;
    return MHD_YES;
}

/* The header's name, cut to HEADER_BLOCK_NAME_MAX bytes and to fit. */
static void copy_name(char *bad, size_t bad_size, const char *key, size_t key_size)
{
    int n = key_size < HEADER_BLOCK_NAME_MAX ? (int)key_size : HEADER_BLOCK_NAME_MAX;
    snprintf(bad, bad_size, "%.*s", n, key ? key : "");
}

int header_block_check(struct MHD_Connection *conn, const char *method, char *bad,
                       size_t bad_size)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    walk w = {.begin = (uintptr_t)method};
    /* 0.9.75 always answers this on the first call; without it, refuse. */
    if (!info || !method || info->header_size > UINTPTR_MAX - w.begin) {
        copy_name(bad, bad_size, "", 0);
        return -1;
    }
    w.end = w.begin + info->header_size;
    MHD_get_connection_values_n(conn, MHD_HEADER_KIND, check_header, &w);
    /* No headers at all (HTTP/1.0 allows it) leaves nothing to check. */
    if (!w.broken && (!w.after || zeros(w.after, w.end, 2, 4)))
        return 0;
    copy_name(bad, bad_size, w.key, w.key_size);
    return -1;
}

#else

int header_block_check(struct MHD_Connection *conn, const char *method, char *bad,
                       size_t bad_size)
{
    (void)conn, (void)method, (void)bad, (void)bad_size;
    return 0;
}

#endif
