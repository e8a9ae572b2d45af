/*
 * Just enough of CUDA for g++ to compile server/src/models/yolo_kernel.cu
 * and run it on a CPU (test_yolo_kernel_on_cpu.py): each CUDA thread of a
 * block is a std::thread, __syncthreads a barrier, __shared__ memory a static
 * (blocks run one after another). The arithmetic is the same IEEE float32
 * and float16 rounding the GPU does: products and sums rounded one at a time
 * (the kernel spells them __fmul_rn / __fadd_rn), conversions to half to
 * nearest even.
 */
#pragma once
#include <barrier>
#include <cstddef>
#include <thread>
#include <vector>

typedef _Float16 __half;
inline float __half2float(__half h) { return (float)h; }
inline __half __float2half_rn(float f) { return (__half)f; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
struct float4 { float x, y, z, w; };
struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
inline thread_local dim3 threadIdx, blockIdx, blockDim;
inline thread_local std::barrier<> *block_barrier;

#define __global__
#define __device__
#define __restrict__
#define __shared__ static
#define __syncthreads() block_barrier->arrive_and_wait()

template <typename Kernel> struct host_launch {
    dim3 grid;
    unsigned threads;
    Kernel kernel;
    template <typename... Args> void operator()(Args... args) const
    {
        for (unsigned by = 0; by < grid.y; by++)
            for (unsigned bx = 0; bx < grid.x; bx++) {
                std::barrier<> barrier((std::ptrdiff_t)threads);
                std::vector<std::thread> block;
                for (unsigned t = 0; t < threads; t++)
                    block.emplace_back([&, t] {
                        threadIdx = dim3(t);
                        blockIdx = dim3(bx, by);
                        blockDim = dim3(threads);
                        block_barrier = &barrier;
                        kernel(args...);
                    });
                for (auto &th : block)
                    th.join();
            }
    }
};
#define YOLO_LAUNCH(grid, threads, stream) host_launch<decltype(&yolo_kernel)>{grid, threads, yolo_kernel}
