/* A tensor of an inference request or response, wherever its bytes live. */
#ifndef FRONTEND_TENSOR_H
#define FRONTEND_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "common/json_io.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TENSOR_MAX_DIMS 8

typedef struct tensor {
    const char *name;     /* borrowed: from the request JSON or a model's spec */
    const char *datatype; /* borrowed likewise */
    int64_t shape[TENSOR_MAX_DIMS];
    int ndims;
    size_t byte_size;     /* bytes at data */
    void *data;           /* in a shared-memory view, the request body, or owned */
    void *owned;          /* malloc'ed buffer behind data, or NULL */
    /* Where data lies, for a model that runs on a GPU (model_yolo.c); zero
     * for the request body and owned buffers. */
    int on_device;        /* data is a device pointer on device_id (a CUDA region) */
    int device_id;
    int pinned;           /* data is page-locked host memory (a pinned system region) */
} tensor;

/* Read a JSON shape (array of non-negative integers) into t. Returns 0, or
 * -1 with a message in err. */
int tensor_shape_from_json(const json_object *shape, tensor *t, char *err, size_t errlen);
/* t's shape as a JSON array, into b. */
void tensor_shape_write(jbuf *b, const tensor *t);
/* Bytes a tensor of t's datatype and shape holds (BYTES: unknown, -1).
 * -1 also when the product overflows size_t. */
int tensor_expected_size(const tensor *t, size_t *bytes);
/* "[1,16]" into buf, for messages. */
const char *tensor_shape_string(const int64_t *shape, int ndims, char *buf, size_t len);
void tensor_free(tensor *t);

#ifdef __cplusplus
}
#endif

#endif
