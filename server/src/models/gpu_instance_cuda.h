/*
 * The GPU model's instances with the CUDA runtime (gpu_instances.h), in four
 * files by concern, sharing what this header declares:
 *   gpu_devices_cuda.c   which devices, the instances on them, start and stop;
 *   gpu_slots_cuda.c     choosing an instance, its run slots and their buffers,
 *                        a batch's events;
 *   gpu_batching_cuda.c  the batching scheduler: runs wait, are queued on the
 *                        stream in batches, and end (gpu_instances_run);
 *   gpu_timing_cuda.c    the clock: which batches are timed, and each run's
 *                        phases on the device.
 * Not for use outside these four files.
 */
#ifndef SERVER_GPU_INSTANCE_CUDA_H
#define SERVER_GPU_INSTANCE_CUDA_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "models/gpu_instances.h"
#include "models/placement.h"

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
    /* Where the kernel reads and writes: d_in and d_out, or, for a tensor
     * in a CUDA region on the instance's device, the region itself (from,
     * to), which then needs no copy (gpu_batching_cuda.c, place_run). */
    const void *kernel_in;
    void *kernel_out;
    struct run_batch *batch;     /* set once the run is queued on the stream */
    gpu_pending *pending;        /* a run handed over (gpu_instances_submit), which
                                  * the finishing thread completes; else NULL */
    uint64_t queued_ns;          /* a handed-over run: when its batch was queued */
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
     * follows the outputs' copies. A batch that is not timed (gpu_timed_batch)
     * gets none of them, only done after its outputs' copies. */
    cudaEvent_t mark[RUN_POINTS], time[RUN_POINTS], done; /* made on first use, done last */
    int timed;
    unsigned holders;            /* its runs that have not let it go */
    int ended;                   /* its end was seen; not counted in flight */
    cudaError_t err;             /* queuing it failed: in what */
    const char *what;
    uint64_t gpu_ns[GPU_PHASES]; /* a timed batch's phases, once ended */
    /* Its runs handed over, which the finishing thread completes, and the
     * next batch it completes. */
    run_slot *handed[SLOTS_PER_INSTANCE];
    unsigned n_handed;
    struct run_batch *next_to_finish;
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
    unsigned slot_waiters;       /* threads waiting in gpu_slot_take */
    /* Runs handed over (gpu_instances_submit) while every slot was held, in
     * the order they came: a slot given back goes to the first of them, or,
     * while threads wait in gpu_slot_take too, to them and to these in
     * turn (slot_turn). */
    gpu_pending *slotless, **slotless_tail;
    unsigned n_slotless;         /* at most gpu_pool.max_queue */
    int slot_turn;
    run_slot *waiting, **waiting_tail; /* runs waiting to be queued, in order */
    /* A batch holds at least one slot that no other batch holds. */
    run_batch batches[SLOTS_PER_INSTANCE];
    run_batch *free_batches;
    unsigned in_flight;          /* batches queued and not yet seen to end */
    /* Batches holding handed-over runs, in the order they were queued, for
     * the finishing thread, which sleeps on to_finish while there are none. */
    run_batch *to_finish, **to_finish_tail;
    pthread_cond_t finish_ready;
    pthread_t finisher;
    int finisher_runs;           /* the thread was started */
    int stopping;                /* it ends once to_finish is empty */
    unsigned runs;               /* runs queued so far: which batches are timed */
    /* The device phases of its last timed batch, for those that are not;
     * relaxed: each is whole, and a run may read two batches' figures. */
    _Atomic uint64_t last_ns[GPU_PHASES];
    atomic_int timed_one;        /* last_ns holds a batch's phases */
    atomic_uint load;            /* requests holding or waiting for this instance */
} gpu_instance;

struct gpu_pool {
    gpu_instance *inst;
    unsigned n;
    int devices[MAX_DEVICES];
    float *weights[MAX_DEVICES]; /* per entry of devices */
    unsigned n_devices;
    unsigned window;
    unsigned time_every;         /* --time-phases-every */
    unsigned copy_batch;         /* --copy-batch: most runs in one batch */
    unsigned max_queue;          /* --max-queue: most handed-over runs waiting for a slot */
    uint64_t wait_spin_ns;       /* --spin-us (gpu_instances_config); written before any run */
    atomic_uint next;            /* round robin among equally busy instances */
    /* relaxed counters, for /metrics */
    _Atomic uint64_t batches_queued, batched_runs;
    _Atomic uint64_t kernel_in_place[2]; /* operands the kernel used where they lie: in, out */
    _Atomic uint64_t placed[PLACEMENT_CASES]; /* requests per placement case */
    char why[400];               /* why there is no instance, when n == 0 */
};
/* The instances and what they share: gpu_devices_cuda.c's. */
extern struct gpu_pool gpu_pool;

/* gpu_slots_cuda.c */
void gpu_batch_free_events(run_batch *b);
cudaError_t gpu_batch_make(run_batch *b);
void gpu_slot_free(run_slot *sl);
gpu_instance *gpu_take_instance(const int *tensor_devices, unsigned n, unsigned *load_before);
/* in's last timed batch took at most ns on the device. */
int gpu_runs_within(gpu_instance *in, uint64_t ns);
void gpu_give_back(gpu_instance *in);
run_slot *gpu_slot_take(gpu_instance *in);
/* sl back among in's free slots, waking a thread waiting in gpu_slot_take.
 * Under in->lock. */
void gpu_slot_free_locked(gpu_instance *in, run_slot *sl);
cudaError_t gpu_grow_slot(run_slot *sl, const gpu_job *job, int stage_in, int stage_out,
                          const char **what);
void gpu_slot_trim(run_slot *sl);

/* gpu_batching_cuda.c: the finishing thread of an instance */
void *gpu_finish_batches(void *instance);

/* gpu_timing_cuda.c */
void gpu_time_batch(gpu_instance *in, run_batch *b);
void gpu_device_phases(gpu_instance *in, const run_batch *b, uint64_t span_ns,
                       uint64_t gpu[GPU_PHASES]);
int gpu_timed_batch(gpu_instance *in, unsigned n);
cudaError_t gpu_pass_point(gpu_instance *in, run_batch *b, int i);

#endif
