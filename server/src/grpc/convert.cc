/*
 * What the gRPC service converts, kept apart from the service itself
 * (service.cc): the server's statuses into gRPC codes (Triton's, its
 * GrpcStatusUtil, by the gRPC column of common/status.h's table), a call's
 * metadata into its caller (access.h), the models' JSON (built once by
 * models.c, shared with HTTP) into protobuf, and a tensor's shared-memory
 * parameters into a window.
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

/* -------------------------------------------- JSON (shared with HTTP) -> pb */

namespace {

/* The models' metadata and statistics are built once, as JSON, by models.c
 * for HTTP; gRPC reads its fields from the same objects. */
struct json_ref {
    json_object *j;
    explicit json_ref(json_object *v) : j(v) {}
    ~json_ref() { json_object_put(j); }
    json_ref(const json_ref &) = delete;
    json_ref &operator=(const json_ref &) = delete;
};

const json_object *member(const json_object *o, const char *key)
{
    return json_object_object_get(o, key);
}

std::string json_str(const json_object *o, const char *key)
{
    const char *s = json_object_get_string(const_cast<json_object *>(member(o, key)));
    return s ? s : "";
}

uint64_t json_u64(const json_object *o, const char *key)
{
    return json_object_get_uint64(member(o, key));
}

int64_t json_i64(const json_object *o, const char *key)
{
    return json_object_get_int64(member(o, key));
}

/* f(element) for each element of the array list (none when it is not one). */
template <typename F> void each(const json_object *list, F f)
{
    if (!json_object_is_type(list, json_type_array))
        return;
    for (size_t i = 0; i < json_object_array_length(list); i++)
        f(static_cast<const json_object *>(json_object_array_get_idx(list, i)));
}

void tensor_metadata(
    const json_object *list,
    google::protobuf::RepeatedPtrField<pb::ModelMetadataResponse::TensorMetadata> *out)
{
    each(list, [out](const json_object *t) {
        auto *m = out->Add();
        m->set_name(json_str(t, "name"));
        m->set_datatype(json_str(t, "datatype"));
        each(member(t, "shape"), [m](const json_object *dim) { m->add_shape(json_object_get_int64(dim)); });
    });
}

void duration(const json_object *stats, const char *key, pb::StatisticDuration *out)
{
    const json_object *d = member(stats, key);
    out->set_count(json_u64(d, "count"));
    out->set_ns(json_u64(d, "ns"));
}

} // namespace

void model_statistics(const model *m, size_t book, pb::ModelStatistics *out)
{
    json_ref j(model_stats_json(m, book));
    out->set_name(json_str(j.j, "name"));
    out->set_version(json_str(j.j, "version"));
    out->set_last_inference(json_u64(j.j, "last_inference"));
    out->set_inference_count(json_u64(j.j, "inference_count"));
    out->set_execution_count(json_u64(j.j, "execution_count"));
    const json_object *s = member(j.j, "inference_stats");
    pb::InferStatistics *is = out->mutable_inference_stats();
    duration(s, "success", is->mutable_success());
    duration(s, "fail", is->mutable_fail());
    duration(s, "queue", is->mutable_queue());
    duration(s, "compute_input", is->mutable_compute_input());
    duration(s, "compute_infer", is->mutable_compute_infer());
    duration(s, "compute_output", is->mutable_compute_output());
    duration(s, "cache_hit", is->mutable_cache_hit());
    duration(s, "cache_miss", is->mutable_cache_miss());
}

/* Triton's model configuration of m, from the JSON the HTTP side returns. */
void model_config(const model *m, pb::ModelConfig *out)
{
    json_ref j(model_config_json(m));
    out->set_name(json_str(j.j, "name"));
    out->set_platform(json_str(j.j, "platform"));
    out->set_backend(json_str(j.j, "backend"));
    out->set_max_batch_size(static_cast<int32_t>(json_i64(j.j, "max_batch_size")));
    each(member(j.j, "input"), [out](const json_object *t) {
        pb::ModelInput *in = out->add_input();
        in->set_name(json_str(t, "name"));
        pb::DataType type = pb::TYPE_INVALID;
        pb::DataType_Parse(json_str(t, "data_type"), &type);
        in->set_data_type(type);
        pb::ModelInput::Format format = pb::ModelInput::FORMAT_NONE;
        pb::ModelInput::Format_Parse(json_str(t, "format"), &format);
        in->set_format(format);
        each(member(t, "dims"), [in](const json_object *dim) { in->add_dims(json_object_get_int64(dim)); });
    });
    each(member(j.j, "output"), [out](const json_object *t) {
        pb::ModelOutput *o = out->add_output();
        o->set_name(json_str(t, "name"));
        pb::DataType type = pb::TYPE_INVALID;
        pb::DataType_Parse(json_str(t, "data_type"), &type);
        o->set_data_type(type);
        each(member(t, "dims"), [o](const json_object *dim) { o->add_dims(json_object_get_int64(dim)); });
    });
    each(member(j.j, "instance_group"), [out](const json_object *t) {
        pb::ModelInstanceGroup *g = out->add_instance_group();
        g->set_count(static_cast<int32_t>(json_i64(t, "count")));
        pb::ModelInstanceGroup::Kind kind = pb::ModelInstanceGroup::KIND_AUTO;
        pb::ModelInstanceGroup::Kind_Parse(json_str(t, "kind"), &kind);
        g->set_kind(kind);
    });
    out->mutable_model_transaction_policy()->set_decoupled(
        json_object_get_boolean(member(member(j.j, "model_transaction_policy"), "decoupled")));
}

void server_metadata(pb::ServerMetadataResponse *resp)
{
    json_ref j(server_metadata_json());
    resp->set_name(json_str(j.j, "name"));
    resp->set_version(json_str(j.j, "version"));
    each(member(j.j, "extensions"), [resp](const json_object *e) {
        resp->add_extensions(json_object_get_string(const_cast<json_object *>(e)));
    });
}

void model_metadata(const model *m, pb::ModelMetadataResponse *resp)
{
    json_ref j(model_metadata_json(m));
    resp->set_name(json_str(j.j, "name"));
    each(member(j.j, "versions"), [resp](const json_object *v) {
        resp->add_versions(json_object_get_string(const_cast<json_object *>(v)));
    });
    resp->set_platform(json_str(j.j, "platform"));
    tensor_metadata(member(j.j, "inputs"), resp->mutable_inputs());
    tensor_metadata(member(j.j, "outputs"), resp->mutable_outputs());
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
