/* A tensor of an inference request or response, wherever its bytes live. */
#ifndef SERVER_TENSOR_H
#define SERVER_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include <shmreg/shmreg.h>


#ifdef __cplusplus
extern "C" {
#endif

#define TENSOR_MAX_DIMS 8

/* A tensor's window in a system region that the CPU may reach only through
 * the library's guarded copies (shmreg_copy_from_view / _to_view): the
 * region is not pinned, and its client may truncate the object under the
 * mapping. A GPU model copies such a tensor itself, once, between the
 * window and its instance's pinned staging buffer, so that the bytes cross
 * the CPU one time per direction (core/tensor_paths.h: staged_copy). */
typedef struct tensor_window {
    shmreg_region *ref; /* lent: the request holds the reference until its reply is sent */
    shmreg_view view;   /* the window, offset 0 at the tensor's first byte */
    shmreg_err failed;  /* SHMREG_OK, or the guarded copy's failure (FAULT: truncated) */
} tensor_window;

typedef struct tensor {
    const char *name;     /* borrowed: from the request JSON or a model's spec */
    const char *datatype; /* borrowed likewise */
    int64_t shape[TENSOR_MAX_DIMS];
    int ndims;
    size_t byte_size;     /* bytes at data */
    void *data;           /* in a shared-memory view, the request body, owned, or the
                           * request's own small buffer (http/infer.c) */
    void *owned;          /* malloc'ed buffer behind data, or NULL */
    /* Where data lies, for a model that runs on a GPU (model_yolo.c); zero
     * for the request body and owned buffers. */
    int on_device;        /* data is a device pointer on device_id (a CUDA region) */
    int device_id;
    int pinned;           /* data is page-locked host memory (a pinned system region) */
    /* Non-NULL: data is NULL and the bytes lie in this window, for a model
     * that runs on a GPU to copy itself (tensor_window says why). */
    tensor_window *window;
} tensor;

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
