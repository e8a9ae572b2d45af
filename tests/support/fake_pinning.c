/* A host pinning without a GPU; see fake_pinning.h. */
#include "fake_pinning.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "backends/backend.h"
#include "base/err.h"
#include "faultinject.h"

#define MAX_PINS 64

static struct shmreg__host_pinning saved;
static bool installed;

/* Under lock: the live pins and the counts; cond wakes hold's waiters. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static struct {
    void *addr;
    size_t len;
} pins[MAX_PINS];
static struct fp_counts counts;
static char held[256]; /* the region whose pins wait; "" for none */
static bool waiting;

static bool fake_usable(void)
{
    return true;
}

static void deadline_in(struct timespec *ts, long ms)
{
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

/* Inside a held pin: wait for fp_hold(NULL), at most FP_HOLD_MAX_MS. */
static void wait_while_held_locked(void)
{
    struct timespec until;
    deadline_in(&until, FP_HOLD_MAX_MS);
    waiting = true;
    pthread_cond_broadcast(&cond);
    while (held[0] && pthread_cond_timedwait(&cond, &lock, &until) == 0)
        ;
    waiting = false;
    pthread_cond_broadcast(&cond);
}

static shmreg_err fake_pin(const char *name, void *addr, size_t len, bool read_only)
{
    (void)read_only;
    if (fi_fails_now(FI_PIN))
        return shmreg__fail(SHMREG_ERR_CUDA, "cannot pin system shared memory region '%s' (%zu bytes): %s", name,
                            len, strerror(errno));
    pthread_mutex_lock(&lock);
    if (held[0] && strcmp(held, name) == 0)
        wait_while_held_locked();
    shmreg_err err = SHMREG_ERR_NO_MEMORY;
    for (size_t i = 0; i < MAX_PINS; i++) {
        if (!pins[i].addr) {
            pins[i].addr = addr;
            pins[i].len = len;
            counts.pins++;
            counts.live++;
            counts.live_bytes += len;
            err = SHMREG_OK;
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    if (err != SHMREG_OK)
        return shmreg__fail(err, "fake pinning: more than %d live pins", MAX_PINS);
    return SHMREG_OK;
}

static shmreg_err fake_unpin(const char *name, void *addr)
{
    pthread_mutex_lock(&lock);
    size_t i = 0;
    while (i < MAX_PINS && pins[i].addr != addr)
        i++;
    if (i < MAX_PINS) {
        counts.unpins++;
        counts.live--;
        counts.live_bytes -= pins[i].len;
        pins[i].addr = NULL;
    } else {
        counts.unmatched++;
    }
    pthread_mutex_unlock(&lock);
    if (i == MAX_PINS)
        return shmreg__fail(SHMREG_ERR_CUDA, "cannot unpin system shared memory region '%s': not pinned", name);
    return SHMREG_OK;
}

void fp_install(void)
{
    if (installed)
        return;
    saved = shmreg__host_pinning;
    pthread_mutex_lock(&lock);
    memset(&counts, 0, sizeof counts);
    memset(pins, 0, sizeof pins);
    pthread_mutex_unlock(&lock);
    shmreg__host_pinning = (struct shmreg__host_pinning){.usable = fake_usable, .pin = fake_pin, .unpin = fake_unpin};
    installed = true;
}

void fp_remove(void)
{
    if (!installed)
        return;
    shmreg__host_pinning = saved;
    installed = false;
}

struct fp_counts fp_counts(void)
{
    pthread_mutex_lock(&lock);
    struct fp_counts c = counts;
    pthread_mutex_unlock(&lock);
    return c;
}

void fp_hold(const char *name)
{
    pthread_mutex_lock(&lock);
    snprintf(held, sizeof held, "%s", name ? name : "");
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
}

bool fp_wait_pinning(void)
{
    struct timespec until;
    deadline_in(&until, FP_HOLD_MAX_MS);
    pthread_mutex_lock(&lock);
    while (!waiting && pthread_cond_timedwait(&cond, &lock, &until) == 0)
        ;
    bool w = waiting;
    pthread_mutex_unlock(&lock);
    return w;
}

bool fp_pinning(void)
{
    pthread_mutex_lock(&lock);
    bool w = waiting;
    pthread_mutex_unlock(&lock);
    return w;
}
