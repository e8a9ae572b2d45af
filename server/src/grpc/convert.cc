/*
 * What the gRPC service converts, kept apart from the service itself
 * (service.cc): the server's statuses into gRPC codes (Triton's, its
 * GrpcStatusUtil, by the gRPC column of common/status.h's table), a call's
 * metadata into its caller (access.h), the models' and the server's
 * descriptions (models.h, triton.h) into protobuf, and a tensor's
 * shared-memory parameters into a window.
 */
#include "grpc/convert.h"

#include <cstdint>
#include <cstdio>

#include "core/triton.h"

namespace grpc_service {

grpc::StatusCode grpc_code_of(server_status st)
{
    switch (st) {
#define STATUS_GRPC_CASE(name, http, code) \
    case STATUS_##name: return grpc::StatusCode::code;
        STATUS_MAP(STATUS_GRPC_CASE)
#undef STATUS_GRPC_CASE
    default: return grpc::StatusCode::INTERNAL;
    }
}

/* The library's failure, with the library's message. */
grpc::Status status_of(const region_scope &, shmreg_err e)
{
    const char *message = shmreg_last_error();
    return grpc::Status(grpc_code_of(status_from_shmreg(e, message)),
                        message[0] ? message : shmreg_err_description(e));
}


/* The caller of a call, from its metadata (access.h): the value of
 * --grpc-restricted-protocol's key, and the "authorization" bearer token. */
caller caller_of(const grpc::ServerContextBase &ctx, const access_options &a)
{
    const auto &md = ctx.client_metadata();
    auto value = a.grpc.header ? md.find(a.grpc.header) : md.end();
    auto auth = md.find("authorization");
    caller who;
    access_caller(&a, &a.grpc, value != md.end() ? value->second.data() : nullptr,
                  value != md.end() ? value->second.size() : 0,
                  auth != md.end() ? auth->second.data() : nullptr,
                  auth != md.end() ? auth->second.size() : 0, &who);
    return who;
}

/* Whether who may use the shared-memory calls; the refusal in *st. */
bool refused(const caller &who, grpc::Status *st)
{
    char why[256];
    server_status refusal = access_refusal(&who, why, sizeof why);
    if (refusal != STATUS_OK)
        *st = grpc::Status(grpc_code_of(refusal), why);
    return refusal != STATUS_OK;
}

grpc::Status unknown_model(const std::string &name, const std::string &version)
{
    char message[600];
    unknown_model_message(message, sizeof message, name.c_str(),
                          version.empty() ? nullptr : version.c_str());
    return grpc::Status(grpc::StatusCode::NOT_FOUND, message);
}

/* ------------------------------------------------ a NUL in a client's string */

namespace {

bool holds_nul(const std::string &s)
{
    return s.find('\0') != std::string::npos;
}

/* what: the field as the message names it ("'id'", "a parameter's name"). */
grpc::Status nul_in(const std::string &what)
{
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        what + " holds a NUL character, which no name, key or parameter may "
                               "contain");
}

/* A map of parameters: its keys, and its string values (named by their key). */
grpc::Status params_nul(const google::protobuf::Map<std::string, pb::InferParameter> &params)
{
    for (const auto &p : params) {
        if (holds_nul(p.first))
            return nul_in("a parameter's name");
        if (p.second.parameter_choice_case() == pb::InferParameter::kStringParam &&
            holds_nul(p.second.string_param()))
            return nul_in("'" + p.first + "'");
    }
    return grpc::Status::OK;
}

} // namespace

grpc::Status refuse_nul(std::initializer_list<named_string> fields)
{
    for (const auto &f : fields)
        if (holds_nul(*f.second))
            return nul_in(std::string("'") + f.first + "'");
    return grpc::Status::OK;
}

grpc::Status refuse_nul(const pb::ModelInferRequest &req)
{
    grpc::Status st = refuse_nul({{"model_name", &req.model_name()},
                                  {"model_version", &req.model_version()},
                                  {"id", &req.id()}});
    if (st.ok())
        st = params_nul(req.parameters());
    for (int i = 0; st.ok() && i < req.inputs_size(); i++) {
        const auto &in = req.inputs(i);
        st = refuse_nul({{"inputs.name", &in.name()}, {"inputs.datatype", &in.datatype()}});
        if (st.ok())
            st = params_nul(in.parameters());
    }
    for (int i = 0; st.ok() && i < req.outputs_size(); i++) {
        st = refuse_nul({{"outputs.name", &req.outputs(i).name()}});
        if (st.ok())
            st = params_nul(req.outputs(i).parameters());
    }
    return st;
}

/* ------------------------------------- the models' descriptions -> protobuf */

namespace {

void tensor_metadata(
    const model_tensor_info *t, size_t n,
    google::protobuf::RepeatedPtrField<pb::ModelMetadataResponse::TensorMetadata> *out)
{
    for (size_t i = 0; i < n; i++) {
        auto *m = out->Add();
        m->set_name(t[i].name);
        m->set_datatype(t[i].datatype);
        for (int d = 0; d < t[i].ndims; d++)
            m->add_shape(t[i].dims[d]);
    }
}

void duration(const model_duration &d, pb::StatisticDuration *out)
{
    out->set_count(d.count);
    out->set_ns(d.ns);
}

/* A config's data_type: the datatype's "TYPE_" name in the enum. */
pb::DataType config_type(const char *datatype)
{
    pb::DataType type = pb::TYPE_INVALID;
    pb::DataType_Parse(std::string("TYPE_") + datatype, &type);
    return type;
}

template <typename Tensor> void config_tensor(const model_tensor_info &t, Tensor *out)
{
    out->set_name(t.name);
    out->set_data_type(config_type(t.datatype));
    for (int d = 0; d < t.ndims; d++)
        out->add_dims(t.dims[d]);
}

} // namespace

void model_statistics_pb(const model *m, size_t book, pb::ModelStatistics *out)
{
    model_statistics st;
    model_get_statistics(m, book, &st);
    out->set_name(st.name);
    out->set_version(st.version);
    out->set_last_inference(st.last_inference);
    out->set_inference_count(st.inference_count);
    out->set_execution_count(st.execution_count);
    pb::InferStatistics *is = out->mutable_inference_stats();
    duration(st.success, is->mutable_success());
    duration(st.fail, is->mutable_fail());
    duration(st.queue, is->mutable_queue());
    duration(st.compute_input, is->mutable_compute_input());
    duration(st.compute_infer, is->mutable_compute_infer());
    duration(st.compute_output, is->mutable_compute_output());
    duration(st.cache_hit, is->mutable_cache_hit());
    duration(st.cache_miss, is->mutable_cache_miss());
}

/* Triton's model configuration of m. The GPU model's devices and
 * parameters, which HTTP's config answer lists, are not filled in here. */
void model_config_pb(const model *m, pb::ModelConfig *out)
{
    model_config cfg;
    model_get_config(m, &cfg);
    out->set_name(cfg.name);
    out->set_platform(cfg.platform);
    out->set_backend(cfg.backend);
    out->set_max_batch_size(cfg.max_batch_size);
    pb::ModelInput::Format format = pb::ModelInput::FORMAT_NONE;
    pb::ModelInput::Format_Parse(cfg.format, &format);
    for (size_t i = 0; i < cfg.n_inputs; i++) {
        pb::ModelInput *in = out->add_input();
        config_tensor(cfg.inputs[i], in);
        in->set_format(format);
    }
    for (size_t i = 0; i < cfg.n_outputs; i++)
        config_tensor(cfg.outputs[i], out->add_output());
    pb::ModelInstanceGroup *g = out->add_instance_group();
    g->set_count(cfg.group.count);
    pb::ModelInstanceGroup::Kind kind = pb::ModelInstanceGroup::KIND_AUTO;
    pb::ModelInstanceGroup::Kind_Parse(cfg.group.kind, &kind);
    g->set_kind(kind);
    out->mutable_model_transaction_policy()->set_decoupled(cfg.decoupled != 0);
}

void server_metadata_pb(pb::ServerMetadataResponse *resp)
{
    server_metadata md;
    server_get_metadata(&md);
    resp->set_name(md.name);
    resp->set_version(md.version);
    for (size_t i = 0; i < md.n_extensions; i++)
        resp->add_extensions(md.extensions[i]);
}

void model_metadata_pb(const model *m, pb::ModelMetadataResponse *resp)
{
    model_metadata md;
    model_get_metadata(m, &md);
    resp->set_name(md.name);
    for (size_t i = 0; i < md.n_versions; i++)
        resp->add_versions(md.versions[i]);
    resp->set_platform(md.platform);
    tensor_metadata(md.inputs, md.n_inputs, resp->mutable_inputs());
    tensor_metadata(md.outputs, md.n_outputs, resp->mutable_outputs());
}

/* The parameters of a tensor that place it in shared memory, read with
 * Triton's rules and words (its gRPC ParseSharedMemoryParams): the region is
 * a string_param, offset and byte size are int64_params, and their bits are
 * the protocol's unsigned 64-bit values (an offset of 2^64 - 32 travels as
 * -32), so that every value reaches the library's bounds and overflow checks. */
namespace {

template <typename Tensor>
server_status window_from_params(infer_ctx *c, const Tensor &t, shm_window *w)
{
    *w = shm_window{};
    const auto &params = t.parameters();
    const char *name = t.name().c_str();
    auto region = params.find("shared_memory_region");
    if (region != params.end()) {
        if (region->second.parameter_choice_case() != pb::InferParameter::kStringParam)
            return infer_fail(c, STATUS_INVALID_ARG,
                              "invalid value type for 'shared_memory_region' parameter "
                              "for tensor '%s', expected string_param.",
                              name);
        w->region = region->second.string_param().c_str();
    }
    static const char *const keys[] = {"shared_memory_offset", "shared_memory_byte_size"};
    size_t *values[] = {&w->offset, &w->byte_size};
    bool has_size = false;
    for (int k = 0; k < 2; k++) {
        auto it = params.find(keys[k]);
        if (it == params.end())
            continue;
        if (!w->region)
            return infer_fail(c, STATUS_INVALID_ARG,
                              "'%s' can not be specified without 'shared_memory_region' "
                              "parameter for tensor '%s'",
                              keys[k], name);
        if (it->second.parameter_choice_case() != pb::InferParameter::kInt64Param)
            return infer_fail(c, STATUS_INVALID_ARG,
                              "invalid value type for '%s' parameter for tensor '%s', "
                              "expected int64_param.",
                              keys[k], name);
        *values[k] = static_cast<size_t>(static_cast<uint64_t>(it->second.int64_param()));
        has_size |= k == 1;
    }
    if (w->region && !has_size)
        return infer_fail(c, STATUS_INVALID_ARG,
                          "'shared_memory_byte_size' must be specified along with "
                          "'shared_memory_region' parameter for tensor '%s'",
                          name);
    return STATUS_OK;
}


} // namespace

server_status shm_window_from_params(infer_ctx *c, const pb::ModelInferRequest::InferInputTensor &t,
                                     shm_window *w)
{
    return window_from_params(c, t, w);
}

server_status shm_window_from_params(infer_ctx *c,
                                     const pb::ModelInferRequest::InferRequestedOutputTensor &t,
                                     shm_window *w)
{
    return window_from_params(c, t, w);
}

} // namespace grpc_service
