/*
 * Which instance of the GPU model a request runs on, from where its tensors
 * live: the rule alone, with no CUDA in it, so that a CPU build and its
 * tests reach every case (gpu_slots_cuda.c applies it to the instances).
 *
 *   tensor_gpu       every tensor of the request that is in a CUDA region
 *                    lies on one device g, and g has instances: the least
 *                    busy instance of g, so that no copy crosses the peer
 *                    link, as long as one of g's instances has a free run
 *                    slot, or no other device's has one either;
 *   spilled          as tensor_gpu, but every instance of g is full (the
 *                    request would wait there for a slot) and an instance
 *                    of another device has a free slot: the least busy of
 *                    those. Its peer copy starts at once, where the wait
 *                    for a slot of g would last a whole run, so a client
 *                    whose regions all lie on one GPU keeps the others at
 *                    work once that GPU's slots are taken;
 *   fallback         its CUDA tensors lie on a device with no instance, or
 *                    on several devices: the least busy instance of all;
 *   no_cuda_tensors  none of its tensors is in a CUDA region (system
 *                    memory, inline data): the least busy instance of all.
 *
 * An instance is full when its load, the requests holding or waiting for
 * one of its slots, is at least its slots: the request placed now is not
 * in that load yet, and would be one more. Tensors in host memory do not
 * decide: a CUDA input on g with its output in a system region still runs
 * on g. Among equally busy instances the first from start on in the
 * instances' order is taken, so that a caller that advances start for each
 * request spreads them round robin.
 */
#ifndef SERVER_PLACEMENT_H
#define SERVER_PLACEMENT_H

#ifdef __cplusplus
extern "C" {
#endif

/* The device of a tensor that is not in a CUDA region. */
#define PLACEMENT_HOST (-1)

typedef enum placement_case {
    PLACED_ON_TENSOR_GPU = 0,
    PLACED_SPILLED,
    PLACED_FALLBACK,
    PLACED_NO_CUDA_TENSORS,
    PLACEMENT_CASES
} placement_case;

/* The instances to choose among: instance i runs on device(ctx, i) and has
 * load(ctx, i) requests holding or waiting for one of its slots, each
 * instance slots run slots (0: every instance is full, and no request
 * spills). */
typedef struct placement_instances {
    unsigned n;
    unsigned slots;
    int (*device)(const void *ctx, unsigned i);
    unsigned (*load)(const void *ctx, unsigned i);
    const void *ctx;
} placement_instances;

/* The instance (an index below inst->n, which must be at least 1) for a
 * request whose n_tensors tensors lie on tensor_devices (PLACEMENT_HOST for
 * one not in a CUDA region); start: where the round robin among equally
 * busy instances begins (any value; taken modulo inst->n). *why says which
 * case applied. */
unsigned placement_choose(const int *tensor_devices, unsigned n_tensors,
                          const placement_instances *inst, unsigned start, placement_case *why);
/* "tensor_gpu", "spilled", "fallback", "no_cuda_tensors": the label on
 * /metrics. */
const char *placement_case_name(placement_case c);

#ifdef __cplusplus
}
#endif

#endif
