// Copies of the benchmark detector's tensor sizes (1,474,560 bytes up, 846,720 down) from
// pinned host memory, one cudaMemcpyAsync per tensor against
// cudaMemcpyBatchAsync of g tensors and against one copy of g tensors'
// bytes: what the GPU model's batches of copies (server/src/models/
// gpu_instances_cuda.c, --copy-batch) gain. Three orders on six streams:
// "up" (copies up alone), "both" (each up then its down), "chain" (up, a
// kernel of about 15 us, down: the server's order). Prints inferences a
// second, then GB/s of one stream's copies up against their size.
//
//   nvcc -O2 -arch=sm_90 -o /tmp/copies_batched server/bench/gpu/copies_batched.cu
//   /tmp/copies_batched [inferences per cell, default 9600]
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(x)                                                                         \
    do {                                                                                 \
        cudaError_t e_ = (x);                                                            \
        if (e_ != cudaSuccess) {                                                         \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)

static const size_t IN = 1474560, OUT = 846720;
enum { STREAMS = 6, MOST_G = 8 };
enum way { ONE_BY_ONE, BATCHED, MERGED };
enum order { UP, BOTH, CHAIN };

static char *host_in, *host_out;                  // MOST_G tensors each, pinned
static char *dev_in[STREAMS], *dev_out[STREAMS];  // MOST_G tensors each

// Stands for the model at --yolo-window 1: the stream's next copy waits for it.
__global__ void model(const char *in, char *out, long long cycles)
{
    long long t0 = clock64();
    if (threadIdx.x == 0)
        out[0] = in[0];
    while (clock64() - t0 < cycles) {
    }
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

// g tensors of size bytes each, from src to dst (tensor i at i * size), in one way.
static void copy(enum way w, int g, char *dst, const char *src, size_t size, int up,
                 cudaStream_t s)
{
    if (w == MERGED || g == 1) {
        CHECK(cudaMemcpyAsync(dst, src, size * g, cudaMemcpyDefault, s));
        return;
    }
    if (w == ONE_BY_ONE) {
        for (int i = 0; i < g; i++)
            CHECK(cudaMemcpyAsync(dst + i * size, src + i * size, size, cudaMemcpyDefault, s));
        return;
    }
    void *d[MOST_G];
    const void *sr[MOST_G];
    size_t sz[MOST_G];
    for (int i = 0; i < g; i++) {
        d[i] = dst + i * size;
        sr[i] = src + i * size;
        sz[i] = size;
    }
    cudaMemLocation host = {cudaMemLocationTypeHost, 0}, dev = {cudaMemLocationTypeDevice, 0};
    cudaMemcpyAttributes a;
    memset(&a, 0, sizeof a);
    a.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    a.srcLocHint = up ? host : dev;
    a.dstLocHint = up ? dev : host;
    size_t first = 0;
    CHECK(cudaMemcpyBatchAsync(d, sr, sz, g, &a, &first, 1, s));
}

// Inferences a second: n of them in groups of g, group j on stream j % STREAMS.
static double rate(enum order o, enum way w, int g, int n, long long cycles)
{
    cudaStream_t st[STREAMS];
    for (int k = 0; k < STREAMS; k++)
        CHECK(cudaStreamCreateWithFlags(&st[k], cudaStreamNonBlocking));
    CHECK(cudaDeviceSynchronize());
    double t0 = now();
    int groups = n / g;
    for (int j = 0; j < groups; j++) {
        int k = j % STREAMS;
        copy(w, g, dev_in[k], host_in, IN, 1, st[k]);
        if (o == CHAIN)
            for (int i = 0; i < g; i++)
                model<<<1, 32, 0, st[k]>>>(dev_in[k] + i * IN, dev_out[k] + i * OUT, cycles);
        if (o != UP)
            copy(w, g, host_out, dev_out[k], OUT, 0, st[k]);
    }
    CHECK(cudaDeviceSynchronize());
    double r = groups * g / (now() - t0);
    for (int k = 0; k < STREAMS; k++)
        CHECK(cudaStreamDestroy(st[k]));
    return r;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 9600;
    int clock_khz = 0;
    CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
    long long cycles = (long long)clock_khz * 15 / 1000;
    CHECK(cudaHostAlloc((void **)&host_in, IN * MOST_G, cudaHostAllocDefault));
    CHECK(cudaHostAlloc((void **)&host_out, OUT * MOST_G, cudaHostAllocDefault));
    memset(host_in, 1, IN * MOST_G);
    for (int k = 0; k < STREAMS; k++) {
        CHECK(cudaMalloc(&dev_in[k], IN * MOST_G));
        CHECK(cudaMalloc(&dev_out[k], OUT * MOST_G));
    }
    const char *orders[] = {"up", "both", "chain"};
    rate(UP, ONE_BY_ONE, 1, 2000, cycles); // warm up
    printf("inferences a second, %d a cell, %d streams\n", n, STREAMS);
    printf("%-6s %10s | %10s %10s %10s | %10s %10s %10s\n", "order", "one", "g=2 one", "batched",
           "merged", "g=4 one", "batched", "merged");
    for (int pass = 0; pass < 2; pass++)
        for (int o = UP; o <= CHAIN; o++) {
            printf("%-6s %10.0f", orders[o], rate((enum order)o, ONE_BY_ONE, 1, n, cycles));
            for (int g = 2; g <= 4; g += 2)
                printf(" | %10.0f %10.0f %10.0f", rate((enum order)o, ONE_BY_ONE, g, n, cycles),
                       rate((enum order)o, BATCHED, g, n, cycles),
                       rate((enum order)o, MERGED, g, n, cycles));
            printf("\n");
            fflush(stdout);
        }
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    for (size_t size = IN / 2; size <= IN * MOST_G; size *= 2) {
        int reps = (int)(4000 * IN / size);
        CHECK(cudaStreamSynchronize(s));
        double t0 = now();
        for (int r = 0; r < reps; r++)
            CHECK(cudaMemcpyAsync(dev_in[0], host_in, size, cudaMemcpyHostToDevice, s));
        CHECK(cudaStreamSynchronize(s));
        printf("one stream's copies up of %8zu bytes: %.2f GB/s\n", size,
               reps * (double)size / (now() - t0) / 1e9);
    }
    return 0;
}
