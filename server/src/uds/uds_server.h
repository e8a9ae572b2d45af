/* --uds PATH: clients register sealed memfds and GPU memory over a Unix
 * socket.
 *
 * A client connects (AF_UNIX, SOCK_SEQPACKET), sends one request per region
 * in a format of shmreg.h, and is answered each time: a sealed memfd
 * (shmreg_send_region: a name, an offset, a size and a memfd carrying
 * F_SEAL_SHRINK), or GPU memory (shmreg_send_cuda_region: a range of VMM
 * allocations with a descriptor per chunk, a pool allocation with the
 * pool's descriptor and its export data, or a legacy IPC handle). The
 * server registers the window under an owner tag of that connection. When
 * the connection closes (the client exited or died) every region of its tag
 * is unregistered under the registry's busy policy: requests still using
 * one finish first. HTTP and gRPC inference then name the regions as
 * usual. */
#ifndef SERVER_UDS_SERVER_H
#define SERVER_UDS_SERVER_H

#include <shmreg/shmreg.h>

#include "common/byte_budget.h"
#include "core/access.h"

/* A client's connection as a live upgrade carries it: its socket, its
 * peer's uid and the owner tag of its regions, which the registry carries. */
#define UDS_TAG_MAX 64
typedef struct uds_connection {
    int fd;
    uid_t uid;
    char tag[UDS_TAG_MAX];
} uds_connection;

/* What uds_server_detach hands over: the caller owns every descriptor and
 * the array (free()). */
typedef struct uds_handoff {
    int listen_fd;
    uds_connection *connections;
    size_t n_connections;
    unsigned long long tags_made; /* connections ever tagged (tags stay unique) */
} uds_handoff;

/* What the Unix-socket server is told (main.c fills it from the flags). */
typedef struct uds_config {
    const char *path;             /* --uds: the socket file */
    /* A live upgrade's: the socket listening at path to serve instead of
     * binding it (-1: bind), the client connections to serve with their
     * tags, and the tag counter to go on from. */
    int listen_fd;
    const uds_connection *adopt;
    size_t n_adopt;
    unsigned long long tags_made;
    unsigned orphan_grace_s;      /* --orphan-grace-s: uds/orphans.h */
    unsigned mode;                /* --uds-mode: the socket file's permission bits */
    unsigned max_connections;     /* --uds-max-connections: open at once */
    unsigned max_regions;         /* --uds-max-regions: registered per connection */
    int verbose;                  /* -v: a log line per connection and region */
    const access_options *access; /* --allow-uid and the limits: outlives the server */
} uds_config;

typedef struct uds_server uds_server;

/* The shape every adapter has (main.c starts them from one table). */

/* Create the socket at cfg->path (refusing to replace anything but a
 * stale socket) with mode cfg->mode, or take cfg->listen_fd (the socket
 * listening there) and cfg->adopt's connections, and serve them on a thread
 * of its own. Every descriptor given is the server's from the call on
 * (closed on failure too); a connection it cannot adopt (no slot, a uid
 * --allow-uid refuses) is closed, and the regions of every Unix-socket tag
 * that no connection holds go after cfg->orphan_grace_s. held, the adapter's budget of request bytes, is not drawn on: each
 * request is one record of a bounded size (the library refuses longer
 * ones), read and answered before the next, so the socket holds no client's bytes beyond
 * it (NULL is fine). cfg is
 * copied; what it points to must outlive the server. NULL after a message
 * on stderr. */
uds_server *uds_server_start(const uds_config *cfg, shmreg_registry *reg, byte_budget *held);

/* 0: a Unix socket has a path (cfg->path), not a port. */
unsigned uds_server_port(const uds_server *u);

/* Stop serving: close every connection (unregistering its regions) and
 * remove the socket file. NULL is a no-op. */
void uds_server_stop(uds_server *u);

/* Stop serving and free u, but hand over the listening socket and every
 * open connection with its tag in *out, leaving the socket file and the
 * connections' regions as they are (a live upgrade). NULL: out empty. */
void uds_server_detach(uds_server *u, uds_handoff *out);

#endif
