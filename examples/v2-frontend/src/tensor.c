/* Shapes and sizes of tensors. */
#include "tensor.h"

#include <stdio.h>
#include <stdlib.h>

#include "datatype.h"

int tensor_shape_from_json(const json_t *shape, tensor *t, char *err, size_t errlen)
{
    if (!json_is_array(shape)) {
        snprintf(err, errlen, "'shape' must be an array of integers");
        return -1;
    }
    if (json_array_size(shape) > TENSOR_MAX_DIMS) {
        snprintf(err, errlen, "shape has %zu dimensions; at most %d are supported",
                 json_array_size(shape), TENSOR_MAX_DIMS);
        return -1;
    }
    t->ndims = (int)json_array_size(shape);
    for (int i = 0; i < t->ndims; i++) {
        const json_t *d = json_array_get(shape, (size_t)i);
        if (!json_is_integer(d) || json_integer_value(d) < 0) {
            snprintf(err, errlen, "'shape' must be an array of non-negative integers");
            return -1;
        }
        t->shape[i] = json_integer_value(d);
    }
    return 0;
}

json_t *tensor_shape_to_json(const tensor *t)
{
    json_t *a = json_array();
    for (int i = 0; a && i < t->ndims; i++) {
        if (json_array_append_new(a, json_integer(t->shape[i])) != 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

int tensor_expected_size(const tensor *t, size_t *bytes)
{
    int elem = datatype_size(t->datatype);
    if (elem <= 0)
        return -1;
    size_t n = (size_t)elem;
    for (int i = 0; i < t->ndims; i++) {
        if (t->shape[i] != 0 && n > SIZE_MAX / (size_t)t->shape[i])
            return -1;
        n *= (size_t)t->shape[i];
    }
    *bytes = n;
    return 0;
}

const char *tensor_shape_string(const int64_t *shape, int ndims, char *buf, size_t len)
{
    size_t used = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < ndims && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%lld", i ? "," : "", (long long)shape[i]);
    if (used < len)
        snprintf(buf + used, len - used, "]");
    return buf;
}

void tensor_free(tensor *t)
{
    free(t->owned);
    t->owned = NULL;
}
