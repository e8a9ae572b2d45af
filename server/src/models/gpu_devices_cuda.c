/*
 * The GPU model's devices (gpu_instance_cuda.h): --gpus into device numbers,
 * peer access between them, the instances and the weights on each, the
 * hardware queues their streams get; start, stop, readiness and placement.
 * Linked with the CUDA runtime statically, as the device copy is: the
 * server starts where there is no driver, and the model then reports why
 * it is not available.
 */
#include "models/gpu_instance_cuda.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

struct gpu_pool gpu_pool;

static void set_why_cuda(const char *what, cudaError_t e)
{
    snprintf(gpu_pool.why, sizeof gpu_pool.why, "%s failed: %s (%s)", what, cudaGetErrorName(e),
             cudaGetErrorString(e));
}

/* The device numbers of --gpus into gpu_pool.devices; 0 or -1 with gpu_pool.why set. */
static int parse_devices(const char *gpus, int count)
{
    if (strcmp(gpus, "none") == 0) {
        snprintf(gpu_pool.why, sizeof gpu_pool.why, "the server was started with --gpus none");
        return -1;
    }
    if (strcmp(gpus, "all") == 0) {
        for (int d = 0; d < count && d < MAX_DEVICES; d++)
            gpu_pool.devices[gpu_pool.n_devices++] = d;
        return 0;
    }
    for (const char *p = gpus; *p;) {
        char *end;
        long d = strtol(p, &end, 10);
        if (d < 0 || d >= count) {
            snprintf(gpu_pool.why, sizeof gpu_pool.why,
                     "--gpus names device %ld, but this machine has %d CUDA device(s)", d, count);
            return -1;
        }
        int seen = 0;
        for (unsigned i = 0; i < gpu_pool.n_devices; i++)
            seen |= gpu_pool.devices[i] == d;
        if (!seen && gpu_pool.n_devices < MAX_DEVICES)
            gpu_pool.devices[gpu_pool.n_devices++] = (int)d;
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
    pthread_cond_init(&in->finish_ready, NULL);
    in->waiting_tail = &in->waiting;
    in->to_finish_tail = &in->to_finish;
    in->slotless_tail = &in->slotless;
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
    int err = pthread_create(&in->finisher, NULL, gpu_finish_batches, in);
    if (err != 0) {
        snprintf(gpu_pool.why, sizeof gpu_pool.why, "starting an instance's finishing thread: %s",
                 strerror(err));
        return -1;
    }
    in->finisher_runs = 1;
    pthread_setname_np(in->finisher, "gpu-finisher"); /* for per-thread CPU figures */
    return 0;
}

/* Its finishing thread ends once every batch handed to it is complete (no
 * request is in progress by then: gpu_instances_stop's rule). */
static void stop_finisher(gpu_instance *in)
{
    if (!in->finisher_runs)
        return;
    pthread_mutex_lock(&in->lock);
    in->stopping = 1;
    pthread_cond_signal(&in->finish_ready);
    pthread_mutex_unlock(&in->lock);
    pthread_join(in->finisher, NULL);
    in->finisher_runs = 0;
}

static void instance_free(gpu_instance *in)
{
    stop_finisher(in);
    cudaSetDevice(in->device);
    if (in->stream)
        cudaStreamDestroy(in->stream);
    if (in->clock)
        cudaStreamDestroy(in->clock);
    for (unsigned i = 0; i < SLOTS_PER_INSTANCE; i++) {
        gpu_slot_free(&in->slots[i]);
        gpu_batch_free_events(&in->batches[i]);
    }
    pthread_cond_destroy(&in->finish_ready);
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

void gpu_instances_start(const gpu_instances_config *cfg, const float *weights,
                         size_t n_weights)
{
    const char *gpus = cfg->gpus;
    unsigned per_gpu = cfg->per_gpu, window = cfg->window, copy_batch = cfg->copy_batch;
    gpu_pool.window = window;
    gpu_pool.time_every = cfg->time_every ? cfg->time_every : 1;
    gpu_pool.wait_spin_ns = cfg->wait_spin_ns;
    gpu_pool.max_queue = cfg->max_queue ? cfg->max_queue : GPU_DEFAULT_MAX_QUEUE;
    gpu_pool.copy_batch = copy_batch < 1 ? 1 : copy_batch > SLOTS_PER_INSTANCE ? SLOTS_PER_INSTANCE
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
        snprintf(gpu_pool.why, sizeof gpu_pool.why, "out of memory for the weights");
        goto none;
    }
    if (parse_devices(gpus, count) != 0)
        goto none;
    gpu_pool.inst = calloc((size_t)gpu_pool.n_devices * per_gpu, sizeof *gpu_pool.inst);
    if (!gpu_pool.inst) {
        snprintf(gpu_pool.why, sizeof gpu_pool.why, "out of memory for the instances");
        goto none;
    }
    for (unsigned i = 0; i < gpu_pool.n_devices; i++) {
        int d = gpu_pool.devices[i];
        if ((e = cudaSetDevice(d)) != cudaSuccess) {
            set_why_cuda("cudaSetDevice", e);
            goto undo;
        }
        enable_peers(d, count);
        if ((e = cudaMalloc((void **)&gpu_pool.weights[i], n_weights * sizeof(float))) != cudaSuccess ||
            (e = cudaMemcpy(gpu_pool.weights[i], weights, n_weights * sizeof(float),
                            cudaMemcpyHostToDevice)) != cudaSuccess) {
            set_why_cuda("copying the weights to the device", e);
            goto undo;
        }
        for (unsigned k = 0; k < per_gpu; k++) {
            if (instance_init(&gpu_pool.inst[gpu_pool.n], d, gpu_pool.weights[i]) != 0) {
                gpu_pool.n++; /* freed below with the others */
                goto undo;
            }
            gpu_pool.n++;
        }
    }
    fprintf(stderr, "gpu model 'yolo': %u instance(s) on %u device(s), window %u; %s; phases "
                    "timed on one run in %u; copies of up to %u runs in a batch\n", gpu_pool.n,
            gpu_pool.n_devices, window, queues, gpu_pool.time_every, gpu_pool.copy_batch);
    return;
undo:
    gpu_instances_stop();
none:
    fprintf(stderr, "gpu model 'yolo' is not available: %s\n", gpu_pool.why);
}

void gpu_instances_stop(void)
{
    for (unsigned i = 0; i < gpu_pool.n; i++)
        instance_free(&gpu_pool.inst[i]);
    for (unsigned i = 0; i < gpu_pool.n_devices; i++) {
        if (gpu_pool.weights[i]) {
            cudaSetDevice(gpu_pool.devices[i]);
            cudaFree(gpu_pool.weights[i]);
            gpu_pool.weights[i] = NULL;
        }
    }
    free(gpu_pool.inst);
    gpu_pool.inst = NULL;
    gpu_pool.n = 0;
    gpu_pool.n_devices = 0;
}

server_status gpu_instances_ready(char *err, size_t errlen)
{
    if (gpu_pool.n)
        return STATUS_OK;
    snprintf(err, errlen, "%s", gpu_pool.why[0] ? gpu_pool.why : "no GPU instance was started");
    return STATUS_NOT_READY;
}

unsigned gpu_instances_placement(int *devices, unsigned max, unsigned *n_devices)
{
    *n_devices = 0;
    for (unsigned i = 0; gpu_pool.n && i < gpu_pool.n_devices && i < max; i++)
        devices[(*n_devices)++] = gpu_pool.devices[i];
    return gpu_pool.n;
}
