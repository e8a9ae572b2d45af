/*
 * The gRPC service's conversions (convert.cc), for service.cc only: Triton's
 * gRPC statuses, the caller of a call, the models' descriptions as protobuf,
 * and a tensor's shared-memory parameters.
 */
#ifndef SERVER_GRPC_CONVERT_H
#define SERVER_GRPC_CONVERT_H

#include <grpcpp/grpcpp.h>

#include <initializer_list>
#include <string>
#include <utility>

#include <shmreg/shmreg.h>

#include "common/status.h"
#include "core/access.h"
#include "core/infer_core.h"
#include "core/region_scope.h"
#include "inference.grpc.pb.h"
#include "models/models.h"

namespace grpc_service {

namespace pb = inference;

/* The gRPC code of st: its column of common/status.h's table, which gRPC
 * reads here only; INTERNAL for a value of no row. */
grpc::StatusCode grpc_code_of(server_status st);
/* The library's failure e, with the library's message in the caller's names. */
grpc::Status status_of(const region_scope &scope, shmreg_err e);

/* The caller of a call, from its metadata (access.h): the value of
 * --grpc-restricted-protocol's key, and the "authorization" bearer token. */
caller caller_of(const grpc::ServerContextBase &ctx, const access_options &a);
/* Whether who may use the shared-memory calls; the refusal in *st. */
bool refused(const caller &who, grpc::Status *st);
/* NOT_FOUND for a model (version empty: none named) that is not served. */
grpc::Status unknown_model(const std::string &name, const std::string &version);

/* Strings a client sends are read as C strings, which a NUL byte (protobuf
 * strings may hold one) would cut short: "r\0junk" would name region r.
 * INVALID_ARGUMENT naming the first field that holds one, OK when none. */
using named_string = std::pair<const char *, const std::string *>;
grpc::Status refuse_nul(std::initializer_list<named_string> fields);
/* The same for every string of an inference request: names, datatypes,
 * parameters (their keys and string values), the model, version and id. */
grpc::Status refuse_nul(const pb::ModelInferRequest &req);

/* The models' and the server's descriptions (models.h, triton.h: the same
 * structs HTTP renders as JSON) as protobuf. */
void server_metadata_pb(pb::ServerMetadataResponse *resp);
void model_metadata_pb(const model *m, pb::ModelMetadataResponse *resp);
/* book: the caller's book of statistics (models.h, scope_stats_book). */
void model_statistics_pb(const model *m, size_t book, pb::ModelStatistics *out);
void model_config_pb(const model *m, pb::ModelConfig *out);

/* The window a tensor's parameters place it in (w->region NULL: none), read
 * with Triton's rules and words; STATUS_OK, or the infer_fail status. */
server_status shm_window_from_params(infer_ctx *c,
                                     const pb::ModelInferRequest::InferInputTensor &t,
                                     shm_window *w);
server_status shm_window_from_params(infer_ctx *c,
                                     const pb::ModelInferRequest::InferRequestedOutputTensor &t,
                                     shm_window *w);

} // namespace grpc_service

#endif
