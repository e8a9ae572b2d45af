/*
 * JSON in and out.
 *
 * In: every request body is read into a json_doc (json_doc.h).
 *
 * Out: replies that can be large (inference outputs, the status of many
 * regions) are written as text straight into one buffer, never as a tree of
 * objects: a tree costs ~50 bytes per element (a 16 MiB output
 * as a tree peaked at ~774 MiB) and most of the time of a status call. Strings are
 * escaped, and bytes that are not UTF-8 become U+FFFD, so a reply is always
 * valid JSON whatever a client named.
 */
#ifndef SERVER_JSON_IO_H
#define SERVER_JSON_IO_H

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "common/utf8.h"

#ifdef __cplusplus
extern "C" {
#endif

/* v as an unsigned 64-bit integer: 0, -1 when v is not an integer (or
 * absent), -2 when it is negative. */
int json_get_u64(const json_object *v, uint64_t *out);

/* Building small trees (metadata, config, statistics) with json-c, which
 * asserts on a NULL container: these take v's reference and drop it when the
 * container is NULL (an allocation failed), so that a failure shows as a
 * NULL at the top and nothing leaks. */
void jobj_add(json_object *o, const char *key, json_object *v);
void jarr_add(json_object *a, json_object *v);


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
/* The value j (small trees only: metadata, errors). */
void jbuf_json(jbuf *b, json_object *j);
/* The text (malloc'ed, NUL-terminated) and its length; the buffer is empty
 * after. NULL when an allocation failed. */
char *jbuf_take(jbuf *b, size_t *len);
void jbuf_free(jbuf *b);

#ifdef __cplusplus
}
#endif

#endif
