/* "HOST:PORT" to a socket address and back: the listener's address as the
 * server gives it out and as a client dials it. */
#ifndef SHMREG_REMOTE_HOSTPORT_H
#define SHMREG_REMOTE_HOSTPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "shmreg/shmreg.h"

/* Parse "HOST:PORT" (a name, an IPv4 address, or [IPv6]:PORT; numeric: IPs
 * only, no name lookup) into out. INVALID_ARG naming `what` and the cause
 * when it is not one or the host does not resolve. */
shmreg_err shmreg__hostport_parse(const char *s, bool numeric, struct sockaddr_storage *out, socklen_t *len,
                                  const char *what);

/* "IP:PORT" ("[IP]:PORT" for IPv6) of sa into out (cap bytes). */
void shmreg__hostport_format(const struct sockaddr *sa, char *out, size_t cap);

#endif
