/* Crash survival: under a service manager (NOTIFY_SOCKET: systemd, or
 * server/tests/support/fd_keeper.py), the registry is kept in the
 * manager's fd store as it changes, and a server the manager starts again
 * after a crash takes its regions back from there before it serves
 * (fd_store.h). main.c calls these four, and nothing else of service/. */
#ifndef SERVER_SERVICE_CRASH_SURVIVAL_H
#define SERVER_SERVICE_CRASH_SURVIVAL_H

#include <shmreg/shmreg.h>

typedef struct crash_survival_config {
    unsigned save_ms; /* --fd-store-ms: at most one save this often */
    int verbose;      /* -v: a line for each state stored */
} crash_survival_config;

typedef struct crash_survival crash_survival;

/* Before the adapters start, on the registry they will serve: restore
 * what the manager passed, then, under a manager, start keeping reg in its
 * store, with one line on stderr that says so (or, in a build without
 * libsystemd, that crash survival is not compiled in). *out: NULL when
 * there is no manager. 0, or -1 after a message (out of memory, no
 * thread). */
int crash_survival_start(const crash_survival_config *cfg, shmreg_registry *reg, crash_survival **out);

/* Once every adapter listens: READY=1 to the manager. NULL: no-op. */
void crash_survival_ready(crash_survival *c);

/* Stop keeping the registry (NULL: no-op). clean: a stop that was asked
 * for, so STOPPING=1 and the store emptied: the next start restores
 * nothing. Else (a start that failed) the store stays for the next. */
void crash_survival_stop(crash_survival *c, int clean);

#endif
