/*
 * The GPU model's clock (gpu_instance_cuda.h): which batches are timed, the
 * points between a batch's phases, and each run's phases on the device.
 */
#include "models/gpu_instance_cuda.h"

#include <stdatomic.h>

#include <cuda_runtime_api.h>

static uint64_t elapsed_ns(cudaEvent_t from, cudaEvent_t to)
{
    float ms = 0;
    return cudaEventElapsedTime(&ms, from, to) == cudaSuccess ? (uint64_t)(ms * 1e6f) : 0;
}

/* A timed batch's phases on the device, kept for the instance's batches
 * that are not timed. Under in->lock, once the batch has ended. */
void gpu_time_batch(gpu_instance *in, run_batch *b)
{
    b->gpu_ns[GPU_INPUT] = elapsed_ns(b->time[RUN_START], b->time[RUN_INPUT_DONE]);
    b->gpu_ns[GPU_INFER] = elapsed_ns(b->time[RUN_INPUT_DONE], b->time[RUN_INFER_DONE]);
    b->gpu_ns[GPU_OUTPUT] = elapsed_ns(b->time[RUN_INFER_DONE], b->time[RUN_OUTPUT_DONE]);
    for (int p = 0; p < GPU_PHASES; p++)
        atomic_store_explicit(&in->last_ns[p], b->gpu_ns[p], memory_order_relaxed);
    /* release: a run that sees it reads the figures above */
    atomic_store_explicit(&in->timed_one, 1, memory_order_release);
}

/* A run's phases on the device into gpu: its batch's where the batch was
 * timed (every run of a batch waits for all of it, as Triton counts a
 * batch's compute time for each request in it), else the instance's last
 * timed batch's, scaled down where they would not fit in span_ns, the time
 * from queuing the run to waking after it. */
void gpu_device_phases(gpu_instance *in, const run_batch *b, uint64_t span_ns,
                       uint64_t gpu[GPU_PHASES])
{
    uint64_t sum = 0;
    for (int p = 0; p < GPU_PHASES; p++)
        sum += gpu[p] = b->timed ? b->gpu_ns[p]
                                 : atomic_load_explicit(&in->last_ns[p], memory_order_relaxed);
    if (!b->timed && sum > span_ns)
        for (int p = 0; p < GPU_PHASES; p++)
            gpu[p] = (uint64_t)((double)gpu[p] * (double)span_ns / (double)sum);
}

/* Whether a batch of n runs about to be queued on in is timed: the first
 * batches, until one has been, then those that hold one run in
 * gpu_pool.time_every. Timing costs the copies of every stream even off the
 * instance's stream (marks, waits and records: the seed benchmark's system rate at
 * window 1, concurrency 100, was 27,112 infer/s with every run timed
 * against 27,870 with one in 8 and 28,335 with one in 32, means of seven
 * rounds on the H200), and the phases of an instance's batches differ
 * little from one to the next. Under in->lock. */
int gpu_timed_batch(gpu_instance *in, unsigned n)
{
    unsigned first = in->runs, every = gpu_pool.time_every;
    in->runs += n;
    return !atomic_load_explicit(&in->timed_one, memory_order_acquire) || first % every == 0 ||
           first / every != (first + n - 1) / every;
}

/* Point i of b: marked on in's stream where the stream is now, timed on the
 * clock stream once the mark is passed; a batch not timed marks only its
 * end, with done. Under in->lock. */
cudaError_t gpu_pass_point(gpu_instance *in, run_batch *b, int i)
{
    if (!b->timed)
        return i == RUN_OUTPUT_DONE ? cudaEventRecord(b->done, in->stream) : cudaSuccess;
    cudaError_t e = cudaEventRecord(b->mark[i], in->stream);
    if (e == cudaSuccess)
        e = cudaStreamWaitEvent(in->clock, b->mark[i], 0);
    if (e == cudaSuccess)
        e = cudaEventRecord(b->time[i], in->clock);
    return e;
}
