/* Handlers of every route but infer (which has infer.h). */
#ifndef FRONTEND_ENDPOINTS_H
#define FRONTEND_ENDPOINTS_H

#include <shmreg/shmreg.h>

#include "core/region_scope.h"
#include "http/reply.h"
#include "http/request.h"
#include "http/router.h"

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
json_object *server_metadata_json(void);

/* Triton's answer (2.73, word for word) to register and unregister when the
 * server was started with --allow-client-shm=false: UNSUPPORTED, which is
 * HTTP 501 and gRPC UNIMPLEMENTED. Status stays open, as in Triton. */
#define CLIENT_SHM_DISABLED_MESSAGE                                              \
    "Client shared memory is disabled. Start the server with "                   \
    "'--allow-client-shm=true' to enable."

/* v2/{system,cuda}sharedmemory/...: status, register, unregister (the last
 * two refused unless allow_client_shm). */
void shm_endpoints_handle(shmreg_registry *reg, int allow_client_shm, const request *rq,
                          const route *rt, reply *out);

/* 1 when name can be registered as far as the frontend is concerned (it is
 * UTF-8: JSON and protobuf strings must be); else 0 with the reason in err.
 * The library checks the rest. */
int shm_name_is_valid(const char *name, char *err, size_t errlen);

/* Unregister name (NULL: every region of kind in scope) as Triton answers it: a name
 * that is not registered at all is success; WRONG_KIND and the rest are the
 * library's failures, with its message. */
shmreg_err shm_unregister_as_triton(shmreg_registry *reg, const region_scope *scope,
                                    const char *name, shmreg_kind kind);

#ifdef __cplusplus
}
#endif

#endif
