/*
 * A live upgrade: a new server process takes the running one's regions,
 * its listening sockets and its Unix-socket clients, so that no client sees
 * a refused connection or an unknown region.
 *
 * The protocol, over a Unix stream socket (the old server's
 * --handover-socket PATH, mode 0600; the new one's --take-over PATH):
 *
 *   new  connects.
 *   old  checks the peer's uid (SO_PEERCRED) against its own; another is
 *        answered "refused: WHY\n" and closed, and the old server goes on.
 *   old  detaches every adapter (adapters.h): each stops accepting but
 *        keeps its listening socket open (connections arriving wait in the
 *        kernel's backlog), lets its requests in flight finish (their
 *        references released), closes its idle connections; the Unix
 *        socket keeps its clients' connections, unserved. The registry is
 *        then quiet: no registration can come.
 *   old  sends "ok\n", then shmreg_handover_send: the registry's state, its
 *        descriptors, and the sockets by name ("http", "grpc", "uds",
 *        "uds-conn-N"), with app_state (below).
 *   new  restores the registry (shmreg_handover_receive: it too refuses a
 *        peer of another uid), checks its port flags against the sockets,
 *        starts each adapter on its inherited socket, adopts the Unix-socket
 *        connections with their tags, prints its usual listening lines and
 *        sends "R" (ready).
 *   old  answers "A" and is from then on no server: it removes its
 *        --handover-socket file, closes the connection, stops and exits 0.
 *   new  after "A", waits for the connection's end (the old server has let
 *        go of the socket path) and listens on its own --handover-socket.
 *
 * If anything fails before the old server has read "R" (the new one exits,
 * sends something else, or says nothing for UPGRADE_READY_TIMEOUT_S), the
 * old server starts its adapters again on the sockets it kept, with the
 * Unix-socket connections, and serves on; a new server that does not get
 * "A" detaches its adapters the same way and exits non-zero.
 *
 * app_state, text: "shmreg-server-upgrade 1\n", "uds-tags N\n" (tags the
 * Unix socket has made, so that new ones stay unique), then per carried
 * Unix-socket connection "conn UID TAG\n", in the order of the "uds-conn-N"
 * descriptors. Addresses and ports are read off the sockets themselves.
 */
#ifndef SERVER_UPGRADE_H
#define SERVER_UPGRADE_H

#include <netinet/in.h>
#include <sys/un.h>

#include <shmreg/shmreg.h>

#include "adapters.h"
#include "options.h"

/* How long the old server waits for "R" once it has sent the state. */
#define UPGRADE_READY_TIMEOUT_S 60

/* ---------------------------------------------------- the old server */

typedef struct upgrade_listener upgrade_listener;

/* Listen at path (a Unix stream socket, mode 0600). NULL after a message. */
upgrade_listener *upgrade_listen(const char *path);
int upgrade_listener_fd(const upgrade_listener *l);
/* Close it and remove its file while it is still the one made. NULL: no-op. */
void upgrade_listener_close(upgrade_listener *l);

enum upgrade_outcome {
    UPGRADE_HANDED_OVER, /* the adapters are detached, their sockets given: stop now */
    UPGRADE_RESUMED,     /* the peer was refused or failed: serving again */
    UPGRADE_FAILED,      /* could not serve again (a message said why) */
};

/* Serve one successor that connected on conn (the caller closes conn). */
enum upgrade_outcome upgrade_hand_over(int conn, shmreg_registry *reg, const server_options *o,
                                       running *run);

/* ---------------------------------------------------- the new server */

/* What the old server gave: its sockets, and the strings o points to once
 * upgrade_take_over has rewritten it. */
typedef struct upgrade_carried {
    char host[INET6_ADDRSTRLEN];
    char uds_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    adapter_sockets sockets;
} upgrade_carried;

/* Connect to path, receive and restore the state into reg, and set o's
 * host, ports and --uds to those of the sockets (refused when a flag given
 * differs). 0 with *conn the connection, or -1 after a message (nothing
 * left open). c must outlive the adapters. */
int upgrade_take_over(const char *path, shmreg_registry *reg, server_options *o,
                      upgrade_carried *c, int *conn);
/* The adapters are up: send "R" and wait for "A". 0, or -1 after a message. */
int upgrade_confirm(int conn);
/* Wait for the old server to let go of the connection (bounded), close it. */
void upgrade_finish(int conn);

#endif
