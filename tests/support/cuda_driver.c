#include "cuda_driver.h"

#include <cuda_runtime_api.h>

int gt_driver_entry(const char *symbol, void **slot)
{
    enum cudaDriverEntryPointQueryResult status;
    cudaError_t err = cudaGetDriverEntryPointByVersion(symbol, slot, 12000, cudaEnableDefault,
                                                       &status);
    return err == cudaSuccess && status == cudaDriverEntryPointSuccess ? 0 : -1;
}
