/* The source a connection request is counted under while it has not yet
 * proven itself (remote/server_connections.c bounds how many wait per source): a pure
 * function of the client's address, apart so that it can be tested. */
#ifndef SHMREG_REMOTE_SOURCE_H
#define SHMREG_REMOTE_SOURCE_H

#include <sys/socket.h>

/* Family (4, 6, or 0 where the address is neither), then the IPv4 address
 * or the IPv6 /64, zero-filled. */
#define SHMREG__SOURCE_SIZE 9

/* The source addr counts under into out. An IPv6 address counts by its
 * /64, which one host commonly holds whole: counted one by one, a single
 * host could take every place. An IPv4 address mapped into IPv6 (a
 * dual-stack listener's IPv4 client) counts as that IPv4 address; NULL or
 * any other family as the zero source, which all such requests share. */
void shmreg__remote_source(const struct sockaddr_storage *addr, unsigned char out[SHMREG__SOURCE_SIZE]);

#endif
