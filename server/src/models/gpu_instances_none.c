/* gpu_instances.h for a server built without CUDA: the GPU model is listed
 * and says why it cannot run. */
#include "models/gpu_instances.h"

#include <stdio.h>

#define WHY "this server was built without CUDA (SERVER_WITH_CUDA=OFF, or no CUDA toolkit found)"

void gpu_instances_start(const gpu_instances_config *cfg, const float *weights,
                         size_t n_weights)
{
    fprintf(stderr, "gpu model 'yolo' is not available: %s\n", WHY);
}

void gpu_instances_stop(void)
{
}

server_status gpu_instances_ready(char *err, size_t errlen)
{
    snprintf(err, errlen, "%s", WHY);
    return STATUS_NOT_READY;
}

unsigned gpu_instances_placement(int *devices, unsigned max, unsigned *n_devices)
{
    *n_devices = 0;
    return 0;
}

void gpu_instances_copy_batches(uint64_t *batches, uint64_t *runs)
{
    *batches = 0;
    *runs = 0;
}

void gpu_instances_kernel_in_place(uint64_t in_place[2])
{
    in_place[0] = in_place[1] = 0;
}

void gpu_instances_placed(uint64_t placed[PLACEMENT_CASES])
{
    for (int c = 0; c < PLACEMENT_CASES; c++)
        placed[c] = 0;
}

server_status gpu_instances_run(const gpu_job *job, model_phases *ph, char *err, size_t errlen)
{
    return gpu_instances_ready(err, errlen);
}

server_status gpu_instances_submit(gpu_pending *p)
{
    return gpu_instances_ready(p->err, p->errlen);
}
