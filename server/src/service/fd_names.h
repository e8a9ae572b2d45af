/* The names under which the server keeps its state in the service
 * manager's fd store, and the order file that ties a state to them.
 *
 * A state of generation G is two descriptors: "shmreg-state-G", the
 * library's blob (shmreg_state_save), and "shmreg-order-G", a sealed memfd
 * listing, one a line, the name of each descriptor the blob refers to, in
 * the order shmreg_state_restore wants them. Each such descriptor is stored
 * once under a name of its file, "shmreg-fd-DEV-INO-MODE", not of the
 * state: the manager keeps one copy of a file description and drops
 * another copy of it stored later (under a new name too), so a region's
 * descriptor must keep its name from one state to the next. */
#ifndef SERVER_SERVICE_FD_NAMES_H
#define SERVER_SERVICE_FD_NAMES_H

#include <stddef.h>

#define FD_NAME_MAX 64 /* with the NUL; the manager allows 255 */

typedef enum fd_name_kind {
    FD_NAME_OTHER,  /* not one of ours */
    FD_NAME_STATE,  /* shmreg-state-G */
    FD_NAME_ORDER,  /* shmreg-order-G */
    FD_NAME_REGION, /* shmreg-fd-DEV-INO-MODE */
} fd_name_kind;

/* What name is, with G in *gen for a state or an order. */
fd_name_kind fd_name_parse(const char *name, unsigned long long *gen);
/* "shmreg-state-G" or "shmreg-order-G" into out. */
void fd_name_of_generation(fd_name_kind kind, unsigned long long gen, char out[FD_NAME_MAX]);
/* The name of the file fd refers to, and of its access mode (a region
 * registered writable needs a writable descriptor back): 0, -1 (fstat), or
 * -2 when fd is no regular file (a CUDA region's descriptor), which a name
 * of its device and inode cannot tell from another. */
int fd_name_of_file(int fd, char out[FD_NAME_MAX]);

/* A list of names; each with the index of the descriptor it came from. */
typedef struct fd_name {
    char name[FD_NAME_MAX];
    size_t at;
} fd_name;
typedef struct fd_name_list {
    fd_name *v;
    size_t n;
} fd_name_list;

/* Sort l by name, keeping the first of equal names. */
void fd_names_sort_unique(fd_name_list *l);
/* The entry of a sorted l named name, or NULL. */
const fd_name *fd_names_find(const fd_name_list *l, const char *name);
/* Append name (with at): 0, or -1 out of memory. */
int fd_names_add(fd_name_list *l, const char *name, size_t at);
void fd_names_free(fd_name_list *l);

/* The order file of names (in l's order): a sealed memfd, or -1 after a
 * message on stderr. */
int fd_order_write(const fd_name_list *l);
/* Read an order file: 0 with *out its names (at: the line), or -1 after a
 * message when it is not one (too large, a line that is no region's name). */
int fd_order_read(int fd, fd_name_list *out);

#endif
