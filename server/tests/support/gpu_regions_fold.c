/*
 * The fold of CUDA regions into one entry per GPU (src/common/gpu_regions.h)
 * on entries given on the command line, for
 * server/tests/core/test_gpu_regions_fold.py:
 *
 *   shmreg-server-gpu-regions-test [UUID=BYTES]...
 *
 * One region per argument: its GPU's UUID ("" for a region without one)
 * and its bytes. Prints "<uuid> <regions> <bytes>" per entry the fold
 * leaves, in its order; exit 2 on an argument it cannot read. Not
 * installed.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/gpu_regions.h"

#define MOST 256

/* argv's "UUID=BYTES" as an entry (the UUID points into arg, cut at '='). */
static int read_entry(char *arg, gpu_regions *e)
{
    char *eq = strrchr(arg, '='), *end;
    if (!eq || !eq[1] || eq[1] == '-')
        return -1;
    errno = 0;
    unsigned long long bytes = strtoull(eq + 1, &end, 10);
    if (errno || *end)
        return -1;
    *eq = 0;
    *e = (gpu_regions){arg[0] ? arg : NULL, 1, bytes};
    return 0;
}

int main(int argc, char **argv)
{
    gpu_regions t[MOST];
    size_t n = 0;
    for (int i = 1; i < argc; i++) {
        if (n == MOST || read_entry(argv[i], &t[n++]) != 0) {
            fprintf(stderr, "usage: %s [UUID=BYTES]... (see the source)\n", argv[0]);
            return 2;
        }
    }
    size_t gpus = gpu_regions_fold(t, n);
    for (size_t g = 0; g < gpus; g++)
        printf("%s %" PRIu64 " %" PRIu64 "\n", t[g].uuid, t[g].regions, t[g].bytes);
    return 0;
}
