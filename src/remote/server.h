/* Remote regions through UCX: the server's engine (remote/server_*.c), what
 * the remote backend (remote/backend.c) stands on.
 *
 * One process-wide engine: a UCX context with active messages only, one
 * worker (remote/worker.h for the threading), the tenants, the one-time
 * secrets issued to them, and the clients' connections with the windows
 * each announced (the protocol: remote/messages.h).
 *
 * The owner model, enforced here:
 * - A connection exists only after its client presented a secret the
 *   server issued to one tenant (a registry and a tag): it belongs to that
 *   tenant for its whole life. Its endpoint is the one UCX made for the
 *   client's own (the reply endpoint of its hello); the server never
 *   creates an endpoint from an address a client sent, and no endpoint is
 *   shared between connections.
 * - A window exists only because its connection announced it; a region
 *   names a window of a connection of its own tenant, and each copy stays
 *   inside that window, checked here before anything is sent and again by
 *   the client's library.
 * - Limits per tenant: connections plus unused secrets, copies in flight. */
#ifndef SHMREG_REMOTE_SERVER_H
#define SHMREG_REMOTE_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "remote/descriptor.h"
#include "shmreg/shmreg.h"

struct shmreg__rconn;

/* The window a descriptor names, for the tenant (registry, tag): OK and
 * the connection, one reference taken, with the window's length; NOT_FOUND
 * (one message for every reason, so that a tenant learns nothing of the
 * others' connections) when the connection is not this tenant's, has
 * failed, or has no such window with that generation. name: the region's,
 * for messages. out NULL: the window's length only, no reference taken. */
shmreg_err shmreg__rconn_find(const struct shmreg__remote_descriptor *d, const void *registry, const char *tag,
                              const char *name, struct shmreg__rconn **out, uint64_t *window_length);

/* Drop a reference; the last one closes the connection if it is no longer
 * listed (it failed or said goodbye). */
void shmreg__rconn_put(struct shmreg__rconn *c);

/* Move n bytes between buf and [offset, offset + n) of the window (id,
 * generation) of c: a fetch (to_memory false) or a store. Waits at most
 * timeout_ns; then the connection is failed and closed, so that nothing
 * lands in buf after this returns. Errors: FAULT (the client refused, the
 * window is withdrawn, the connection failed or timed out: the message
 * says which), NO_MEMORY (the tenant's copies in flight are at its limit). */
shmreg_err shmreg__rconn_copy(struct shmreg__rconn *c, uint64_t window, uint64_t generation, uint64_t offset,
                              void *buf, size_t n, bool to_memory, uint64_t timeout_ns, const char *name);

/* Whether c is unreachable for good. Also checks an idle connection: a
 * liveness request goes out at most once a second, and one unanswered for
 * timeout_ns fails the connection. */
bool shmreg__rconn_gone(struct shmreg__rconn *c, uint64_t timeout_ns);

/* The UCX transports c's endpoint uses ("tcp", "posix,sysv"); lives as long
 * as c. */
const char *shmreg__rconn_transports(const struct shmreg__rconn *c);

#endif
