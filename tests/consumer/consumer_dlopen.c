/* A program that loads libshmreg at run time, as language bindings and
 * plugin hosts do (Python's ctypes, a server's backend loader), and drives a
 * system region through acquire and release. It checks that the library's
 * initial-exec access to liburcu-bp's thread-local reader works when neither
 * library was loaded at startup: glibc must find static TLS room for it. */
#include <dlfcn.h>
#include <fcntl.h>
#include <shmreg/shmreg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

struct api {
    shmreg_err (*create)(const shmreg_config *, shmreg_registry **);
    void (*destroy)(shmreg_registry *);
    shmreg_err (*register_system)(shmreg_registry *, const char *, const char *, size_t, size_t, unsigned);
    shmreg_err (*acquire)(shmreg_registry *, const char *, size_t, size_t, shmreg_region **, shmreg_view *);
    void (*release)(shmreg_region *);
    shmreg_err (*unregister)(shmreg_registry *, const char *, shmreg_kind);
    const char *(*last_error)(void);
};

static int load(const char *path, struct api *a)
{
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
        return -1;
    }
    /* POSIX allows object-to-function pointer conversion through dlsym. */
    *(void **)&a->create = dlsym(lib, "shmreg_registry_create");
    *(void **)&a->destroy = dlsym(lib, "shmreg_registry_destroy");
    *(void **)&a->register_system = dlsym(lib, "shmreg_register_system");
    *(void **)&a->acquire = dlsym(lib, "shmreg_acquire");
    *(void **)&a->release = dlsym(lib, "shmreg_release");
    *(void **)&a->unregister = dlsym(lib, "shmreg_unregister");
    *(void **)&a->last_error = dlsym(lib, "shmreg_last_error");
    if (!a->create || !a->destroy || !a->register_system || !a->acquire || !a->release || !a->unregister ||
        !a->last_error) {
        fprintf(stderr, "dlsym: a public symbol is missing from %s\n", path);
        return -1;
    }
    return 0;
}

static int make_object(char *key, size_t cap)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    snprintf(key, cap, "/shmreg-dlopen-%d-%ld", (int)getpid(), t.tv_nsec);
    int fd = shm_open(key, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 || ftruncate(fd, 4096) != 0) {
        perror("shm_open/ftruncate");
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    return 0;
}

static int fail(const struct api *a, const char *what)
{
    fprintf(stderr, "%s: %s\n", what, a->last_error());
    return 1;
}

static int run(const struct api *a, const char *key)
{
    shmreg_registry *reg;
    if (a->create(NULL, &reg) != SHMREG_OK)
        return fail(a, "create");
    int rc = 1;
    shmreg_region *ref;
    shmreg_view view;
    if (a->register_system(reg, "dlopened", key, 0, 4096, SHMREG_NO_PIN) != SHMREG_OK) {
        rc = fail(a, "register");
    } else if (a->acquire(reg, "dlopened", 8, 16, &ref, &view) != SHMREG_OK) {
        rc = fail(a, "acquire");
    } else {
        ((char *)view.addr)[0] = 'x';
        a->release(ref);
        rc = a->unregister(reg, "dlopened", SHMREG_KIND_SYSTEM) == SHMREG_OK ? 0 : fail(a, "unregister");
    }
    a->destroy(reg);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s PATH-TO-libshmreg.so\n", argv[0]);
        return 2;
    }
    struct api a;
    char key[64];
    if (load(argv[1], &a) != 0 || make_object(key, sizeof key) != 0)
        return 1;
    int rc = run(&a, key);
    shm_unlink(key);
    if (rc == 0)
        printf("consumer: dlopen of %s: register, acquire, release, unregister passed\n", argv[1]);
    return rc;
}
