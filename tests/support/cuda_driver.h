/* Driver entry points for the GPU tests and shmreg-bench-gpu, reached through
 * the CUDA runtime (cudaGetDriverEntryPointByVersion) as the library reaches
 * them, so that no program here links libcuda. No cmocka in here. */
#ifndef SHMREG_TESTS_CUDA_DRIVER_H
#define SHMREG_TESTS_CUDA_DRIVER_H

/* Store the driver's `symbol` (CUDA 12.0 ABI) in *slot: 0 on success, -1 if
 * the runtime or the driver does not have it. */
int gt_driver_entry(const char *symbol, void **slot);

#endif
