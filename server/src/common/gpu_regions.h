/*
 * The CUDA regions on each GPU, named by the UUID the library gives a
 * region's device (shmreg_region_status.device_uuid): the fold that turns
 * one entry per region into one per GPU, so that /metrics has a sample per
 * GPU however many regions there are. Pure: no registry, no CUDA.
 */
#ifndef SERVER_GPU_REGIONS_H
#define SERVER_GPU_REGIONS_H

#include <stddef.h>
#include <stdint.h>

typedef struct gpu_regions {
    const char *uuid; /* NULL: the library could not name the GPU */
    uint64_t regions, bytes;
} gpu_regions;

/* Folds the n entries of t in place: one entry per distinct UUID, in the
 * UUIDs' byte order, with the regions and bytes of the entries that had it
 * summed; an entry without a UUID, or with one that a metric label could
 * not carry as it is (anything but letters, digits and '-'), is dropped.
 * The count left at the front of t. The UUIDs are not copied: they stay the
 * caller's. */
size_t gpu_regions_fold(gpu_regions *t, size_t n);

#endif
