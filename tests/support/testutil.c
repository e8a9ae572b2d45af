#include "testutil.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

int tu_count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1; /* the directory stream's own descriptor */
}

/* Mappings of /dev/shm objects (of `key` only, unless NULL); with
 * writable_only, only those mapped with PROT_WRITE ("rw" in the perms). */
static int count_shm_maps(const char *key, int writable_only)
{
    FILE *f = fopen("/proc/self/maps", "r");
    assert_non_null(f);
    char line[4096];
    char want[300];
    snprintf(want, sizeof want, "/dev/shm/%s", key ? key + strspn(key, "/") : "");
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        const char *path = strstr(line, "/dev/shm/");
        if (!path)
            continue;
        if (key) {
            /* exact object: the path ends the line (maybe with " (deleted)") */
            size_t wl = strlen(want);
            if (strncmp(path, want, wl) != 0 || (path[wl] != '\0' && path[wl] != ' '))
                continue;
        }
        /* "start-end rwxs ...": the second letter after the first space is
         * 'w' for a writable mapping */
        const char *perms = strchr(line, ' ');
        if (writable_only && (!perms || perms[2] != 'w'))
            continue;
        n++;
    }
    fclose(f);
    return n;
}

int tu_count_shm_maps(const char *key)
{
    return count_shm_maps(key, 0);
}

uint64_t tu_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int tu_wait_shm_maps(const char *key, int want, int timeout_ms)
{
    int n = tu_count_shm_maps(key);
    for (int waited = 0; n != want && waited < timeout_ms; waited++) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
        n = tu_count_shm_maps(key);
    }
    return n;
}

int tu_count_writable_shm_maps(const char *key)
{
    return count_shm_maps(key, 1);
}

struct tu_baseline tu_take_baseline(void)
{
    struct tu_baseline b = {tu_count_fds(), tu_count_shm_maps(NULL)};
    return b;
}

void tu_check_baseline(struct tu_baseline b)
{
    assert_int_equal(tu_count_fds(), b.fds);
    /* A reclaim thread may still be unmapping what was released. */
    assert_int_equal(tu_wait_shm_maps(NULL, b.shm_maps, 5000), b.shm_maps);
}

void tu_unique_key(const char *prefix, char *out)
{
    uint64_t token;
    if (getrandom(&token, sizeof token, 0) != (ssize_t)sizeof token)
        abort(); /* no entropy at all: nothing the test could trust */
    snprintf(out, 64, "/%s-%ld-%016llx", prefix, (long)getpid(), (unsigned long long)token);
}

void tu_shm_create(size_t size, uint8_t seed, char *key_out)
{
    tu_unique_key("shmreg-test", key_out);
    int fd = shm_open(key_out, O_CREAT | O_EXCL | O_RDWR, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)size), 0);
    if (size > 0) {
        uint8_t *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        assert_true(p != MAP_FAILED);
        for (size_t i = 0; i < size; i++)
            p[i] = tu_pattern(seed, i);
        munmap(p, size);
    }
    close(fd);
}

void tu_shm_unlink(const char *key)
{
    shm_unlink(key);
}

int tu_memfd_create(size_t size, uint8_t seed, int seals)
{
    int fd = memfd_create("shmreg-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)size), 0);
    unsigned char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    assert_true(p != MAP_FAILED);
    for (size_t i = 0; i < size; i++)
        p[i] = tu_pattern(seed, i);
    munmap(p, size);
    if (seals)
        assert_int_equal(fcntl(fd, F_ADD_SEALS, seals), 0);
    return fd;
}

void *tu_shm_map(const char *key, size_t size)
{
    int fd = shm_open(key, O_RDWR, 0);
    assert_true(fd >= 0);
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    assert_true(p != MAP_FAILED);
    return p;
}
