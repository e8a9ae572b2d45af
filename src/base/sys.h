/* The seam between the library and the operating system.
 *
 * Every system call and allocation the library makes goes through the table
 * below, so that tests built against the static copy of the library can fail
 * the N-th call with a chosen errno and prove that each failure path is clean.
 * Production code never changes it. */
#ifndef SHMREG_SYS_H
#define SHMREG_SYS_H

#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

struct shmreg__sys {
    int (*shm_open)(const char *key, int oflag, mode_t mode);
    int (*fstat)(int fd, struct stat *st);
    void *(*mmap)(void *addr, size_t len, int prot, int flags, int fd, off_t off);
    int (*munmap)(void *addr, size_t len);
    int (*close)(int fd);
    /* fcntl with an int argument (F_GET_SEALS takes none: pass 0). */
    int (*fcntl)(int fd, int cmd, int arg);
    off_t (*lseek)(int fd, off_t off, int whence);
    void *(*malloc)(size_t size);
    void *(*calloc)(size_t n, size_t size);
    void (*free)(void *p);
    /* Wait for every RCU-deferred free (urcu_bp_barrier): what
     * shmreg_registry_destroy does when it frees a registry. A harness that
     * destroys a registry per input sets a no-op and waits once at exit. */
    void (*rcu_barrier)(void);
};

/* The live table; defaults to libc. Tests swap entries and restore them. */
extern struct shmreg__sys shmreg__sys;

/* The libc defaults, for tests to restore or to delegate to. */
extern const struct shmreg__sys shmreg__sys_default;

/* Allocation helpers over the table. shmreg__strdup/strndup return NULL on
 * allocation failure without setting an error message. */
void *shmreg__malloc(size_t size);
void *shmreg__calloc(size_t n, size_t size);
void shmreg__free(void *p);
char *shmreg__strdup(const char *s);

#endif
