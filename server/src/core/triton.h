/*
 * Triton's answers, the same for every adapter (HTTP, gRPC): the status each
 * library error gets, the words for a model that is not served and for
 * client shared memory that is disabled, which region names are accepted,
 * unregister's rule, and the server's metadata. Clients (tritonclient,
 * perf_analyzer, Triton's own tests) test for these, so they live once.
 */
#ifndef SERVER_TRITON_H
#define SERVER_TRITON_H

#include <stddef.h>

#include <shmreg/shmreg.h>

#include "common/json_io.h"
#include "core/region_scope.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Triton's error-to-status table, the only one (docs/errors.md prints it;
 * python/shmreg/kserve/status.py's copy is tested against it): X(library error
 * without SHMREG_, HTTP status, gRPC status code name). Triton's statuses
 * where Triton has one, since clients test for them: ALREADY_EXISTS is 400
 * over HTTP; a region in use (BUSY) is INTERNAL over gRPC, as Triton
 * refused to unregister one; FAULT is the client truncating its own region.
 * Every library error is listed, so a new one is a -Wswitch warning here. */
#define TRITON_STATUS_MAP(X)                                                                   \
    X(OK, 200, OK)                                                                             \
    X(ERR_INVALID_ARG, 400, INVALID_ARGUMENT)                                                  \
    X(ERR_NOT_FOUND, 404, NOT_FOUND)                                                           \
    X(ERR_ALREADY_EXISTS, 400, ALREADY_EXISTS)                                                 \
    X(ERR_OUT_OF_BOUNDS, 400, INVALID_ARGUMENT)                                                \
    X(ERR_BUSY, 400, INTERNAL)                                                                 \
    X(ERR_SYSTEM, 500, INTERNAL)                                                               \
    X(ERR_CUDA, 500, INTERNAL)                                                                 \
    X(ERR_UNSUPPORTED, 501, UNIMPLEMENTED)                                                     \
    X(ERR_NO_MEMORY, 507, RESOURCE_EXHAUSTED)                                                  \
    X(ERR_WRONG_KIND, 404, NOT_FOUND)                                                          \
    X(ERR_FAULT, 400, INVALID_ARGUMENT)

/* The HTTP status of err by the table; 500 for a code it does not know. */
unsigned http_status_from_shmreg(shmreg_err err);

/* Triton 2.73's answer (word for word) to register and unregister when the
 * server was started with --allow-client-shm=false: UNSUPPORTED, which is
 * HTTP 501 and gRPC UNIMPLEMENTED. Status stays open, as in Triton. */
#define CLIENT_SHM_DISABLED_MESSAGE                                              \
    "Client shared memory is disabled. Start the server with "                   \
    "'--allow-client-shm=true' to enable."

/* Triton's message for a model (or version) that is not served, into buf
 * (version NULL: none named). HTTP answers it with 404, gRPC NOT_FOUND. */
void unknown_model_message(char *buf, size_t len, const char *name, const char *version);

/* The server's name, version and extensions (HTTP's v2, gRPC's
 * ServerMetadata); the caller owns the object. */
json_object *server_metadata_json(void);

/* 1 when name can be registered as far as the server is concerned (it is
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
