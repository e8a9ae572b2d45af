/*
 * The tensor-path decision (src/core/tensor_paths.c) for every case, which
 * the CPU CI cannot reach through a request (the GPU model is not available
 * without a device): prints one line per case,
 *
 *   <model on the GPU 0|1> <system|cuda> <pinned 0|1> <path>
 *
 * then counts a few tensors and prints the totals as
 *
 *   total <path> <direction> <tensors> <bytes>
 *
 * for server/tests/core/test_tensor_path_decision.py to check. Not installed.
 */
#include <stdio.h>

#include "core/tensor_paths.h"

int main(void)
{
    for (int device_model = 0; device_model <= 1; device_model++)
        for (int kind = 0; kind <= 2; kind++)
            for (int pinned = 0; pinned <= 1; pinned++) {
                static const char *const kinds[] = {"system", "cuda", "remote"};
                static const shmreg_kind kind_of[] = {SHMREG_KIND_SYSTEM, SHMREG_KIND_CUDA,
                                                      SHMREG_KIND_REMOTE};
                if (kind > 0 && pinned) /* only a system view is ever pinned */
                    continue;
                shmreg_view v = {.kind = kind_of[kind], .pinned = pinned,
                                 .device_id = kind == 1 ? 0 : -1};
                printf("%d %s %d %s\n", device_model, kinds[kind], pinned,
                       tensor_path_name(tensor_path_for(device_model, &v)));
            }
    tensor_path_count(TENSOR_PATH_STAGED_COPY, TENSOR_INPUT, 1474560);
    tensor_path_count(TENSOR_PATH_STAGED_COPY, TENSOR_INPUT, 1474560);
    tensor_path_count(TENSOR_PATH_DMA_IN_PLACE, TENSOR_OUTPUT, 846720);
    tensor_path_count(TENSOR_PATH_NONE, TENSOR_INPUT, 99); /* not in shared memory: not counted */
    for (int p = TENSOR_PATH_NONE + 1; p < TENSOR_PATH_COUNT; p++)
        for (int d = TENSOR_INPUT; d <= TENSOR_OUTPUT; d++) {
            uint64_t tensors, bytes;
            tensor_path_totals((tensor_path)p, (tensor_direction)d, &tensors, &bytes);
            printf("total %s %s %llu %llu\n", tensor_path_name((tensor_path)p),
                   tensor_direction_name((tensor_direction)d), (unsigned long long)tensors,
                   (unsigned long long)bytes);
        }
    return 0;
}
