/* Counting wrappers over the seam; see faultinject.h for the semantics. */
#include "faultinject.h"

#include <errno.h>
#include <stdatomic.h>
#include <sys/mman.h>

#include "sys.h"

static const char *const call_names[FI_NCALLS] = {
    [FI_SHM_OPEN] = "shm_open", [FI_FSTAT] = "fstat",   [FI_MMAP] = "mmap",
    [FI_MUNMAP] = "munmap",     [FI_CLOSE] = "close",   [FI_MALLOC] = "malloc",
    [FI_CALLOC] = "calloc",     [FI_FCNTL] = "fcntl",   [FI_LSEEK] = "lseek",
};

/* The arming thread's state: other threads see armed == false. */
static _Thread_local bool armed;
static _Thread_local unsigned fail_at;
static _Thread_local struct fi_shot shot;

/* Freed from liburcu's worker thread too, hence atomic. */
static atomic_long live_allocations;

const char *fi_call_name(enum fi_call call)
{
    return call >= 0 && call < FI_NCALLS ? call_names[call] : "?";
}

/* Count one failable call; true when this is the one to fail (errno set). */
static bool should_fail(enum fi_call call)
{
    if (!armed || shot.fired)
        return false;
    if (++shot.calls != fail_at)
        return false;
    shot.fired = true;
    shot.call = call;
    errno = shot.errnum;
    return true;
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

static int fi_munmap(void *addr, size_t len)
{
    if (!should_fail(FI_MUNMAP))
        return shmreg__sys_default.munmap(addr, len);
    shot.addr = addr;
    shot.len = len;
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
        .lseek = fi_lseek,
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

long fi_live_allocations(void)
{
    return atomic_load_explicit(&live_allocations, memory_order_relaxed);
}
