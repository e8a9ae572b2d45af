/* Tensors in JSON: a request's "shape" and "data" read into a tensor, a
 * reply's written from one. The datatypes' table is common/datatype.h's. */
#ifndef SERVER_JSON_TENSOR_H
#define SERVER_JSON_TENSOR_H

#include <stddef.h>

#include "common/tensor.h"
#include "http/json_doc.h"
#include "http/json_write.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Read a JSON shape (array of non-negative integers) into t. Returns 0, or
 * -1 with a message in err. */
int tensor_shape_from_json(const json_val *shape, tensor *t, char *err, size_t errlen);
/* t's shape as a JSON array, into b. */
void tensor_shape_write(jbuf *b, const tensor *t);

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
