/*
 * One ModelInfer call of the gRPC service: the twin of http/infer.c over
 * the same inference path (infer_core.h). ModelInfer is a raw method: the
 * service charges each message by its length before it is parsed, parses it
 * (parse_request) and starts the call; the call serializes its own response.
 *
 * A call's life:
 *   ask (a serving thread)      -> asked of gRPC before it arrives, on the
 *                                  service's completion queue
 *   arrived (a serving thread)  -> the next call is asked for; the service
 *                                  charges the message to the budget, parses
 *                                  it, and runs the call at once (run_inline:
 *                                  a short model's call that names no region,
 *                                  or a GPU model's call whose tensors the
 *                                  device reaches where they lie: handed to
 *                                  an instance) or queues it to a worker
 *   InferCall::run (a worker)   -> acquire the regions the call names
 *                                  (refs_hold), run the model, build the
 *                                  response, free the request, serialize
 *                                  the response, finish
 *   device_run_ended            -> a GPU model's run handed over from the
 *                                  serving thread has ended (on that thread,
 *                                  or on the instance's finishing thread):
 *                                  the response, as run's
 *   done (a serving thread)     -> after the response has been sent, or the
 *                                  call failed or was cancelled: releases
 *                                  every reference the call took
 */
#ifndef SERVER_GRPC_INFER_CALL_H
#define SERVER_GRPC_INFER_CALL_H

#include <grpcpp/grpcpp.h>

#include <cstddef>
#include <ctime>
#include <memory>
#include <string>

#include <shmreg/shmreg.h>

#include "core/infer_core.h"
#include "core/refs.h"
#include "core/region_scope.h"
#include "grpc/convert.h"
#include "grpc/queue_call.h"

namespace grpc_service {

class InferCall;

/* What a call needs of the service that made it (service.cc's Service). */
class CallOwner {
  public:
    virtual shmreg_registry *registry() const = 0;
    /* The turns of the service's workers for remote copies (remote_turns.h). */
    virtual remote_turns *turns() const = 0;
    /* Ask gRPC for the next ModelInfer call on queue, into call's parts. */
    virtual void ask(InferCall *call, grpc::ServerContext *ctx, grpc::ByteBuffer *message,
                     grpc::ServerAsyncResponseWriter<grpc::ByteBuffer> *writer,
                     grpc::ServerCompletionQueue *queue) = 0;
    /* A call has arrived: the service starts it (InferCall::start) or
     * refuses it (InferCall::refuse). */
    virtual void arrived(InferCall *call) = 0;
    /* Give back bytes the service charged for a call's request to what the
     * server holds of gRPC requests (--max-buffered-mb). */
    virtual void give_back(size_t bytes) = 0;
    /* A call between its ask and its deletion: the service's stop waits
     * until there is none. */
    virtual void call_started() = 0;
    virtual void call_done() = 0;
    /* Where every answer passes (answer_gate.h). */
    virtual AnswerGate &gate() = 0;

  protected:
    ~CallOwner() = default;
};

/* Free what a received message's buffer holds now, rather than when gRPC
 * destroys the call: its slices are charged to gRPC's resource quota until
 * then. wire is not read again. */
void release_message(const grpc::ByteBuffer *wire);

/* Parse a received ModelInferRequest into req, freeing wire's slices
 * (release_message) on the way; false when it is not one. */
bool parse_request(const grpc::ByteBuffer *wire, pb::ModelInferRequest *req);

/* One ModelInfer call, asked of gRPC by ask; it deletes itself once its
 * answer has been sent (done). */
class InferCall final : public QueueTag {
  public:
    /* Ask gRPC for the next ModelInfer call on queue, for s. */
    static void ask(CallOwner *s, grpc::ServerCompletionQueue *queue);
    /* The queue hands the call back: arrived, or its answer sent. */
    void proceed(bool ok) override;

    /* Once arrived, for the service: */
    const grpc::ServerContext &context() const { return ctx_; }
    size_t message_bytes() const { return message_.Length(); }
    /* Free the message's buffers; parse it into req first (parse_request),
     * false when it is not a ModelInferRequest. */
    void drop_message() { release_message(&message_); }
    bool parse_message(pb::ModelInferRequest *req) { return parse_request(&message_, req); }
    /* Answer st: a call refused before it started. */
    void refuse(const grpc::Status &st) { finish(st); }
    /* The call is the service's to run from here: req parsed from its
     * message, in scope. charged: the bytes of req taken from the service's
     * budget, given back in done: run frees req once the response is built,
     * and the charge then stands for the response. */
    void start(const region_scope &scope, std::unique_ptr<pb::ModelInferRequest> req,
               size_t charged);
    /* On a worker: everything up to finish. After finish the call belongs
     * to the queue again, so nothing here touches *this afterwards. */
    void run();
    /* run on the serving thread that received the call, for a call
     * infer_runs_inline (where: INFER_ON_TRANSPORT) or
     * infer_device_runs_inline (INFER_ON_TRANSPORT_DEVICE) allows: true when
     * it ran (finish called); false when it cannot run here
     * (INFER_DEFERRED): nothing is held or counted, and the call is as it
     * was, for run on a worker. */
    bool run_inline(infer_thread where);
    /* Shutdown, past the drain time: answer UNAVAILABLE without running. */
    void cancel();

  private:
    InferCall(CallOwner *s, grpc::ServerCompletionQueue *queue);
    ~InferCall() = default;
    /* Send the answer (reply_ when st is OK): the last touch of *this. */
    void finish(const grpc::Status &st);
    /* After the answer has been sent, or could not be. */
    void done();
    bool run_here(infer_thread where);
    /* c_ as a call starts: nothing parsed or held, the caller's scope. */
    void reset_ctx(region_scope scope);
    /* The end of a run handed to the device from the transport's thread,
     * on the thread where it ended. */
    static void device_run_ended(infer_ctx *c, server_status st);
    /* The response for the request's result st, built and sent: the last
     * touch of *this. */
    void answer(server_status st);
    server_status input_data(const pb::ModelInferRequest::InferInputTensor &in, tensor *t,
                             int *raw_used);
    server_status parse_inputs();
    server_status parse_outputs();
    void build_response();

    CallOwner *service_;
    grpc::ServerCompletionQueue *queue_;
    grpc::ServerContext ctx_;
    grpc::ByteBuffer message_; /* the request as received */
    grpc::ByteBuffer reply_;   /* the response, serialized */
    grpc::ServerAsyncResponseWriter<grpc::ByteBuffer> writer_{&ctx_};
    bool answering_ = false; /* finish has been called: the next proceed is the last */
    std::unique_ptr<pb::ModelInferRequest> req_;
    std::unique_ptr<pb::ModelInferResponse> resp_;
    std::string id_; /* the request's id, which outlives the request */
    refs held_{}; /* released in done, after the response has been sent */
    infer_ctx c_{};
    struct timespec started_ {};
    size_t charged_ = 0;
};

} // namespace grpc_service

#endif
