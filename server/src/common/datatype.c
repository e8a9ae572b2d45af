/* One table of datatypes; the conversions (http/json_tensor.c, grpc/) switch on its tag. */
#include "common/datatype.h"

#include <stdint.h>
#include <string.h>

static const struct { const char *name; datatype_tag tag; int size; } types[] = {
    {"BOOL", DT_BOOL, 1},  {"UINT8", DT_U8, 1},  {"UINT16", DT_U16, 2}, {"UINT32", DT_U32, 4},
    {"UINT64", DT_U64, 8}, {"INT8", DT_I8, 1},   {"INT16", DT_I16, 2},  {"INT32", DT_I32, 4},
    {"INT64", DT_I64, 8},  {"FP16", DT_F16, 2},  {"BF16", DT_BF16, 2},  {"FP32", DT_F32, 4},
    {"FP64", DT_F64, 8},   {"BYTES", DT_BYTES, 0},
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
    return known(type) && types[type].tag != DT_F16 && types[type].tag != DT_BF16 &&
           types[type].tag != DT_BYTES;
}

int datatype_size(const char *name)
{
    return datatype_type_size(datatype_find(name));
}

int datatype_has_json(const char *name)
{
    return datatype_type_has_json(datatype_find(name));
}

datatype_tag datatype_type_tag(int type)
{
    return known(type) ? types[type].tag : DT_BYTES;
}
