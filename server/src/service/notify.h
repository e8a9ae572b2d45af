/* The service manager's two calls, as the server uses them: a message on
 * its notify socket (sd_notify's protocol: "KEY=VALUE" lines, descriptors
 * by SCM_RIGHTS) and the descriptors it passed at start (LISTEN_FDS).
 * notify_systemd.c speaks them through libsystemd; notify_none.c, in a
 * build without it, answers that there is no manager, so the rest of
 * service/ builds and runs unchanged and stores nothing. */
#ifndef SERVER_SERVICE_NOTIFY_H
#define SERVER_SERVICE_NOTIFY_H

#include <stddef.h>

/* The first descriptor the manager passes (SD_LISTEN_FDS_START). */
#define SERVICE_LISTEN_FDS_START 3

/* The most descriptors one message carries: the kernel's SCM_MAX_FD. */
#define SERVICE_FDS_PER_MESSAGE 253

/* 1 when this build speaks to a service manager (libsystemd), else 0. */
int service_notify_built(void);

/* Send state (e.g. "READY=1") with fds[0, n) to the manager named by
 * NOTIFY_SOCKET; n at most SERVICE_FDS_PER_MESSAGE. The caller keeps its
 * descriptors (the manager receives its own). Returns > 0 when sent, 0
 * when there is no manager (NOTIFY_SOCKET unset, or not built), -errno on
 * failure. Any thread. */
int service_notify(const char *state, const int *fds, size_t n);

/* The descriptors the manager passed this process (LISTEN_FDS,
 * LISTEN_FDNAMES, LISTEN_PID), taken once: the variables are unset. They
 * are 3, 4, ... (count of them), each close-on-exec, and the caller owns
 * them. *names: count names and a NULL, freed with service_names_free;
 * NULL when count is 0. Returns the count, or -errno. */
int service_listen_fds(char ***names);
void service_names_free(char **names);

#endif
