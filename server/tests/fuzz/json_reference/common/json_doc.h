/* THE REFERENCE: the server's reading of request bodies before it had one
 * reader (json-c behind a RapidJSON pre-scan), kept unchanged, save for this
 * include and its guard's name, for the differential fuzz target only. */
#include "ref_names.h"
/*
 * A parsed inference request header, read in place.
 *
 * json-c builds a tree of one allocated object per element (a short
 * inference's header is about a hundred mallocs); RapidJSON keeps the
 * document in a pool that here starts inside the document itself, so a short
 * header takes two allocations. RapidJSON reads the text where it is sure to
 * read it as json-c does: plain ASCII with no escapes, no integer that might
 * not fit 64 bits, no exponent of the kind RapidJSON 1.1 misreads, shallow
 * nesting, no repeated key, and nothing around the one object. Any other
 * text (and any text RapidJSON refuses) is read by json_parse (json_io.h),
 * as before, and the accessors below read json-c's tree: what a client
 * gets, error messages included, does not depend on which of the two read
 * it. Neither lets a NUL character into a string: RapidJSON reads no text
 * with an escape or a control byte, and json_parse refuses a "\u0000"
 * (JSON_NUL_MESSAGE), since every string is read as a C string.
 *
 * The accessors keep json-c's view of a document: a JSON null is a NULL
 * value, as absent as a missing key; the key an object names twice is its
 * last; an integer is signed or unsigned 64-bit, a number with a fraction or
 * an exponent a double.
 */
#ifndef REFERENCE_JSON_DOC_H
#define REFERENCE_JSON_DOC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct json_tokener;
typedef struct json_doc json_doc;
typedef struct json_val json_val; /* a value inside a json_doc, valid while it lives */

/* Parse len bytes of text; NULL with json_parse's message in err. tok: a
 * json-c tokener kept by the calling thread for the texts RapidJSON does
 * not take (json_parse_reusing), or NULL. Free with json_doc_free. */
json_doc *json_doc_parse(const char *text, size_t len, struct json_tokener **tok, char *err,
                         size_t errlen);
/* NULL is a no-op. */
void json_doc_free(json_doc *d);
/* The document's root value (NULL: the root is null). */
const json_val *json_doc_root(const json_doc *d);

/* Member key of o; NULL when absent, null, or when o is not an object. */
const json_val *jv_get(const json_val *o, const char *key);
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
