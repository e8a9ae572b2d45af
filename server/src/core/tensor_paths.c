/* Counters of the ways tensors travel (tensor_paths.h). */
#include "core/tensor_paths.h"

#include <stdatomic.h>

static struct {
    atomic_uint_least64_t tensors, bytes;
} totals[TENSOR_PATH_COUNT][2];

tensor_path tensor_path_for(int device_model, const shmreg_view *view)
{
    if (view->kind == SHMREG_KIND_REMOTE) /* no address here: the library copies */
        return TENSOR_PATH_REMOTE_COPY;
    if (view->kind != SHMREG_KIND_SYSTEM)
        return device_model ? TENSOR_PATH_DMA_IN_PLACE : TENSOR_PATH_DEVICE_COPY;
    if (!device_model)
        return TENSOR_PATH_CPU_COPY;
    /* Only a pinned region may be read or written where it lies: DMA reaches
     * the pages the pin holds whatever the client does to its object, while
     * the CPU (and DMA from pageable memory, which the driver stages through
     * the CPU) would fault on pages a truncation took away. */
    return view->pinned ? TENSOR_PATH_DMA_IN_PLACE : TENSOR_PATH_STAGED_COPY;
}

const char *tensor_path_name(tensor_path p)
{
    switch (p) {
    case TENSOR_PATH_DMA_IN_PLACE: return "dma_in_place";
    case TENSOR_PATH_STAGED_COPY: return "staged_copy";
    case TENSOR_PATH_CPU_COPY: return "cpu_copy";
    case TENSOR_PATH_DEVICE_COPY: return "device_copy";
    case TENSOR_PATH_REMOTE_COPY: return "remote_copy";
    case TENSOR_PATH_NONE:
    case TENSOR_PATH_COUNT: break;
    }
    return "none";
}

const char *tensor_direction_name(tensor_direction d)
{
    return d == TENSOR_INPUT ? "input" : "output";
}

void tensor_path_count(tensor_path p, tensor_direction d, size_t n)
{
    if (p <= TENSOR_PATH_NONE || p >= TENSOR_PATH_COUNT)
        return;
    /* relaxed: independent counters, read only for display */
    atomic_fetch_add_explicit(&totals[p][d].tensors, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&totals[p][d].bytes, n, memory_order_relaxed);
}

void tensor_path_totals(tensor_path p, tensor_direction d, uint64_t *tensors, uint64_t *bytes)
{
    *tensors = *bytes = 0;
    if (p <= TENSOR_PATH_NONE || p >= TENSOR_PATH_COUNT)
        return;
    *tensors = atomic_load_explicit(&totals[p][d].tensors, memory_order_relaxed);
    *bytes = atomic_load_explicit(&totals[p][d].bytes, memory_order_relaxed);
}
