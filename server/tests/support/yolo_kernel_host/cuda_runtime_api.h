/* The part of the CUDA runtime's API that yolo_kernel.{h,cu} name (cuda_fp16.h says why). */
#pragma once
typedef int cudaError_t;
typedef void *cudaStream_t;
enum { cudaSuccess = 0, cudaErrorInvalidValue = 1 };
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
