/* What the GPU tests share beside fixture.h's assertions and registry
 * helpers: the driver entry points the tests themselves need (reached through
 * the runtime, like the library, so no test binary links libcuda), device
 * copies with checked results, and a baseline that proves a test left no
 * descriptor, mapping or device memory behind. */
#ifndef SHMREG_TESTS_GPU_TEST_H
#define SHMREG_TESTS_GPU_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <cuda.h>
#include <cuda_runtime_api.h>

#include "shmreg/shmreg.h"
#include "fixture.h"
#include "testutil.h"

/* A CUDA runtime call in a test must succeed. */
#define gt_cuda_ok(expr)                                                                     \
    do {                                                                                     \
        cudaError_t gt_c_ = (expr);                                                          \
        if (gt_c_ != cudaSuccess)                                                            \
            fail_msg("%s: %s", #expr, cudaGetErrorName(gt_c_));                              \
    } while (0)

/* Driver entry points the tests call themselves. */
struct gt_driver {
    CUresult (*cuMemGetAddressRange)(CUdeviceptr *base, size_t *size, CUdeviceptr ptr);
    CUresult (*cuMemGetAccess)(unsigned long long *flags, const CUmemLocation *loc,
                               CUdeviceptr ptr);
};
extern struct gt_driver gt_cu;

/* Resolve gt_cu; 0 on success. Initialises CUDA in this process. */
int gt_load_driver(void);

/* Whether ptr lies in an allocation mapped into this process. */
int gt_device_mapped(const void *ptr);

/* Whether CUDA sees host memory at p as page-locked (registered). */
int gt_is_pinned(const void *p);

/* Wait (up to 5 s) until ptr is no longer mapped: a reclaim thread closes
 * it on its own time. True when it is not. */
int gt_wait_unmapped(const void *ptr);

/* Copy n bytes of device memory at dev and assert they are
 * tu_pattern(seed, first + i). */
void gt_assert_device_pattern(const void *dev, size_t n, uint8_t seed, size_t first);

/* Write tu_pattern(seed, first + i) to n bytes of device memory at dev, and
 * wait until the device has them. */
void gt_write_device_pattern(void *dev, size_t n, uint8_t seed, size_t first);

/* Device d's UUID as nvidia-smi -L prints it ("GPU-" and 36 characters),
 * from the runtime, for the registrations that name a GPU by UUID. */
void gt_device_uuid(int d, char out[41]);

/* Free device memory of device 0, in bytes. */
size_t gt_device_free(void);

/* What a test starts from: descriptors, shm mappings and free device
 * memory. Device memory is compared within `slack` bytes: the driver's own
 * bookkeeping moves it a little; a leaked region moves it by the region's
 * size. Device mappings are checked per region with gt_device_mapped; the
 * total of /proc/self/maps is not compared, since CUDA grows its own
 * mappings (staging buffers, thread stacks) as a process uses it. */
struct gt_baseline {
    struct tu_baseline host; /* descriptors and shm mappings */
    size_t device_free;
};
struct gt_baseline gt_take_baseline(void);
void gt_check_baseline(struct gt_baseline b, size_t slack);

/* gt_check_baseline's device half: free device memory is within `slack`
 * bytes of `before` (a gt_device_free() of the test's start). */
void gt_check_device_free(size_t before, size_t slack);

#endif
