/* The CUDA regions on each GPU (gpu_regions.h). */
#include "common/gpu_regions.h"

#include <stdlib.h>
#include <string.h>

/* A UUID as the library writes one ("GPU-" or "MIG-" and hex digits in
 * groups): a label value that needs no escaping. */
static int label_safe(const char *uuid)
{
    if (!uuid || !*uuid)
        return 0;
    for (const char *c = uuid; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '-'))
            return 0;
    return 1;
}

static int by_uuid(const void *a, const void *b)
{
    return strcmp(((const gpu_regions *)a)->uuid, ((const gpu_regions *)b)->uuid);
}

size_t gpu_regions_fold(gpu_regions *t, size_t n)
{
    size_t kept = 0;
    for (size_t i = 0; i < n; i++)
        if (label_safe(t[i].uuid))
            t[kept++] = t[i];
    if (kept > 1) /* qsort's base may not be NULL, even for no entries */
        qsort(t, kept, sizeof *t, by_uuid);
    size_t out = 0;
    for (size_t i = 0; i < kept; i++) {
        if (out && strcmp(t[out - 1].uuid, t[i].uuid) == 0) {
            t[out - 1].regions += t[i].regions;
            t[out - 1].bytes += t[i].bytes;
        } else {
            t[out++] = t[i];
        }
    }
    return out;
}
