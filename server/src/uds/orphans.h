/* The Unix socket's regions whose connection did not come along in a live
 * upgrade (the client died, or the new server could not adopt its
 * connection) or that a restart after a crash restored (service/): no socket is left whose close would unregister them, so they
 * are unregistered once --orphan-grace-s has passed instead of being pinned
 * for the server's life. Until then HTTP and gRPC inference still name them.
 * Used by uds_server.c's thread alone. */
#ifndef SERVER_UDS_ORPHANS_H
#define SERVER_UDS_ORPHANS_H

#include <stdbool.h>

#include <shmreg/shmreg.h>

/* Every tag a Unix-socket connection registers under starts with this. */
#define UDS_TAG_PREFIX "uds:"

typedef struct uds_orphans uds_orphans;

/* The tags of reg's regions that start with UDS_TAG_PREFIX and that
 * is_held(ctx, tag) says no open connection holds, each due grace_s seconds
 * from now. NULL when there is none (or, after a message on stderr, when
 * the registry cannot be read: no region is then swept). *highest is raised
 * to the largest connection number any such tag ends with, so that a
 * connection made now never takes a carried tag (a client's pid may come
 * again). */
uds_orphans *uds_orphans_find(shmreg_registry *reg, bool (*is_held)(const void *ctx, const char *tag),
                              const void *ctx, unsigned grace_s, unsigned long long *highest);

/* Milliseconds until the next sweep is due (0: now), -1 when none waits. */
int uds_orphans_wait_ms(const uds_orphans *o);

/* Unregister the regions of every tag whose grace is over, under the
 * registry's busy policy (one the refuse policy keeps busy is tried again
 * on a later sweep). */
void uds_orphans_sweep(uds_orphans *o, shmreg_registry *reg);

/* NULL is a no-op. */
void uds_orphans_free(uds_orphans *o);

#endif
