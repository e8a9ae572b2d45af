/*
 * A parsed request body, read in place by RapidJSON.
 *
 * json-c builds a tree of one allocated object per element (a short
 * inference's header is about a hundred mallocs); RapidJSON keeps the
 * document in a pool that here starts inside the document itself, so a short
 * header takes two allocations.
 *
 * The reading is the one clients have had from the server since it began
 * (json-c's): RFC 8259 plus Triton's NaN, Infinity and -Infinity; strings
 * checked to be UTF-8; nesting within 32; every integer checked to fit 64
 * bits (a larger one must not reach a UINT64 tensor or a bounds check as its
 * nearest bound); numbers read with strtod, not RapidJSON 1.1's own reading,
 * which misreads some exponents; and no NUL character in a string
 * (JSON_NUL_MESSAGE), since every string is read as a C string. A text that
 * is not JSON is refused in RapidJSON's words, which are Triton's.
 *
 * The accessors keep that view of a document: a JSON null is a NULL value,
 * as absent as a missing key; the key an object names twice is its last; an
 * integer is signed or unsigned 64-bit, a number with a fraction or an
 * exponent a double.
 */
#ifndef SERVER_JSON_DOC_H
#define SERVER_JSON_DOC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct json_doc json_doc;
typedef struct json_val json_val; /* a value inside a json_doc, valid while it lives */

/* What a body with a NUL character in a string is refused with, followed
 * by " at " and where. */
#define JSON_NUL_MESSAGE                                                                        \
    "the request JSON holds a NUL character (\\u0000) in a string, which no name, key or "     \
    "parameter may contain"

/* Parse len bytes of text; NULL with Triton's "failed to parse the request
 * JSON buffer: ..." (or JSON_NUL_MESSAGE) in err. Free with json_doc_free. */
json_doc *json_doc_parse(const char *text, size_t len, char *err, size_t errlen);
/* NULL is a no-op. */
void json_doc_free(json_doc *d);
/* The document's root value (NULL: the root is null). */
const json_val *json_doc_root(const json_doc *d);

/* Member key of o; NULL when absent, null, or when o is not an object. */
const json_val *jv_get(const json_val *o, const char *key);
/* Whether the object o names key at all, null included. */
int jv_has(const json_val *o, const char *key);
int jv_is_string(const json_val *v);
int jv_is_object(const json_val *v);
int jv_is_array(const json_val *v);
int jv_is_bool(const json_val *v);
/* The string's text, NUL-terminated (json_doc_parse let no NUL into it). */
const char *jv_str(const json_val *v);
/* Whether v is the boolean true. */
int jv_true(const json_val *v);
/* Length of the array v; element i (NULL for a null element). */
size_t jv_len(const json_val *v);
const json_val *jv_at(const json_val *v, size_t i);
/* v as an unsigned 64-bit integer: 0, -1 when v is not an integer (or
 * absent), -2 when it is negative. */
int jv_u64(const json_val *v, uint64_t *out);
/* v as a signed 64-bit integer: 0, or -1 when v is not an integer or is
 * past INT64_MAX. */
int jv_i64(const json_val *v, int64_t *out);
/* v as a double: 0 for an integer or a double, -1 otherwise. */
int jv_number(const json_val *v, double *out);

#ifdef __cplusplus
}
#endif

#endif
