/* Counting wrappers over the seam; see faultinject.h for the semantics. */
#include "faultinject.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>
#include <stdio.h>
#include <sys/mman.h>

#include "base/sys.h"

static const char *const call_names[FI_NCALLS] = {
    [FI_SHM_OPEN] = "shm_open", [FI_FSTAT] = "fstat",   [FI_MMAP] = "mmap",
    [FI_MUNMAP] = "munmap",     [FI_CLOSE] = "close",   [FI_MALLOC] = "malloc",
    [FI_CALLOC] = "calloc",     [FI_FCNTL] = "fcntl",   [FI_LSEEK] = "lseek",
    [FI_PIN] = "pin",
};

/* The arming thread's state: other threads see armed == false. */
static _Thread_local bool armed;
static _Thread_local unsigned fail_at;
static _Thread_local struct fi_shot shot;

/* Armed for a named thread: under remote_lock. */
static atomic_bool remote_armed;
static pthread_mutex_t remote_lock = PTHREAD_MUTEX_INITIALIZER;
static char remote_name[16];
static unsigned remote_fail_at;
static struct fi_shot remote_shot;

/* Freed from liburcu's worker thread too, hence atomic. */
static atomic_long live_allocations;

const char *fi_call_name(enum fi_call call)
{
    return call >= 0 && call < FI_NCALLS ? call_names[call] : "?";
}

/* A call of a thread armed by name: count it under the lock. */
static bool remote_should_fail(enum fi_call call, void *addr, size_t len)
{
    char name[16] = "";
    pthread_getname_np(pthread_self(), name, sizeof name);
    bool fail = false;
    pthread_mutex_lock(&remote_lock);
    if (atomic_load(&remote_armed) && !remote_shot.fired && strcmp(name, remote_name) == 0 &&
        ++remote_shot.calls == remote_fail_at) {
        remote_shot.fired = true;
        remote_shot.call = call;
        remote_shot.addr = addr;
        remote_shot.len = len;
        errno = remote_shot.errnum;
        fail = true;
    }
    pthread_mutex_unlock(&remote_lock);
    return fail;
}

/* Count one failable call; true when this is the one to fail (errno set). */
static bool should_fail_at(enum fi_call call, void *addr, size_t len)
{
    if (!armed && atomic_load_explicit(&remote_armed, memory_order_relaxed))
        return remote_should_fail(call, addr, len);
    if (!armed || shot.fired)
        return false;
    if (++shot.calls != fail_at)
        return false;
    shot.fired = true;
    shot.call = call;
    shot.addr = addr;
    shot.len = len;
    errno = shot.errnum;
    return true;
}

static bool should_fail(enum fi_call call)
{
    return should_fail_at(call, NULL, 0);
}

bool fi_fails_now(enum fi_call call)
{
    return should_fail(call);
}

static int fi_shm_open(const char *key, int oflag, mode_t mode)
{
    return should_fail(FI_SHM_OPEN) ? -1 : shmreg__sys_default.shm_open(key, oflag, mode);
}

static int fi_fstat(int fd, struct stat *st)
{
    return should_fail(FI_FSTAT) ? -1 : shmreg__sys_default.fstat(fd, st);
}

static void *fi_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    return should_fail(FI_MMAP) ? MAP_FAILED
                                : shmreg__sys_default.mmap(addr, len, prot, flags, fd, off);
}

static atomic_bool munmap_held;
static char munmap_held_name[16];

void fi_hold_munmap(const char *thread_name, bool held)
{
    if (held)
        snprintf(munmap_held_name, sizeof munmap_held_name, "%s", thread_name);
    atomic_store(&munmap_held, held);
}

static void wait_while_held(void)
{
    if (!atomic_load(&munmap_held))
        return;
    char name[16] = "";
    pthread_getname_np(pthread_self(), name, sizeof name);
    while (strcmp(name, munmap_held_name) == 0 && atomic_load(&munmap_held))
        usleep(1000);
}

static int fi_munmap(void *addr, size_t len)
{
    wait_while_held();
    if (!should_fail_at(FI_MUNMAP, addr, len))
        return shmreg__sys_default.munmap(addr, len);
    return -1;
}

static int fi_close(int fd)
{
    if (!should_fail(FI_CLOSE))
        return shmreg__sys_default.close(fd);
    int errnum = errno;
    shmreg__sys_default.close(fd);
    errno = errnum;
    return -1;
}

static int fi_fcntl(int fd, int cmd, int arg)
{
    return should_fail(FI_FCNTL) ? -1 : shmreg__sys_default.fcntl(fd, cmd, arg);
}

static off_t fi_lseek(int fd, off_t off, int whence)
{
    return should_fail(FI_LSEEK) ? -1 : shmreg__sys_default.lseek(fd, off, whence);
}

static void *counted(void *p)
{
    if (p)
        atomic_fetch_add_explicit(&live_allocations, 1, memory_order_relaxed);
    return p;
}

static void *fi_malloc(size_t size)
{
    return should_fail(FI_MALLOC) ? NULL : counted(shmreg__sys_default.malloc(size));
}

static void *fi_calloc(size_t n, size_t size)
{
    return should_fail(FI_CALLOC) ? NULL : counted(shmreg__sys_default.calloc(n, size));
}

static void fi_free(void *p)
{
    if (p)
        atomic_fetch_sub_explicit(&live_allocations, 1, memory_order_relaxed);
    shmreg__sys_default.free(p);
}

void fi_install(void)
{
    shmreg__sys = (struct shmreg__sys){
        .shm_open = fi_shm_open, .fstat = fi_fstat,   .mmap = fi_mmap,
        .munmap = fi_munmap,     .close = fi_close,   .malloc = fi_malloc,
        .calloc = fi_calloc,     .free = fi_free,     .fcntl = fi_fcntl,
        .lseek = fi_lseek,       .rcu_barrier = shmreg__sys_default.rcu_barrier,
    };
}

void fi_remove(void)
{
    shmreg__sys = shmreg__sys_default;
}

void fi_arm(unsigned n, int errnum)
{
    shot = (struct fi_shot){.errnum = errnum};
    fail_at = n;
    armed = true;
}

struct fi_shot fi_disarm(void)
{
    armed = false;
    return shot;
}

void fi_arm_thread(const char *thread_name, unsigned n, int errnum)
{
    pthread_mutex_lock(&remote_lock);
    snprintf(remote_name, sizeof remote_name, "%s", thread_name);
    remote_fail_at = n;
    remote_shot = (struct fi_shot){.errnum = errnum};
    atomic_store(&remote_armed, true);
    pthread_mutex_unlock(&remote_lock);
}

struct fi_shot fi_disarm_thread(void)
{
    pthread_mutex_lock(&remote_lock);
    atomic_store(&remote_armed, false);
    struct fi_shot s = remote_shot;
    pthread_mutex_unlock(&remote_lock);
    return s;
}

long fi_live_allocations(void)
{
    return atomic_load_explicit(&live_allocations, memory_order_relaxed);
}
