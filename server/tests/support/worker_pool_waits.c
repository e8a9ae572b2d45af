/*
 * The worker pool's accounting of waits (src/common/worker_pool.h): n bounds
 * the items at work, an item between worker_pool_wait_begin and _end does
 * not count, and the spare threads bound how many may wait; all of it again
 * with threads polling for work (worker_pool_config.spin_ns), where an item
 * queued while a thread polls runs on that thread, and a stop does not wait
 * for the polls to end. Printed as
 * "ok NAME" or "FAIL NAME: why" lines for server/tests/core/test_worker_pool.py;
 * exit 1 on any failure. Not installed.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "common/worker_pool.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static int started[8], released, at_work, most_at_work;

static void reset(void)
{
    pthread_mutex_lock(&lock);
    for (int i = 0; i < 8; i++)
        started[i] = 0;
    released = at_work = most_at_work = 0;
    pthread_mutex_unlock(&lock);
}

/* Under lock: wait until *flag or seconds pass; returns *flag. */
static int wait_for(const int *flag, int seconds)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += seconds;
    while (!*flag && pthread_cond_timedwait(&changed, &lock, &until) == 0)
        ;
    return *flag;
}

static int started_within(int item, int seconds)
{
    pthread_mutex_lock(&lock);
    int yes = wait_for(&started[item], seconds);
    pthread_mutex_unlock(&lock);
    return yes;
}

static void release_all(void)
{
    pthread_mutex_lock(&lock);
    released = 1;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
}

/* An item: marks itself started, then holds its thread until released,
 * either at work (ctx NULL) or inside a declared wait (ctx non-NULL). */
static void item(void *ctx, void *arg)
{
    int id = (int)(long)arg;
    pthread_mutex_lock(&lock);
    started[id] = 1;
    if (++at_work > most_at_work)
        most_at_work = at_work;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
    if (ctx) {
        pthread_mutex_lock(&lock);
        at_work--;
        pthread_mutex_unlock(&lock);
        worker_pool_wait_begin();
    }
    pthread_mutex_lock(&lock);
    wait_for(&released, 10);
    pthread_mutex_unlock(&lock);
    if (ctx) {
        worker_pool_wait_end();
        pthread_mutex_lock(&lock);
        at_work++;
        pthread_mutex_unlock(&lock);
    }
    pthread_mutex_lock(&lock);
    at_work--;
    pthread_mutex_unlock(&lock);
}

static int failures;
/* The polls of the pools that one_at_work and spares_bound_waits start. */
static uint64_t spin_ns;

static void check(int ok, const char *name, const char *why)
{
    if (ok) {
        printf("ok %s\n", name);
    } else {
        printf("FAIL %s: %s\n", name, why);
        failures++;
    }
}

/* Two items on one worker with one spare: the second starts only when the
 * first waits. */
static void one_at_work(int waits)
{
    static int marker;
    reset();
    worker_pool *p =
        worker_pool_start(&(worker_pool_config){1, 1, spin_ns}, item, waits ? &marker : NULL);
    worker_pool_submit(p, (void *)0L);
    worker_pool_submit(p, (void *)1L);
    int first = started_within(0, 5);
    int second = started_within(1, waits ? 5 : 1); /* 1 s: long enough to show it does not */
    release_all();
    worker_pool_stop(p, NULL);
    if (waits)
        check(first && second, "a waiting item lets the next one start on a spare thread",
              "the second item did not start while the first waited");
    else
        check(first && !second && most_at_work == 1, "n bounds the items at work",
              "a second item started while the only worker's item was at work");
}

/* One worker and one spare, every item waiting: two threads, so a third
 * item waits for one of them, and runs once they end. */
static void spares_bound_waits(void)
{
    static int marker;
    reset();
    worker_pool *p = worker_pool_start(&(worker_pool_config){1, 1, spin_ns}, item, &marker);
    for (long i = 0; i < 3; i++)
        worker_pool_submit(p, (void *)i);
    int two = started_within(0, 5) && started_within(1, 5);
    int third_early = started_within(2, 1);
    release_all();
    int third_later = started_within(2, 5);
    worker_pool_stop(p, NULL);
    check(two && !third_early && third_later, "the spare threads bound the waiting items",
          "a third item started with both threads waiting, or never ran");
}

static pthread_t ran_on[2];
static int done[2];

/* An item that says which thread ran it, and that it is done. */
static void note_thread(void *ctx, void *arg)
{
    int id = (int)(long)arg;
    pthread_mutex_lock(&lock);
    ran_on[id] = pthread_self();
    done[id] = 1;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
}

static double seconds_since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + (t.tv_nsec - t0->tv_nsec) / 1e9;
}

/* Four threads, polling for 10 s after an item: the next item, queued
 * 50 ms after the first ended, runs on the thread that ran the first (the
 * three others sleep and nobody wakes them), and a stop then returns long
 * before the 10 s poll would end. */
static void polling_thread_takes_the_next_item(void)
{
    done[0] = done[1] = 0;
    worker_pool *p = worker_pool_start(&(worker_pool_config){2, 2, 10ull * 1000 * 1000 * 1000},
                                       note_thread, NULL);
    usleep(100 * 1000); /* every thread asleep in the queue's wait */
    worker_pool_submit(p, (void *)0L);
    pthread_mutex_lock(&lock);
    int first = wait_for(&done[0], 5);
    pthread_mutex_unlock(&lock);
    usleep(50 * 1000);
    worker_pool_submit(p, (void *)1L);
    pthread_mutex_lock(&lock);
    int second = wait_for(&done[1], 5);
    pthread_mutex_unlock(&lock);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    worker_pool_stop(p, NULL);
    double stop_s = seconds_since(&t0);
    check(first && second && pthread_equal(ran_on[0], ran_on[1]),
          "an item queued while a thread polls runs on that thread",
          "the second item ran on another thread, or an item never ran");
    check(stop_s < 5.0, "a stop does not wait for the polls to end",
          "worker_pool_stop waited for a thread's poll");
}

static atomic_int counted;

static void count_item(void *ctx, void *arg)
{
    atomic_fetch_add(&counted, 1);
}

enum { SUBMITTERS = 3, PER_SUBMITTER = 2000 };

/* Items queued at gaps of 0-100 us, around the end of the threads' polls. */
static void *submit_with_gaps(void *pool)
{
    unsigned seed = (unsigned)(uintptr_t)&seed;
    for (int i = 0; i < PER_SUBMITTER; i++) {
        while (worker_pool_submit(pool, NULL) != 0)
            usleep(10);
        usleep((unsigned)(rand_r(&seed) % 100));
    }
    return NULL;
}

/* With 50 us polls, items from three threads at random gaps: each runs
 * once, none waits for a wake-up that never comes. */
static void polls_lose_no_item(void)
{
    atomic_store(&counted, 0);
    worker_pool *p = worker_pool_start(&(worker_pool_config){2, 2, 50 * 1000}, count_item, NULL);
    pthread_t t[SUBMITTERS];
    for (int i = 0; i < SUBMITTERS; i++)
        pthread_create(&t[i], NULL, submit_with_gaps, p);
    for (int i = 0; i < SUBMITTERS; i++)
        pthread_join(t[i], NULL);
    for (int waited = 0; atomic_load(&counted) < SUBMITTERS * PER_SUBMITTER && waited < 500; waited++)
        usleep(10 * 1000); /* at most 5 s for the last items */
    int ran = atomic_load(&counted);
    worker_pool_stop(p, NULL);
    check(ran == SUBMITTERS * PER_SUBMITTER, "items queued around the polls all run, each once",
          "an item was lost or ran twice while threads polled");
}

int main(void)
{
    worker_pool_wait_begin(); /* not a pool's thread: no-ops */
    worker_pool_wait_end();
    for (int spin = 0; spin <= 1; spin++) {
        /* 1 ms a poll: each rule holds with threads that poll before they sleep */
        spin_ns = spin ? 1000 * 1000 : 0;
        one_at_work(0);
        one_at_work(1);
        spares_bound_waits();
    }
    polling_thread_takes_the_next_item();
    polls_lose_no_item();
    return failures ? 1 : 0;
}
