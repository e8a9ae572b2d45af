/*
 * libshmreg: remote regions through UCX, for a server that reads and
 * writes windows of its clients' memory in other processes or on other
 * hosts, and for those clients (the client side is here too).
 *
 * A supplement of shmreg/shmreg.h, which includes it: a program that
 * includes shmreg/shmreg.h has these declarations already. The conventions
 * of shmreg/shmreg.h hold here too.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef SHMREG_REMOTE_H
#define SHMREG_REMOTE_H

#include <shmreg/shmreg.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------- remote regions through UCX (1.2) */

/*
 * A client in another process (on this host or another) lets the server
 * read and write windows of its memory: the server registers a region on
 * such a window (shmreg_register_remote) and its requests move the bytes
 * with shmreg_copy_from_view / shmreg_copy_to_view.
 *
 * Who may make the server touch what (docs/security.md, "Remote regions"):
 * - A client connects to the server: it dials the server's listener
 *   (shmreg_remote_server_address) and proves itself with a one-time secret
 *   that the server issued to one tenant, a (registry, tag) pair, over a
 *   channel the server authenticated (shmreg_remote_invite). The endpoint
 *   is the server's own, made from the client's connection request; the
 *   server never dials an address a client sent, and no endpoint serves
 *   two connections. At most 64 connections may wait to prove
 *   themselves, at most 8 of them from one source address (an IPv6
 *   address counts by its /64), each for 5 s; one past its time is heard
 *   no more and is closed at the next invitation or sweep.
 * - Over its own connection, and only there, the client's library announces
 *   the windows of its own memory it exports (shmreg_remote_export): an
 *   address, a length, a window id and a generation.
 * - A descriptor names a connection, a window and its generation, never an
 *   address. A registration with tag T in registry R accepts it only when
 *   the connection was invited for (R, T), the window is announced on it
 *   now, with that generation, and the region's window lies inside it.
 * - The server moves bytes only by asking the client over that connection
 *   (a read: the client sends the bytes; a write: the server sends them and
 *   the client stores them); the client's library checks each request
 *   against its windows again. Neither side's UCX context asks for
 *   one-sided operations (UCP_FEATURE_RMA), and neither opens a transport
 *   that serves them to a peer without a key checked in hardware, but for
 *   tcp on a device declared trusted (Transports, below). The server sends
 *   a write's bytes by copy (UCX's eager protocol), never exposing its
 *   buffer to the peer.
 * - Each tenant has at most max_connections connections and invitations,
 *   and at most max_copies copies in flight (shmreg_remote_config): past
 *   them a call fails at once (NO_MEMORY) rather than waiting.
 *
 * UCX is optional twice over: a build with SHMREG_WITH_UCX=OFF has these
 * functions answering UNSUPPORTED, and a build with UCX reaches libucp.so.0
 * through dlopen at the first remote call, so the library loads and works
 * where UCX is not installed; every remote call then answers UNSUPPORTED
 * with the reason. The library sets UCX_ERROR_SIGNALS to "" before loading
 * it, unless the environment already says otherwise, so that UCX installs
 * no handler for SIGSEGV or SIGBUS (guarded copies need theirs).
 *
 * Transports (1.4; docs/security.md has the inventory). UCX's tcp
 * transport serves a put or get at any address of the process to any
 * peer that reaches its interface's own listening port, checking no key,
 * and UCX opens it, like its shared-memory transports, whatever features
 * the context asks for; UD emulates puts in software at the receiver the
 * same way. So by default the library opens no transport on which a peer
 * that has not proven itself can read or write memory: only rc and dc,
 * whose one-sided operations the NIC checks against a key. tcp is opened
 * only on the one network device the caller declares trusted (tcp_device:
 * any host that reaches that device's address can then write into the
 * process), and UD, shared-memory, self, IPC and unknown transports are
 * refused. The library sets UCX's transports itself: the environment's
 * UCX_TLS no longer chooses them, and UCX_NET_DEVICES contributes only
 * its RDMA devices when tcp is open (its network interfaces are left out).
 * Other UCX settings still come from the environment.
 *
 * UCX's own log is bounded: the library pushes a log handler into libucs
 * (process-wide, for the life of the process) that writes at most one of
 * UCX's lines a second to stderr, prefixed "shmreg: UCX", cut at its first
 * line break (UCX's hex dumps of a peer's bytes never pass) and saying how
 * many lines it held back, so that a peer cannot make the process write
 * without bound. UCX_LOG_LEVEL still filters what reaches it; UCX_LOG_FILE
 * no longer applies.
 *
 * Threads: the server side holds one UCX context and one worker for the
 * whole process, created with UCS_THREAD_MODE_MULTI at the first remote
 * call and kept until the process exits; a copy progresses that worker in
 * the calling thread until it completes, and a thread of the library
 * ("shmreg-ucx") progresses it while no copy does. A client
 * (shmreg_remote_client) has its own context, worker and progress thread,
 * which answers the server's requests.
 *
 * The descriptor (version 2, all integers little-endian, 40 bytes):
 *   byte 0       version, 2
 *   bytes 1..7   zero
 *   bytes 8..23  the connection id (the server's, from its welcome)
 *   bytes 24..31 uint64 the window id (the client's)
 *   bytes 32..39 uint64 the window's generation (the client's)
 * Version 1 (a worker address and a remote key) is refused: it let a
 * descriptor name any worker and any address.
 */
#define SHMREG_REMOTE_DESCRIPTOR_VERSION 2
#define SHMREG_REMOTE_DESCRIPTOR_SIZE 40
#define SHMREG_REMOTE_DESCRIPTOR_MAX SHMREG_REMOTE_DESCRIPTOR_SIZE
#define SHMREG_REMOTE_SECRET_SIZE 32
#define SHMREG_REMOTE_TIMEOUT_MS 10000 /* a copy's default bound (shmreg_config) */
#define SHMREG_REMOTE_INVITE_MS 60000  /* how long an unused secret stays valid */

/* OK when remote regions can be used in this process: the build has UCX
 * and libucp.so.0 loads; else UNSUPPORTED with the reason in
 * shmreg_last_error(). The first call loads UCX; later calls are cheap. */
SHMREG_API shmreg_err shmreg_remote_available(void);

/* 1.3. The server side's settings, for the whole process. */
typedef struct shmreg_remote_config {
    /* Where the server listens for clients' connections, "IP:PORT" (port 0:
     * one the system picks); NULL: "0.0.0.0:0". Copied. */
    const char *listen;
    /* Connections plus unused invitations one tenant may hold; 0: 16. */
    unsigned max_connections;
    /* Copies one tenant may have in flight at once; 0: 8. */
    unsigned max_copies;
    /* The UCX transports the server's context is opened with, comma
     * separated ("rc", "dc,tcp"); NULL: "rc,dc", plus "tcp" when
     * tcp_device is set (rc and dc only where the host has an RDMA device).
     * Allowed (1.4): rc, rc_verbs, rc_mlx5, rc_x, dc, dc_mlx5, dc_x, tcp
     * (with tcp_device only), and the local copy engines cuda_copy,
     * rocm_copy, gdr_copy; anything else (ud*, posix, sysv, cma, knem,
     * xpmem, sm, shm, mm, self, all, cuda_ipc, rocm_ipc, an exclusion
     * "^...", an unknown name) is INVALID_ARG (the remote section above
     * says why). A client that can reach the server by none of them
     * cannot connect. Copied. */
    const char *transports;
    /* 1.4. The network device ("lo", "eth1": a network interface of this
     * host) on which the operator declares the network trusted: tcp is
     * opened there and only there. Any host that reaches this device's
     * address, on the tcp transport's own port (tcp_ports), can read and
     * write this process's memory at any address: name only a
     * device whose network admits no one else ("lo": processes of this
     * host). NULL: tcp is refused. The server's --remote-tcp-device. Copied. */
    const char *tcp_device;
    /* 1.4. "LOW-HIGH": the ports the tcp transport's own listener may take
     * (UCX_TCP_PORT_RANGE), for a firewall; NULL: any. Needs tcp_device.
     * The server's --remote-tcp-ports. Copied. */
    const char *tcp_ports;
    void *reserved_[2]; /* zero */
} shmreg_remote_config;

/*
 * 1.3. Configure the server side (NULL: the defaults). Only before the
 * server's engine starts (the first shmreg_remote_server_address,
 * shmreg_remote_invite or remote registration): later, INVALID_ARG
 * ("already started"), nothing changed. The server's context also has UCX
 * reuse the listener's address (UCX_TCP_CM_REUSEADDR), so that a port left
 * in TIME_WAIT by an earlier run can be bound; a port in use still fails.
 * Errors: INVALID_ARG (a listen address that is not IP:PORT; a transport
 * refused, tcp without tcp_device, a tcp_device that is no network
 * interface here, tcp_ports not LOW-HIGH: the message names the transport
 * or field, why, and the server's flag), NO_MEMORY.
 */
SHMREG_API shmreg_err shmreg_remote_configure(const shmreg_remote_config *config);

/*
 * 1.3. Where clients connect (shmreg_remote_client_connect): "IP:PORT" of
 * the server's listener, NUL-terminated, valid for the life of the process;
 * an IP of 0.0.0.0 means any of the host's addresses (a client uses the one
 * it reaches the server by). Starts the engine on the first call. It is
 * not a secret: what lets a client in is the secret of
 * shmreg_remote_invite. Errors: INVALID_ARG, UNSUPPORTED (no UCX; or no
 * device of this host offers the transports asked: the message names them
 * and says that tcp needs tcp_device, the server's --remote-tcp-device, on
 * a network the operator trusts), SYSTEM (UCX: the listener could not be
 * created), NO_MEMORY. A failed start is retried by the next call.
 */
SHMREG_API shmreg_err shmreg_remote_server_address(const char **address);

/*
 * 1.3. Issue a one-time secret that lets one client connection in as the
 * tenant (reg, tag): tag NULL is the untagged tenant. Call it from a
 * channel that authenticated the tenant (the server's HTTP endpoint, with
 * the tenant's token) and hand the secret to that client only. The secret
 * is good for one connection within SHMREG_REMOTE_INVITE_MS. Regions
 * registered in reg with that tag may then name that connection's windows,
 * and no others may. Errors: INVALID_ARG (NULL, a bad tag), NO_MEMORY (the
 * tenant holds max_connections connections and invitations), UNSUPPORTED,
 * SYSTEM.
 */
SHMREG_API shmreg_err shmreg_remote_invite(shmreg_registry *reg, const char *tag,
                                           unsigned char secret[SHMREG_REMOTE_SECRET_SIZE]);

/*
 * Register the window [offset, offset + byte_size) of a window a client
 * announced, named by the descriptor bytes, under `name`, untagged. The same
 * as shmreg_register with SHMREG_SOURCE_REMOTE, raw_handle = descriptor and
 * raw_handle_size = size (which takes a tag). The descriptor is parsed here;
 * the library keeps no pointer to it. flags: SHMREG_READONLY refuses copies
 * into the region; pinning flags do not apply (INVALID_ARG).
 * Errors: as shmreg_register; INVALID_ARG (a malformed descriptor: the
 * message says which field), NOT_FOUND (no live connection of that id for
 * this tenant, or the window is not announced on it with that generation:
 * withdrawn, or a stale descriptor; one message for every case, so that a
 * tenant learns nothing of another's connections), OUT_OF_BOUNDS (the
 * region's window is not inside the announced one), UNSUPPORTED (no UCX).
 */
SHMREG_API shmreg_err shmreg_register_remote(shmreg_registry *reg, const char *name, const void *descriptor,
                                             size_t size, size_t offset, size_t byte_size, unsigned flags);

/*
 * Unregister, under the registry's busy policy, every remote region whose
 * client is unreachable: its connection failed (the client died, closed
 * or said goodbye; a copy timed out; a liveness check got no answer).
 * Copies of those regions already fail at once; this gives their names and
 * memory back. Regions still referenced follow the policy (DEFER and
 * DETACH: gone with their last release; REFUSE: kept, and swept by a later
 * call). A server calls it from time to time (its HTTP server does once a
 * second), which also checks idle connections; shmreg_register_remote
 * calls it too. *count (may be NULL): how many were unregistered.
 * Errors: INVALID_ARG.
 */
SHMREG_API shmreg_err shmreg_remote_sweep(shmreg_registry *reg, size_t *count);

/* The client side: a UCX context, worker and progress thread. */
typedef struct shmreg_remote_client shmreg_remote_client; /* opaque */
typedef struct shmreg_remote_window shmreg_remote_window; /* opaque: one exported range */

/* 1.4. A client's transports, as the server's (shmreg_remote_config):
 * what its UCX context may open. A client on another host names the
 * device it reaches the server by, when that is over tcp. */
typedef struct shmreg_remote_client_config {
    const char *transports; /* NULL: "rc,dc", plus "tcp" with tcp_device; the same names allowed */
    const char *tcp_device; /* the trusted network device for tcp; NULL: tcp refused */
    const char *tcp_ports;  /* "LOW-HIGH" for the tcp transport's own listener; NULL: any */
    void *reserved_[4];     /* zero */
} shmreg_remote_client_config;

/* Create a client with the default transports: create_with(NULL, out),
 * hardware (rc, dc) only since 1.4; a client reaching its server over tcp
 * needs shmreg_remote_client_create_with and a tcp_device. */
SHMREG_API shmreg_err shmreg_remote_client_create(shmreg_remote_client **out);

/* 1.4. Create a client whose UCX context opens only config's transports
 * (NULL: the defaults); config need not outlive the call. Free it with
 * shmreg_remote_client_destroy after every window it exported.
 * Errors: INVALID_ARG (out NULL; a transport refused, tcp without
 * tcp_device, a bad tcp_device or tcp_ports: as shmreg_remote_configure),
 * UNSUPPORTED (no UCX; or no device of this host offers the transports
 * asked, the message says which), SYSTEM (UCX failed: its status string in
 * the message), NO_MEMORY. */
SHMREG_API shmreg_err shmreg_remote_client_create_with(const shmreg_remote_client_config *config,
                                                       shmreg_remote_client **out);

/*
 * 1.3. Connect c to the server listening at server_address ("HOST:PORT",
 * a name or an IP), proving the connection with the secret the server
 * issued (shmreg_remote_invite, or the server's remotememory/connect
 * endpoint), and wait for its welcome (at most SHMREG_REMOTE_TIMEOUT_MS).
 * Once per client. Errors: INVALID_ARG (NULL, not HOST:PORT, a host that
 * does not resolve, already connected),
 * NOT_FOUND (the server refused the secret: unknown, used or expired),
 * NO_MEMORY (the tenant's connection limit), SYSTEM (UCX, or no answer).
 */
SHMREG_API shmreg_err shmreg_remote_client_connect(shmreg_remote_client *c, const char *server_address,
                                                   const unsigned char secret[SHMREG_REMOTE_SECRET_SIZE]);

/* Say goodbye to the server (its regions of this client then go at its
 * next sweep), stop the progress thread and close the worker and context.
 * NULL is a no-op. */
SHMREG_API void shmreg_remote_client_destroy(shmreg_remote_client *c);

/*
 * Export [addr, addr + length) of this process's memory to the connected
 * server: announce it as a new window (nothing is copied) and wait for the
 * server to take the announcement. The memory must stay mapped until
 * shmreg_remote_unexport. Thread-safe; any number of windows.
 * Errors: INVALID_ARG (NULL, length 0, a range past 2^64, not connected),
 * SYSTEM (UCX, or no answer), NO_MEMORY.
 */
SHMREG_API shmreg_err shmreg_remote_export(shmreg_remote_client *c, void *addr, size_t length,
                                           shmreg_remote_window **out);

/*
 * Allocate length bytes and export them as shmreg_remote_export does.
 * *addr: the memory, zero-filled, valid until shmreg_remote_unexport
 * frees it. Errors: INVALID_ARG, SYSTEM, NO_MEMORY.
 */
SHMREG_API shmreg_err shmreg_remote_alloc(shmreg_remote_client *c, size_t length, void **addr,
                                          shmreg_remote_window **out);

/* The descriptor of w (the format above): *bytes points into w, valid until
 * w is unexported. Errors: INVALID_ARG. */
SHMREG_API shmreg_err shmreg_remote_descriptor(const shmreg_remote_window *w, const void **bytes,
                                               size_t *size);

/* Withdraw w at the server (its later copies of w fail: the server's
 * regions on it stay registered until unregistered) and from this
 * client's own checks, free the memory of shmreg_remote_alloc, and free w.
 * NULL is a no-op. */
SHMREG_API void shmreg_remote_unexport(shmreg_remote_window *w);

#ifdef __cplusplus
}
#endif

#endif /* SHMREG_REMOTE_H */
