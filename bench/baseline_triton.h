/* The incumbent design that shmreg-bench measures libshmreg against, compiled
 * into the bench from baseline_triton.cpp: Triton Inference Server's
 * SharedMemoryManager, reduced to what a request path and a register/
 * unregister path do. One std::mutex guards a
 * std::map<std::string, std::shared_ptr<Info>>; every lookup takes the mutex
 * and copies the shared_ptr; register (shm_open, fstat, mmap, close) and
 * unregister (munmap) run with that same mutex held, as Triton's do.
 *
 * C linkage so that the C bench drives it through the same function table as
 * the library. Not part of libshmreg. */
#ifndef SHMREG_BENCH_BASELINE_TRITON_H
#define SHMREG_BENCH_BASELINE_TRITON_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct triton_manager triton_manager;

/* One counted reference: storage for a std::shared_ptr copy, held by the
 * caller as a frontend holds it in its per-request bookkeeping, so acquiring
 * allocates nothing. Opaque; only baseline_triton.cpp looks inside. */
typedef struct triton_ref {
    void *slot_[2];
} triton_ref;

/* NULL when out of memory. */
triton_manager *triton_manager_create(void);

/* Unmaps every region, as Triton's destructor does. Only for idle regions:
 * references still held must be released first. NULL is a no-op. */
void triton_manager_destroy(triton_manager *mgr);

/* 0 on success, -1 on failure with triton_last_error() set. */
int triton_register_system(triton_manager *mgr, const char *name, const char *key,
                           size_t offset, size_t byte_size);
int triton_acquire(triton_manager *mgr, const char *name, size_t offset, size_t byte_size,
                   triton_ref *ref, void **addr);
void triton_release(triton_ref *ref);
int triton_unregister(triton_manager *mgr, const char *name);

/* This thread's message for its last failed call; "" if none. */
const char *triton_last_error(void);

#ifdef __cplusplus
}
#endif

#endif
