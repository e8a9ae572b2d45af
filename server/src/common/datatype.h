/* KServe v2 tensor datatypes: names, element sizes, and the tag that each
 * protocol's conversion switches on (http/json_tensor.h for JSON). */
#ifndef SERVER_DATATYPE_H
#define SERVER_DATATYPE_H

#include <stddef.h>

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

/* The element type of a datatype: what a conversion switches on. */
typedef enum datatype_tag { DT_BOOL, DT_U8, DT_U16, DT_U32, DT_U64, DT_I8, DT_I16, DT_I32, DT_I64, DT_F16,
                            DT_BF16, DT_F32, DT_F64, DT_BYTES } datatype_tag;

/* The tag of a datatype_find result; DT_BYTES (no fixed form) for -1. */
datatype_tag datatype_type_tag(int type);

#ifdef __cplusplus
}
#endif

#endif
