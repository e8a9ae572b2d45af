/*
 * Triton's answers, the same for every adapter (HTTP, gRPC): the words for
 * a model that is not served and for client shared memory that is disabled,
 * which region names are accepted, unregister's rule, and the server's
 * metadata (the statuses are common/status.h's). Clients (tritonclient,
 * perf_analyzer, Triton's own tests) test for these, so they live once.
 */
#ifndef SERVER_TRITON_H
#define SERVER_TRITON_H

#include <stddef.h>

#include <shmreg/shmreg.h>

#include "core/region_scope.h"
#include "common/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Triton 2.73's answer (word for word) to register and unregister when the
 * server was started with --allow-client-shm=false: STATUS_UNSUPPORTED
 * (Triton's UNSUPPORTED). Status stays open, as in Triton. */
#define CLIENT_SHM_DISABLED_MESSAGE                                              \
    "Client shared memory is disabled. Start the server with "                   \
    "'--allow-client-shm=true' to enable."

/* Triton's message for a model (or version) that is not served, into buf
 * (version NULL: none named), answered with STATUS_NOT_FOUND. */
void unknown_model_message(char *buf, size_t len, const char *name, const char *version);

/* The server's name, version and extensions (HTTP's v2, gRPC's
 * ServerMetadata), which each adapter renders. Strings are constant. */
typedef struct server_metadata {
    const char *name, *version;
    const char *extensions[5];
    size_t n_extensions;
} server_metadata;
void server_get_metadata(server_metadata *out);

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
