/*
 * The instances of the GPU model 'yolo' (model_yolo.c), placed with --gpus
 * and --instances-per-gpu. Each instance owns a CUDA stream, device buffers
 * for one request's input and output, pinned staging buffers for tensors in
 * pageable host memory, and CUDA events that time the phases.
 *
 * A request takes the least busy instance (ties: one on the device that
 * holds its CUDA tensors, then round robin) and one of its run slots (up to
 * four requests in flight per instance; waiting for a slot is the "queue"
 * phase). A tensor in pageable host memory is copied into the slot's
 * pinned staging buffer first, outside the instance's lock. Then, under the
 * lock, the request queues its whole run on the instance's stream, where it
 * follows the runs queued before it (one run in --time-phases-every also
 * marks the points between its phases, which the instance's clock stream
 * times):
 *
 *   input   a CUDA region: device to device (peer if on another device);
 *           a pinned system region: one DMA copy from the mapping;
 *           a system region registered unpinned (tensor.window): DMA from
 *           the staging buffer, which the library's guarded copy filled:
 *           the one CPU copy of the tensor (a truncated object fails the
 *           request, not the server);
 *           inline data in the request's body: the same, through memcpy;
 *   infer   the kernel (yolo_kernel.cu);
 *   output  the same ways back, into the request's region or buffer;
 *
 * and waits (blocking, not spinning) for its last copy before it returns,
 * so that the response never promises bytes that are not there yet. While
 * it waits, its worker thread does not count as at work (worker_pool.h):
 * the next request's CPU work goes on, and the stream always has the next
 * run queued behind the current one.
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

/* Start the instances: gpus "all", "none" or "0,1"; time_every: the phases
 * of one run in time_every on each instance are timed on the device, and
 * the others count that instance's last timed run's (1: every run is
 * timed); weights: the model's table of taps x 84 floats, copied to each
 * device. Never fails the server: where no instance can be made, the
 * reason is kept for gpu_instances_ready and printed on stderr. */
void gpu_instances_start(const char *gpus, unsigned per_gpu, unsigned window,
                         unsigned time_every, const float *weights, size_t n_weights);
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
