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
 *   old  instead, when anything failed before it read "R": starts its
 *        adapters again on the sockets it kept, sends "X" (it serves
 *        again) and closes; a new server that reads "X" stops.
 *
 * Every way this can fail leaves one server serving: the old one (it
 * kept its listening sockets, so a server that binds its own ports fails
 * with EADDRINUSE while it lives, and a live --uds file is never replaced)
 * or the new one. Both serve at once only where the old server resumes
 * after the new one is ready, which each says on stderr. Step by step:
 *
 *   the new server dies or is killed
 *     before connecting, or refused (uid)  the old serves on, never detached
 *     before "R" (while the old detaches,  the old reads the end, starts its
 *     during the send, while restoring,    adapters again on the sockets it
 *     starting its adapters, a flag that   kept, with its Unix-socket
 *     differs, a state it refuses)         clients, and serves ("upgrade:
 *                                          serving again"); it writes "X"
 *     answers other than "R", or says      the same, after 60 s for silence
 *     nothing (UPGRADE_READY_TIMEOUT_S)
 *     stops reading (a send blocked past  the send fails (SO_SNDTIMEO): the
 *     UPGRADE_READY_TIMEOUT_S)             same
 *     after "R" was answered "A"           the new one was the server: a
 *                                          crash of it, as any (crash
 *                                          survival under systemd)
 *   the old server dies or is killed
 *     before the new one connects          connect refused, or no file: the
 *     before or while detaching            new one starts on its own flags
 *     after detaching, before "ok"         (below); the old's clients'
 *     mid-send (a state cut short: the     connections and its regions are
 *     library refuses it whole)            lost, the regions' clients
 *                                          register again
 *     after the send, before reading "R"   the new one has the sockets and
 *     after "R", before "A"                regions: it reads the end with no
 *                                          word and serves on
 *   the old server cannot start its        it exits 1 without "X": to the new
 *     adapters again                       one, if it lives, that is a death
 *   the connection is cut (not a death)    each side sees its peer end: the
 *                                          same as the peer's death above,
 *                                          and where both would serve, the
 *                                          new one's bind fails on the old
 *                                          one's sockets and it exits 1
 *   a descriptor missing, a state          the library refuses it whole, the
 *     malformed (the old one alive)        new one closes and exits 1, the
 *                                          old one serves again
 *   a silent old server: before "ok"       the new one waits (the old one's
 *                                          --drain-s bounds it)
 *     mid-send                             the receive times out (SO_RCVTIMEO,
 *                                          60 s): as a state refused
 *     after "R"                            after 60 s the new one serves on
 *                                          and keeps the connection: the old
 *                                          one, detached, reads "R" when it
 *                                          wakes, answers "A" and stops
 *
 * The new server's fallback: when the old one is gone before the sockets
 * came (UPGRADE_OLD_GONE), it starts as a server without --take-over
 * would, binding --host, --port, --grpc-port and --uds as given, with the
 * registry it has (empty: a state cut short restores nothing), and says
 * so on stderr. It does so only with a fixed --port given: a take-over
 * that names no port has no address its clients know, and exits 1.
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

/* How long the old server waits for "R" once it has sent the state, or
 * for a successor to read what it sends; how long the new one waits for
 * each part of the state, and for "A". */
#define UPGRADE_READY_TIMEOUT_S 60
/* The old server's word before it closes, when it serves again. */
#define UPGRADE_RESUMING "X"

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
    int old_conn; /* a silent old server's connection, kept to the exit; -1: none */
} upgrade_carried;

enum upgrade_take {
    UPGRADE_TAKEN,     /* the state and the sockets are here: start on them */
    UPGRADE_NOT_TAKEN, /* refused or failed; the old server serves on */
    UPGRADE_OLD_GONE,  /* the old server is not there, or ended before the sockets came */
};

/* Connect to path, receive and restore the state into reg, and set o's
 * host, ports and --uds to those of the sockets (refused when a flag given
 * differs). UPGRADE_TAKEN with *conn the connection; else after a message,
 * nothing left open. c must outlive the adapters. */
enum upgrade_take upgrade_take_over(const char *path, shmreg_registry *reg, server_options *o,
                                    upgrade_carried *c, int *conn);

enum upgrade_answer {
    UPGRADE_CONFIRMED,   /* "A": the old server stops */
    UPGRADE_OLD_RESUMED, /* "X" (or another word): it serves again, this one must not */
    UPGRADE_OLD_DIED,    /* the end with no word: this one serves on */
    UPGRADE_OLD_SILENT,  /* nothing for UPGRADE_READY_TIMEOUT_S: serve on, keep conn */
};

/* The adapters are up: send "R" and read the answer (a message on stderr
 * for all but UPGRADE_CONFIRMED). */
enum upgrade_answer upgrade_confirm(int conn);
/* Wait for the old server to let go of the connection (bounded), close it. */
void upgrade_finish(int conn);

#endif
