/* The objects of shm_objects.h. */
#include "shm_objects.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"

#define MAX_OBJECTS 4

static char keys[MAX_OBJECTS][SHM_OBJECT_KEY_SIZE];
static int nkeys;

static void unlink_all(void)
{
    for (int i = 0; i < nkeys; i++)
        shm_unlink(keys[i]);
}

static void fill_pages(int fd, const char *key, size_t size)
{
    char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        bench_fatal("mmap %s: %s", key, strerror(errno));
    long page = sysconf(_SC_PAGESIZE);
    for (size_t off = 0; off < size; off += (size_t)page)
        p[off] = 1;
    munmap(p, size);
}

const char *shm_object_create(const char *role, size_t size)
{
    if (nkeys == MAX_OBJECTS)
        bench_fatal("too many shm objects");
    if (nkeys == 0)
        atexit(unlink_all);
    char *key = keys[nkeys];
    snprintf(key, SHM_OBJECT_KEY_SIZE, "/shmreg-bench-%ld-%s", (long)getpid(), role);
    int fd = shm_open(key, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd == -1)
        bench_fatal("shm_open %s: %s", key, strerror(errno));
    nkeys++; /* from here on, exit unlinks it */
    if (ftruncate(fd, (off_t)size) == -1)
        bench_fatal("ftruncate %s to %zu bytes: %s", key, size, strerror(errno));
    fill_pages(fd, key, size);
    close(fd);
    return key;
}
