/* Handlers of every route but infer (which has infer.h). */
#ifndef FRONTEND_ENDPOINTS_H
#define FRONTEND_ENDPOINTS_H

#include <shmreg/shmreg.h>

#include "reply.h"
#include "request.h"
#include "router.h"

#ifdef __cplusplus
extern "C" {
#endif

/* v2/health/{live,ready}, v2, v2/models/{m}[/ready|/config|/stats], v2/models/stats */
void model_endpoints_handle(const route *rt, reply *out);

/* 404 for a model (or version) that is not served, in Triton's words. */
void reply_unknown_model(reply *out, const route *rt);
/* The message of reply_unknown_model, into buf (version NULL: none named). */
void unknown_model_message(char *buf, size_t len, const char *name, const char *version);

/* The server's name, version and extensions (v2, and gRPC's ServerMetadata). */
json_t *server_metadata_json(void);

/* v2/{system,cuda}sharedmemory/...: status, register, unregister */
void shm_endpoints_handle(shmreg_registry *reg, const request *rq, const route *rt, reply *out);

/* Unregister name (NULL: every region of kind) as Triton answers it: a name
 * that is not registered at all is success; WRONG_KIND and the rest are the
 * library's failures, with its message. */
shmreg_err shm_unregister_as_triton(shmreg_registry *reg, const char *name, shmreg_kind kind);

#ifdef __cplusplus
}
#endif

#endif
