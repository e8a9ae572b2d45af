/* HOST:PORT (remote/hostport.h). */
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "remote/hostport.h"

shmreg_err shmreg__hostport_parse(const char *s, bool numeric, struct sockaddr_storage *out, socklen_t *len,
                                  const char *what)
{
    char host[256];
    const char *colon = s ? strrchr(s, ':') : NULL;
    size_t hl = colon ? (size_t)(colon - s) : 0;
    if (hl >= 2 && s[0] == '[' && s[hl - 1] == ']') /* [IPv6]:PORT */
        s++, hl -= 2;
    char *end;
    unsigned long port = colon ? strtoul(colon + 1, &end, 10) : 0;
    if (!colon || hl == 0 || hl >= sizeof host || colon[1] == '\0' || *end != '\0' || port > 65535)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "%s: '%s' is not HOST:PORT", what, s ? s : "(null)");
    memcpy(host, s, hl);
    host[hl] = '\0';
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = numeric ? AI_NUMERICHOST : 0}, *ai;
    int rc = getaddrinfo(host, NULL, &hints, &ai);
    if (rc != 0)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "%s: host '%s': %s", what, host, gai_strerror(rc));
    memcpy(out, ai->ai_addr, ai->ai_addrlen);
    *len = ai->ai_addrlen;
    freeaddrinfo(ai);
    if (out->ss_family == AF_INET)
        ((struct sockaddr_in *)out)->sin_port = htons((uint16_t)port);
    else
        ((struct sockaddr_in6 *)out)->sin6_port = htons((uint16_t)port);
    return SHMREG_OK;
}

void shmreg__hostport_format(const struct sockaddr *sa, char *out, size_t cap)
{
    char ip[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &in->sin_addr, ip, sizeof ip);
        port = ntohs(in->sin_port);
        snprintf(out, cap, "%s:%u", ip, port);
    } else {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof ip);
        port = ntohs(in6->sin6_port);
        snprintf(out, cap, "[%s]:%u", ip, port);
    }
}
