/*
 * One ModelInfer call (infer_call.h): the request's inputs and outputs into
 * infer_core's context, the model's run, the response; the twin of
 * http/infer.c.
 */
#include "grpc/infer_call.h"

#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/datatype.h"
#include "grpc/typed_contents.h"

namespace grpc_service {

/* The buffer is the call's own (gRPC passes it const only to say that it
 * stays gRPC's to destroy). */
void release_message(const grpc::ByteBuffer *wire)
{
    const_cast<grpc::ByteBuffer *>(wire)->Clear();
}

/* From one contiguous copy, so that each bytes field is allocated once at
 * its size: parsed from gRPC's many slices, protobuf grows a field past
 * 50 MB by doubling (a 60 MiB input took 143 MiB while it was parsed). The
 * slices are freed first. */
bool parse_request(const grpc::ByteBuffer *wire, pb::ModelInferRequest *req)
{
    grpc::Slice flat;
    bool copied = wire->DumpToSingleSlice(&flat).ok();
    release_message(wire);
    return copied && flat.size() <= INT32_MAX &&
           req->ParseFromArray(flat.begin(), static_cast<int>(flat.size()));
}

namespace {

/* Serialize resp into out as one slice of its exact size (gRPC's own
 * serializer writes 1 MiB slices); false when it is too large to send. */
bool serialize_response(const pb::ModelInferResponse &resp, grpc::ByteBuffer *out)
{
    size_t size = resp.ByteSizeLong();
    if (size > INT32_MAX)
        return false;
    void *buf = std::malloc(size ? size : 1);
    if (!buf)
        return false;
    resp.SerializeWithCachedSizesToArray(static_cast<uint8_t *>(buf));
    grpc::Slice slice(buf, size, std::free); /* owns buf from here on */
    grpc::ByteBuffer bytes(&slice, 1);
    out->Swap(&bytes);
    return true;
}

} // namespace

void InferCall::ask(CallOwner *s, grpc::ServerCompletionQueue *queue)
{
    new InferCall(s, queue); /* deleted by done, or by proceed when no call comes */
}

InferCall::InferCall(CallOwner *s, grpc::ServerCompletionQueue *queue)
    : service_(s), queue_(queue)
{
    service_->call_started(); /* before the ask, whose end another thread may see first */
    service_->ask(this, &ctx_, &message_, &writer_, queue_);
}

void InferCall::proceed(bool ok)
{
    /* Answered (sent, or the client is gone), or no call came before the
     * server stopped (nothing held or charged then): either way it is over. */
    if (answering_ || !ok) {
        done();
        return;
    }
    ask(service_, queue_); /* the next call may arrive while this one runs */
    service_->arrived(this);
}

void InferCall::start(const region_scope &scope, std::unique_ptr<pb::ModelInferRequest> req,
                      size_t charged)
{
    req_ = std::move(req);
    resp_ = std::make_unique<pb::ModelInferResponse>();
    id_ = req_->id();
    charged_ = charged;
    reset_ctx(scope);
    clock_gettime(CLOCK_MONOTONIC, &started_);
}

void InferCall::reset_ctx(region_scope scope)
{
    c_ = infer_ctx{};
    c_.scope = scope;
    c_.reg = service_->registry();
    c_.remote_turns = service_->turns();
    c_.held = &held_;
    c_.owner = this; /* for device_run_ended */
}

void InferCall::cancel()
{
    /* Nothing was acquired yet: run() takes the references. */
    finish(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        "the server is shutting down: the request was not started within the "
                        "drain time"));
}

void InferCall::finish(const grpc::Status &st)
{
    answering_ = true; /* read by a serving thread once the queue hands the call back */
    send_answer(service_->gate(), &writer_, reply_, st, this);
}

void InferCall::done()
{
    /* The response has been sent (or the call failed or was cancelled):
     * nothing reads or writes the call's regions any more. */
    refs_release_all(&held_);
    req_.reset(); /* when run did not: the call was cancelled or refused early */
    if (charged_) /* a call refused before it started charged nothing */
        service_->give_back(charged_);
    CallOwner *s = service_;
    delete this;
    s->call_done();
}

/* Where input in's bytes are, with Triton's rules and words: a window of
 * shared memory, its typed contents (never beside raw_input_contents), or
 * the next of raw_input_contents (*raw_used counts those taken). */
server_status InferCall::input_data(const pb::ModelInferRequest::InferInputTensor &in, tensor *t,
                                    int *raw_used)
{
    infer_ctx *c = &c_;
    const auto &req = *req_;
    shm_window w;
    server_status st = shm_window_from_params(c, in, &w);
    if (st)
        return st;
    if (w.region) {
        if (in.has_contents())
            return infer_fail(c, STATUS_INVALID_ARG,
                              "unexpected 'content' provided when using shared memory "
                              "for input tensor '%s' for model '%s'",
                              t->name, model_name(c->m));
        /* the window's bounds first, then its size: Triton's order */
        if ((st = infer_input_from_window(c, t, &w)) != 0)
            return st;
        return infer_check_input_size(c, t, w.byte_size);
    }
    if (in.has_contents()) {
        if (req.raw_input_contents_size() != 0)
            return infer_fail(c, STATUS_INVALID_ARG,
                              "contents field must not be specified when using "
                              "raw_input_contents for '%s' for model '%s'",
                              t->name, model_name(c->m));
        return input_from_contents(c, in, t);
    }
    if (*raw_used >= req.raw_input_contents_size())
        return infer_fail(c, STATUS_INVALID_ARG,
                          "unable to find data for input tensor '%s' for model '%s' "
                          "in request.",
                          t->name, model_name(c->m));
    const std::string &raw = req.raw_input_contents((*raw_used)++);
    if ((st = infer_check_input_size(c, t, raw.size())) != 0)
        return st;
    /* The request outlives the model's run (run frees it after). */
    t->data = const_cast<char *>(raw.data());
    t->byte_size = raw.size();
    return STATUS_OK;
}

server_status InferCall::parse_inputs()
{
    infer_ctx *c = &c_;
    const auto &req = *req_;
    if (req.inputs_size() == 0)
        return infer_fail(c, STATUS_INVALID_ARG, "the request needs at least one input");
    if (req.inputs_size() > INFER_MAX_INPUTS)
        return infer_fail(c, STATUS_INVALID_ARG,
                          "at most %d inputs are accepted", INFER_MAX_INPUTS);
    int raw_used = 0;
    for (int i = 0; i < req.inputs_size(); i++) {
        const auto &in = req.inputs(i);
        tensor *t = &c->in[i];
        c->n_in =
            static_cast<size_t>(i) + 1; /* counted first, so that a half-built one is freed too */
        t->name = in.name().c_str();
        t->datatype = in.datatype().c_str();
        if (datatype_size(t->datatype) < 0)
            return infer_fail(c, STATUS_INVALID_ARG,
                              "input '%s' has an unknown datatype '%s'", t->name,
                              t->datatype);
        if (in.shape_size() > TENSOR_MAX_DIMS)
            return infer_fail(c, STATUS_INVALID_ARG,
                              "shape has %d dimensions; at most %d are supported",
                              in.shape_size(), TENSOR_MAX_DIMS);
        t->ndims = in.shape_size();
        for (int d = 0; d < t->ndims; d++) {
            if (in.shape(d) < 0)
                return infer_fail(c, STATUS_INVALID_ARG,
                                  "'shape' must be an array of non-negative integers");
            t->shape[d] = in.shape(d);
        }
        server_status st = input_data(in, t, &raw_used);
        if (st)
            return st;
    }
    if (raw_used != req.raw_input_contents_size())
        return infer_fail(c, STATUS_INVALID_ARG,
                          "the request carries %d raw_input_contents but only %d inputs "
                          "read from them",
                          req.raw_input_contents_size(), raw_used);
    return STATUS_OK;
}

server_status InferCall::parse_outputs()
{
    infer_ctx *c = &c_;
    if (req_->outputs_size() == 0) { /* no list: every output, in raw_output_contents */
        for (size_t i = 0; i < model_n_outputs(c->m); i++) {
            server_status st = infer_place_output(c, i, PLACE_BINARY, nullptr);
            if (st)
                return st;
        }
        return STATUS_OK;
    }
    for (const auto &o : req_->outputs()) {
        int i = infer_output_index(c, o.name().c_str());
        if (i < 0 || c->out_place[i] != PLACE_NONE)
            return infer_fail(c, STATUS_INVALID_ARG,
                              "unexpected inference output '%s' for model '%s'",
                              o.name().c_str(), model_name(c->m));
        shm_window w;
        server_status st = shm_window_from_params(c, o, &w);
        if (st)
            return st;
        if ((st = infer_place_output(c, static_cast<size_t>(i), w.region ? PLACE_SHM : PLACE_BINARY,
                                     &w)) != 0)
            return st;
    }
    return STATUS_OK;
}

/* Every output requested, in the model's order, each with an entry in
 * raw_output_contents (empty for one in shared memory, whose bytes are in
 * the client's region), as Triton sends them: clients index the two lists
 * together. */
void InferCall::build_response()
{
    infer_ctx *c = &c_;
    resp_->set_model_name(model_name(c->m));
    resp_->set_model_version("1");
    if (!id_.empty())
        resp_->set_id(id_);
    for (size_t i = 0; i < model_n_outputs(c->m); i++) {
        if (c->out_place[i] == PLACE_NONE)
            continue;
        const tensor &t = c->out[i];
        auto *o = resp_->add_outputs();
        o->set_name(t.name);
        o->set_datatype(t.datatype);
        for (int d = 0; d < t.ndims; d++)
            o->add_shape(t.shape[d]);
        std::string *raw = resp_->add_raw_output_contents();
        if (c->out_place[i] == PLACE_BINARY)
            raw->assign(static_cast<const char *>(t.data), t.byte_size);
    }
}

void InferCall::run()
{
    run_here(INFER_ON_WORKER);
}

bool InferCall::run_inline(infer_thread where)
{
    if (!run_here(where))
        return false;
    infer_count_inline();
    return true;
}

bool InferCall::run_here(infer_thread where)
{
    infer_ctx *c = &c_;
    c->on_transport = where;
    c->m = model_find_version(req_->model_name().c_str(), req_->model_version().c_str());
    c->request_id = id_.c_str();
    if (!c->m) {
        finish(unknown_model(req_->model_name(), req_->model_version()));
        return true;
    }
    /* A model that cannot run now is refused before anything is parsed or
     * acquired (NOT_READY: common/status.h says what Triton answers). */
    if (server_status st = infer_ready(c)) {
        infer_finish(c, st, &started_);
        finish(grpc::Status(grpc_code_of(st), c->err));
        return true;
    }
    const tensor *ordered[INFER_MAX_INPUTS];
    server_status st;
    if (!(st = parse_inputs()) && !(st = infer_bind(c, ordered)) && !(st = parse_outputs())) {
        if (where != INFER_ON_TRANSPORT_DEVICE)
            st = infer_compute(c, ordered);
        else if ((st = infer_compute_start(c, ordered, device_run_ended)) == INFER_STARTED)
            return true; /* *this may be gone already: device_run_ended answers */
    }
    if (st == INFER_DEFERRED) { /* back to the state start left, for a worker */
        infer_finish(c, st, &started_);
        refs_release_all(&held_); /* a GPU model's regions, acquired before it was deferred */
        reset_ctx(c_.scope); /* by value: c_ is cleared first */
        return false;
    }
    answer(st);
    return true;
}

void InferCall::device_run_ended(infer_ctx *c, server_status st)
{
    static_cast<InferCall *>(c->owner)->answer(infer_compute_end(c, st));
}

void InferCall::answer(server_status st)
{
    infer_ctx *c = &c_;
    if (!st)
        build_response(); /* before the request goes: the tensors may point into it */
    infer_finish(c, st, &started_);
    grpc::Status status = st ? grpc::Status(grpc_code_of(st), c->err) : grpc::Status::OK;
    req_.reset(); /* freed before the response is serialized, which takes as much again */
    if (status.ok() && !serialize_response(*resp_, &reply_))
        status = grpc::Status(grpc::StatusCode::INTERNAL,
                              "the response is larger than gRPC can send (2 GiB)");
    resp_.reset(); /* serialized: gRPC sends its copy */
    finish(status); /* the last touch of *this: done may run at once */
}

} // namespace grpc_service
