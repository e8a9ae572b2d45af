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

/* Which instances least_busy looks at, next to one device. */
typedef enum among { ALL, ON_DEVICE, OFF_DEVICE } among;

/* The least busy instance looked at and the load it was read with (the
 * loads move meanwhile: the rule decides on one reading of each). */
typedef struct pick {
    int found;
    unsigned index, load;
} pick;

/* The least busy of the instances `which` names, the first of equals from
 * start on; found 0 where there is none. */
static pick least_busy(const placement_instances *inst, among which, int device, unsigned start)
{
    pick best = {0, 0, 0};
    for (unsigned k = 0; k < inst->n; k++) {
        unsigned i = (unsigned)(((unsigned long long)start + k) % inst->n);
        int on = inst->device(inst->ctx, i) == device;
        if ((which == ON_DEVICE && !on) || (which == OFF_DEVICE && on))
            continue;
        unsigned load = inst->load(inst->ctx, i);
        if (!best.found || load < best.load)
            best = (pick){1, i, load};
    }
    return best;
}

/* The request would wait for a slot there. */
static int full(const placement_instances *inst, pick p)
{
    return p.load >= inst->slots;
}

unsigned placement_choose(const int *tensor_devices, unsigned n_tensors,
                          const placement_instances *inst, unsigned start, placement_case *why)
{
    int g = tensors_device(tensor_devices, n_tensors);
    pick on_g = g >= 0 ? least_busy(inst, ON_DEVICE, g, start) : (pick){0, 0, 0};
    if (on_g.found) {
        /* g's least busy instance full: all of g's are. */
        pick other = full(inst, on_g) ? least_busy(inst, OFF_DEVICE, g, start) : (pick){0, 0, 0};
        if (other.found && !full(inst, other)) {
            *why = PLACED_SPILLED;
            return other.index;
        }
        *why = PLACED_ON_TENSOR_GPU;
        return on_g.index;
    }
    *why = g == NO_DEVICE ? PLACED_NO_CUDA_TENSORS : PLACED_FALLBACK;
    return least_busy(inst, ALL, NO_DEVICE, start).index;
}

const char *placement_case_name(placement_case c)
{
    static const char *const names[PLACEMENT_CASES] = {
        [PLACED_ON_TENSOR_GPU] = "tensor_gpu",
        [PLACED_SPILLED] = "spilled",
        [PLACED_FALLBACK] = "fallback",
        [PLACED_NO_CUDA_TENSORS] = "no_cuda_tensors",
    };
    return (unsigned)c < PLACEMENT_CASES ? names[c] : "?";
}
