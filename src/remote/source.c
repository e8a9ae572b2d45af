/* The source an unproven connection counts under (remote/source.h). */
#include <netinet/in.h>
#include <string.h>

#include "remote/source.h"

void shmreg__remote_source(const struct sockaddr_storage *addr, unsigned char out[SHMREG__SOURCE_SIZE])
{
    memset(out, 0, SHMREG__SOURCE_SIZE);
    if (!addr)
        return;
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)addr;
    if (addr->ss_family == AF_INET) {
        out[0] = 4;
        memcpy(out + 1, &((const struct sockaddr_in *)addr)->sin_addr, 4);
    } else if (addr->ss_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
        out[0] = 4;
        memcpy(out + 1, &in6->sin6_addr.s6_addr[12], 4);
    } else if (addr->ss_family == AF_INET6) {
        out[0] = 6;
        memcpy(out + 1, in6->sin6_addr.s6_addr, 8);
    }
}
