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

#include "models/yolo_kernel.h"

#define MAX_DEVICES 64

typedef struct gpu_instance {
    int device;
    const float *weights;        /* the device's copy, shared by its instances */
    cudaStream_t stream;
    cudaEvent_t start, input_done, infer_done, output_done;
    void *d_in, *d_out;          /* device buffers, grown to the largest request */
    size_t d_in_cap, d_out_cap;
    void *h_in, *h_out;          /* pinned staging for pageable host memory, made when first needed */
    size_t h_in_cap, h_out_cap;
    pthread_mutex_t lock;        /* one request at a time */
    atomic_uint load;            /* requests holding or waiting for this instance */
} gpu_instance;

static struct {
    gpu_instance *inst;
    unsigned n;
    int devices[MAX_DEVICES];
    float *weights[MAX_DEVICES]; /* per entry of devices */
    unsigned n_devices;
    unsigned window;
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
    atomic_init(&in->load, 0);
    cudaError_t e = cudaStreamCreateWithFlags(&in->stream, cudaStreamNonBlocking);
    if (e == cudaSuccess)
        e = cudaEventCreate(&in->start);
    if (e == cudaSuccess)
        e = cudaEventCreate(&in->input_done);
    if (e == cudaSuccess)
        e = cudaEventCreate(&in->infer_done);
    /* The request's thread sleeps on this one rather than spinning: the
     * frontend's CPUs belong to the HTTP thread and the other workers. */
    if (e == cudaSuccess)
        e = cudaEventCreateWithFlags(&in->output_done, cudaEventBlockingSync);
    if (e != cudaSuccess) {
        set_why_cuda("creating a stream or events for an instance", e);
        return -1;
    }
    return 0;
}

static void instance_free(gpu_instance *in)
{
    cudaSetDevice(in->device);
    if (in->stream)
        cudaStreamDestroy(in->stream);
    cudaEvent_t *events[] = {&in->start, &in->input_done, &in->infer_done, &in->output_done};
    for (size_t i = 0; i < 4; i++)
        if (*events[i])
            cudaEventDestroy(*events[i]);
    cudaFree(in->d_in);
    cudaFree(in->d_out);
    cudaFreeHost(in->h_in);
    cudaFreeHost(in->h_out);
    pthread_mutex_destroy(&in->lock);
}

void gpu_instances_start(const char *gpus, unsigned per_gpu, unsigned window,
                         const float *weights, size_t n_weights)
{
    pool.window = window;
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
    fprintf(stderr, "gpu model 'yolo': %u instance(s) on %u device(s), window %u\n", pool.n,
            pool.n_devices, window);
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
 * round-robin order), counted busy from here; *queue_ns is how long the
 * request then waited for it. */
static gpu_instance *take_instance(int prefer_device, uint64_t *queue_ns)
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
    uint64_t t0 = now_ns();
    pthread_mutex_lock(&best->lock);
    *queue_ns = now_ns() - t0;
    return best;
}

static void give_back(gpu_instance *in)
{
    pthread_mutex_unlock(&in->lock);
    atomic_fetch_sub_explicit(&in->load, 1, memory_order_relaxed);
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

static uint64_t elapsed_ns(cudaEvent_t from, cudaEvent_t to)
{
    float ms = 0;
    return cudaEventElapsedTime(&ms, from, to) == cudaSuccess ? (uint64_t)(ms * 1e6f) : 0;
}

/* A tensor in an unpinned system region (tensor.window) crosses the CPU
 * once: the library's guarded copy between the window and the instance's
 * pinned staging buffer, which DMA then reads or filled. A truncated object
 * fails the copy, not the process: the failure is kept in the window for
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

/* The whole run on instance in; the thread's current device is in's. A
 * guarded copy that fails ends it early with cudaSuccess and *guard_failed
 * set; nothing is left queued on the stream then. */
static cudaError_t run_on(gpu_instance *in, const gpu_job *job, model_phases *ph,
                          const char **what, int *guard_failed)
{
    const tensor *src = job->in;
    tensor *dst = job->out;
    cudaError_t e;
    *what = "cudaMalloc (the instance's buffers)";
    if ((e = grow(&in->d_in, &in->d_in_cap, src->byte_size, 0)) != cudaSuccess ||
        (e = grow(&in->d_out, &in->d_out_cap, dst->byte_size, 0)) != cudaSuccess)
        return e;
    int stage_in = !src->on_device && !src->pinned, stage_out = !dst->on_device && !dst->pinned;
    *what = "cudaMallocHost (the instance's staging buffers)";
    if ((stage_in && (e = grow(&in->h_in, &in->h_in_cap, src->byte_size, 1)) != cudaSuccess) ||
        (stage_out && (e = grow(&in->h_out, &in->h_out_cap, dst->byte_size, 1)) != cudaSuccess))
        return e;

    *what = "cudaEventRecord";
    if ((e = cudaEventRecord(in->start, in->stream)) != cudaSuccess)
        return e;
    /* Input. Recorded before the staging copy, so that compute input
     * counts it: the stream is idle, so the event completes at once. */
    const void *from = src->data;
    if (stage_in) {
        if (src->window) {
            if (!guarded_in(src->window, in->h_in, src->byte_size, guard_failed))
                return cudaStreamSynchronize(in->stream); /* the start event only */
        } else {
            memcpy(in->h_in, src->data, src->byte_size); /* the request's body */
        }
        from = in->h_in;
    }
    *what = "cudaMemcpyAsync (input)";
    if ((e = cudaMemcpyAsync(in->d_in, from, src->byte_size, cudaMemcpyDefault, in->stream)) !=
            cudaSuccess ||
        (e = cudaEventRecord(in->input_done, in->stream)) != cudaSuccess)
        return e;
    *what = "the kernel's launch";
    if ((e = yolo_kernel_launch(in->d_in, job->height, job->width, in->weights, (int)pool.window,
                                in->d_out, in->stream)) != cudaSuccess ||
        (e = cudaEventRecord(in->infer_done, in->stream)) != cudaSuccess)
        return e;
    *what = "cudaMemcpyAsync (output)";
    if ((e = cudaMemcpyAsync(stage_out ? in->h_out : dst->data, in->d_out, dst->byte_size,
                             cudaMemcpyDefault, in->stream)) != cudaSuccess ||
        (e = cudaEventRecord(in->output_done, in->stream)) != cudaSuccess)
        return e;
    /* The reply must not say the output is there before it is. */
    *what = "cudaEventSynchronize (the run)";
    if ((e = cudaEventSynchronize(in->output_done)) != cudaSuccess)
        return e;
    uint64_t t0 = now_ns();
    if (stage_out && dst->window)
        guarded_out(dst->window, in->h_out, dst->byte_size, guard_failed);
    else if (stage_out)
        memcpy(dst->data, in->h_out, dst->byte_size);
    ph->input_ns = elapsed_ns(in->start, in->input_done);
    ph->infer_ns = elapsed_ns(in->input_done, in->infer_done);
    ph->output_ns = elapsed_ns(in->infer_done, in->output_done) + (now_ns() - t0);
    return cudaSuccess;
}

unsigned gpu_instances_run(const gpu_job *job, model_phases *ph, char *err, size_t errlen)
{
    if (!pool.n)
        return gpu_instances_ready(err, errlen);
    int prefer = job->in->on_device ? job->in->device_id
                 : job->out->on_device ? job->out->device_id : -1;
    gpu_instance *in = take_instance(prefer, &ph->queue_ns);
    int previous = -1;
    const char *what = "cudaGetDevice";
    int guard_failed = 0;
    cudaError_t e = cudaGetDevice(&previous);
    if (e == cudaSuccess) {
        what = "cudaSetDevice";
        e = cudaSetDevice(in->device);
    }
    if (e == cudaSuccess) {
        e = run_on(in, job, ph, &what, &guard_failed);
        /* A failed step may leave copies queued: let them finish before the
         * request's references (and so perhaps the regions) go. */
        if (e != cudaSuccess)
            cudaStreamSynchronize(in->stream);
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
