/* KServe v2 tensor datatypes: element sizes and JSON <-> binary elements. */
#ifndef SERVER_DATATYPE_H
#define SERVER_DATATYPE_H

#include <stddef.h>

#include "common/json_doc.h"
#include "common/json_io.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes per element of the datatype named name; 0 for BYTES (variable
 * length); -1 for a name that is not a v2 datatype. */
int datatype_size(const char *name);

/* Whether elements of this datatype travel as JSON numbers or booleans
 * (FP16, BF16 and BYTES need the binary extension or shared memory here). */
int datatype_has_json(const char *name);

/* The datatype named name, looked up once for all of a tensor's elements;
 * -1 for a name that is not a v2 datatype. */
int datatype_find(const char *name);

/* datatype_size and datatype_has_json of a datatype_find result. */
int datatype_type_size(int type);
int datatype_type_has_json(int type);

/* Store the JSON element v as element i of buf (of datatype type, from
 * datatype_find). Returns 0, or -1 when v has the wrong type or is out of
 * range. */
int datatype_from_json(int type, const json_val *v, void *buf, size_t i);

/* The n elements at buf (of datatype name) as a flat JSON array, into b:
 * integers exactly (UINT64 past 2^63 too), floats as jbuf_double writes them.
 * Returns 0, or -1 for a datatype without a JSON form. */
int datatype_write_json(jbuf *b, const char *name, const void *buf, size_t n);

#ifdef __cplusplus
}
#endif

#endif
