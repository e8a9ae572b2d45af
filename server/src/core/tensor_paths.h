/*
 * Which way each tensor in shared memory travelled between its region and
 * the model, counted for /metrics (http/metrics.c) and logged with -v, so
 * that a user can tell when the fast path was not taken:
 *
 *   dma_in_place    a GPU model reached the region where it lies: a pinned
 *                   system region by DMA (the pin holds its pages), or a
 *                   CUDA region as a device pointer;
 *   staged_copy     an unpinned system region for a GPU model: one guarded
 *                   CPU copy into (input) or out of (output) the instance's
 *                   pinned staging buffer, which DMA then reads or filled;
 *   cpu_copy        a system region for a model on the CPU: one guarded copy
 *                   into (or out of) the buffer the model reads (writes);
 *   device_copy     a CUDA region for a model on the CPU: one device copy;
 *   remote_copy     a remote region (another host's memory, over UCX): one
 *                   get into (put out of) a host buffer, whatever the model.
 *
 * Counters are process-wide relaxed atomics: a scrape may see one request's
 * tensor count before its bytes, never a torn value.
 */
#ifndef SERVER_TENSOR_PATHS_H
#define SERVER_TENSOR_PATHS_H

#include <stddef.h>
#include <stdint.h>

#include <shmreg/shmreg.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tensor_path {
    TENSOR_PATH_NONE = 0, /* not in shared memory: not counted */
    TENSOR_PATH_DMA_IN_PLACE,
    TENSOR_PATH_STAGED_COPY,
    TENSOR_PATH_CPU_COPY,
    TENSOR_PATH_DEVICE_COPY,
    TENSOR_PATH_REMOTE_COPY,
    TENSOR_PATH_COUNT
} tensor_path;

typedef enum tensor_direction { TENSOR_INPUT = 0, TENSOR_OUTPUT = 1 } tensor_direction;

/* The path a tensor in view takes: device_model is model_device_tensors(). */
tensor_path tensor_path_for(int device_model, const shmreg_view *view);
/* "dma_in_place", ...; "none" for TENSOR_PATH_NONE. */
const char *tensor_path_name(tensor_path p);
const char *tensor_direction_name(tensor_direction d);
/* Count one tensor of n bytes (TENSOR_PATH_NONE: nothing). */
void tensor_path_count(tensor_path p, tensor_direction d, size_t n);
/* The totals since start. */
void tensor_path_totals(tensor_path p, tensor_direction d, uint64_t *tensors, uint64_t *bytes);

#ifdef __cplusplus
}
#endif

#endif
