/* The yolo model's kernel (yolo_kernel.cu), launched by gpu_batching_cuda.c. */
#ifndef SERVER_YOLO_KERNEL_H
#define SERVER_YOLO_KERNEL_H

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* output0 [84][anchors] from images [3][height][width] (FP16, device
 * pointers), weights [3*window*window][84] float32 on the same device, on
 * stream. Returns the launch's error. */
cudaError_t yolo_kernel_launch(const void *images, int height, int width, const float *weights,
                               int window, void *output0, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
