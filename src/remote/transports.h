/* Which UCX transports a remote context may open, checked in every build
 * (a refused transport is INVALID_ARG whether or not UCX is here), and the
 * UCX settings that open only those (remote/worker.c).
 *
 * The threat: UCX's tcp transport serves a put or get at any address to
 * any peer that connects to its interface's listening port, checking no
 * key, and UCX opens it and its shared-memory transports whatever features
 * the context asks for; UD emulates puts at the receiver in software. So a
 * context opens only transports whose one-sided operations the NIC keys
 * (rc, dc), local copy engines, and tcp on the one device the caller
 * declared trusted. */
#ifndef SHMREG_REMOTE_TRANSPORTS_H
#define SHMREG_REMOTE_TRANSPORTS_H

#include <stdbool.h>
#include <stddef.h>

#include "shmreg/shmreg.h"

struct shmreg__remote_transports {
    const char *transports; /* as the caller gave it, or NULL */
    const char *tcp_device; /* NULL: tcp refused */
    const char *tcp_ports;  /* "LOW-HIGH", or NULL */
    bool server;            /* names the server's flags in messages */
};

/* INVALID_ARG, with a message naming the transport or field, why, and the
 * field and flag to change, for settings that would open a transport a peer
 * could read or write memory through; OK otherwise. `what` starts the
 * message ("remote_configure"). */
shmreg_err shmreg__remote_transports_check(const struct shmreg__remote_transports *t, const char *what);

/* t from a server's or a client's config (NULL: the defaults), checked:
 * OK, or INVALID_ARG as shmreg__remote_transports_check. t points into
 * config. */
shmreg_err shmreg__remote_server_transports(const shmreg_remote_config *config, struct shmreg__remote_transports *t);
shmreg_err shmreg__remote_client_transports(const shmreg_remote_client_config *config,
                                            struct shmreg__remote_transports *t);

/* UCX's spelling of the transports t opens (for UCX_TLS), into tls; ""
 * when none can work on this host (the default list without an RDMA
 * device, no tcp_device). t must have passed the check. */
void shmreg__remote_tls(const struct shmreg__remote_transports *t, char *tls, size_t cap);

/* UCX_NET_DEVICES for a context that opens tcp: t's tcp_device, plus the
 * RDMA devices of env_devices (the environment's UCX_NET_DEVICES; NULL or
 * "all": this host's RDMA ports), never another network interface, so
 * that tcp listens on the trusted device alone. */
void shmreg__remote_net_devices(const struct shmreg__remote_transports *t, const char *env_devices, char *out,
                                size_t cap);

/* The message a start that found no device for the transports leaves:
 * which were asked, and that tcp needs a trusted device. */
shmreg_err shmreg__remote_no_device(const struct shmreg__remote_transports *t, const char *what,
                                    const char *ucx_reason);

#endif
