/*
 * What the core and the models answer, in no protocol's words: one status
 * per row of the table below, which each adapter maps once (HTTP by its
 * column in http/reply.c, gRPC by its column in grpc/convert.cc), as
 * Triton's frontends map its TRITONSERVER_Error codes.
 */
#ifndef SERVER_STATUS_H
#define SERVER_STATUS_H

#include <shmreg/shmreg.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The only table of the server's statuses: X(name, HTTP status, gRPC status
 * code name). Triton's statuses where Triton has one, since clients test for
 * them. docs/errors.md prints it; python/shmreg/kserve/status.py's copy of the HTTP
 * column is tested against it.
 *
 * STATUS_LIBRARY_MAP has one row per library error, named as the library
 * names it without SHMREG_ERR_: status_from_shmreg answers that row, and a new
 * library error is a -Wswitch warning there. ALREADY_EXISTS is 400 over
 * HTTP; a region in use (BUSY) is INTERNAL over gRPC, as Triton refused to
 * unregister one; FAULT is the client truncating its own region. */
#define STATUS_LIBRARY_MAP(X)                                                                  \
    X(INVALID_ARG, 400, INVALID_ARGUMENT)                                                      \
    X(NOT_FOUND, 404, NOT_FOUND)                                                               \
    X(ALREADY_EXISTS, 400, ALREADY_EXISTS)                                                     \
    X(OUT_OF_BOUNDS, 400, INVALID_ARGUMENT)                                                    \
    X(BUSY, 400, INTERNAL)                                                                     \
    X(SYSTEM, 500, INTERNAL)                                                                   \
    X(CUDA, 500, INTERNAL)                                                                     \
    X(UNSUPPORTED, 501, UNIMPLEMENTED)                                                         \
    X(NO_MEMORY, 507, RESOURCE_EXHAUSTED)                                                      \
    X(WRONG_KIND, 404, NOT_FOUND)                                                              \
    X(FAULT, 400, INVALID_ARGUMENT)

/* The server's own answers. UNAUTHENTICATED: --tenants and no known token;
 * RESTRICTED: a request without the header of --http-restricted-api or
 * --grpc-restricted-protocol (Triton: 403, and UNAVAILABLE over gRPC);
 * TOO_LARGE: past --max-body-mb; OVER_LIMIT: a configured limit or share,
 * which the client can wait out (not the server's lack of memory, 507);
 * INTERNAL: the server's own failure; UNAVAILABLE: shutting down, or more
 * held than --max-buffered-mb; NOT_READY: a model that cannot run now
 * (Triton answers a model that is not ready with 400 over HTTP, and an
 * inference on one with UNAVAILABLE over gRPC). */
#define STATUS_SERVER_MAP(X)                                                                   \
    X(OK, 200, OK)                                                                             \
    X(NOT_READY, 400, UNAVAILABLE)                                                             \
    X(UNAUTHENTICATED, 401, UNAUTHENTICATED)                                                   \
    X(RESTRICTED, 403, UNAVAILABLE)                                                            \
    X(TOO_LARGE, 413, RESOURCE_EXHAUSTED)                                                      \
    X(OVER_LIMIT, 429, RESOURCE_EXHAUSTED)                                                     \
    X(INTERNAL, 500, INTERNAL)                                                                 \
    X(UNAVAILABLE, 503, UNAVAILABLE)

#define STATUS_MAP(X) STATUS_SERVER_MAP(X) STATUS_LIBRARY_MAP(X)

/* OK is the first row, so STATUS_OK is 0: `if (st)` asks whether st failed. */
typedef enum server_status {
#define STATUS_ENUM(name, http, grpc) STATUS_##name,
    STATUS_MAP(STATUS_ENUM)
#undef STATUS_ENUM
    STATUS_COUNT,
    /* Values from STATUS_PRIVATE on are no answer: a step's word to its
     * caller (INFER_DEFERRED, MODEL_BUSY), which never reaches a client. */
    STATUS_PRIVATE = 0x40,
    STATUS_PRIVATE_LAST_ = 0x7f
} server_status;

/* The step-to-caller words above the table (infer_core.h, model_ops.h). */
#define STATUS_PRIVATE_WORD(n) ((server_status)(STATUS_PRIVATE + (n)))

/* The status of the library's failure e with its message (NULL: none): its
 * row, except STATUS_OVER_LIMIT for a registration or copy over a configured
 * limit, which the client can wait out (it is not the server's lack of
 * memory, NO_MEMORY); STATUS_INTERNAL for a code the table does not know. */
server_status status_from_shmreg(shmreg_err e, const char *message);
/* "INVALID_ARG" for STATUS_INVALID_ARG; NULL for a value of no row. */
const char *status_name(server_status st);

#ifdef __cplusplus
}
#endif

#endif
