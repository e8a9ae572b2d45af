/*
 * The gRPC service's calls through a completion queue (service.cc's): each
 * call is an object asked of gRPC before it arrives, handed back by the
 * queue when it has arrived and again when its answer has been sent. The
 * thread that takes a short call from the queue runs it to its answer, with
 * no other thread woken on the way: gRPC's callback API hands each call
 * from the thread that read it to another, and that is what this saves.
 *
 * QueueTag is what a queue hands back (InferCall, infer_call.h, is one);
 * UnaryCall is one typed call whose answer its handler gives at once.
 */
#ifndef SERVER_GRPC_QUEUE_CALL_H
#define SERVER_GRPC_QUEUE_CALL_H

#include <grpcpp/grpcpp.h>

#include "grpc/answer_gate.h"

namespace grpc_service {

/* What a completion queue hands back: ok false when the operation did not
 * happen (no call arrived before the server stopped; an answer that could
 * not be sent). */
class QueueTag {
  public:
    virtual void proceed(bool ok) = 0;

  protected:
    ~QueueTag() = default;
};

/* Hand each tag of queue to its proceed until the queue is shut down and
 * empty: a serving thread's whole life. */
inline void drain_queue(grpc::ServerCompletionQueue *queue)
{
    void *tag;
    bool ok;
    while (queue->Next(&tag, &ok))
        static_cast<QueueTag *>(tag)->proceed(ok);
}

/* Send a call's answer through writer: resp with an OK status, the status
 * alone otherwise; the queue hands tag back once it is sent. Through gate,
 * which may hold it for a moment (answer_gate.h): resp and writer must live
 * until tag comes back, as they do in the call that owns them. */
template <class Resp>
void send_answer(AnswerGate &gate, grpc::ServerAsyncResponseWriter<Resp> *writer, const Resp &resp,
                 const grpc::Status &st, void *tag)
{
    gate.pass([writer, &resp, st, tag] {
        if (st.ok())
            writer->Finish(resp, st, tag);
        else
            writer->FinishWithError(st, tag);
    });
}

/* One call of a typed unary method of Owner's service: ask makes one and
 * asks gRPC for the method's next call on queue; when it arrives another is
 * asked for at once (so that calls arriving together do not wait for each
 * other), handle answers it, and the call deletes itself once the answer
 * has been sent. Owner counts each from its ask to its deletion
 * (call_started, call_done), so that its stop can wait until no thread
 * will ask for a call or answer one. */
template <class Owner, class Req, class Resp>
class UnaryCall final : public QueueTag {
  public:
    using Ask = void (Owner::*)(grpc::ServerContext *, Req *, grpc::ServerAsyncResponseWriter<Resp> *,
                                grpc::CompletionQueue *, grpc::ServerCompletionQueue *, void *);
    using Handle = grpc::Status (Owner::*)(const grpc::ServerContext &, const Req &, Resp *);

    static void ask(Owner *owner, Ask asking, Handle handle, grpc::ServerCompletionQueue *queue)
    {
        new UnaryCall(owner, asking, handle, queue); /* deleted by its last proceed */
    }

    void proceed(bool ok) override
    {
        if (!ok || answered_) {
            Owner *owner = owner_;
            delete this;
            owner->call_done();
            return;
        }
        owner_->gate().arrived();
        ask(owner_, ask_, handle_, queue_);
        grpc::Status st = (owner_->*handle_)(ctx_, req_, &resp_);
        answered_ = true;
        send_answer(owner_->gate(), &writer_, resp_, st, this);
    }

  private:
    UnaryCall(Owner *owner, Ask asking, Handle handle, grpc::ServerCompletionQueue *queue)
        : owner_(owner), ask_(asking), handle_(handle), queue_(queue)
    {
        owner_->call_started(); /* before the ask, whose end another thread may see first */
        (owner_->*ask_)(&ctx_, &req_, &writer_, queue_, queue_, this);
    }
    ~UnaryCall() = default;

    Owner *owner_;
    Ask ask_;
    Handle handle_;
    grpc::ServerCompletionQueue *queue_;
    grpc::ServerContext ctx_;
    Req req_;
    Resp resp_;
    grpc::ServerAsyncResponseWriter<Resp> writer_{&ctx_};
    bool answered_ = false;
};

} // namespace grpc_service

#endif
