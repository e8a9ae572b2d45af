/*
 * gpu_instances.h with the CUDA runtime (linked statically, as for the
 * device copy: the frontend starts where there is no driver, and the model
 * then reports why it is not available).
 */
#include "models/gpu_instances.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "common/worker_pool.h"
#include "models/yolo_kernel.h"

#define MAX_DEVICES 64
/* Requests in flight on one instance at once: enough that the next one's
 * copies are queued on the stream before the last one's end, so the stream
 * never idles while its thread wakes; few enough to bound the pinned
 * staging (two tensors' worth per slot, made only when a tensor needs it). */
#define SLOTS_PER_INSTANCE 4
/* Streams an instance has: its own and its clock. */
#define STREAMS_PER_INSTANCE 2
/* CUDA's most hardware work queues a device gives one process, and the
 * number it gives when CUDA_DEVICE_MAX_CONNECTIONS is not set. */
#define MOST_HARDWARE_QUEUES 32
#define DEFAULT_HARDWARE_QUEUES 8

/* The points of a run between its phases, in the order it passes them. */
enum { RUN_START, RUN_INPUT_DONE, RUN_INFER_DONE, RUN_OUTPUT_DONE, RUN_POINTS };
/* The phases a timed run measures on the device. */
enum { GPU_INPUT, GPU_INFER, GPU_OUTPUT, GPU_PHASES };

/* One request in flight on an instance: its points, marked on the
 * instance's stream and timed on the instance's clock stream, and pinned
 * staging for tensors in pageable host memory. */
typedef struct run_slot {
    struct run_slot *next; /* the instance's free slots */
    /* A timing event between copies on the stream costs the copies of every
     * stream (the seed's copies alone ran about 12% slower with the four of
     * them, measured on the H200), so the stream gets marks without timing
     * and the clock stream, once each mark is passed, records the time.
     * time[RUN_OUTPUT_DONE] is the one a timed run's thread sleeps on: it
     * follows the output's copy. A run that is not timed (timed_run) gets
     * none of them, only done after its output's copy. */
    cudaEvent_t mark[RUN_POINTS], time[RUN_POINTS], done;
    void *h_in, *h_out;
    size_t h_in_cap, h_out_cap;
} run_slot;

typedef struct gpu_instance {
    int device;
    const float *weights;        /* the device's copy, shared by its instances */
    cudaStream_t stream;         /* its requests run in the order they were queued */
    cudaStream_t clock;          /* times the points its stream passes */
    void *d_in, *d_out;          /* device buffers, grown to the largest request */
    size_t d_in_cap, d_out_cap;
    /* Queuing on the stream (one request's copies and kernel at a time, so
     * that each request's run is contiguous and the device buffers are its
     * own for that run), and the slots. */
    pthread_mutex_t lock;
    pthread_cond_t slot_freed;
    run_slot slots[SLOTS_PER_INSTANCE];
    run_slot *free_slots;
    unsigned n_made;             /* slots[0..n_made) have their events */
    unsigned runs;               /* runs queued so far, under lock: which are timed */
    /* The device phases of its last timed run, for those that are not;
     * relaxed: each is whole, and a run may read two runs' figures. */
    _Atomic uint64_t last_ns[GPU_PHASES];
    atomic_int timed_one;        /* last_ns holds a run's phases */
    atomic_uint load;            /* requests holding or waiting for this instance */
} gpu_instance;

static struct {
    gpu_instance *inst;
    unsigned n;
    int devices[MAX_DEVICES];
    float *weights[MAX_DEVICES]; /* per entry of devices */
    unsigned n_devices;
    unsigned window;
    unsigned time_every;         /* --time-phases-every */
    atomic_uint next;            /* round robin among equally busy instances */
    char why[400];               /* why there is no instance, when n == 0 */
} pool;

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void set_why_cuda(const char *what, cudaError_t e)
{
    snprintf(pool.why, sizeof pool.why, "%s failed: %s (%s)", what, cudaGetErrorName(e),
             cudaGetErrorString(e));
}

/* The device numbers of --gpus into pool.devices; 0 or -1 with pool.why set. */
static int parse_devices(const char *gpus, int count)
{
    if (strcmp(gpus, "none") == 0) {
        snprintf(pool.why, sizeof pool.why, "the frontend was started with --gpus none");
        return -1;
    }
    if (strcmp(gpus, "all") == 0) {
        for (int d = 0; d < count && d < MAX_DEVICES; d++)
            pool.devices[pool.n_devices++] = d;
        return 0;
    }
    for (const char *p = gpus; *p;) {
        char *end;
        long d = strtol(p, &end, 10);
        if (d < 0 || d >= count) {
            snprintf(pool.why, sizeof pool.why, "--gpus names device %ld, but this machine has "
                                                "%d CUDA device(s)", d, count);
            return -1;
        }
        int seen = 0;
        for (unsigned i = 0; i < pool.n_devices; i++)
            seen |= pool.devices[i] == d;
        if (!seen && pool.n_devices < MAX_DEVICES)
            pool.devices[pool.n_devices++] = (int)d;
        p = *end == ',' ? end + 1 : end;
    }
    return 0;
}

/* Peer access from an instance's device to every other device, where the
 * hardware has it, so that a tensor in a CUDA region on another device
 * reaches the instance directly (NVLink or PCIe P2P) rather than through
 * host memory. */
static void enable_peers(int device, int count)
{
    for (int other = 0; other < count; other++) {
        int can = 0;
        if (other != device && cudaDeviceCanAccessPeer(&can, device, other) == cudaSuccess && can)
            if (cudaDeviceEnablePeerAccess(other, 0) != cudaSuccess)
                (void)cudaGetLastError(); /* already enabled: not an error worth keeping */
    }
}

static int instance_init(gpu_instance *in, int device, const float *weights)
{
    *in = (gpu_instance){.device = device, .weights = weights};
    pthread_mutex_init(&in->lock, NULL);
    pthread_cond_init(&in->slot_freed, NULL);
    atomic_init(&in->load, 0);
    atomic_init(&in->timed_one, 0);
    for (int p = 0; p < GPU_PHASES; p++)
        atomic_init(&in->last_ns[p], 0);
    cudaError_t e = cudaStreamCreateWithFlags(&in->stream, cudaStreamNonBlocking);
    if (e == cudaSuccess)
        e = cudaStreamCreateWithFlags(&in->clock, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        set_why_cuda("creating the streams of an instance", e);
        return -1;
    }
    return 0;
}

/* A slot's events, on the current device (the instance's). */
static cudaError_t slot_make(run_slot *sl)
{
    cudaError_t e = cudaSuccess;
    for (int i = 0; i < RUN_POINTS && e == cudaSuccess; i++) {
        e = cudaEventCreateWithFlags(&sl->mark[i], cudaEventDisableTiming);
        /* The request's thread sleeps on the last rather than spinning: the
         * frontend's CPUs belong to the protocol threads and the other workers. */
        if (e == cudaSuccess)
            e = cudaEventCreateWithFlags(&sl->time[i], i == RUN_OUTPUT_DONE ? cudaEventBlockingSync
                                                                            : cudaEventDefault);
    }
    if (e == cudaSuccess)
        e = cudaEventCreateWithFlags(&sl->done, cudaEventDisableTiming | cudaEventBlockingSync);
    return e;
}

static void slot_free(run_slot *sl)
{
    for (int i = 0; i < RUN_POINTS; i++) {
        if (sl->mark[i])
            cudaEventDestroy(sl->mark[i]);
        if (sl->time[i])
            cudaEventDestroy(sl->time[i]);
    }
    if (sl->done)
        cudaEventDestroy(sl->done);
    cudaFreeHost(sl->h_in);
    cudaFreeHost(sl->h_out);
    *sl = (run_slot){0};
}

static void instance_free(gpu_instance *in)
{
    cudaSetDevice(in->device);
    if (in->stream)
        cudaStreamDestroy(in->stream);
    if (in->clock)
        cudaStreamDestroy(in->clock);
    for (unsigned i = 0; i < SLOTS_PER_INSTANCE; i++)
        slot_free(&in->slots[i]);
    cudaFree(in->d_in);
    cudaFree(in->d_out);
    pthread_cond_destroy(&in->slot_freed);
    pthread_mutex_destroy(&in->lock);
}

/* CUDA puts a device's streams on CUDA_DEVICE_MAX_CONNECTIONS hardware
 * work queues in turn, and two streams that share a queue wait for each
 * other's work as if they were one. At the default of 8, six instances'
 * twelve streams went two to a queue on four of the eight: the seed's
 * system rate at window 1 was 2.8% lower (27,600 against 28,400 infer/s on
 * the H200, three passes each) and the clock streams' times came late
 * (compute infer 38 us where the kernel takes 21). The variable is read
 * when the device's context is made, so it is set here, before the
 * process's first CUDA call, and only where the user has not set it.
 * Writes what was decided into why. */
static void ask_hardware_queues(unsigned per_gpu, char *why, size_t whylen)
{
    unsigned streams = per_gpu * STREAMS_PER_INSTANCE;
    const char *set = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
    if (set) {
        char *end;
        unsigned long n = strtoul(set, &end, 10);
        snprintf(why, whylen, "%u streams a device on CUDA_DEVICE_MAX_CONNECTIONS=%s hardware "
                              "queues (set in the environment)%s", streams, set,
                 *set && !*end && n < streams ? ", some shared" : "");
        return;
    }
    unsigned queues = DEFAULT_HARDWARE_QUEUES;
    if (streams > DEFAULT_HARDWARE_QUEUES) {
        queues = MOST_HARDWARE_QUEUES;
        char value[16];
        snprintf(value, sizeof value, "%u", queues);
        setenv("CUDA_DEVICE_MAX_CONNECTIONS", value, 0); /* only the main thread runs yet */
    }
    snprintf(why, whylen, "%u streams a device on %u hardware queues%s", streams, queues,
             streams > queues ? ", some shared" : "");
}

void gpu_instances_start(const char *gpus, unsigned per_gpu, unsigned window,
                         unsigned time_every, const float *weights, size_t n_weights)
{
    pool.window = window;
    pool.time_every = time_every ? time_every : 1;
    char queues[160];
    ask_hardware_queues(per_gpu, queues, sizeof queues);
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        set_why_cuda("no CUDA device is usable: cudaGetDeviceCount", e);
        goto none;
    }
    if (!weights) {
        snprintf(pool.why, sizeof pool.why, "out of memory for the weights");
        goto none;
    }
    if (parse_devices(gpus, count) != 0)
        goto none;
    pool.inst = calloc((size_t)pool.n_devices * per_gpu, sizeof *pool.inst);
    if (!pool.inst) {
        snprintf(pool.why, sizeof pool.why, "out of memory for the instances");
        goto none;
    }
    for (unsigned i = 0; i < pool.n_devices; i++) {
        int d = pool.devices[i];
        if ((e = cudaSetDevice(d)) != cudaSuccess) {
            set_why_cuda("cudaSetDevice", e);
            goto undo;
        }
        enable_peers(d, count);
        if ((e = cudaMalloc((void **)&pool.weights[i], n_weights * sizeof(float))) != cudaSuccess ||
            (e = cudaMemcpy(pool.weights[i], weights, n_weights * sizeof(float),
                            cudaMemcpyHostToDevice)) != cudaSuccess) {
            set_why_cuda("copying the weights to the device", e);
            goto undo;
        }
        for (unsigned k = 0; k < per_gpu; k++) {
            if (instance_init(&pool.inst[pool.n], d, pool.weights[i]) != 0) {
                pool.n++; /* freed below with the others */
                goto undo;
            }
            pool.n++;
        }
    }
    fprintf(stderr, "gpu model 'yolo': %u instance(s) on %u device(s), window %u; %s; phases "
                    "timed on one run in %u\n", pool.n, pool.n_devices, window, queues,
            pool.time_every);
    return;
undo:
    gpu_instances_stop();
none:
    fprintf(stderr, "gpu model 'yolo' is not available: %s\n", pool.why);
}

void gpu_instances_stop(void)
{
    for (unsigned i = 0; i < pool.n; i++)
        instance_free(&pool.inst[i]);
    for (unsigned i = 0; i < pool.n_devices; i++) {
        if (pool.weights[i]) {
            cudaSetDevice(pool.devices[i]);
            cudaFree(pool.weights[i]);
            pool.weights[i] = NULL;
        }
    }
    free(pool.inst);
    pool.inst = NULL;
    pool.n = 0;
    pool.n_devices = 0;
}

unsigned gpu_instances_ready(char *err, size_t errlen)
{
    if (pool.n)
        return 0;
    snprintf(err, errlen, "%s", pool.why[0] ? pool.why : "no GPU instance was started");
    return 400;
}

unsigned gpu_instances_placement(int *devices, unsigned max, unsigned *n_devices)
{
    *n_devices = 0;
    for (unsigned i = 0; pool.n && i < pool.n_devices && i < max; i++)
        devices[(*n_devices)++] = pool.devices[i];
    return pool.n;
}

/* The least busy instance (ties: on the preferred device, then the next in
 * round-robin order), counted busy from here until give_back. */
static gpu_instance *take_instance(int prefer_device)
{
    unsigned start = atomic_fetch_add_explicit(&pool.next, 1, memory_order_relaxed);
    gpu_instance *best = NULL;
    unsigned best_load = 0;
    for (unsigned k = 0; k < pool.n; k++) {
        gpu_instance *in = &pool.inst[(start + k) % pool.n];
        /* relaxed: a hint for placement, nothing is published through it */
        unsigned load = atomic_load_explicit(&in->load, memory_order_relaxed);
        if (!best || load < best_load ||
            (load == best_load && in->device == prefer_device && best->device != prefer_device)) {
            best = in;
            best_load = load;
        }
    }
    atomic_fetch_add_explicit(&best->load, 1, memory_order_relaxed);
    return best;
}

static void give_back(gpu_instance *in)
{
    atomic_fetch_sub_explicit(&in->load, 1, memory_order_relaxed);
}

/* A free slot of in, made on first use; waits while all are in flight (that
 * wait is the "queue" phase, and the worker pool's thread does not count as
 * at work meanwhile). The thread's current device is in's. */
static cudaError_t slot_take(gpu_instance *in, run_slot **out)
{
    pthread_mutex_lock(&in->lock);
    if (!in->free_slots && in->n_made == SLOTS_PER_INSTANCE) {
        worker_pool_wait_begin();
        while (!in->free_slots)
            pthread_cond_wait(&in->slot_freed, &in->lock);
        worker_pool_wait_end();
    }
    cudaError_t e = cudaSuccess;
    if (in->free_slots) {
        *out = in->free_slots;
        in->free_slots = (*out)->next;
    } else if ((e = slot_make(&in->slots[in->n_made])) == cudaSuccess) {
        *out = &in->slots[in->n_made++];
    } else {
        slot_free(&in->slots[in->n_made]); /* the events that were made */
    }
    pthread_mutex_unlock(&in->lock);
    return e;
}

static void slot_give(gpu_instance *in, run_slot *sl)
{
    pthread_mutex_lock(&in->lock);
    sl->next = in->free_slots;
    in->free_slots = sl;
    pthread_cond_signal(&in->slot_freed);
    pthread_mutex_unlock(&in->lock);
}

/* Grow a device or pinned host buffer to n bytes (its contents are not kept). */
static cudaError_t grow(void **buf, size_t *cap, size_t n, int pinned_host)
{
    if (*cap >= n)
        return cudaSuccess;
    if (pinned_host)
        cudaFreeHost(*buf);
    else
        cudaFree(*buf);
    *buf = NULL;
    *cap = 0;
    cudaError_t e = pinned_host ? cudaMallocHost(buf, n) : cudaMalloc(buf, n);
    if (e == cudaSuccess)
        *cap = n;
    return e;
}

/* Under in->lock: the device buffers at least this run's sizes. Runs queued
 * earlier use them until they end, so a buffer grows only on an idle stream. */
static cudaError_t grow_device_buffers(gpu_instance *in, size_t in_bytes, size_t out_bytes)
{
    if (in->d_in_cap >= in_bytes && in->d_out_cap >= out_bytes)
        return cudaSuccess;
    cudaError_t e = cudaStreamSynchronize(in->stream);
    if (e == cudaSuccess)
        e = grow(&in->d_in, &in->d_in_cap, in_bytes, 0);
    if (e == cudaSuccess)
        e = grow(&in->d_out, &in->d_out_cap, out_bytes, 0);
    return e;
}

static uint64_t elapsed_ns(cudaEvent_t from, cudaEvent_t to)
{
    float ms = 0;
    return cudaEventElapsedTime(&ms, from, to) == cudaSuccess ? (uint64_t)(ms * 1e6f) : 0;
}

/* sl's run's phases on the device into gpu: measured where the run was
 * timed (and kept for the instance's runs that are not), else the
 * instance's last timed run's, scaled down where they would not fit in
 * span_ns, the time from queuing the run to waking after it. */
static void device_phases(gpu_instance *in, const run_slot *sl, int timed, uint64_t span_ns,
                          uint64_t gpu[GPU_PHASES])
{
    if (timed) {
        gpu[GPU_INPUT] = elapsed_ns(sl->time[RUN_START], sl->time[RUN_INPUT_DONE]);
        gpu[GPU_INFER] = elapsed_ns(sl->time[RUN_INPUT_DONE], sl->time[RUN_INFER_DONE]);
        gpu[GPU_OUTPUT] = elapsed_ns(sl->time[RUN_INFER_DONE], sl->time[RUN_OUTPUT_DONE]);
        for (int p = 0; p < GPU_PHASES; p++)
            atomic_store_explicit(&in->last_ns[p], gpu[p], memory_order_relaxed);
        /* release: a run that sees it reads the figures above */
        atomic_store_explicit(&in->timed_one, 1, memory_order_release);
        return;
    }
    uint64_t sum = 0;
    for (int p = 0; p < GPU_PHASES; p++)
        sum += gpu[p] = atomic_load_explicit(&in->last_ns[p], memory_order_relaxed);
    if (sum > span_ns)
        for (int p = 0; p < GPU_PHASES; p++)
            gpu[p] = (uint64_t)((double)gpu[p] * (double)span_ns / (double)sum);
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
 * before the run is queued, so that the CPU copy holds neither the stream
 * nor its order. 0, or -1 with *guard_failed set (nothing queued). */
static int stage_input(run_slot *sl, const tensor *src, int *guard_failed)
{
    if (src->window)
        return guarded_in(src->window, sl->h_in, src->byte_size, guard_failed) ? 0 : -1;
    memcpy(sl->h_in, src->data, src->byte_size); /* the request's body */
    return 0;
}

/* Whether the run about to be queued on in is timed: the first runs, until
 * one has been, then one in pool.time_every. Timing costs the copies of
 * every stream even off the instance's stream (marks, waits and records:
 * the seed's system rate at window 1, concurrency 100, was 27,112 infer/s
 * with every run timed against 27,870 with one in 8 and 28,335 with one in
 * 32, means of seven rounds on the H200), and the phases of an instance's
 * runs differ little from one to the next. Under in->lock. */
static int timed_run(gpu_instance *in)
{
    int timed = !atomic_load_explicit(&in->timed_one, memory_order_acquire) ||
                in->runs % pool.time_every == 0;
    in->runs++;
    return timed;
}

/* Point i of sl's run: marked on in's stream where the stream is now, timed
 * on the clock stream once the mark is passed; a run not timed marks only
 * its end, with done. Under in->lock. */
static cudaError_t pass_point(gpu_instance *in, run_slot *sl, int i, int timed)
{
    if (!timed)
        return i == RUN_OUTPUT_DONE ? cudaEventRecord(sl->done, in->stream) : cudaSuccess;
    cudaError_t e = cudaEventRecord(sl->mark[i], in->stream);
    if (e == cudaSuccess)
        e = cudaStreamWaitEvent(in->clock, sl->mark[i], 0);
    if (e == cudaSuccess)
        e = cudaEventRecord(sl->time[i], in->clock);
    return e;
}

/* The run's copies and kernel on in's stream, between sl's points.
 * Under in->lock. */
static cudaError_t enqueue_run(gpu_instance *in, run_slot *sl, const gpu_job *job,
                               const void *from, void *to, int timed, const char **what)
{
    const tensor *src = job->in;
    tensor *dst = job->out;
    cudaError_t e;
    *what = "cudaMalloc (the instance's buffers)";
    if ((e = grow_device_buffers(in, src->byte_size, dst->byte_size)) != cudaSuccess)
        return e;
    *what = "cudaMemcpyAsync (input)";
    if ((e = pass_point(in, sl, RUN_START, timed)) != cudaSuccess ||
        (e = cudaMemcpyAsync(in->d_in, from, src->byte_size, cudaMemcpyDefault, in->stream)) !=
            cudaSuccess ||
        (e = pass_point(in, sl, RUN_INPUT_DONE, timed)) != cudaSuccess)
        return e;
    *what = "the kernel's launch";
    if ((e = yolo_kernel_launch(in->d_in, job->height, job->width, in->weights, (int)pool.window,
                                in->d_out, in->stream)) != cudaSuccess ||
        (e = pass_point(in, sl, RUN_INFER_DONE, timed)) != cudaSuccess)
        return e;
    *what = "cudaMemcpyAsync (output)";
    if ((e = cudaMemcpyAsync(to, in->d_out, dst->byte_size, cudaMemcpyDefault, in->stream)) !=
            cudaSuccess ||
        (e = pass_point(in, sl, RUN_OUTPUT_DONE, timed)) != cudaSuccess)
        return e;
    return cudaSuccess;
}

/* The whole run on instance in with slot sl; the thread's current device is
 * in's. A guarded copy that fails ends it early with cudaSuccess and
 * *guard_failed set; nothing of this run is left queued on the stream then,
 * nor after an error (the stream is drained). */
static cudaError_t run_on(gpu_instance *in, run_slot *sl, const gpu_job *job, model_phases *ph,
                          const char **what, int *guard_failed)
{
    const tensor *src = job->in;
    tensor *dst = job->out;
    cudaError_t e;
    int stage_in = !src->on_device && !src->pinned, stage_out = !dst->on_device && !dst->pinned;
    *what = "cudaMallocHost (a run slot's staging buffers)";
    if ((stage_in && (e = grow(&sl->h_in, &sl->h_in_cap, src->byte_size, 1)) != cudaSuccess) ||
        (stage_out && (e = grow(&sl->h_out, &sl->h_out_cap, dst->byte_size, 1)) != cudaSuccess))
        return e;
    uint64_t t0 = now_ns();
    if (stage_in && stage_input(sl, src, guard_failed) != 0)
        return cudaSuccess;
    uint64_t queued = now_ns(), copy_in_ns = queued - t0;

    pthread_mutex_lock(&in->lock);
    int timed = timed_run(in);
    e = enqueue_run(in, sl, job, stage_in ? sl->h_in : src->data,
                    stage_out ? sl->h_out : dst->data, timed, what);
    if (e != cudaSuccess) { /* a failed step may leave copies queued: they end before the
                             * request's references (and so perhaps the regions) go */
        cudaStreamSynchronize(in->stream);
        cudaStreamSynchronize(in->clock);
    }
    pthread_mutex_unlock(&in->lock);
    if (e != cudaSuccess)
        return e;

    /* The reply must not say the output is there before it is. */
    *what = "cudaEventSynchronize (the run)";
    worker_pool_wait_begin();
    e = cudaEventSynchronize(timed ? sl->time[RUN_OUTPUT_DONE] : sl->done);
    worker_pool_wait_end();
    if (e != cudaSuccess)
        return e;
    t0 = now_ns();
    uint64_t gpu[GPU_PHASES];
    device_phases(in, sl, timed, t0 - queued, gpu);
    if (stage_out && dst->window)
        guarded_out(dst->window, sl->h_out, dst->byte_size, guard_failed);
    else if (stage_out)
        memcpy(dst->data, sl->h_out, dst->byte_size);
    ph->input_ns = copy_in_ns + gpu[GPU_INPUT];
    ph->infer_ns = gpu[GPU_INFER];
    ph->output_ns = gpu[GPU_OUTPUT] + (now_ns() - t0);
    return cudaSuccess;
}

unsigned gpu_instances_run(const gpu_job *job, model_phases *ph, char *err, size_t errlen)
{
    if (!pool.n)
        return gpu_instances_ready(err, errlen);
    int prefer = job->in->on_device ? job->in->device_id
                 : job->out->on_device ? job->out->device_id : -1;
    gpu_instance *in = take_instance(prefer);
    int previous = -1;
    const char *what = "cudaGetDevice";
    int guard_failed = 0;
    cudaError_t e = cudaGetDevice(&previous);
    if (e == cudaSuccess) {
        what = "cudaSetDevice";
        e = cudaSetDevice(in->device);
    }
    if (e == cudaSuccess) {
        run_slot *sl = NULL;
        uint64_t t0 = now_ns();
        what = "cudaEventCreate (an instance's events)";
        e = slot_take(in, &sl);
        ph->queue_ns = now_ns() - t0;
        if (e == cudaSuccess) {
            e = run_on(in, sl, job, ph, &what, &guard_failed);
            slot_give(in, sl);
        }
        cudaSetDevice(previous);
    }
    give_back(in);
    if (e == cudaSuccess && guard_failed) {
        /* infer_core.c answers with the window's failure and the library's
         * message; this one stands only where a caller does not. */
        snprintf(err, errlen, "model 'yolo': a guarded copy of a shared memory tensor failed");
        return 400;
    }
    if (e == cudaSuccess)
        return 0;
    snprintf(err, errlen, "model 'yolo' failed on device %d in %s: %s (%s)", in->device, what,
             cudaGetErrorName(e), cudaGetErrorString(e));
    return 500;
}
