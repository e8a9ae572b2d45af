/*
 * The remote_memory extension's cleanup: a thread that, once a second,
 * unregisters the regions of remote clients that died or disconnected
 * (shmreg_remote_sweep), so that their names and the limits' room come back
 * without anyone asking. Requests still holding such a region keep it until
 * they finish (the busy policy); their copies already fail at once.
 */
#ifndef SERVER_REMOTE_SWEEP_H
#define SERVER_REMOTE_SWEEP_H

#include <shmreg/shmreg.h>

typedef struct remote_sweeper remote_sweeper;

/* Start sweeping reg; NULL when the thread cannot start (logged). */
remote_sweeper *remote_sweep_start(shmreg_registry *reg);
/* Stop and join; NULL is a no-op. Before the registry is destroyed. */
void remote_sweep_stop(remote_sweeper *s);

#endif
