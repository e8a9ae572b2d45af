/*
 * One ModelInfer call of the gRPC service: the twin of http/infer.c over
 * the same inference path (infer_core.h). ModelInfer is a raw method: the
 * service charges each message by its length before it is parsed, parses it
 * (parse_request), makes an InferCall for it and queues it to its workers;
 * the call serializes its own response.
 *
 * A call's life:
 *   ModelInfer (a gRPC thread)  -> charge the message to the budget, parse
 *                                  it, an InferCall reactor run at once
 *                                  (run_inline: a short model's call that
 *                                  names no region, or a GPU model's call
 *                                  whose tensors the device reaches where
 *                                  they lie: handed to an instance) or
 *                                  queued to a worker
 *   InferCall::run (a worker)   -> acquire the regions the call names
 *                                  (refs_hold), run the model, build the
 *                                  response, free the request, serialize
 *                                  the response, Finish
 *   device_run_ended            -> a GPU model's run handed over from the
 *                                  gRPC thread has ended (on that thread, or
 *                                  on the instance's finishing thread):
 *                                  the response, as run's
 *   InferCall::OnDone (gRPC)    -> after the response has been sent, or the
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

namespace grpc_service {

/* What a call needs of the service that made it (service.cc's Service). */
class CallOwner {
  public:
    virtual shmreg_registry *registry() const = 0;
    /* Give back bytes the service charged for a call's request to what the
     * server holds of gRPC requests (--max-buffered-mb). */
    virtual void give_back(size_t bytes) = 0;
    /* A call between its construction and its OnDone: the service's stop
     * waits until there is none. */
    virtual void call_started() = 0;
    virtual void call_done() = 0;

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

/* One ModelInfer call, made by the service for each. Owned by gRPC from ModelInfer's return until OnDone,
 * which deletes it. */
class InferCall final : public grpc::ServerUnaryReactor {
  public:
    /* charged: the bytes of req taken from the service's budget, given back
     * in OnDone: run frees req once the response is built, and the charge
     * then stands for the response. reply: the call's response buffer,
     * gRPC's, filled before Finish. */
    InferCall(CallOwner *s, const region_scope &scope, std::unique_ptr<pb::ModelInferRequest> req,
              grpc::ByteBuffer *reply, size_t charged);
    /* On a worker: everything up to Finish. After Finish the call belongs to
     * gRPC again, so nothing here touches *this afterwards. */
    void run();
    /* run on the gRPC thread that received the call, for a call
     * infer_runs_inline (where: INFER_ON_TRANSPORT) or
     * infer_device_runs_inline (INFER_ON_TRANSPORT_DEVICE) allows: true when
     * it ran (Finish called); false when it cannot run here
     * (INFER_DEFERRED): nothing is held or counted, and the call is as it
     * was, for run on a worker. */
    bool run_inline(infer_thread where);
    /* Shutdown, past the drain time: answer UNAVAILABLE without running. */
    void cancel();
    void OnDone() override;

  private:
    bool run_here(infer_thread where);
    /* c_ as a call starts: nothing parsed or held, the caller's scope. */
    void reset_ctx(region_scope scope);
    /* The end of a run handed to the device from the transport's thread,
     * on the thread where it ended. */
    static void device_run_ended(infer_ctx *c, unsigned st);
    /* The response for the request's result st, built and sent: the last
     * touch of *this. */
    void answer(unsigned st);
    unsigned parse_inputs();
    unsigned parse_outputs();
    void build_response();

    CallOwner *service_;
    std::unique_ptr<pb::ModelInferRequest> req_;
    std::unique_ptr<pb::ModelInferResponse> resp_;
    grpc::ByteBuffer *reply_;
    std::string id_; /* the request's id, which outlives the request */
    refs held_{}; /* released in OnDone, after the response has been sent */
    infer_ctx c_{};
    struct timespec started_ {};
    size_t charged_;
};

} // namespace grpc_service

#endif
