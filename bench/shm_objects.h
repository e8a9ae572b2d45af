/* The POSIX shared-memory objects the bench registers windows of, created by
 * the bench itself (the registries never create or unlink one) and unlinked
 * at exit, even a fatal one. */
#ifndef SHMREG_BENCH_SHM_OBJECTS_H
#define SHMREG_BENCH_SHM_OBJECTS_H

#include <stddef.h>

#define SHM_OBJECT_KEY_SIZE 64

/* Create "/shmreg-bench-<pid>-<role>" of `size` bytes, write every page once
 * so that tmpfs allocation never falls in a timed path, and return its key
 * (static storage, one per role; at most a handful of roles). Fatal on
 * failure. */
const char *shm_object_create(const char *role, size_t size);

#endif
