/* Shapes and sizes of tensors. */
#include "common/tensor.h"

#include <stdio.h>
#include <stdlib.h>

#include "common/datatype.h"

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
    /* Byte sizes are int64 in Triton and on gRPC's wire: past that, the
     * shape overflows as surely as past SIZE_MAX. */
    if (n > (size_t)INT64_MAX)
        return -1;
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
