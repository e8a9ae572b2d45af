/* One table of datatypes; the conversions switch on its tag. */
#include "datatype.h"

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

static int find(const char *name)
{
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (name && strcmp(types[i].name, name) == 0)
            return (int)i;
    return -1;
}

int datatype_size(const char *name)
{
    int i = find(name);
    return i < 0 ? -1 : types[i].size;
}

int datatype_has_json(const char *name)
{
    int i = find(name);
    return i >= 0 && types[i].tag != T_F16 && types[i].tag != T_BF16 && types[i].tag != T_BYTES;
}

/* Integer element in [lo, hi], stored in size bytes (little-endian host). */
static int store_int(const json_t *v, long long lo, long long hi, void *buf, size_t i, int size)
{
    if (!json_is_integer(v))
        return -1;
    long long x = json_integer_value(v);
    if (x < lo || x > hi)
        return -1;
    /* Low bytes of x, little-endian host: tensors may sit at any alignment. */
    uint64_t u = (uint64_t)x;
    memcpy((char *)buf + i * (size_t)size, &u, (size_t)size);
    return 0;
}

int datatype_from_json(const char *name, const json_t *v, void *buf, size_t i)
{
    int t = find(name);
    if (t < 0)
        return -1;
    switch (types[t].tag) {
    case T_BOOL:
        if (!json_is_boolean(v))
            return -1;
        ((uint8_t *)buf)[i] = json_is_true(v);
        return 0;
    case T_U8: return store_int(v, 0, UINT8_MAX, buf, i, 1);
    case T_U16: return store_int(v, 0, UINT16_MAX, buf, i, 2);
    case T_U32: return store_int(v, 0, UINT32_MAX, buf, i, 4);
    case T_U64: return store_int(v, 0, INT64_MAX, buf, i, 8); /* JSON ints here are int64 */
    case T_I8: return store_int(v, INT8_MIN, INT8_MAX, buf, i, 1);
    case T_I16: return store_int(v, INT16_MIN, INT16_MAX, buf, i, 2);
    case T_I32: return store_int(v, INT32_MIN, INT32_MAX, buf, i, 4);
    case T_I64: return store_int(v, INT64_MIN, INT64_MAX, buf, i, 8);
    case T_F32: {
        if (!json_is_number(v))
            return -1;
        float f = (float)json_number_value(v);
        memcpy((char *)buf + i * sizeof f, &f, sizeof f);
        return 0;
    }
    case T_F64: {
        if (!json_is_number(v))
            return -1;
        double d = json_number_value(v);
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

json_t *datatype_to_json(const char *name, const void *buf, size_t i)
{
    int t = find(name);
    if (t < 0)
        return NULL;
    switch (types[t].tag) {
    case T_BOOL: return json_boolean(LOAD(uint8_t, buf, i));
    case T_U8: return json_integer(LOAD(uint8_t, buf, i));
    case T_U16: return json_integer(LOAD(uint16_t, buf, i));
    case T_U32: return json_integer(LOAD(uint32_t, buf, i));
    case T_U64: return json_integer((json_int_t)LOAD(uint64_t, buf, i)); /* JSON ints are int64 */
    case T_I8: return json_integer(LOAD(int8_t, buf, i));
    case T_I16: return json_integer(LOAD(int16_t, buf, i));
    case T_I32: return json_integer(LOAD(int32_t, buf, i));
    case T_I64: return json_integer(LOAD(int64_t, buf, i));
    case T_F32: return json_real(LOAD(float, buf, i));
    case T_F64: return json_real(LOAD(double, buf, i));
    case T_F16:
    case T_BF16:
    case T_BYTES: break;
    }
    return NULL;
}
