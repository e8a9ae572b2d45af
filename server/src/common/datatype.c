/* One table of datatypes; the conversions switch on its tag. */
#include "common/datatype.h"

#include <stdint.h>
#include <string.h>

typedef enum tag { T_BOOL, T_U8, T_U16, T_U32, T_U64, T_I8, T_I16, T_I32, T_I64, T_F16, T_BF16,
                   T_F32, T_F64, T_BYTES } tag;

static const struct { const char *name; tag tag; int size; } types[] = {
    {"BOOL", T_BOOL, 1},  {"UINT8", T_U8, 1},  {"UINT16", T_U16, 2}, {"UINT32", T_U32, 4},
    {"UINT64", T_U64, 8}, {"INT8", T_I8, 1},   {"INT16", T_I16, 2},  {"INT32", T_I32, 4},
    {"INT64", T_I64, 8},  {"FP16", T_F16, 2},  {"BF16", T_BF16, 2},  {"FP32", T_F32, 4},
    {"FP64", T_F64, 8},   {"BYTES", T_BYTES, 0},
};

int datatype_find(const char *name)
{
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (name && strcmp(types[i].name, name) == 0)
            return (int)i;
    return -1;
}

static int known(int type)
{
    return type >= 0 && (size_t)type < sizeof types / sizeof types[0];
}

int datatype_type_size(int type)
{
    return known(type) ? types[type].size : -1;
}

int datatype_type_has_json(int type)
{
    return known(type) && types[type].tag != T_F16 && types[type].tag != T_BF16 &&
           types[type].tag != T_BYTES;
}

int datatype_size(const char *name)
{
    return datatype_type_size(datatype_find(name));
}

int datatype_has_json(const char *name)
{
    return datatype_type_has_json(datatype_find(name));
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
    if (!known(t))
        return -1;
    switch (types[t].tag) {
    case T_BOOL:
        if (!jv_is_bool(v))
            return -1;
        ((uint8_t *)buf)[i] = jv_true(v) != 0;
        return 0;
    case T_U8: return store_uint(v, UINT8_MAX, buf, i, 1);
    case T_U16: return store_uint(v, UINT16_MAX, buf, i, 2);
    case T_U32: return store_uint(v, UINT32_MAX, buf, i, 4);
    case T_U64: return store_uint(v, UINT64_MAX, buf, i, 8);
    case T_I8: return store_int(v, INT8_MIN, INT8_MAX, buf, i, 1);
    case T_I16: return store_int(v, INT16_MIN, INT16_MAX, buf, i, 2);
    case T_I32: return store_int(v, INT32_MIN, INT32_MAX, buf, i, 4);
    case T_I64: return store_int(v, INT64_MIN, INT64_MAX, buf, i, 8);
    case T_F32: {
        double d;
        if (jv_number(v, &d) != 0)
            return -1;
        float f = (float)d;
        memcpy((char *)buf + i * sizeof f, &f, sizeof f);
        return 0;
    }
    case T_F64: {
        double d;
        if (jv_number(v, &d) != 0)
            return -1;
        memcpy((char *)buf + i * sizeof d, &d, sizeof d);
        return 0;
    }
    case T_F16:
    case T_BF16:
    case T_BYTES: break;
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
static size_t json_width(tag t)
{
    switch (t) {
    case T_BOOL: return 6;                /* false, */
    case T_U8: case T_I8: return 5;       /* -128, */
    case T_U16: case T_I16: return 7;
    case T_U32: case T_I32: return 12;
    case T_U64: case T_I64: return 21;
    case T_F32: case T_F64: return 25;    /* -1.2345678901234567e-308, */
    case T_F16: case T_BF16: case T_BYTES: break;
    }
    return 0;
}

/* Element e of buf as JSON. */
static void write_element(jbuf *b, tag t, const void *buf, size_t e)
{
    switch (t) {
    case T_BOOL: jbuf_lit(b, LOAD(uint8_t, buf, e) ? "true" : "false"); break;
    case T_U8: jbuf_u64(b, LOAD(uint8_t, buf, e)); break;
    case T_U16: jbuf_u64(b, LOAD(uint16_t, buf, e)); break;
    case T_U32: jbuf_u64(b, LOAD(uint32_t, buf, e)); break;
    case T_U64: jbuf_u64(b, LOAD(uint64_t, buf, e)); break;
    case T_I8: jbuf_i64(b, LOAD(int8_t, buf, e)); break;
    case T_I16: jbuf_i64(b, LOAD(int16_t, buf, e)); break;
    case T_I32: jbuf_i64(b, LOAD(int32_t, buf, e)); break;
    case T_I64: jbuf_i64(b, LOAD(int64_t, buf, e)); break;
    case T_F32: jbuf_double(b, LOAD(float, buf, e)); break;
    case T_F64: jbuf_double(b, LOAD(double, buf, e)); break;
    case T_F16: case T_BF16: case T_BYTES: break;
    }
}

int datatype_write_json(jbuf *b, const char *name, const void *buf, size_t n)
{
    int t = datatype_find(name);
    if (t < 0 || json_width(types[t].tag) == 0)
        return -1;
    /* Reserved, not touched: pages the text does not reach cost nothing. */
    if (n <= (SIZE_MAX - 2) / json_width(types[t].tag))
        jbuf_reserve(b, n * json_width(types[t].tag) + 2);
    jbuf_raw(b, "[", 1);
    for (size_t e = 0; e < n && !b->failed; e++) {
        if (e)
            jbuf_raw(b, ",", 1);
        write_element(b, types[t].tag, buf, e);
    }
    jbuf_raw(b, "]", 1);
    return 0;
}
