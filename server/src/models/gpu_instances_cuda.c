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
/* Requests holding a run slot of one instance at once: two batches in
 * flight on its stream and the next one gathering. Each slot has device
 * buffers for its run's tensors and, made only when a tensor needs it,
 * pinned staging for them: the bound on what an instance holds. */
#define SLOTS_PER_INSTANCE 12
/* A slot keeps its buffers for the next run up to this size each (the
 * seed benchmark's tensors are 1.4 MiB); larger ones, made for a large request, are
 * freed after its run, so that what twelve slots hold between requests is
 * bounded whatever the clients sent. */
#define SLOT_KEEP_BYTES ((size_t)16 << 20)
/* Batches queued on an instance's stream and not yet seen to end: the one
 * running and the next, so that the stream never idles while a thread
 * wakes; the runs that come meanwhile wait and go together. */
#define BATCHES_IN_FLIGHT 2
/* Streams an instance has: its own and its clock. */
#define STREAMS_PER_INSTANCE 2
/* CUDA's most hardware work queues a device gives one process, and the
 * number it gives when CUDA_DEVICE_MAX_CONNECTIONS is not set. */
#define MOST_HARDWARE_QUEUES 32
#define DEFAULT_HARDWARE_QUEUES 8

/* The points of a batch between its phases, in the order it passes them. */
enum { RUN_START, RUN_INPUT_DONE, RUN_INFER_DONE, RUN_OUTPUT_DONE, RUN_POINTS };
/* The phases a timed batch measures on the device. */
enum { GPU_INPUT, GPU_INFER, GPU_OUTPUT, GPU_PHASES };

struct run_batch;

/* One request on an instance, from taking the slot to giving it back: its
 * tensors' places for the run, and the batch that carries it. */
typedef struct run_slot {
    struct run_slot *next;       /* the instance's free slots, or its runs waiting */
    void *h_in, *h_out;          /* pinned staging, for tensors in pageable memory */
    size_t h_in_cap, h_out_cap;
    void *d_in, *d_out;          /* device buffers of its run */
    size_t d_in_cap, d_out_cap;
    const gpu_job *job;          /* the run waiting: its job, and where its */
    const void *from;            /* input is read from and its output written */
    void *to;
    struct run_batch *batch;     /* set once the run is queued on the stream */
} run_slot;

/* Runs queued on an instance's stream together: their inputs' copies up as
 * one batch, their kernels, their outputs' copies down as one batch. The
 * copy engine pays a fixed cost for each copy (on the H200, copies of the
 * seed benchmark's 1,474,560 bytes in the server's order went 29,000-29,900 a second
 * one by one and 31,200-32,400 two to a batch, 31,700-33,800 four to a
 * batch, as fast as one copy of all four's bytes), so runs that wait for
 * the same stream cross the link together. */
typedef struct run_batch {
    struct run_batch *next;      /* the instance's free batches */
    /* A timing event between copies on the stream costs the copies of every
     * stream (the seed benchmark's copies alone ran about 12% slower with the four of
     * them, measured on the H200), so the stream gets marks without timing
     * and the clock stream, once each mark is passed, records the time.
     * time[RUN_OUTPUT_DONE] is the one a timed batch's runs sleep on: it
     * follows the outputs' copies. A batch that is not timed (timed_batch)
     * gets none of them, only done after its outputs' copies. */
    cudaEvent_t mark[RUN_POINTS], time[RUN_POINTS], done; /* made on first use, done last */
    int timed;
    unsigned holders;            /* its runs that have not let it go */
    int ended;                   /* its end was seen; not counted in flight */
    cudaError_t err;             /* queuing it failed: in what */
    const char *what;
    uint64_t gpu_ns[GPU_PHASES]; /* a timed batch's phases, once ended */
} run_batch;

typedef struct gpu_instance {
    int device;
    const float *weights;        /* the device's copy, shared by its instances */
    cudaStream_t stream;         /* its batches run in the order they were queued */
    cudaStream_t clock;          /* times the points its stream passes */
    /* Under lock: the slots, the runs waiting to be queued, and queuing on
     * the stream (one batch's copies and kernels at a time, so that each
     * batch's run is contiguous). */
    pthread_mutex_t lock;
    pthread_cond_t slot_freed;
    pthread_cond_t queued;       /* a waiting run's batch was queued */
    run_slot slots[SLOTS_PER_INSTANCE];
    run_slot *free_slots;
    run_slot *waiting, **waiting_tail; /* runs waiting to be queued, in order */
    /* A batch holds at least one slot that no other batch holds. */
    run_batch batches[SLOTS_PER_INSTANCE];
    run_batch *free_batches;
    unsigned in_flight;          /* batches queued and not yet seen to end */
    unsigned runs;               /* runs queued so far: which batches are timed */
    /* The device phases of its last timed batch, for those that are not;
     * relaxed: each is whole, and a run may read two batches' figures. */
    _Atomic uint64_t last_ns[GPU_PHASES];
    atomic_int timed_one;        /* last_ns holds a batch's phases */
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
    unsigned copy_batch;         /* --copy-batch: most runs in one batch */
    atomic_uint next;            /* round robin among equally busy instances */
    /* relaxed counters, for /metrics */
    _Atomic uint64_t batches_queued, batched_runs;
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
    pthread_cond_init(&in->queued, NULL);
    in->waiting_tail = &in->waiting;
    for (unsigned i = SLOTS_PER_INSTANCE; i-- > 0;) {
        in->slots[i].next = in->free_slots;
        in->free_slots = &in->slots[i];
        in->batches[i].next = in->free_batches;
        in->free_batches = &in->batches[i];
    }
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

static void batch_free_events(run_batch *b)
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
static cudaError_t batch_make(run_batch *b)
{
    if (b->done) /* made last: all of them exist */
        return cudaSuccess;
    cudaError_t e = cudaSuccess;
    for (int i = 0; i < RUN_POINTS && e == cudaSuccess; i++) {
        e = cudaEventCreateWithFlags(&b->mark[i], cudaEventDisableTiming);
        /* The runs' threads sleep on the last rather than spinning: the
         * frontend's CPUs belong to the protocol threads and the other workers. */
        if (e == cudaSuccess)
            e = cudaEventCreateWithFlags(&b->time[i], i == RUN_OUTPUT_DONE ? cudaEventBlockingSync
                                                                           : cudaEventDefault);
    }
    if (e == cudaSuccess)
        e = cudaEventCreateWithFlags(&b->done, cudaEventDisableTiming | cudaEventBlockingSync);
    if (e != cudaSuccess)
        batch_free_events(b);
    return e;
}

static void slot_free(run_slot *sl)
{
    cudaFreeHost(sl->h_in);
    cudaFreeHost(sl->h_out);
    cudaFree(sl->d_in);
    cudaFree(sl->d_out);
    *sl = (run_slot){0};
}

static void instance_free(gpu_instance *in)
{
    cudaSetDevice(in->device);
    if (in->stream)
        cudaStreamDestroy(in->stream);
    if (in->clock)
        cudaStreamDestroy(in->clock);
    for (unsigned i = 0; i < SLOTS_PER_INSTANCE; i++) {
        slot_free(&in->slots[i]);
        batch_free_events(&in->batches[i]);
    }
    pthread_cond_destroy(&in->queued);
    pthread_cond_destroy(&in->slot_freed);
    pthread_mutex_destroy(&in->lock);
}

/* CUDA puts a device's streams on CUDA_DEVICE_MAX_CONNECTIONS hardware
 * work queues in turn, and two streams that share a queue wait for each
 * other's work as if they were one. At the default of 8, six instances'
 * twelve streams went two to a queue on four of the eight: the seed
 * benchmark's system rate at window 1 was 2.8% lower (27,600 against 28,400 infer/s on
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
                         unsigned time_every, unsigned copy_batch, const float *weights,
                         size_t n_weights)
{
    pool.window = window;
    pool.time_every = time_every ? time_every : 1;
    pool.copy_batch = copy_batch < 1 ? 1 : copy_batch > SLOTS_PER_INSTANCE ? SLOTS_PER_INSTANCE
                                                                          : copy_batch;
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
                    "timed on one run in %u; copies of up to %u runs in a batch\n", pool.n,
            pool.n_devices, window, queues, pool.time_every, pool.copy_batch);
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

/* A free slot of in; waits while all are held (that wait is the "queue"
 * phase, and the worker pool's thread does not count as at work meanwhile). */
static run_slot *slot_take(gpu_instance *in)
{
    pthread_mutex_lock(&in->lock);
    if (!in->free_slots) {
        worker_pool_wait_begin();
        while (!in->free_slots)
            pthread_cond_wait(&in->slot_freed, &in->lock);
        worker_pool_wait_end();
    }
    run_slot *sl = in->free_slots;
    in->free_slots = sl->next;
    pthread_mutex_unlock(&in->lock);
    return sl;
}

static void slot_give(gpu_instance *in, run_slot *sl)
{
    pthread_mutex_lock(&in->lock);
    sl->job = NULL;
    sl->batch = NULL;
    sl->next = in->free_slots;
    in->free_slots = sl;
    pthread_cond_signal(&in->slot_freed);
    pthread_mutex_unlock(&in->lock);
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
static cudaError_t grow_slot(run_slot *sl, const gpu_job *job, int stage_in, int stage_out,
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
static void slot_trim(run_slot *sl)
{
    shrink(&sl->d_in, &sl->d_in_cap, 0);
    shrink(&sl->d_out, &sl->d_out_cap, 0);
    shrink(&sl->h_in, &sl->h_in_cap, 1);
    shrink(&sl->h_out, &sl->h_out_cap, 1);
}

static uint64_t elapsed_ns(cudaEvent_t from, cudaEvent_t to)
{
    float ms = 0;
    return cudaEventElapsedTime(&ms, from, to) == cudaSuccess ? (uint64_t)(ms * 1e6f) : 0;
}

/* A timed batch's phases on the device, kept for the instance's batches
 * that are not timed. Under in->lock, once the batch has ended. */
static void time_batch(gpu_instance *in, run_batch *b)
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
static void device_phases(gpu_instance *in, const run_batch *b, uint64_t span_ns,
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

/* Whether a batch of n runs about to be queued on in is timed: the first
 * batches, until one has been, then those that hold one run in
 * pool.time_every. Timing costs the copies of every stream even off the
 * instance's stream (marks, waits and records: the seed benchmark's system rate at
 * window 1, concurrency 100, was 27,112 infer/s with every run timed
 * against 27,870 with one in 8 and 28,335 with one in 32, means of seven
 * rounds on the H200), and the phases of an instance's batches differ
 * little from one to the next. Under in->lock. */
static int timed_batch(gpu_instance *in, unsigned n)
{
    unsigned first = in->runs, every = pool.time_every;
    in->runs += n;
    return !atomic_load_explicit(&in->timed_one, memory_order_acquire) || first % every == 0 ||
           first / every != (first + n - 1) / every;
}

/* Point i of b: marked on in's stream where the stream is now, timed on the
 * clock stream once the mark is passed; a batch not timed marks only its
 * end, with done. Under in->lock. */
static cudaError_t pass_point(gpu_instance *in, run_batch *b, int i)
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

/* The copies of one direction of the n runs: those between host and device
 * memory together, those from or to a CUDA region (device to device, or
 * peer) one by one. */
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
    if ((e = pass_point(in, b, RUN_START)) != cudaSuccess ||
        (e = copy_runs(runs, n, 1, in->device, in->stream)) != cudaSuccess ||
        (e = pass_point(in, b, RUN_INPUT_DONE)) != cudaSuccess)
        return e;
    *what = "the kernel's launch";
    for (unsigned i = 0; i < n; i++) {
        const gpu_job *job = runs[i]->job;
        if ((e = yolo_kernel_launch(runs[i]->d_in, job->height, job->width, in->weights,
                                    (int)pool.window, runs[i]->d_out, in->stream)) != cudaSuccess)
            return e;
    }
    if ((e = pass_point(in, b, RUN_INFER_DONE)) != cudaSuccess)
        return e;
    *what = n > 1 ? "cudaMemcpyBatchAsync (outputs)" : "cudaMemcpyAsync (output)";
    if ((e = copy_runs(runs, n, 0, in->device, in->stream)) != cudaSuccess ||
        (e = pass_point(in, b, RUN_OUTPUT_DONE)) != cudaSuccess)
        return e;
    return cudaSuccess;
}

/* Queue the waiting runs, up to pool.copy_batch a batch, while fewer than
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
        while (in->waiting && n < pool.copy_batch) {
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
        b->err = batch_make(b);
        if (b->err == cudaSuccess) {
            b->timed = timed_batch(in, n);
            b->err = enqueue_batch(in, b, runs, n, &b->what);
            if (b->err != cudaSuccess) {
                cudaStreamSynchronize(in->stream);
                cudaStreamSynchronize(in->clock);
            }
        }
        if (b->err == cudaSuccess) {
            in->in_flight++;
            atomic_fetch_add_explicit(&pool.batches_queued, 1, memory_order_relaxed);
            atomic_fetch_add_explicit(&pool.batched_runs, n, memory_order_relaxed);
        }
        for (unsigned i = 0; i < n; i++)
            runs[i]->batch = b;
        woke = 1;
    }
    if (woke)
        pthread_cond_broadcast(&in->queued);
}

/* sl's run waits its turn among the instance's runs and is queued in a
 * batch (by this thread or another); returns the batch. */
static run_batch *wait_queued(gpu_instance *in, run_slot *sl)
{
    pthread_mutex_lock(&in->lock);
    sl->next = NULL;
    *in->waiting_tail = sl;
    in->waiting_tail = &sl->next;
    queue_waiting(in);
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
            time_batch(in, b);
        queue_waiting(in);
    }
    if (gpu)
        device_phases(in, b, span_ns, gpu);
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
static cudaError_t run_on(gpu_instance *in, run_slot *sl, const gpu_job *job, model_phases *ph,
                          const char **what, int *guard_failed)
{
    const tensor *src = job->in;
    tensor *dst = job->out;
    cudaError_t e;
    int stage_in = !src->on_device && !src->pinned, stage_out = !dst->on_device && !dst->pinned;
    if ((e = grow_slot(sl, job, stage_in, stage_out, what)) != cudaSuccess)
        return e;
    uint64_t t0 = now_ns();
    if (stage_in && stage_input(sl, src, guard_failed) != 0)
        return cudaSuccess;
    uint64_t staged = now_ns(), copy_in_ns = staged - t0;

    sl->job = job;
    sl->from = stage_in ? sl->h_in : src->data;
    sl->to = stage_out ? sl->h_out : dst->data;
    run_batch *b = wait_queued(in, sl);
    uint64_t queued = now_ns();
    ph->queue_ns += queued - staged; /* waiting for its batch is queuing too */
    if ((e = b->err) != cudaSuccess) {
        *what = b->what;
        batch_done(in, b, 0, NULL);
        return e;
    }
    /* The reply must not say the output is there before it is. */
    *what = "cudaEventSynchronize (the run)";
    worker_pool_wait_begin();
    e = cudaEventSynchronize(b->timed ? b->time[RUN_OUTPUT_DONE] : b->done);
    worker_pool_wait_end();
    t0 = now_ns();
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
    ph->output_ns = gpu[GPU_OUTPUT] + (now_ns() - t0);
    return cudaSuccess;
}

void gpu_instances_copy_batches(uint64_t *batches, uint64_t *runs)
{
    *batches = atomic_load_explicit(&pool.batches_queued, memory_order_relaxed);
    *runs = atomic_load_explicit(&pool.batched_runs, memory_order_relaxed);
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
        uint64_t t0 = now_ns();
        run_slot *sl = slot_take(in);
        ph->queue_ns = now_ns() - t0;
        e = run_on(in, sl, job, ph, &what, &guard_failed);
        slot_trim(sl);
        slot_give(in, sl);
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
