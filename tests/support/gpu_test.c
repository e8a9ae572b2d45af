#include "gpu_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cuda_driver.h"

struct gt_driver gt_cu;

int gt_load_driver(void)
{
    if (gt_driver_entry("cuMemGetAddressRange", (void **)&gt_cu.cuMemGetAddressRange) != 0 ||
        gt_driver_entry("cuMemGetAccess", (void **)&gt_cu.cuMemGetAccess) != 0)
        return -1;
    return 0;
}

int gt_device_mapped(const void *ptr)
{
    CUdeviceptr base;
    size_t size;
    return gt_cu.cuMemGetAddressRange(&base, &size, (CUdeviceptr)(uintptr_t)ptr) == CUDA_SUCCESS;
}

int gt_is_pinned(const void *p)
{
    struct cudaPointerAttributes attr;
    if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return attr.type == cudaMemoryTypeHost;
}

int gt_wait_unmapped(const void *ptr)
{
    for (int ms = 0; ms < 5000 && gt_device_mapped(ptr); ms++)
        usleep(1000);
    return !gt_device_mapped(ptr);
}

void gt_assert_device_pattern(const void *dev, size_t n, uint8_t seed, size_t first)
{
    uint8_t *host = malloc(n);
    assert_non_null(host);
    gt_cuda_ok(cudaMemcpy(host, dev, n, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++)
        if (host[i] != tu_pattern(seed, first + i)) {
            uint8_t got = host[i];
            free(host);
            fail_msg("device byte %zu is %u, expected %u", first + i, got,
                     tu_pattern(seed, first + i));
        }
    free(host);
}

void gt_write_device_pattern(void *dev, size_t n, uint8_t seed, size_t first)
{
    uint8_t *host = malloc(n);
    assert_non_null(host);
    for (size_t i = 0; i < n; i++)
        host[i] = tu_pattern(seed, first + i);
    cudaError_t err = cudaMemcpy(dev, host, n, cudaMemcpyHostToDevice);
    /* From pageable memory, cudaMemcpy returns once the bytes are staged, not
     * once they landed: wait, so that a release right after this cannot unmap
     * the region under a DMA still in flight (the context would be lost). */
    if (err == cudaSuccess)
        err = cudaDeviceSynchronize();
    free(host);
    gt_cuda_ok(err);
}

size_t gt_device_free(void)
{
    size_t free_bytes = 0, total = 0;
    gt_cuda_ok(cudaMemGetInfo(&free_bytes, &total));
    return free_bytes;
}

struct gt_baseline gt_take_baseline(void)
{
    struct gt_baseline b = {tu_take_baseline(), gt_device_free()};
    return b;
}

void gt_check_device_free(size_t before, size_t slack)
{
    size_t now = gt_device_free();
    size_t diff = now > before ? now - before : before - now;
    if (diff > slack)
        fail_msg("device free memory moved by %zu bytes (from %zu to %zu), more than %zu", diff, before, now,
                 slack);
}

void gt_check_baseline(struct gt_baseline b, size_t slack)
{
    tu_check_baseline(b.host);
    gt_check_device_free(b.device_free, slack);
}

void gt_device_uuid(int d, char out[41])
{
    struct cudaDeviceProp prop;
    gt_cuda_ok(cudaGetDeviceProperties(&prop, d));
    const unsigned char *b = (const unsigned char *)prop.uuid.bytes;
    snprintf(out, 41, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
             b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}
