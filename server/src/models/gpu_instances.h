/*
 * The instances of the GPU model 'yolo' (model_yolo.c), placed with --gpus
 * and --instances-per-gpu. Each instance owns a CUDA stream, device buffers
 * for one request's input and output, pinned staging buffers for tensors in
 * pageable host memory, and CUDA events that time the phases.
 *
 * One request at a time per instance: a request takes the least busy
 * instance (ties: one on the device that holds its CUDA tensors, then round
 * robin), waits for it if it is running another (that wait is the "queue"
 * phase), and then, on the instance's stream:
 *
 *   input   a CUDA region: device to device (peer if on another device);
 *           a pinned system region: one DMA copy from the mapping;
 *           a system region registered unpinned (tensor.window): the
 *           library's guarded copy straight into the pinned staging buffer,
 *           then DMA: the one CPU copy of the tensor (a truncated object
 *           fails the request, not the server);
 *           inline data in the request's body: memcpy into the staging
 *           buffer, then DMA;
 *   infer   the kernel (yolo_kernel.cu);
 *   output  the same ways back, into the request's region or buffer;
 *
 * and waits (blocking, not spinning) for the last copy before it returns, so
 * that the response never promises bytes that are not there yet.
 *
 * gpu_instances_cuda.c is the implementation; gpu_instances_none.c, in a build
 * without CUDA, reports the model unavailable.
 */
#ifndef FRONTEND_GPU_INSTANCES_H
#define FRONTEND_GPU_INSTANCES_H

#include <stddef.h>

#include "models/model_ops.h"
#include "common/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What one run computes (model_yolo.c fills it). */
typedef struct gpu_job {
    const tensor *in;   /* FP16 [3,H,W] */
    tensor *out;        /* FP16 [84,anchors] */
    int height, width;
} gpu_job;

/* Start the instances: gpus "all", "none" or "0,1"; weights: the model's
 * table of taps x 84 floats, copied to each device. Never fails the server:
 * where no instance can be made, the reason is kept for gpu_instances_ready
 * and printed on stderr. */
void gpu_instances_start(const char *gpus, unsigned per_gpu, unsigned window,
                         const float *weights, size_t n_weights);
/* Free everything; no run may be in progress. */
void gpu_instances_stop(void);
/* 0 when at least one instance runs; else 400 and the reason. */
unsigned gpu_instances_ready(char *err, size_t errlen);
/* The devices that hold instances, into devices (up to max); returns how
 * many instances there are in all. */
unsigned gpu_instances_placement(int *devices, unsigned max, unsigned *n_devices);
/* One request on one instance: 0, or an HTTP status with the message. */
unsigned gpu_instances_run(const gpu_job *job, model_phases *ph, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
