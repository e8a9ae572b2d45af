/* The GPU model's placement rule (placement.h). */
#include "models/placement.h"

#define NO_DEVICE (-2)  /* no CUDA tensor seen yet */
#define SEVERAL (-3)    /* CUDA tensors on more than one device */

/* The one device that holds every CUDA tensor, NO_DEVICE or SEVERAL. */
static int tensors_device(const int *tensor_devices, unsigned n)
{
    int g = NO_DEVICE;
    for (unsigned i = 0; i < n; i++) {
        int d = tensor_devices[i];
        if (d == PLACEMENT_HOST)
            continue;
        if (g == NO_DEVICE)
            g = d;
        else if (d != g)
            return SEVERAL;
    }
    return g;
}

static int has_instance_on(const placement_instances *inst, int device)
{
    for (unsigned i = 0; i < inst->n; i++)
        if (inst->device(inst->ctx, i) == device)
            return 1;
    return 0;
}

/* The least busy instance on device (any device: NO_DEVICE), the first of
 * equals from start on. */
static unsigned least_busy(const placement_instances *inst, int device, unsigned start)
{
    unsigned best = 0, best_load = 0;
    int found = 0;
    for (unsigned k = 0; k < inst->n; k++) {
        unsigned i = (unsigned)(((unsigned long long)start + k) % inst->n);
        if (device != NO_DEVICE && inst->device(inst->ctx, i) != device)
            continue;
        unsigned load = inst->load(inst->ctx, i);
        if (!found || load < best_load) {
            best = i;
            best_load = load;
            found = 1;
        }
    }
    return best;
}

unsigned placement_choose(const int *tensor_devices, unsigned n_tensors,
                          const placement_instances *inst, unsigned start, placement_case *why)
{
    int g = tensors_device(tensor_devices, n_tensors);
    if (g >= 0 && has_instance_on(inst, g)) {
        *why = PLACED_ON_TENSOR_GPU;
        return least_busy(inst, g, start);
    }
    *why = g == NO_DEVICE ? PLACED_NO_CUDA_TENSORS : PLACED_FALLBACK;
    return least_busy(inst, NO_DEVICE, start);
}

const char *placement_case_name(placement_case c)
{
    static const char *const names[PLACEMENT_CASES] = {
        [PLACED_ON_TENSOR_GPU] = "tensor_gpu",
        [PLACED_FALLBACK] = "fallback",
        [PLACED_NO_CUDA_TENSORS] = "no_cuda_tensors",
    };
    return (unsigned)c < PLACEMENT_CASES ? names[c] : "?";
}
