/* Shapes and elements of tensors in JSON: what the inference endpoint reads
 * from a request's "shape" and "data" and writes into a reply's. */
#include "http/json_tensor.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/datatype.h"

int tensor_shape_from_json(const json_val *shape, tensor *t, char *err, size_t errlen)
{
    if (!jv_is_array(shape)) {
        snprintf(err, errlen, "'shape' must be an array of integers");
        return -1;
    }
    size_t n = jv_len(shape);
    if (n > TENSOR_MAX_DIMS) {
        snprintf(err, errlen, "shape has %zu dimensions; at most %d are supported", n,
                 TENSOR_MAX_DIMS);
        return -1;
    }
    t->ndims = (int)n;
    for (int i = 0; i < t->ndims; i++) {
        const json_val *d = jv_at(shape, (size_t)i);
        uint64_t v;
        /* A dimension past INT64_MAX can hold nothing: refused like a negative one. */
        if (jv_u64(d, &v) != 0 || v > INT64_MAX) {
            snprintf(err, errlen, "'shape' must be an array of non-negative integers");
            return -1;
        }
        t->shape[i] = (int64_t)v;
    }
    return 0;
}

void tensor_shape_write(jbuf *b, const tensor *t)
{
    jbuf_raw(b, "[", 1);
    for (int i = 0; i < t->ndims; i++) {
        if (i)
            jbuf_raw(b, ",", 1);
        jbuf_i64(b, t->shape[i]);
    }
    jbuf_raw(b, "]", 1);
}

/* Low size bytes of u as element i (little-endian host): tensors may sit at
 * any alignment. */
static void store_bytes(uint64_t u, void *buf, size_t i, int size)
{
    memcpy((char *)buf + i * (size_t)size, &u, (size_t)size);
}

/* Signed integer element in [lo, hi]. */
static int store_int(const json_val *v, int64_t lo, int64_t hi, void *buf, size_t i, int size)
{
    int64_t x;
    if (jv_i64(v, &x) != 0 || x < lo || x > hi)
        return -1;
    store_bytes((uint64_t)x, buf, i, size);
    return 0;
}

/* Unsigned integer element in [0, hi]: the whole of UINT64 included. */
static int store_uint(const json_val *v, uint64_t hi, void *buf, size_t i, int size)
{
    uint64_t x;
    if (jv_u64(v, &x) != 0 || x > hi)
        return -1;
    store_bytes(x, buf, i, size);
    return 0;
}

int datatype_from_json(int t, const json_val *v, void *buf, size_t i)
{
    if (t < 0)
        return -1;
    switch (datatype_type_tag(t)) {
    case DT_BOOL:
        if (!jv_is_bool(v))
            return -1;
        ((uint8_t *)buf)[i] = jv_true(v) != 0;
        return 0;
    case DT_U8: return store_uint(v, UINT8_MAX, buf, i, 1);
    case DT_U16: return store_uint(v, UINT16_MAX, buf, i, 2);
    case DT_U32: return store_uint(v, UINT32_MAX, buf, i, 4);
    case DT_U64: return store_uint(v, UINT64_MAX, buf, i, 8);
    case DT_I8: return store_int(v, INT8_MIN, INT8_MAX, buf, i, 1);
    case DT_I16: return store_int(v, INT16_MIN, INT16_MAX, buf, i, 2);
    case DT_I32: return store_int(v, INT32_MIN, INT32_MAX, buf, i, 4);
    case DT_I64: return store_int(v, INT64_MIN, INT64_MAX, buf, i, 8);
    case DT_F32: {
        double d;
        if (jv_number(v, &d) != 0)
            return -1;
        float f = (float)d;
        memcpy((char *)buf + i * sizeof f, &f, sizeof f);
        return 0;
    }
    case DT_F64: {
        double d;
        if (jv_number(v, &d) != 0)
            return -1;
        memcpy((char *)buf + i * sizeof d, &d, sizeof d);
        return 0;
    }
    case DT_F16:
    case DT_BF16:
    case DT_BYTES: break;
    }
    return -1;
}

/* Element i of an array of T at any alignment. */
#define LOAD(T, buf, i) load_##T(buf, i)
#define DEFINE_LOAD(T)                                         \
    static T load_##T(const void *buf, size_t i)               \
    {                                                          \
        T x;                                                   \
        memcpy(&x, (const char *)buf + i * sizeof x, sizeof x); \
        return x;                                              \
    }
DEFINE_LOAD(uint8_t)
DEFINE_LOAD(uint16_t)
DEFINE_LOAD(uint32_t)
DEFINE_LOAD(uint64_t)
DEFINE_LOAD(int8_t)
DEFINE_LOAD(int16_t)
DEFINE_LOAD(int32_t)
DEFINE_LOAD(int64_t)
DEFINE_LOAD(float)
DEFINE_LOAD(double)

/* The widest element of each datatype in JSON, with its comma: a size hint
 * that makes the array one allocation. */
static size_t json_width(datatype_tag t)
{
    switch (t) {
    case DT_BOOL: return 6;                /* false, */
    case DT_U8: case DT_I8: return 5;       /* -128, */
    case DT_U16: case DT_I16: return 7;
    case DT_U32: case DT_I32: return 12;
    case DT_U64: case DT_I64: return 21;
    case DT_F32: case DT_F64: return 25;    /* -1.2345678901234567e-308, */
    case DT_F16: case DT_BF16: case DT_BYTES: break;
    }
    return 0;
}

/* Element e of buf as JSON. */
static void write_element(jbuf *b, datatype_tag t, const void *buf, size_t e)
{
    switch (t) {
    case DT_BOOL: jbuf_lit(b, LOAD(uint8_t, buf, e) ? "true" : "false"); break;
    case DT_U8: jbuf_u64(b, LOAD(uint8_t, buf, e)); break;
    case DT_U16: jbuf_u64(b, LOAD(uint16_t, buf, e)); break;
    case DT_U32: jbuf_u64(b, LOAD(uint32_t, buf, e)); break;
    case DT_U64: jbuf_u64(b, LOAD(uint64_t, buf, e)); break;
    case DT_I8: jbuf_i64(b, LOAD(int8_t, buf, e)); break;
    case DT_I16: jbuf_i64(b, LOAD(int16_t, buf, e)); break;
    case DT_I32: jbuf_i64(b, LOAD(int32_t, buf, e)); break;
    case DT_I64: jbuf_i64(b, LOAD(int64_t, buf, e)); break;
    case DT_F32: jbuf_double(b, LOAD(float, buf, e)); break;
    case DT_F64: jbuf_double(b, LOAD(double, buf, e)); break;
    case DT_F16: case DT_BF16: case DT_BYTES: break;
    }
}

int datatype_write_json(jbuf *b, const char *name, const void *buf, size_t n)
{
    datatype_tag t = datatype_type_tag(datatype_find(name));
    if (json_width(t) == 0)
        return -1;
    /* Reserved, not touched: pages the text does not reach cost nothing. */
    if (n <= (SIZE_MAX - 2) / json_width(t))
        jbuf_reserve(b, n * json_width(t) + 2);
    jbuf_raw(b, "[", 1);
    for (size_t e = 0; e < n && !b->failed; e++) {
        if (e)
            jbuf_raw(b, ",", 1);
        write_element(b, t, buf, e);
    }
    jbuf_raw(b, "]", 1);
    return 0;
}
