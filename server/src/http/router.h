/* URL -> endpoint: the KServe v2 routes and Triton's shared-memory extension. */
#ifndef SERVER_ROUTER_H
#define SERVER_ROUTER_H

#include <shmreg/shmreg.h>

typedef enum route_id {
    ROUTE_NONE = 0,
    ROUTE_HEALTH_LIVE,
    ROUTE_HEALTH_READY,
    ROUTE_SERVER_METADATA,
    ROUTE_MODEL_METADATA,
    ROUTE_MODEL_READY,
    ROUTE_MODEL_CONFIG,
    ROUTE_MODEL_STATS,  /* model NULL: every model */
    ROUTE_MODEL_INFER,
    ROUTE_SHM_STATUS,   /* region NULL: every region of the kind */
    ROUTE_SHM_REGISTER,
    ROUTE_SHM_UNREGISTER, /* region NULL: every region of the kind */
    ROUTE_REMOTE_CONNECT, /* v2/remotememory/connect: an invitation to connect */
    ROUTE_REMOTE_ENGINE,  /* v2/remotememory/engine: where and how the engine listens */
    ROUTE_METRICS        /* metrics: Prometheus text, as Triton serves it */
} route_id;

typedef struct route {
    route_id id;
    int post;          /* the route's method: 1 POST, 0 GET */
    const char *model; /* points into the route's own copy of the URL */
    const char *version;
    const char *region;
    shmreg_kind kind;  /* SYSTEM, CUDA or REMOTE for ROUTE_SHM_* */
    char *buf_;        /* that copy; free with route_free */
} route;

/* Match url (already percent-decoded by libmicrohttpd). Returns 0, or -1 when
 * out of memory. An unknown URL gives id ROUTE_NONE. */
int route_match(const char *url, route *out);
void route_free(route *r);

#endif
