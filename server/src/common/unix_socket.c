/* Listening Unix sockets at a path (unix_socket.h). */
#include "common/unix_socket.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int unix_socket_address(const char *flag, const char *path, struct sockaddr_un *addr)
{
    *addr = (struct sockaddr_un){.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof addr->sun_path) {
        fprintf(stderr, "error: %s %s: a socket path is at most %zu bytes\n", flag, path,
                sizeof addr->sun_path - 1);
        return -1;
    }
    memcpy(addr->sun_path, path, strlen(path) + 1);
    return 0;
}

int unix_socket_clear_stale(const char *flag, const char *path, int type)
{
    struct sockaddr_un addr;
    struct stat st;
    if (unix_socket_address(flag, path, &addr) != 0)
        return -1;
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT)
            return 0;
        fprintf(stderr, "error: %s %s: %s\n", flag, path, strerror(errno));
        return -1;
    }
    if (!S_ISSOCK(st.st_mode)) {
        fprintf(stderr, "error: %s %s exists and is not a socket; refusing to replace it\n", flag, path);
        return -1;
    }
    int probe = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
    int live = probe >= 0 && connect(probe, (const struct sockaddr *)&addr, sizeof addr) == 0;
    int why = errno;
    if (probe >= 0)
        close(probe);
    if (live || why != ECONNREFUSED) {
        fprintf(stderr, "error: %s %s: %s; refusing to replace it\n", flag, path,
                live ? "another server is listening on it" : strerror(why));
        return -1;
    }
    if (unlink(path) != 0) {
        fprintf(stderr, "error: %s %s: removing the stale socket: %s\n", flag, path, strerror(errno));
        return -1;
    }
    return 0;
}

/* Bind with the file created at its final mode: the umask is the one way to
 * set it at creation (a chmod after bind would follow a symbolic link an
 * attacker swapped in). No other thread creates files while this runs. */
int unix_socket_listen(const char *flag, const char *path, int type, unsigned mode, struct stat *made)
{
    struct sockaddr_un addr;
    if (unix_socket_address(flag, path, &addr) != 0 || unix_socket_clear_stale(flag, path, type) != 0)
        return -1;
    int fd = socket(AF_UNIX, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        fprintf(stderr, "error: %s: socket: %s\n", flag, strerror(errno));
        return -1;
    }
    mode_t old = umask(0777 & ~(mode_t)mode);
    int rc = bind(fd, (const struct sockaddr *)&addr, sizeof addr);
    int why = errno;
    umask(old);
    if (rc != 0) {
        fprintf(stderr, "error: %s %s: bind: %s\n", flag, path, strerror(why));
        close(fd);
        return -1;
    }
    if (lstat(path, made) != 0 || listen(fd, 64) != 0) {
        fprintf(stderr, "error: %s %s: %s\n", flag, path, strerror(errno));
        unlink(path);
        close(fd);
        return -1;
    }
    return fd;
}

void unix_socket_remove(const char *path, const struct stat *made)
{
    struct stat st;
    if (lstat(path, &st) == 0 && st.st_dev == made->st_dev && st.st_ino == made->st_ino)
        unlink(path);
}
