/* The helpers of harness.h. */
#include "harness.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void bench_sleep(double seconds)
{
    struct timespec ts = {.tv_sec = (time_t)seconds,
                          .tv_nsec = (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
        continue;
}

void bench_fatal(const char *fmt, ...)
{
    /* exit() is not safe to call twice at once: only the first caller does. */
    static atomic_flag exiting = ATOMIC_FLAG_INIT;
    if (atomic_flag_test_and_set(&exiting))
        for (;;)
            pause();
    va_list ap;
    va_start(ap, fmt);
    fputs("shmreg-bench: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

void bench_spawn(pthread_t *thread, void *(*fn)(void *), void *arg)
{
    int err = pthread_create(thread, NULL, fn, arg);
    if (err != 0)
        bench_fatal("pthread_create: %s", strerror(err));
}

void bench_join(pthread_t thread)
{
    int err = pthread_join(thread, NULL);
    if (err != 0)
        bench_fatal("pthread_join: %s", strerror(err));
}
