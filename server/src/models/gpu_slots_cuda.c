/*
 * The GPU model's run slots (gpu_instance_cuda.h): which instance a request
 * takes, the slot it holds there, the slot's device and staging buffers
 * (grown for a run, trimmed after it), and a batch's events.
 */
#include "models/gpu_instance_cuda.h"

#include <pthread.h>
#include <stdatomic.h>

#include <cuda_runtime_api.h>

#include "common/worker_pool.h"
#include "models/placement.h"

void gpu_batch_free_events(run_batch *b)
{
    for (int i = 0; i < RUN_POINTS; i++) {
        if (b->mark[i])
            cudaEventDestroy(b->mark[i]);
        if (b->time[i])
            cudaEventDestroy(b->time[i]);
        b->mark[i] = b->time[i] = NULL;
    }
    if (b->done)
        cudaEventDestroy(b->done);
    b->done = NULL;
}

/* A batch's events, on the current device (the instance's), made on its
 * first use; on failure none is left. */
cudaError_t gpu_batch_make(run_batch *b)
{
    if (b->done) /* made last: all of them exist */
        return cudaSuccess;
    cudaError_t e = cudaSuccess;
    for (int i = 0; i < RUN_POINTS && e == cudaSuccess; i++) {
        e = cudaEventCreateWithFlags(&b->mark[i], cudaEventDisableTiming);
        /* The runs' threads sleep on the last rather than spinning: the
         * server's CPUs belong to the protocol threads and the other workers. */
        if (e == cudaSuccess)
            e = cudaEventCreateWithFlags(&b->time[i], i == RUN_OUTPUT_DONE ? cudaEventBlockingSync
                                                                           : cudaEventDefault);
    }
    if (e == cudaSuccess)
        e = cudaEventCreateWithFlags(&b->done, cudaEventDisableTiming | cudaEventBlockingSync);
    if (e != cudaSuccess)
        gpu_batch_free_events(b);
    return e;
}

void gpu_slot_free(run_slot *sl)
{
    cudaFreeHost(sl->h_in);
    cudaFreeHost(sl->h_out);
    cudaFree(sl->d_in);
    cudaFree(sl->d_out);
    *sl = (run_slot){0};
}

static int instance_device(const void *ctx, unsigned i)
{
    return ((const gpu_instance *)ctx)[i].device;
}

static unsigned instance_load(const void *ctx, unsigned i)
{
    /* relaxed: a hint for placement, nothing is published through it */
    return atomic_load_explicit(&((const gpu_instance *)ctx)[i].load, memory_order_relaxed);
}

/* The instance for a request whose n tensors lie on tensor_devices
 * (placement.h), counted busy from here until gpu_give_back. Its load thus
 * counts each request from before it takes a slot (gpu_slot_take) until
 * after it gives the slot back: those holding one and those waiting, as
 * the rule compares it with the slots. *load_before: its load before this
 * request (0: it held none). */
gpu_instance *gpu_take_instance(const int *tensor_devices, unsigned n, unsigned *load_before)
{
    unsigned start = atomic_fetch_add_explicit(&gpu_pool.next, 1, memory_order_relaxed);
    placement_instances inst = {.n = gpu_pool.n, .slots = SLOTS_PER_INSTANCE,
                                .device = instance_device, .load = instance_load,
                                .ctx = gpu_pool.inst};
    placement_case why;
    gpu_instance *best = &gpu_pool.inst[placement_choose(tensor_devices, n, &inst, start, &why)];
    *load_before = atomic_fetch_add_explicit(&best->load, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&gpu_pool.placed[why], 1, memory_order_relaxed);
    return best;
}

int gpu_runs_within(gpu_instance *in, uint64_t ns)
{
    /* acquire: the figures were stored before timed_one (gpu_time_batch) */
    if (!atomic_load_explicit(&in->timed_one, memory_order_acquire))
        return 0;
    uint64_t sum = 0;
    for (int p = 0; p < GPU_PHASES; p++)
        sum += atomic_load_explicit(&in->last_ns[p], memory_order_relaxed);
    return sum <= ns;
}

void gpu_give_back(gpu_instance *in)
{
    atomic_fetch_sub_explicit(&in->load, 1, memory_order_relaxed);
}

/* A free slot of in; waits while all are held (that wait is the "queue"
 * phase, and the worker pool's thread does not count as at work meanwhile). */
run_slot *gpu_slot_take(gpu_instance *in)
{
    pthread_mutex_lock(&in->lock);
    if (!in->free_slots) {
        worker_pool_wait_begin();
        in->slot_waiters++;
        while (!in->free_slots)
            pthread_cond_wait(&in->slot_freed, &in->lock);
        in->slot_waiters--;
        worker_pool_wait_end();
    }
    run_slot *sl = in->free_slots;
    in->free_slots = sl->next;
    pthread_mutex_unlock(&in->lock);
    return sl;
}

void gpu_slot_free_locked(gpu_instance *in, run_slot *sl)
{
    sl->job = NULL;
    sl->batch = NULL;
    sl->pending = NULL;
    sl->next = in->free_slots;
    in->free_slots = sl;
    pthread_cond_signal(&in->slot_freed);
}

/* Free a device or pinned host buffer, and say it is gone. */
static void release(void **buf, size_t *cap, int pinned_host)
{
    if (pinned_host)
        cudaFreeHost(*buf);
    else
        cudaFree(*buf);
    *buf = NULL;
    *cap = 0;
}

/* Grow a device or pinned host buffer to n bytes (its contents are not kept). */
static cudaError_t grow(void **buf, size_t *cap, size_t n, int pinned_host)
{
    if (*cap >= n)
        return cudaSuccess;
    release(buf, cap, pinned_host);
    cudaError_t e = pinned_host ? cudaMallocHost(buf, n) : cudaMalloc(buf, n);
    if (e == cudaSuccess)
        *cap = n;
    return e;
}

/* The slot's buffers for this job: device buffers always, pinned staging
 * for a tensor in pageable memory. The slot's last run has ended, so
 * nothing on the device uses them. */
cudaError_t gpu_grow_slot(run_slot *sl, const gpu_job *job, int stage_in, int stage_out,
                          const char **what)
{
    cudaError_t e;
    *what = "cudaMalloc (a run slot's device buffers)";
    if ((e = grow(&sl->d_in, &sl->d_in_cap, job->in->byte_size, 0)) != cudaSuccess ||
        (e = grow(&sl->d_out, &sl->d_out_cap, job->out->byte_size, 0)) != cudaSuccess)
        return e;
    *what = "cudaMallocHost (a run slot's staging buffers)";
    if (stage_in && (e = grow(&sl->h_in, &sl->h_in_cap, job->in->byte_size, 1)) != cudaSuccess)
        return e;
    if (stage_out && (e = grow(&sl->h_out, &sl->h_out_cap, job->out->byte_size, 1)) != cudaSuccess)
        return e;
    return cudaSuccess;
}

/* Free a buffer larger than SLOT_KEEP_BYTES (grow makes it again). */
static void shrink(void **buf, size_t *cap, int pinned_host)
{
    if (*cap > SLOT_KEEP_BYTES)
        release(buf, cap, pinned_host);
}

/* After the slot's run has ended: its buffers back to SLOT_KEEP_BYTES at most. */
void gpu_slot_trim(run_slot *sl)
{
    shrink(&sl->d_in, &sl->d_in_cap, 0);
    shrink(&sl->d_out, &sl->d_out_cap, 0);
    shrink(&sl->h_in, &sl->h_in_cap, 1);
    shrink(&sl->h_out, &sl->h_out_cap, 1);
}
