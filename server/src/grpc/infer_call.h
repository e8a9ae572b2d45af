/*
 * One ModelInfer call of the gRPC service: the twin of http/infer.c over
 * the same inference path (infer_core.h). service.cc makes an InferCall for
 * each ModelInfer and queues it to its workers.
 *
 * A call's life:
 *   ModelInfer (a gRPC thread)  -> an InferCall reactor, queued to a worker
 *   InferCall::run (a worker)   -> parse, acquire the regions the call names
 *                                  (refs_hold), run the model, build the
 *                                  response, Finish
 *   InferCall::OnDone (gRPC)    -> after the response has been sent, or the
 *                                  call failed or was cancelled: releases
 *                                  every reference the call took
 */
#ifndef SERVER_GRPC_INFER_CALL_H
#define SERVER_GRPC_INFER_CALL_H

#include <grpcpp/grpcpp.h>

#include <cstddef>
#include <ctime>

#include <shmreg/shmreg.h>

#include "common/byte_budget.h"
#include "core/infer_core.h"
#include "core/refs.h"
#include "core/region_scope.h"
#include "grpc/convert.h"

namespace grpc_service {

/* What a call needs of the service that made it (service.cc's Service). */
class CallOwner {
  public:
    virtual shmreg_registry *registry() const = 0;
    /* The bytes of gRPC requests the server holds (--max-buffered-mb). */
    virtual byte_budget *held() const = 0;
    /* A call between its construction and its OnDone: the service's stop
     * waits until there is none. */
    virtual void call_started() = 0;
    virtual void call_done() = 0;

  protected:
    ~CallOwner() = default;
};

/* One ModelInfer call, made by the service for each. Owned by gRPC from ModelInfer's return until OnDone,
 * which deletes it. */
class InferCall final : public grpc::ServerUnaryReactor {
  public:
    /* charged: the bytes of req taken from the service's budget, given
     * back in OnDone. */
    InferCall(CallOwner *s, const region_scope &scope, const pb::ModelInferRequest *req,
              pb::ModelInferResponse *resp, size_t charged);
    /* On a worker: everything up to Finish. After Finish the call belongs to
     * gRPC again, so nothing here touches *this afterwards. */
    void run();
    /* Shutdown, past the drain time: answer UNAVAILABLE without running. */
    void cancel();
    void OnDone() override;

  private:
    unsigned parse_inputs();
    unsigned parse_outputs();
    void build_response();

    CallOwner *service_;
    const pb::ModelInferRequest *req_;
    pb::ModelInferResponse *resp_;
    refs held_{}; /* released in OnDone, after the response has been sent */
    infer_ctx c_{};
    struct timespec started_ {};
    size_t charged_;
};

} // namespace grpc_service

#endif
