/* The operating-system seam (see sys.h): libc by default. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/rcu.h"
#include "base/sys.h"

/* fcntl is variadic: the seam's entry takes the one int argument the
 * library ever passes. */
static int fcntl_int(int fd, int cmd, int arg)
{
    return fcntl(fd, cmd, arg);
}

/* Both tables start as libc; a C initializer cannot copy one into the other. */
#define SHMREG_SYS_LIBC                                                       \
    {                                                                         \
        .shm_open = shm_open, .fstat = fstat, .mmap = mmap, .munmap = munmap, \
        .close = close, .fcntl = fcntl_int, .lseek = lseek, .malloc = malloc, \
        .calloc = calloc, .free = free, .rcu_barrier = urcu_bp_barrier,       \
    }

const struct shmreg__sys shmreg__sys_default = SHMREG_SYS_LIBC;
struct shmreg__sys shmreg__sys = SHMREG_SYS_LIBC;

void *shmreg__malloc(size_t size)
{
    return shmreg__sys.malloc(size);
}

void *shmreg__calloc(size_t n, size_t size)
{
    return shmreg__sys.calloc(n, size);
}

void shmreg__free(void *p)
{
    shmreg__sys.free(p);
}

char *shmreg__strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *copy = shmreg__malloc(n);
    if (copy)
        memcpy(copy, s, n);
    return copy;
}
