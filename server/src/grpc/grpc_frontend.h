/*
 * The KServe v2 gRPC service (inference.GRPCInferenceService, proto/
 * inference.proto) beside the HTTP server, in the same process and over the
 * same registry and models: service.cc (conversions in convert.cc), C++17, callable from main.c.
 *
 * Inference runs on the service's own worker threads, never on gRPC's, and
 * each call's region references are released from the call's OnDone, after
 * its response has been sent: the same rule as HTTP's completion callback.
 */
#ifndef SERVER_GRPC_FRONTEND_H
#define SERVER_GRPC_FRONTEND_H

#include <shmreg/shmreg.h>

#include "common/byte_budget.h"
#include "options.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct grpc_frontend grpc_frontend;

/* Listen on opts->host:opts->grpc_port (which must not be 0). Each
 * ModelInfer message is charged to held (the bytes of gRPC requests the
 * server holds, --max-buffered-mb) until its call is done; one that does
 * not fit is answered RESOURCE_EXHAUSTED at once. NULL with a message on stderr when
 * the port cannot be bound. */
grpc_frontend *grpc_frontend_start(const server_options *opts, shmreg_registry *reg,
                                   byte_budget *held);
/* The port actually bound. */
unsigned grpc_frontend_port(const grpc_frontend *g);
/* Refuse new calls, let the calls in flight finish (up to opts->drain_s,
 * then they are cancelled), wait until every call's references are
 * released, stop the threads and free g. NULL is a no-op. */
void grpc_frontend_stop(grpc_frontend *g);

#ifdef __cplusplus
}
#endif

#endif
