/* Splits the URL into segments and matches them against the known routes. */
#include "http/router.h"

#include <stdlib.h>
#include <string.h>

#define MAX_SEGMENTS 8

static int is(const char *segment, const char *want)
{
    return segment && strcmp(segment, want) == 0;
}

/* v2/models/{m}[/versions/{v}][/ready|/config|/stats|/infer], v2/models/stats */
static void match_models(char **seg, int n, route *r)
{
    if (n == 3 && is(seg[2], "stats")) {
        *r = (route){.id = ROUTE_MODEL_STATS, .buf_ = r->buf_};
        return;
    }
    if (n < 3)
        return;
    r->model = seg[2];
    int rest = 3;
    if (n >= 5 && is(seg[3], "versions")) {
        r->version = seg[4];
        rest = 5;
    }
    if (n == rest) {
        r->id = ROUTE_MODEL_METADATA;
    } else if (n == rest + 1) {
        static const struct { const char *name; route_id id; int post; } tails[] = {
            {"ready", ROUTE_MODEL_READY, 0},
            {"config", ROUTE_MODEL_CONFIG, 0},
            {"stats", ROUTE_MODEL_STATS, 0},
            {"infer", ROUTE_MODEL_INFER, 1},
        };
        for (size_t i = 0; i < sizeof tails / sizeof tails[0]; i++) {
            if (is(seg[rest], tails[i].name)) {
                r->id = tails[i].id;
                r->post = tails[i].post;
            }
        }
    }
}

/* v2/{system,cuda}sharedmemory[/region/{name}]/{status,register,unregister},
 * and the remote_memory extension's v2/remotememory[...]: the same verbs,
 * v2/remotememory/connect and v2/remotememory/engine. */
static void match_shared_memory(char **seg, int n, route *r)
{
    r->kind = is(seg[1], "systemsharedmemory") ? SHMREG_KIND_SYSTEM
              : is(seg[1], "remotememory")     ? SHMREG_KIND_REMOTE
                                               : SHMREG_KIND_CUDA;
    const char *verb;
    if (n == 3) {
        verb = seg[2];
    } else if (n == 5 && is(seg[2], "region")) {
        r->region = seg[3];
        verb = seg[4];
    } else {
        return;
    }
    if (is(verb, "status")) {
        r->id = ROUTE_SHM_STATUS;
    } else if (is(verb, "unregister")) {
        r->id = ROUTE_SHM_UNREGISTER;
        r->post = 1;
    } else if (is(verb, "register") && r->region) {
        r->id = ROUTE_SHM_REGISTER;
        r->post = 1;
    } else if (is(verb, "connect") && !r->region && r->kind == SHMREG_KIND_REMOTE) {
        r->id = ROUTE_REMOTE_CONNECT;
        r->post = 1;
    } else if (is(verb, "engine") && !r->region && r->kind == SHMREG_KIND_REMOTE) {
        r->id = ROUTE_REMOTE_ENGINE;
    }
}

int route_match(const char *url, route *out)
{
    *out = (route){.id = ROUTE_NONE};
    out->buf_ = strdup(url);
    if (!out->buf_)
        return -1;
    char *seg[MAX_SEGMENTS + 1] = {0};
    int n = 0;
    char *save = NULL;
    for (char *s = strtok_r(out->buf_, "/", &save); s; s = strtok_r(NULL, "/", &save)) {
        if (n == MAX_SEGMENTS + 1)
            return 0; /* longer than any route */
        seg[n++] = s;
    }
    if (n == 1 && is(seg[0], "metrics")) { /* Triton's path, outside v2 */
        out->id = ROUTE_METRICS;
        return 0;
    }
    if (n == 0 || !is(seg[0], "v2"))
        return 0;
    if (n == 1) {
        out->id = ROUTE_SERVER_METADATA;
    } else if (n == 3 && is(seg[1], "health")) {
        out->id = is(seg[2], "live") ? ROUTE_HEALTH_LIVE : is(seg[2], "ready") ? ROUTE_HEALTH_READY
                                                                            : ROUTE_NONE;
    } else if (is(seg[1], "models")) {
        match_models(seg, n, out);
    } else if (is(seg[1], "systemsharedmemory") || is(seg[1], "cudasharedmemory") ||
               is(seg[1], "remotememory")) {
        match_shared_memory(seg, n, out);
    }
    return 0;
}

void route_free(route *r)
{
    free(r->buf_);
    r->buf_ = NULL;
}
