/*
 * The GPU model's batching scheduler (gpu_instance_cuda.h): a run stages its
 * input, waits its turn, is queued on the instance's stream with the runs
 * waiting beside it as one batch of copies each way, and waits for its
 * batch's end (gpu_instances_run).
 */
#include "models/gpu_instance_cuda.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "common/clock.h"
#include "common/worker_pool.h"
#include "models/yolo_kernel.h"

/* The runs waiting for their batch's end on every instance. */
static _Atomic unsigned runs_waiting;

static void release_slot(gpu_instance *in, run_slot *sl);

/* The end of a run's batch. A run that waits alone polls the event for up
 * to spin nanoseconds first: woken from cudaEventSynchronize, a thread on a
 * virtual machine starts tens of microseconds after the device is done,
 * more than the whole run of a light model. With others waiting the server
 * is busy, its cores are better spent on them, and it sleeps at once. */
static cudaError_t wait_for_batch(cudaEvent_t done, uint64_t spin, const char **what)
{
    unsigned others = atomic_fetch_add_explicit(&runs_waiting, 1, memory_order_relaxed);
    cudaError_t e = cudaErrorNotReady;
    if (spin && !others) {
        *what = "cudaEventQuery (the run)";
        uint64_t until = monotonic_ns() + spin;
        while ((e = cudaEventQuery(done)) == cudaErrorNotReady && monotonic_ns() < until)
            ;
    }
    if (e == cudaErrorNotReady) {
        *what = "cudaEventSynchronize (the run)";
        e = cudaEventSynchronize(done);
    }
    atomic_fetch_sub_explicit(&runs_waiting, 1, memory_order_relaxed);
    return e;
}

/* A tensor in an unpinned system region (tensor.window) crosses the CPU
 * once: the library's guarded copy between the window and the slot's pinned
 * staging buffer, which DMA then reads or filled. A truncated object fails
 * the copy, not the process: the failure is kept in the window for
 * infer_core.c to answer, and *guard_failed tells the caller to stop. */
static int guarded_in(tensor_window *w, void *staging, size_t n, int *guard_failed)
{
    w->failed = shmreg_copy_from_view(w->ref, &w->view, 0, staging, n);
    *guard_failed = w->failed != SHMREG_OK;
    return !*guard_failed;
}

static void guarded_out(tensor_window *w, const void *staging, size_t n, int *guard_failed)
{
    w->failed = shmreg_copy_to_view(w->ref, &w->view, 0, staging, n);
    *guard_failed = w->failed != SHMREG_OK;
}

/* The input into the slot's staging buffer, where it is in pageable memory:
 * before the run waits for its batch, so that the CPU copy holds neither
 * the stream nor its order. 0, or -1 with *guard_failed set. */
static int stage_input(run_slot *sl, const tensor *src, int *guard_failed)
{
    if (src->window)
        return guarded_in(src->window, sl->h_in, src->byte_size, guard_failed) ? 0 : -1;
    memcpy(sl->h_in, src->data, src->byte_size); /* the request's body */
    return 0;
}

/* The copies between host and device of n runs on stream (up: host to
 * device), as one batch where there are several (the copy engine's cost
 * per copy is paid once: run_batch). Each copy reads its source in the
 * stream's order, as cudaMemcpyAsync does. A toolkit older than CUDA 13
 * copies them one by one. */
static cudaError_t copy_together(void *const *dst, const void *const *src, const size_t *size,
                                 unsigned n, int up, int device, cudaStream_t stream)
{
#if CUDART_VERSION >= 13000
    if (n > 1) {
        struct cudaMemLocation host = {.type = cudaMemLocationTypeHost},
                               dev = {.type = cudaMemLocationTypeDevice, .id = device};
        struct cudaMemcpyAttributes attr = {.srcAccessOrder = cudaMemcpySrcAccessOrderStream,
                                            .srcLocHint = up ? host : dev,
                                            .dstLocHint = up ? dev : host};
        size_t first = 0;
        return cudaMemcpyBatchAsync(dst, src, size, n, &attr, &first, 1, stream);
    }
#endif
    for (unsigned i = 0; i < n; i++) {
        cudaError_t e = cudaMemcpyAsync(dst[i], src[i], size[i], cudaMemcpyDefault, stream);
        if (e != cudaSuccess)
            return e;
    }
    return cudaSuccess;
}

/* t lies in a CUDA region that in's kernel may read or write where it is:
 * on in's device (a peer's memory would cross the link at every sample) and
 * aligned for the kernel's FP16 elements (a client chooses the offset). */
static int kernel_reaches(const gpu_instance *in, const tensor *t)
{
    return t->on_device && t->device_id == in->device && (uintptr_t)t->data % sizeof(uint16_t) == 0;
}

/* The places of sl's run on in: the input read from from, the output
 * written to to, and where the kernel reads and writes. A tensor in a CUDA
 * region on in's device is the kernel's own operand, saving a copy each way
 * (two calls into CUDA under in->lock and two copies on the stream per run),
 * unless input and output overlap: the kernel's threads would read what
 * others wrote. */
static void place_run(const gpu_instance *in, run_slot *sl, const gpu_job *job, const void *from,
                      void *to)
{
    const tensor *src = job->in, *dst = job->out;
    uintptr_t in0 = (uintptr_t)from, out0 = (uintptr_t)to;
    int overlap = in0 < out0 + dst->byte_size && out0 < in0 + src->byte_size;
    int direct_in = kernel_reaches(in, src), direct_out = kernel_reaches(in, dst);
    if (direct_in && direct_out && overlap)
        direct_in = direct_out = 0;
    sl->job = job;
    sl->from = from;
    sl->to = to;
    sl->kernel_in = direct_in ? from : sl->d_in;
    sl->kernel_out = direct_out ? to : sl->d_out;
}

/* Whether sl's kernel reads its input (up) or writes its output (!up) in
 * the tensor's region itself, as place_run decided: that tensor needs no
 * copy on the device. */
static int kernel_in_region(const run_slot *sl, int up)
{
    return up ? sl->kernel_in == sl->from : sl->kernel_out == sl->to;
}

/* The copies of one direction of the n runs: those between host and device
 * memory together, those from or to a CUDA region (device to device, or
 * peer) one by one, none where the kernel reads or writes the region. */
static cudaError_t copy_runs(run_slot *const *runs, unsigned n, int up, int device,
                             cudaStream_t stream)
{
    void *dst[SLOTS_PER_INSTANCE];
    const void *src[SLOTS_PER_INSTANCE];
    size_t size[SLOTS_PER_INSTANCE];
    unsigned host = 0;
    for (unsigned i = 0; i < n; i++) {
        const run_slot *sl = runs[i];
        const tensor *t = up ? sl->job->in : sl->job->out;
        if (kernel_in_region(sl, up))
            continue;
        void *to = up ? sl->d_in : sl->to;
        const void *from = up ? sl->from : sl->d_out;
        if (t->on_device) {
            cudaError_t e = cudaMemcpyAsync(to, from, t->byte_size, cudaMemcpyDefault, stream);
            if (e != cudaSuccess)
                return e;
            continue;
        }
        dst[host] = to;
        src[host] = from;
        size[host++] = t->byte_size;
    }
    return copy_together(dst, src, size, host, up, device, stream);
}

/* The batch's copies and kernels on in's stream, between b's points.
 * Under in->lock. */
static cudaError_t enqueue_batch(gpu_instance *in, run_batch *b, run_slot *const *runs, unsigned n,
                                 const char **what)
{
    cudaError_t e;
    *what = n > 1 ? "cudaMemcpyBatchAsync (inputs)" : "cudaMemcpyAsync (input)";
    if ((e = gpu_pass_point(in, b, RUN_START)) != cudaSuccess ||
        (e = copy_runs(runs, n, 1, in->device, in->stream)) != cudaSuccess ||
        (e = gpu_pass_point(in, b, RUN_INPUT_DONE)) != cudaSuccess)
        return e;
    *what = "the kernel's launch";
    for (unsigned i = 0; i < n; i++) {
        const gpu_job *job = runs[i]->job;
        if ((e = yolo_kernel_launch(runs[i]->kernel_in, job->height, job->width, in->weights,
                                    (int)gpu_pool.window, runs[i]->kernel_out,
                                    in->stream)) != cudaSuccess)
            return e;
    }
    if ((e = gpu_pass_point(in, b, RUN_INFER_DONE)) != cudaSuccess)
        return e;
    *what = n > 1 ? "cudaMemcpyBatchAsync (outputs)" : "cudaMemcpyAsync (output)";
    if ((e = copy_runs(runs, n, 0, in->device, in->stream)) != cudaSuccess ||
        (e = gpu_pass_point(in, b, RUN_OUTPUT_DONE)) != cudaSuccess)
        return e;
    return cudaSuccess;
}

/* The runs of b that were handed over (gpu_instances_submit) go to the
 * instance's finishing thread with b, which wakes if it sleeps. Under
 * in->lock. */
static void hand_to_finisher(gpu_instance *in, run_batch *b, run_slot *const *runs, unsigned n)
{
    uint64_t now = 0;
    b->n_handed = 0;
    for (unsigned i = 0; i < n; i++) {
        if (!runs[i]->pending)
            continue;
        if (!now)
            now = monotonic_ns();
        runs[i]->queued_ns = now;
        b->handed[b->n_handed++] = runs[i];
    }
    if (!b->n_handed)
        return;
    b->next_to_finish = NULL;
    int idle = !in->to_finish;
    *in->to_finish_tail = b;
    in->to_finish_tail = &b->next_to_finish;
    if (idle)
        pthread_cond_signal(&in->finish_ready);
}

/* The kernel's operands among the n runs that are their CUDA regions
 * themselves, for /metrics: a user can tell the in-place path from the
 * device copies place_run falls back to. */
static void count_in_place(run_slot *const *runs, unsigned n)
{
    uint64_t in = 0, out = 0;
    for (unsigned i = 0; i < n; i++) {
        in += kernel_in_region(runs[i], 1);
        out += kernel_in_region(runs[i], 0);
    }
    atomic_fetch_add_explicit(&gpu_pool.kernel_in_place[0], in, memory_order_relaxed);
    atomic_fetch_add_explicit(&gpu_pool.kernel_in_place[1], out, memory_order_relaxed);
}

/* Queue the waiting runs, up to gpu_pool.copy_batch a batch, while fewer than
 * BATCHES_IN_FLIGHT are on the stream; wakes their threads. A batch that
 * fails to queue carries the error to its runs, and nothing of it is left
 * on the stream (the stream is drained: copies that were queued end before
 * the requests' references, and so perhaps the regions, go). Under
 * in->lock; the thread's current device is in's. */
static void queue_waiting(gpu_instance *in)
{
    int woke = 0;
    while (in->waiting && in->in_flight < BATCHES_IN_FLIGHT) {
        run_slot *runs[SLOTS_PER_INSTANCE];
        unsigned n = 0;
        while (in->waiting && n < gpu_pool.copy_batch) {
            runs[n++] = in->waiting;
            in->waiting = in->waiting->next;
        }
        if (!in->waiting)
            in->waiting_tail = &in->waiting;
        run_batch *b = in->free_batches; /* never NULL: run_batch's rule */
        in->free_batches = b->next;
        b->holders = n; /* its events stay from its last use */
        b->timed = b->ended = 0;
        b->what = "cudaEventCreate (a batch's events)";
        b->err = gpu_batch_make(b);
        if (b->err == cudaSuccess) {
            b->timed = gpu_timed_batch(in, n);
            b->err = enqueue_batch(in, b, runs, n, &b->what);
            if (b->err != cudaSuccess) {
                cudaStreamSynchronize(in->stream);
                cudaStreamSynchronize(in->clock);
            }
        }
        if (b->err == cudaSuccess) {
            in->in_flight++;
            atomic_fetch_add_explicit(&gpu_pool.batches_queued, 1, memory_order_relaxed);
            atomic_fetch_add_explicit(&gpu_pool.batched_runs, n, memory_order_relaxed);
            count_in_place(runs, n);
        }
        hand_to_finisher(in, b, runs, n);
        for (unsigned i = 0; i < n; i++)
            runs[i]->batch = b;
        woke = 1;
    }
    if (woke)
        pthread_cond_broadcast(&in->queued);
}

/* sl's run joins the end of in's waiting runs, which are queued while
 * the stream has room. Under in->lock; the thread's current device is in's. */
static void join_waiting(gpu_instance *in, run_slot *sl)
{
    sl->next = NULL;
    *in->waiting_tail = sl;
    in->waiting_tail = &sl->next;
    queue_waiting(in);
}

/* The event whose passing ends b: the timed one its runs sleep on, or done. */
static cudaEvent_t batch_end(const run_batch *b)
{
    return b->timed ? b->time[RUN_OUTPUT_DONE] : b->done;
}

/* sl's run waits its turn among the instance's runs and is queued in a
 * batch (by this thread or another); returns the batch. */
static run_batch *wait_queued(gpu_instance *in, run_slot *sl)
{
    pthread_mutex_lock(&in->lock);
    join_waiting(in, sl);
    if (!sl->batch) {
        worker_pool_wait_begin();
        while (!sl->batch)
            pthread_cond_wait(&in->queued, &in->lock);
        worker_pool_wait_end();
    }
    run_batch *b = sl->batch;
    pthread_mutex_unlock(&in->lock);
    return b;
}

/* After b has ended (or failed to queue): the first of its runs here counts
 * it out of flight, times it and queues the runs that waited meanwhile;
 * each run reads its phases and lets go of b, the last one freeing it. */
static void batch_done(gpu_instance *in, run_batch *b, uint64_t span_ns, uint64_t gpu[GPU_PHASES])
{
    pthread_mutex_lock(&in->lock);
    if (b->err == cudaSuccess && !b->ended) {
        b->ended = 1;
        in->in_flight--;
        if (b->timed)
            gpu_time_batch(in, b);
        queue_waiting(in);
    }
    if (gpu)
        gpu_device_phases(in, b, span_ns, gpu);
    if (--b->holders == 0) {
        b->next = in->free_batches;
        in->free_batches = b;
    }
    pthread_mutex_unlock(&in->lock);
}

/* The whole run on instance in with slot sl; the thread's current device is
 * in's. A guarded copy that fails ends it early with cudaSuccess and
 * *guard_failed set; nothing of this run is left queued on the stream then,
 * nor after an error. */
static cudaError_t run_on(gpu_instance *in, run_slot *sl, const gpu_job *job, uint64_t spin,
                          model_phases *ph, const char **what, int *guard_failed)
{
    const tensor *src = job->in;
    tensor *dst = job->out;
    cudaError_t e;
    int stage_in = !src->on_device && !src->pinned, stage_out = !dst->on_device && !dst->pinned;
    if ((e = gpu_grow_slot(sl, job, stage_in, stage_out, what)) != cudaSuccess)
        return e;
    uint64_t t0 = monotonic_ns();
    if (stage_in && stage_input(sl, src, guard_failed) != 0)
        return cudaSuccess;
    uint64_t staged = monotonic_ns(), copy_in_ns = staged - t0;

    place_run(in, sl, job, stage_in ? sl->h_in : src->data, stage_out ? sl->h_out : dst->data);
    run_batch *b = wait_queued(in, sl);
    uint64_t queued = monotonic_ns();
    ph->queue_ns += queued - staged; /* waiting for its batch is queuing too */
    if ((e = b->err) != cudaSuccess) {
        *what = b->what;
        batch_done(in, b, 0, NULL);
        return e;
    }
    /* The reply must not say the output is there before it is. */
    worker_pool_wait_begin();
    e = wait_for_batch(batch_end(b), spin, what);
    worker_pool_wait_end();
    t0 = monotonic_ns();
    uint64_t gpu[GPU_PHASES];
    batch_done(in, b, t0 - queued, gpu);
    if (e != cudaSuccess)
        return e;
    if (stage_out && dst->window)
        guarded_out(dst->window, sl->h_out, dst->byte_size, guard_failed);
    else if (stage_out)
        memcpy(dst->data, sl->h_out, dst->byte_size);
    ph->input_ns = copy_in_ns + gpu[GPU_INPUT];
    ph->infer_ns = gpu[GPU_INFER];
    ph->output_ns = gpu[GPU_OUTPUT] + (monotonic_ns() - t0);
    return cudaSuccess;
}

void gpu_instances_copy_batches(uint64_t *batches, uint64_t *runs)
{
    *batches = atomic_load_explicit(&gpu_pool.batches_queued, memory_order_relaxed);
    *runs = atomic_load_explicit(&gpu_pool.batched_runs, memory_order_relaxed);
}

void gpu_instances_kernel_in_place(uint64_t in_place[2])
{
    for (int d = 0; d < 2; d++)
        in_place[d] = atomic_load_explicit(&gpu_pool.kernel_in_place[d], memory_order_relaxed);
}

void gpu_instances_placed(uint64_t placed[PLACEMENT_CASES])
{
    for (int c = 0; c < PLACEMENT_CASES; c++)
        placed[c] = atomic_load_explicit(&gpu_pool.placed[c], memory_order_relaxed);
}

/* A CUDA call's failure on in's device, as the request's message. */
static server_status cuda_failure(const gpu_instance *in, const char *what, cudaError_t e,
                                  char *err, size_t errlen)
{
    snprintf(err, errlen, "model 'yolo' failed on device %d in %s: %s (%s)", in->device, what,
             cudaGetErrorName(e), cudaGetErrorString(e));
    return STATUS_INTERNAL;
}

/* The instance for job (gpu_take_instance, by where its tensors lie). */
static gpu_instance *instance_for(const gpu_job *job, unsigned *load_before)
{
    const int devices[] = {job->in->on_device ? job->in->device_id : PLACEMENT_HOST,
                           job->out->on_device ? job->out->device_id : PLACEMENT_HOST};
    return gpu_take_instance(devices, 2, load_before);
}

/* job's whole run on in, which the caller took (and gives back), on this
 * thread; a run alone polls its end for up to spin nanoseconds. */
static server_status run_taken(gpu_instance *in, const gpu_job *job, uint64_t spin,
                               model_phases *ph, char *err, size_t errlen)
{
    int previous = -1;
    const char *what = "cudaGetDevice";
    int guard_failed = 0;
    cudaError_t e = cudaGetDevice(&previous);
    if (e == cudaSuccess) {
        what = "cudaSetDevice";
        e = cudaSetDevice(in->device);
    }
    if (e == cudaSuccess) {
        uint64_t t0 = monotonic_ns();
        run_slot *sl = gpu_slot_take(in);
        ph->queue_ns = monotonic_ns() - t0;
        e = run_on(in, sl, job, spin, ph, &what, &guard_failed);
        gpu_slot_trim(sl);
        release_slot(in, sl);
        cudaSetDevice(previous);
    }
    if (e == cudaSuccess && guard_failed) {
        /* infer_core.c answers with the window's failure and the library's
         * message; this one stands only where a caller does not. */
        snprintf(err, errlen, "model 'yolo': a guarded copy of a shared memory tensor failed");
        return STATUS_FAULT;
    }
    return e == cudaSuccess ? STATUS_OK : cuda_failure(in, what, e, err, errlen);
}

server_status gpu_instances_run(const gpu_job *job, model_phases *ph, char *err, size_t errlen)
{
    if (!gpu_pool.n)
        return gpu_instances_ready(err, errlen);
    unsigned load_before;
    gpu_instance *in = instance_for(job, &load_before);
    server_status st = run_taken(in, job, gpu_pool.wait_spin_ns, ph, err, errlen);
    gpu_give_back(in);
    return st;
}

/* ------------------------------------------------------- handed-over runs */

/* A tensor the device reaches where it lies: no CPU copy on the way. */
static int in_place(const tensor *t)
{
    return t->on_device || t->pinned;
}

/* How long a run on its caller's thread polls its end: twice the longest
 * run allowed there (limit), or --spin-us where that is longer. */
static uint64_t caller_poll_ns(uint64_t limit)
{
    uint64_t spin = gpu_pool.wait_spin_ns;
    return spin > 2u * limit ? spin : 2u * limit;
}

/* Set while a caller's thread makes a run longer than GPU_SHORT_RUN_NS:
 * such runs take turns, so that they hold one transport thread at most
 * whatever the load, and the others stay free for the calls that come. */
static atomic_flag lone_run = ATOMIC_FLAG_INIT;

/* No instance but in (which the caller holds) holds a request: the
 * server is serving one request, as at concurrency 1. Relaxed: a hint. */
static int alone_in_the_server(const gpu_instance *in)
{
    for (unsigned i = 0; i < gpu_pool.n; i++)
        if (&gpu_pool.inst[i] != in &&
            atomic_load_explicit(&gpu_pool.inst[i].load, memory_order_relaxed))
            return 0;
    return 1;
}

/* The longest run the caller may make on its thread on in, which holds no
 * other request: GPU_SHORT_RUN_NS, or GPU_LONE_RUN_NS with *lone set where
 * in's runs are longer, no other instance holds a request and the caller
 * took lone_run (clear it after the run); 0 where in's runs are longer
 * still, the server is busy or lone_run is taken: the run is handed over.
 *
 * A pinned system region's run is not short once its copies pass 100 us
 * (FP16 3x640x640 in and out takes about 86 us on an H200's link); handed
 * over, a lone request would wait for the finishing thread's wake-up on
 * top of the copies, while the same run from a CUDA region, short, would
 * not. Under load, though, an idle instance's last timed batch holds
 * several runs, so passes 100 us, and a thread polling it would spend a
 * core on what the finishing thread waits for with one wake-up per batch. */
static uint64_t caller_run_limit(gpu_instance *in, int *lone)
{
    *lone = 0;
    if (gpu_runs_within(in, GPU_SHORT_RUN_NS))
        return GPU_SHORT_RUN_NS;
    /* relaxed: a bound on the threads held, nothing is published through it */
    if (!gpu_runs_within(in, GPU_LONE_RUN_NS) || !alone_in_the_server(in) ||
        atomic_flag_test_and_set_explicit(&lone_run, memory_order_relaxed))
        return 0;
    *lone = 1;
    return GPU_LONE_RUN_NS;
}

/* p's run into slot sl of in, joining in's waiting runs for the finishing
 * thread to complete: STATUS_OK, or the failure's status with sl left as it was (then
 * done is not called). The thread's current device is in's. Nothing
 * touches p once it is queued: its done may run at once. */
static server_status start_in_slot(gpu_instance *in, run_slot *sl, gpu_pending *p)
{
    const char *what;
    cudaError_t e = gpu_grow_slot(sl, &p->job, 0, 0, &what);
    if (e != cudaSuccess)
        return cuda_failure(in, what, e, p->err, p->errlen);
    place_run(in, sl, &p->job, p->job.in->data, p->job.out->data);
    sl->batch = NULL; /* a slot passed on by release_slot still names its last batch */
    sl->pending = p;
    pthread_mutex_lock(&in->lock);
    join_waiting(in, sl);
    pthread_mutex_unlock(&in->lock);
    return STATUS_OK;
}

/* A run's slot given back: to the first handed-over run waiting for one
 * (taking turns with threads waiting in gpu_slot_take), else among the
 * free slots. A waiting run whose slot cannot be readied is done with the
 * error here, and the slot goes to the next. The thread's current device is
 * in's. */
static void release_slot(gpu_instance *in, run_slot *sl)
{
    for (;;) {
        pthread_mutex_lock(&in->lock);
        gpu_pending *p = in->slotless;
        if (p && in->slot_waiters && (in->slot_turn ^= 1))
            p = NULL;
        if (!p) {
            gpu_slot_free_locked(in, sl);
            pthread_mutex_unlock(&in->lock);
            return;
        }
        in->slotless = p->next;
        if (!in->slotless)
            in->slotless_tail = &in->slotless;
        in->n_slotless--;
        pthread_mutex_unlock(&in->lock);
        server_status st = start_in_slot(in, sl, p);
        if (!st)
            return;
        gpu_give_back(in);
        p->done(p, st);
    }
}

/* A request refused because in holds gpu_pool.max_queue waiting for a slot.
 * The words Triton's full queue answers with come first: clients match them. */
static server_status refuse_full(gpu_instance *in, gpu_pending *p)
{
    snprintf(p->err, p->errlen,
             "Exceeds maximum queue size: model 'yolo' has %u requests waiting for a run slot "
             "on device %d (--max-queue %u); retry later", gpu_pool.max_queue, in->device,
             gpu_pool.max_queue);
    return STATUS_OVER_LIMIT;
}

/* p's run to in without waiting: into a free slot, or, where all are held,
 * to wait for one (release_slot starts it) unless max_queue already wait.
 * STATUS_OK or the failure's status. */
static server_status hand_over(gpu_instance *in, gpu_pending *p)
{
    p->started_ns = monotonic_ns();
    pthread_mutex_lock(&in->lock);
    run_slot *sl = in->free_slots;
    int full = 0;
    if (sl) {
        in->free_slots = sl->next;
    } else if (in->n_slotless >= gpu_pool.max_queue) {
        full = 1;
    } else {
        p->next = NULL;
        *in->slotless_tail = p;
        in->slotless_tail = &p->next;
        in->n_slotless++;
    }
    pthread_mutex_unlock(&in->lock);
    if (full)
        return refuse_full(in, p);
    if (!sl)
        return STATUS_OK;
    int previous = -1;
    cudaError_t e = cudaGetDevice(&previous);
    if (e == cudaSuccess && (e = cudaSetDevice(in->device)) == cudaSuccess) {
        server_status st = start_in_slot(in, sl, p);
        if (st)
            release_slot(in, sl);
        cudaSetDevice(previous);
        return st;
    }
    pthread_mutex_lock(&in->lock);
    gpu_slot_free_locked(in, sl); /* no device: nothing a waiting run could start on */
    pthread_mutex_unlock(&in->lock);
    return cuda_failure(in, previous < 0 ? "cudaGetDevice" : "cudaSetDevice", e, p->err,
                        p->errlen);
}

server_status gpu_instances_submit(gpu_pending *p)
{
    if (!gpu_pool.n)
        return gpu_instances_ready(p->err, p->errlen);
    if (!in_place(p->job.in) || !in_place(p->job.out))
        return MODEL_BUSY;
    unsigned load_before;
    gpu_instance *in = instance_for(&p->job, &load_before);
    int lone = 0;
    uint64_t limit = load_before ? 0 : caller_run_limit(in, &lone);
    if (limit) {
        server_status st = run_taken(in, &p->job, caller_poll_ns(limit), p->ph, p->err, p->errlen);
        if (lone) /* relaxed: caller_run_limit's */
            atomic_flag_clear_explicit(&lone_run, memory_order_relaxed);
        gpu_give_back(in);
        p->done(p, st);
        return STATUS_OK;
    }
    server_status st = hand_over(in, p);
    if (st)
        gpu_give_back(in);
    return st;
}

/* The handed-over runs of b, once b has ended (or failed to queue): each
 * gets its phases, gives its slot and instance back, and is done. */
static void finish_batch(gpu_instance *in, run_batch *b, run_slot *const *runs, unsigned n)
{
    const char *what = b->what;
    cudaError_t e = b->err;
    if (e == cudaSuccess)
        e = wait_for_batch(batch_end(b), gpu_pool.wait_spin_ns,
                           &what);
    uint64_t now = monotonic_ns();
    int queued = b->err == cudaSuccess;
    for (unsigned i = 0; i < n; i++) {
        run_slot *sl = runs[i];
        gpu_pending *p = sl->pending;
        uint64_t gpu[GPU_PHASES];
        batch_done(in, b, now - sl->queued_ns, queued ? gpu : NULL);
        server_status st =
            e == cudaSuccess ? STATUS_OK : cuda_failure(in, what, e, p->err, p->errlen);
        if (!st) {
            p->ph->queue_ns = sl->queued_ns - p->started_ns;
            p->ph->input_ns = gpu[GPU_INPUT];
            p->ph->infer_ns = gpu[GPU_INFER];
            p->ph->output_ns = gpu[GPU_OUTPUT];
        }
        gpu_slot_trim(sl);
        release_slot(in, sl);
        gpu_give_back(in);
        p->done(p, st);
    }
}

/* An instance's finishing thread: completes the batches holding handed-over
 * runs in the order they were queued (the stream ends them in that order),
 * one wait for each batch, whatever number of runs it holds. */
void *gpu_finish_batches(void *instance)
{
    gpu_instance *in = instance;
    cudaSetDevice(in->device); /* batch_done queues the next batch on in's stream */
    pthread_mutex_lock(&in->lock);
    for (;;) {
        while (!in->to_finish && !in->stopping)
            pthread_cond_wait(&in->finish_ready, &in->lock);
        run_batch *b = in->to_finish;
        if (!b)
            break;
        in->to_finish = b->next_to_finish;
        if (!in->to_finish)
            in->to_finish_tail = &in->to_finish;
        run_slot *runs[SLOTS_PER_INSTANCE];
        unsigned n = b->n_handed; /* b may be freed and reused once its runs let go */
        memcpy(runs, b->handed, n * sizeof *runs);
        pthread_mutex_unlock(&in->lock);
        finish_batch(in, b, runs, n);
        pthread_mutex_lock(&in->lock);
    }
    pthread_mutex_unlock(&in->lock);
    return NULL;
}
