/* A listening Unix socket at a path, as the server's Unix sockets make one
 * (--uds, --handover-socket): created at its final mode, never replacing
 * anything but a stale socket, and removed only while it is still the file
 * that was made. Messages name the flag the path came from. */
#ifndef SERVER_COMMON_UNIX_SOCKET_H
#define SERVER_COMMON_UNIX_SOCKET_H

#include <sys/stat.h>
#include <sys/un.h>

/* path into *addr: 0, or -1 after a message (too long for sun_path). */
int unix_socket_address(const char *flag, const char *path, struct sockaddr_un *addr);

/* Make room for a socket of type at path without ever destroying anything
 * but a socket nobody listens on (what a server that died leaves behind): a
 * regular file, a directory, a symbolic link or a live socket at path is an
 * error. 0, or -1 after a message. */
int unix_socket_clear_stale(const char *flag, const char *path, int type);

/* A socket of type (SOCK_NONBLOCK and SOCK_CLOEXEC added) bound at path
 * with permission bits mode and listening: its descriptor with *made the
 * file's lstat, or -1 after a message (path cleared of a stale socket
 * first). */
int unix_socket_listen(const char *flag, const char *path, int type, unsigned mode, struct stat *made);

/* Remove path while it is still the file made. */
void unix_socket_remove(const char *path, const struct stat *made);

#endif
