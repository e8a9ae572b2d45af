/* The fd store's names and order file (fd_names.h). */
#include "service/fd_names.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <shmreg/shmreg.h>

#define STATE_PREFIX "shmreg-state-"
#define ORDER_PREFIX "shmreg-order-"
#define REGION_PREFIX "shmreg-fd-"

/* The largest order file read: a name a line for as many descriptors as
 * a state may carry. */
#define ORDER_MAX ((size_t)SHMREG_HANDOVER_FDS_MAX * FD_NAME_MAX)

/* G of "PREFIXG", written as fd_name_of_generation writes it: 1, or 0. */
static int generation_of(const char *name, const char *prefix, unsigned long long *gen)
{
    size_t len = strlen(prefix);
    if (strncmp(name, prefix, len) != 0 || name[len] < '1' || name[len] > '9')
        return 0;
    char *end;
    errno = 0;
    *gen = strtoull(name + len, &end, 10);
    return errno == 0 && *end == 0;
}

/* A region's name is taken only as fd_name_of_file writes it, so that one
 * file has one name. */
static int is_region_name(const char *name)
{
    unsigned long long dev, ino;
    char mode, again[FD_NAME_MAX];
    if (strlen(name) >= FD_NAME_MAX ||
        sscanf(name, REGION_PREFIX "%llx-%llx-%c", &dev, &ino, &mode) != 3 ||
        (mode != 'r' && mode != 'w'))
        return 0;
    snprintf(again, sizeof again, REGION_PREFIX "%llx-%llx-%c", dev, ino, mode);
    return strcmp(again, name) == 0;
}

fd_name_kind fd_name_parse(const char *name, unsigned long long *gen)
{
    if (generation_of(name, STATE_PREFIX, gen))
        return FD_NAME_STATE;
    if (generation_of(name, ORDER_PREFIX, gen))
        return FD_NAME_ORDER;
    return is_region_name(name) ? FD_NAME_REGION : FD_NAME_OTHER;
}

void fd_name_of_generation(fd_name_kind kind, unsigned long long gen, char out[FD_NAME_MAX])
{
    snprintf(out, FD_NAME_MAX, "%s%llu", kind == FD_NAME_STATE ? STATE_PREFIX : ORDER_PREFIX, gen);
}

int fd_name_of_file(int fd, char out[FD_NAME_MAX])
{
    struct stat st;
    int flags = fcntl(fd, F_GETFL);
    if (fstat(fd, &st) != 0 || flags < 0)
        return -1;
    /* Device and inode tell file descriptions apart for a file only: other
     * descriptors (a CUDA region's) may share one inode. */
    if (!S_ISREG(st.st_mode))
        return -2;
    snprintf(out, FD_NAME_MAX, REGION_PREFIX "%llx-%llx-%c", (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino, (flags & O_ACCMODE) == O_RDONLY ? 'r' : 'w');
    return 0;
}

/* ------------------------------------------------------------ lists */

static int by_name(const void *a, const void *b)
{
    return strcmp(((const fd_name *)a)->name, ((const fd_name *)b)->name);
}

void fd_names_sort_unique(fd_name_list *l)
{
    if (l->n < 2)
        return;
    /* Stable for equal names is not needed: any copy of a file serves. */
    qsort(l->v, l->n, sizeof *l->v, by_name);
    size_t kept = 1;
    for (size_t i = 1; i < l->n; i++)
        if (strcmp(l->v[i].name, l->v[kept - 1].name) != 0)
            l->v[kept++] = l->v[i];
    l->n = kept;
}

const fd_name *fd_names_find(const fd_name_list *l, const char *name)
{
    fd_name key;
    snprintf(key.name, sizeof key.name, "%s", name);
    return l->n ? bsearch(&key, l->v, l->n, sizeof *l->v, by_name) : NULL;
}

int fd_names_add(fd_name_list *l, const char *name, size_t at)
{
    fd_name *grown = realloc(l->v, (l->n + 1) * sizeof *grown);
    if (!grown)
        return -1;
    l->v = grown;
    snprintf(l->v[l->n].name, FD_NAME_MAX, "%s", name);
    l->v[l->n++].at = at;
    return 0;
}

void fd_names_free(fd_name_list *l)
{
    free(l->v);
    *l = (fd_name_list){0};
}

/* ------------------------------------------------------ the order file */

static int write_all(int fd, const char *p, size_t len)
{
    while (len) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

int fd_order_write(const fd_name_list *l)
{
    char *text = malloc(l->n * FD_NAME_MAX + 1);
    int fd = memfd_create("shmreg-order", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    size_t len = 0;
    for (size_t i = 0; text && i < l->n; i++)
        len += (size_t)sprintf(text + len, "%s\n", l->v[i].name);
    /* Sealed, as the state's blob is: no copy of it can be changed. */
    int ok = text && fd >= 0 && write_all(fd, text, len) == 0 &&
             fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) == 0;
    if (!ok) {
        fprintf(stderr, "crash survival: writing the order of descriptors: %s\n",
                text ? strerror(errno) : "out of memory");
        if (fd >= 0)
            close(fd);
        fd = -1;
    }
    free(text);
    return fd;
}

/* The whole of a file of at most ORDER_MAX bytes, NUL-ended: 0, or -1. */
static int read_whole(int fd, char **out)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size > ORDER_MAX)
        return -1;
    size_t len = (size_t)st.st_size, got = 0;
    char *text = malloc(len + 1);
    while (text && got < len) {
        ssize_t r = pread(fd, text + got, len - got, (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    if (!text || got < len) {
        free(text);
        return -1;
    }
    text[len] = 0;
    *out = text;
    return 0;
}

int fd_order_read(int fd, fd_name_list *out)
{
    *out = (fd_name_list){0};
    char *text = NULL;
    if (read_whole(fd, &text) != 0) {
        fprintf(stderr, "crash survival: the stored order of descriptors is unreadable or too large\n");
        return -1;
    }
    unsigned long long gen;
    int rc = 0;
    for (char *line = text; *line;) {
        char *nl = strchr(line, '\n');
        if (!nl || (*nl = 0, fd_name_parse(line, &gen) != FD_NAME_REGION)) {
            fprintf(stderr, "crash survival: the stored order of descriptors is malformed\n");
            rc = -1;
            break;
        }
        if (fd_names_add(out, line, out->n) != 0) {
            fprintf(stderr, "crash survival: out of memory reading the order of descriptors\n");
            rc = -1;
            break;
        }
        line = nl + 1;
    }
    free(text);
    if (rc != 0)
        fd_names_free(out);
    return rc;
}
