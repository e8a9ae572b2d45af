/*
 * The yolo model's kernel: model_yolo.h defines what it computes. One thread
 * per anchor and group of 4 output rows; a warp's threads share their rows,
 * so the 4 weights of a tap are one broadcast load. Products and sums use
 * __fmul_rn / __fadd_rn so that the compiler cannot fuse them into FMAs: the
 * result is bit for bit what float32 arithmetic in that order gives on a CPU.
 */
#include "models/yolo_kernel.h"

#include <cuda_fp16.h>

#define ROWS 84
#define ROWS_PER_THREAD 4
#define THREADS 128
#define MAX_WINDOW 64 /* --yolo-window's largest */
/* tests/support/yolo_kernel_host runs this file on a CPU with a launch of
 * its own, to check the kernel against the tests' numpy reference in CI. */
#ifndef YOLO_LAUNCH
#define YOLO_LAUNCH(grid, threads, stream) yolo_kernel<<<grid, threads, 0, stream>>>
#endif

__device__ static int clamp_to(int v, int hi)
{
    return v < 0 ? 0 : (v > hi ? hi : v);
}

/* offset[si][k] = (k * 2 * s) / window for the strides s = 8 << si: the
 * sample positions relative to a window's corner, the same for every anchor
 * of a stride, so the division leaves the inner loop. */
__device__ static void fill_offsets(int *offset, int window, int tid, int n_threads)
{
    for (int i = tid; i < 3 * window; i += n_threads)
        offset[i] = ((i % window) * 2 * (8 << (i / window))) / window;
}

__global__ void yolo_kernel(const __half *__restrict__ images, int height, int width,
                            const float4 *__restrict__ weights, int window,
                            __half *__restrict__ out, int n_anchors, int n8, int n16)
{
    __shared__ int offset[3 * MAX_WINDOW];
    fill_offsets(offset, window, threadIdx.x, blockDim.x);
    __syncthreads();
    int a = blockIdx.x * blockDim.x + threadIdx.x;
    int group = blockIdx.y; /* rows 4*group .. 4*group+3 */
    if (a >= n_anchors)
        return;
    int si, i;
    if (a < n8) {
        si = 0;
        i = a;
    } else if (a < n8 + n16) {
        si = 1;
        i = a - n8;
    } else {
        si = 2;
        i = a - n8 - n16;
    }
    int s = 8 << si;
    const int *off = offset + si * window;
    int grid_w = width / s;
    int y0 = (i / grid_w) * s - s / 2, x0 = (i % grid_w) * s - s / 2;
    float acc0 = 0.0f, acc1 = 0.0f, acc2 = 0.0f, acc3 = 0.0f;
    const float4 *w = weights + group; /* tap t's 4 weights: w[t * (ROWS / 4)] */
    int t = 0;
    for (int c = 0; c < 3; c++) {
        for (int ky = 0; ky < window; ky++) {
            int y = clamp_to(y0 + off[ky], height - 1);
            const __half *row = images + ((size_t)c * height + y) * width;
            for (int kx = 0; kx < window; kx++, t++) {
                int x = clamp_to(x0 + off[kx], width - 1);
                float v = __half2float(row[x]);
                float4 wt = w[t * (ROWS / 4)];
                acc0 = __fadd_rn(acc0, __fmul_rn(wt.x, v));
                acc1 = __fadd_rn(acc1, __fmul_rn(wt.y, v));
                acc2 = __fadd_rn(acc2, __fmul_rn(wt.z, v));
                acc3 = __fadd_rn(acc3, __fmul_rn(wt.w, v));
            }
        }
    }
    size_t r = (size_t)group * ROWS_PER_THREAD;
    out[(r + 0) * n_anchors + a] = __float2half_rn(acc0);
    out[(r + 1) * n_anchors + a] = __float2half_rn(acc1);
    out[(r + 2) * n_anchors + a] = __float2half_rn(acc2);
    out[(r + 3) * n_anchors + a] = __float2half_rn(acc3);
}

extern "C" cudaError_t yolo_kernel_launch(const void *images, int height, int width,
                                          const float *weights, int window, void *output0,
                                          cudaStream_t stream)
{
    if (window < 1 || window > MAX_WINDOW)
        return cudaErrorInvalidValue;
    int n8 = (height / 8) * (width / 8), n16 = (height / 16) * (width / 16);
    int n_anchors = n8 + n16 + (height / 32) * (width / 32);
    dim3 grid((unsigned)((n_anchors + THREADS - 1) / THREADS), ROWS / ROWS_PER_THREAD);
    YOLO_LAUNCH(grid, THREADS, stream)((const __half *)images, height, width,
                                       (const float4 *)weights, window, (__half *)output0,
                                       n_anchors, n8, n16);
    return cudaGetLastError();
}
