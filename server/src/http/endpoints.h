/* Handlers of every route but infer (which has infer.h). */
#ifndef SERVER_ENDPOINTS_H
#define SERVER_ENDPOINTS_H

#include <shmreg/shmreg.h>

#include "core/region_scope.h"
#include "core/triton.h"
#include "http/reply.h"
#include "http/request.h"
#include "http/router.h"

#ifdef __cplusplus
extern "C" {
#endif

/* v2/health/{live,ready}, v2, v2/models/{m}[/ready|/config|/stats],
 * v2/models/stats. scope: the caller's, whose book of statistics the stats
 * show (under --tenants: its tenant's; 401 without a known token). */
void model_endpoints_handle(const route *rt, const region_scope *scope, reply *out);

/* v2/health/live (ready_route 0) or v2/health/ready, with the Open
 * Inference Protocol's body; draining: the server is shutting down, and not
 * ready. */
void reply_health(reply *out, int ready_route, int draining);

/* 404 for a model (or version) that is not served, in Triton's words (triton.h). */
void reply_unknown_model(reply *out, const route *rt);

/* v2/{system,cuda}sharedmemory/...: status, register, unregister (the last
 * two refused unless allow_client_shm). */
void shm_endpoints_handle(shmreg_registry *reg, int allow_client_shm, const request *rq,
                          const route *rt, reply *out);

#ifdef __cplusplus
}
#endif

#endif
