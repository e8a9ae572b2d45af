/* THE REFERENCE: the server's reading of request bodies before it had one
 * reader (json-c behind a RapidJSON pre-scan), kept unchanged, save for this
 * include and its guard's name, for the differential fuzz target only. */
#include "ref_names.h"
/*
 * JSON in and out.
 *
 * In: request bodies are parsed with json-c, strictly (RFC 8259 plus
 * Triton's NaN and Infinity), with strings checked to be UTF-8 and every
 * integer checked to fit 64 bits: json-c would clamp 2^64 to 2^64-1 without
 * a word, which must not reach a UINT64 tensor or a bounds check. An
 * inference request's header is read into a json_doc (json_doc.h), with
 * json-c's reading where RapidJSON's might differ.
 *
 * Out: replies that can be large (inference outputs, the status of many
 * regions) are written as text straight into one buffer, never as a tree of
 * objects: a tree costs ~50 bytes per element (a 16 MiB output
 * as a tree peaked at ~774 MiB) and most of the time of a status call. Strings are
 * escaped, and bytes that are not UTF-8 become U+FFFD, so a reply is always
 * valid JSON whatever a client named.
 */
#ifndef REFERENCE_JSON_IO_H
#define REFERENCE_JSON_IO_H

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Parse len bytes of text into a new value (free with json_object_put), or
 * NULL with Triton's "failed to parse the request JSON buffer: ..." in err.
 * A text with a NUL character in a string (a "\u0000" escape, or a raw NUL
 * byte) is refused with JSON_NUL_MESSAGE and where it is: every string a
 * client sends is read as a C string, which a NUL would cut short. */
json_object *json_parse(const char *text, size_t len, char *err, size_t errlen);

#define JSON_NUL_MESSAGE                                                                        \
    "the request JSON holds a NUL character (\\u0000) in a string, which no name, key or "     \
    "parameter may contain"

/* json_parse with a tokener kept in *tok from one call to the next, so that
 * a thread that parses request after request does not allocate one each
 * time: made on first use, reset after a text that parsed, and freed (*tok
 * NULL) after one that did not, since json-c's reset does not clear all of
 * a half-read string's state. Not for two threads at once. */
json_object *json_parse_reusing(struct json_tokener **tok, const char *text, size_t len,
                                char *err, size_t errlen);

/* Free *tok (NULL is a no-op) and set it to NULL. */
void json_parse_tokener_free(struct json_tokener **tok);

/* v as an unsigned 64-bit integer: 0, -1 when v is not an integer (or
 * absent), -2 when it is negative. */
int json_get_u64(const json_object *v, uint64_t *out);

#ifdef __cplusplus
}
#endif

#endif
