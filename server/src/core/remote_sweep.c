/* The remote clients' cleanup thread (remote_sweep.h). */
#include "core/remote_sweep.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

struct remote_sweeper {
    shmreg_registry *reg;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int stop;
};

static void *sweep_main(void *arg)
{
    remote_sweeper *s = arg;
    pthread_mutex_lock(&s->lock);
    while (!s->stop) {
        struct timespec next;
        clock_gettime(CLOCK_REALTIME, &next);
        next.tv_sec += 1;
        if (pthread_cond_timedwait(&s->wake, &s->lock, &next) != ETIMEDOUT)
            continue;
        pthread_mutex_unlock(&s->lock);
        size_t swept = 0;
        (void)shmreg_remote_sweep(s->reg, &swept);
        if (swept)
            fprintf(stderr, "remote_memory: %zu region%s of unreachable clients unregistered\n", swept,
                    swept == 1 ? "" : "s");
        pthread_mutex_lock(&s->lock);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

remote_sweeper *remote_sweep_start(shmreg_registry *reg)
{
    remote_sweeper *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->reg = reg;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->wake, NULL);
    if (pthread_create(&s->thread, NULL, sweep_main, s) != 0) {
        fprintf(stderr, "warning: remote_memory: no cleanup thread; dead clients' regions stay "
                        "until a status or register call sweeps them\n");
        pthread_cond_destroy(&s->wake);
        pthread_mutex_destroy(&s->lock);
        free(s);
        return NULL;
    }
    return s;
}

void remote_sweep_stop(remote_sweeper *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    s->stop = 1;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->thread, NULL);
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->lock);
    free(s);
}
