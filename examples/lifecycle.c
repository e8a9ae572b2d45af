/* One region through its whole lifecycle, as an inference server sees it:
 *
 *   a client creates a shm object and writes its input there;
 *   the server registers it under a name, and a request acquires it;
 *   the client unregisters it while the request still reads it (DEFER: the
 *   region stays, pending, and the request's bytes stay mapped);
 *   the request releases it, and only then is it removed and unmapped.
 *
 * Status is printed after each step. Exits 0 when every step behaved. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include <shmreg/shmreg.h>

#define REGION_SIZE (1u << 20)
#define GREETING "tensor bytes written by the client"

/* What a client does: a new shm object holding its input. */
static int client_create_object(const char *key)
{
    int fd = shm_open(key, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) {
        perror("shm_open");
        return -1;
    }
    char *p = MAP_FAILED;
    if (ftruncate(fd, REGION_SIZE) == 0)
        p = mmap(NULL, REGION_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        perror("creating the shm object");
        shm_unlink(key);
        return -1;
    }
    memcpy(p, GREETING, sizeof GREETING);
    munmap(p, REGION_SIZE);
    return 0;
}

static int check(shmreg_err err, const char *what)
{
    if (err == SHMREG_OK)
        return 0;
    fprintf(stderr, "%s failed: %s: %s\n", what, shmreg_err_name(err), shmreg_last_error());
    return -1;
}

static void print_status(shmreg_registry *reg, const char *step, const char *name)
{
    shmreg_region_status *st = NULL;
    size_t n = 0;
    shmreg_err err = shmreg_status(reg, name, SHMREG_KIND_ANY, &st, &n);
    if (err != SHMREG_OK) {
        printf("%-28s %s (%s)\n", step, shmreg_last_error(), shmreg_err_name(err));
        return;
    }
    for (size_t i = 0; i < n; i++)
        printf("%-28s '%s' key=%s references=%u pending_unregister=%d generation=%llu\n", step,
               st[i].name, st[i].key, st[i].references, st[i].pending_unregister,
               (unsigned long long)st[i].generation);
    shmreg_status_free(st, n);
}

/* The server's side, from registration to shutdown. */
static int run(shmreg_registry *reg, const char *key)
{
    const char *name = "input0";
    shmreg_region *request = NULL;
    shmreg_view view;

    if (check(shmreg_register_system(reg, name, key, 0, REGION_SIZE, 0), "register"))
        return -1;
    print_status(reg, "1. registered", name);

    if (check(shmreg_acquire(reg, name, 0, sizeof GREETING, &request, &view), "acquire"))
        return -1;
    printf("%-28s the request reads \"%s\"\n", "", (const char *)view.addr);
    print_status(reg, "2. acquired by a request", name);

    if (check(shmreg_unregister(reg, name, SHMREG_KIND_SYSTEM), "unregister"))
        return -1;
    print_status(reg, "3. unregistered while held", name);
    printf("%-28s the request still reads \"%s\"\n", "", (const char *)view.addr);

    shmreg_release(request);
    print_status(reg, "4. released", name);

    shmreg_region_status *st = NULL;
    size_t n = 0;
    if (shmreg_status(reg, name, SHMREG_KIND_ANY, &st, &n) != SHMREG_ERR_NOT_FOUND) {
        shmreg_status_free(st, n);
        fprintf(stderr, "'%s' should be gone after its last release\n", name);
        return -1;
    }
    return 0;
}

int main(void)
{
    /* A random part as well as the pid: an object that a killed earlier run
     * left in /dev/shm must not make this run's O_EXCL create fail. */
    unsigned long long token = 0;
    if (getrandom(&token, sizeof token, 0) != (ssize_t)sizeof token)
        return EXIT_FAILURE;
    char key[64];
    snprintf(key, sizeof key, "/shmreg-example-%ld-%016llx", (long)getpid(), token);
    printf("libshmreg %s: lifecycle of one region (key %s)\n", shmreg_version(), key);
    if (client_create_object(key) != 0)
        return EXIT_FAILURE;

    shmreg_registry *reg = NULL;
    int rc = EXIT_FAILURE;
    if (check(shmreg_registry_create(NULL, &reg), "registry_create") == 0 && run(reg, key) == 0)
        rc = EXIT_SUCCESS;
    shmreg_registry_destroy(reg);
    shm_unlink(key);
    printf("%s\n", rc == EXIT_SUCCESS ? "done: every step behaved" : "FAILED");
    return rc;
}
