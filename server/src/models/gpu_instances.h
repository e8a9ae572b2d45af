/*
 * The instances of the GPU model 'yolo' (model_yolo.c), placed with --gpus
 * and --instances-per-gpu. Each instance owns a CUDA stream, run slots
 * (device buffers for one request's input and output, and pinned staging
 * buffers for tensors in pageable host memory), and CUDA events that mark
 * and time its batches.
 *
 * A request runs where its tensors are (placement.h): when every tensor
 * of it in a CUDA region lies on one device that has instances, on the
 * least busy of that device's instances, so that no copy crosses the peer
 * link, unless all their slots are taken and another device's instance
 * has one free (the request spills there); otherwise (no CUDA tensor, or
 * CUDA tensors on several devices or on one without an instance) on the
 * least busy of all; ties go round robin, and /metrics counts each case.
 * The request takes one of the instance's twelve run slots
 * (waiting for a slot is the "queue" phase; a slot keeps its buffers for the
 * next request up to 16 MiB each, and frees larger ones after their run). A
 * tensor in pageable host memory is copied into the slot's pinned staging
 * buffer first, outside the instance's lock. Then the request waits its
 * turn: while two batches are on the instance's stream and not yet seen to
 * end, the requests that come wait, and when one ends, up to --copy-batch of
 * them are queued as the next batch: their inputs' copies as one batch of
 * copies, their kernels one after the other, their outputs' copies as one
 * batch (a copy engine pays a fixed cost per copy; alone on the stream, a
 * request is queued at once and goes by itself). A batch follows those
 * queued before it (one holding a run in --time-phases-every also marks the
 * points between its phases, which the instance's clock stream times):
 *
 *   input   a CUDA region on the instance's device: none, the kernel reads
 *           it where it lies (unless its offset is odd, FP16 elements
 *           being two bytes, or the output overlaps it: then device to
 *           device); on another device: peer to peer;
 *           a pinned system region: one DMA copy from the mapping;
 *           a system region registered unpinned (tensor.window): DMA from
 *           the staging buffer, which the library's guarded copy filled:
 *           the one CPU copy of the tensor (a truncated object fails the
 *           request, not the server);
 *           inline data in the request's body: the same, through memcpy;
 *   infer   the kernel (yolo_kernel.cu);
 *   output  the same ways back, into the request's region or buffer;
 *
 * and waits (blocking, not spinning) for its batch's last copy before it
 * returns, so that the response never promises bytes that are not there
 * yet. While it waits, its worker thread does not count as at work
 * (worker_pool.h): the next request's CPU work goes on, and the stream
 * always has the next batch queued behind the current one.
 *
 * A request that a transport's thread hands over (gpu_instances_submit)
 * takes none of a worker's time: on an idle instance whose runs are short
 * (or not much longer, one such run at a time) it runs on that thread,
 * which polls its end; otherwise it joins the instance's waiting
 * runs and the instance's finishing thread, which waits for each batch in
 * turn, completes it: one wake-up per batch rather than one per request.
 * Where all twelve slots are held, it waits for one in a list of at most
 * --max-queue requests per instance; past that it is refused at once
 * (STATUS_OVER_LIMIT: 429, RESOURCE_EXHAUSTED), so that the transport's
 * thread never blocks and what a flood of calls holds is bounded.
 *
 * gpu_*_cuda.c are the implementation (gpu_instance_cuda.h says which file
 * holds what); gpu_instances_none.c, in a build
 * without CUDA, reports the model unavailable.
 */
#ifndef SERVER_GPU_INSTANCES_H
#define SERVER_GPU_INSTANCES_H

#include <stddef.h>
#include <stdint.h>

#include "models/model_ops.h"
#include "models/placement.h"
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

/* What the instances are told (the models' config carries it). */
typedef struct gpu_instances_config {
    const char *gpus;      /* --gpus: "all", "none" or "0,1" */
    unsigned per_gpu;      /* --instances-per-gpu */
    unsigned window;       /* --yolo-window: K of model_yolo.h */
    /* --time-phases-every: the phases of the batch holding one run in
     * time_every on each instance are timed on the device, and the others
     * count that instance's last timed batch's (1: every batch is timed) */
    unsigned time_every;
    unsigned copy_batch;   /* --copy-batch: the most runs in one batch (1 to 12;
                              1: each run's copies alone) */
    uint64_t wait_spin_ns; /* --spin-us: a run that is the only one waiting for the
                              device polls its end this long before it sleeps
                              (0: sleeps at once) */
    unsigned max_queue;    /* --max-queue: the most handed-over requests that wait
                              for a run slot of one instance; one more is refused
                              with STATUS_OVER_LIMIT (0: the default, 64) */
} gpu_instances_config;

/* Start the instances as cfg says; weights: the model's table of taps x 84
 * floats, copied to each device. Never fails the server: where no instance
 * can be made, the reason is kept for gpu_instances_ready and printed on
 * stderr. The instances are the process's one set, shared by every
 * adapter's requests: started once, before any request. */
void gpu_instances_start(const gpu_instances_config *cfg, const float *weights,
                         size_t n_weights);
/* Free everything; no run may be in progress. */
void gpu_instances_stop(void);
/* STATUS_OK when at least one instance runs; else STATUS_NOT_READY and the
 * reason. */
server_status gpu_instances_ready(char *err, size_t errlen);
/* The devices that hold instances, into devices (up to max); returns how
 * many instances there are in all. */
unsigned gpu_instances_placement(int *devices, unsigned max, unsigned *n_devices);
/* The batches queued on the instances' streams since start, and the runs
 * in them (relaxed counters, for /metrics). */
void gpu_instances_copy_batches(uint64_t *batches, uint64_t *runs);
/* The runs' input (in_place[0]) and output (in_place[1]) tensors in CUDA
 * regions that the kernel read or wrote where they lie, with no copy on the
 * device, since start (relaxed counters, for /metrics). */
void gpu_instances_kernel_in_place(uint64_t in_place[2]);
/* The requests given an instance since start, per placement case
 * (placement.h; relaxed counters, for /metrics). */
void gpu_instances_placed(uint64_t placed[PLACEMENT_CASES]);
/* One request on one instance: STATUS_OK, or the failure's status with the
 * message. */
server_status gpu_instances_run(const gpu_job *job, model_phases *ph, char *err, size_t errlen);

/* The longest a run may take on the device, its copies included, for
 * gpu_instances_submit to run it on the calling thread: the instance's last
 * timed batch says how long its runs take. */
#define GPU_SHORT_RUN_NS 100000u
/* The same for a longer run, one at a time in the process and only while
 * no other instance holds a request (a lone request, as at concurrency
 * 1): one transport thread at most is held this
 * long, and a run whose copies cross the link (a pinned system region of a
 * few MB) ends without the wake-up of the instance's finishing thread,
 * which on a virtual machine costs tens of microseconds, about what such
 * copies take. Past it a wake-up is a small part of the run. */
#define GPU_LONE_RUN_NS 500000u
/* Handed-over requests that may wait for a run slot of one instance when
 * --max-queue is not given: with twelve slots each, one instance then
 * holds 76 requests, more than a client window of 64 sends it. */
#define GPU_DEFAULT_MAX_QUEUE 64u

/* A run that gpu_instances_submit hands to an instance without waiting for
 * it. The caller fills the first four fields and keeps the struct until
 * done has been called. */
typedef struct gpu_pending {
    gpu_job job;
    model_phases *ph;            /* the run's phases, set before done */
    char *err;                   /* done's message, when st is not 0 */
    size_t errlen;
    /* Called once: st STATUS_OK, or the failure's status with the message
     * in err. */
    void (*done)(struct gpu_pending *p, server_status st);
    uint64_t started_ns;         /* the scheduler's */
    struct gpu_pending *next;
} gpu_pending;

/* Start p's run without waiting for a run slot or the device, for a
 * caller that must not wait (a transport's thread), where every tensor is
 * one the device reaches where it lies (a CUDA or pinned region: no CPU
 * copy). On an instance that holds no other request and whose runs are
 * short (GPU_SHORT_RUN_NS), or up to GPU_LONE_RUN_NS while no other
 * instance holds a request and no other caller's thread is making such a
 * longer run, the run is made here,
 * polling its end, and done is called before this returns. Else the run
 * joins the instance's waiting runs (first waiting for a free slot where
 * all twelve are held, without its caller) and done is called on the
 * thread that ends it: the instance's finishing thread once the device is
 * done, or one giving a slot back where that slot could not be readied.
 * Returns STATUS_OK (done is or will be called), MODEL_BUSY (nothing done:
 * a tensor needs staging), STATUS_OVER_LIMIT when the least busy instance
 * already holds --max-queue requests waiting for a slot, or another
 * failure's status; with any failure the message is in p->err and done is
 * not called. */
server_status gpu_instances_submit(gpu_pending *p);

#ifdef __cplusplus
}
#endif

#endif
