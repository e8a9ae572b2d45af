/* What every measurement of the bench shares: a clock, fatal errors that
 * still clean up, and threads that cannot silently fail to start. */
#ifndef SHMREG_BENCH_HARNESS_H
#define SHMREG_BENCH_HARNESS_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC in nanoseconds: a vDSO call, no system call, on Linux. */
static inline uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void bench_sleep(double seconds);

/* Print "shmreg-bench: <message>" to stderr and exit(1), which runs the
 * atexit handlers that unlink the bench's shm objects. Safe from any thread;
 * a second caller waits for the first to end the process. */
void bench_fatal(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

/* pthread_create or bench_fatal. */
void bench_spawn(pthread_t *thread, void *(*fn)(void *), void *arg);

/* pthread_join or bench_fatal. */
void bench_join(pthread_t thread);

#endif
