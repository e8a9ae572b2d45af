/*
 * JSON out, the server's one writer (every request body is read by
 * json_doc.h, its one reader).
 *
 * Replies that can be large (inference outputs, the status of many
 * regions) are written as text straight into one buffer, never as a tree of
 * objects: a tree costs ~50 bytes per element (a 16 MiB output
 * as a tree peaked at ~774 MiB) and most of the time of a status call. Strings are
 * escaped, and bytes that are not UTF-8 become U+FFFD, so a reply is always
 * valid JSON whatever a client named.
 */
#ifndef SERVER_JSON_WRITE_H
#define SERVER_JSON_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "common/utf8.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A growing text buffer. Every write after a failed allocation is a no-op
 * and jbuf_take then returns NULL, so writers check once, at the end. */
typedef struct jbuf {
    char *text;
    size_t len, cap;
    int failed;
} jbuf;

/* Make room for at least more bytes beyond len (a size hint: writes grow
 * the buffer anyway). */
void jbuf_reserve(jbuf *b, size_t more);
void jbuf_raw(jbuf *b, const char *s, size_t len);
void jbuf_lit(jbuf *b, const char *s); /* NUL-terminated, written as is */
void jbuf_str(jbuf *b, const char *s); /* a JSON string: quoted and escaped */
void jbuf_u64(jbuf *b, uint64_t v);
void jbuf_i64(jbuf *b, int64_t v);
/* A double as Triton writes it: digits that read back exactly (15 to 17),
 * and NaN, Infinity, -Infinity (Triton's writer allows them). */
void jbuf_double(jbuf *b, double v);
/* The text (malloc'ed, NUL-terminated) and its length; the buffer is empty
 * after. NULL when an allocation failed. */
char *jbuf_take(jbuf *b, size_t *len);
void jbuf_free(jbuf *b);

#ifdef __cplusplus
}
#endif

#endif
