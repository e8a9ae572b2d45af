/* The gRPC floor: the KServe v2 service of proto/inference.proto on the same
 * gRPC as the server, with nothing of the server's in the way. ModelInfer
 * answers with one fixed response the shape of the `simple` model's (two
 * INT32 [1,16] outputs as raw contents); every other method is UNIMPLEMENTED.
 * No registry, no worker pool, no checks of the request: what a call costs
 * here is what the transport costs on this machine, which
 * bench_request_cost.py divides the server's figures by.
 *
 * Served as the server serves (grpc/queue_call.h): the completion-queue API,
 * --threads N threads (the server's count by default: half the cores, two
 * to eight) draining one queue, each answering the calls it takes. With
 * --callback, through gRPC's callback API instead, whose own threads run
 * each call: the other way gRPC serves, for weighing the two on the machine
 * at hand.
 *
 *     shmreg-bare-grpc [--threads N | --callback] [PORT]
 *                               prints "grpc listening on 127.0.0.1:PORT"
 *                               (PORT 0 or absent: a free one); SIGTERM or
 *                               SIGINT stops it. */
#include <grpcpp/grpcpp.h>

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "inference.grpc.pb.h"

namespace pb = inference;

namespace {

/* Built once: a call copies it, as a server that answers from a cache
 * would. */
pb::ModelInferResponse fixed_reply()
{
    pb::ModelInferResponse reply;
    reply.set_model_name("simple");
    reply.set_model_version("1");
    std::string zeros(16 * sizeof(int32_t), '\0');
    for (const char *name : {"OUTPUT0", "OUTPUT1"}) {
        auto *out = reply.add_outputs();
        out->set_name(name);
        out->set_datatype("INT32");
        out->add_shape(1);
        out->add_shape(16);
        reply.add_raw_output_contents(zeros);
    }
    return reply;
}

/* The callback API: ModelInfer answers on the thread gRPC runs it on. */
class CallbackService final : public pb::GRPCInferenceService::CallbackService {
  public:
    grpc::ServerUnaryReactor *ModelInfer(grpc::CallbackServerContext *ctx,
                                         const pb::ModelInferRequest *req,
                                         pb::ModelInferResponse *resp) override
    {
        *resp = reply_;
        resp->set_id(req->id()); /* clients match answers to requests by id */
        grpc::ServerUnaryReactor *r = ctx->DefaultReactor();
        r->Finish(grpc::Status::OK);
        return r;
    }

  private:
    const pb::ModelInferResponse reply_ = fixed_reply();
};

/* The completion-queue API: one ModelInfer call, from the request gRPC is
 * asked to match to its end. The queue hands it back twice: when a call has
 * arrived (it asks for the next one and answers) and when the answer is
 * sent (it is deleted). */
class QueueCall {
  public:
    QueueCall(pb::GRPCInferenceService::AsyncService *service, grpc::ServerCompletionQueue *queue,
              const pb::ModelInferResponse *reply)
        : service_(service), queue_(queue), reply_(reply)
    {
        service_->RequestModelInfer(&ctx_, &req_, &writer_, queue_, queue_, this);
    }

    /* ok false: the server is shutting down (no call came) or the answer
     * could not be sent; either way the call is over. */
    void proceed(bool ok)
    {
        if (!ok || answered_) {
            delete this;
            return;
        }
        new QueueCall(service_, queue_, reply_); /* the next call may now be matched */
        resp_ = *reply_;
        resp_.set_id(req_.id());
        answered_ = true;
        writer_.Finish(resp_, grpc::Status::OK, this);
    }

  private:
    pb::GRPCInferenceService::AsyncService *service_;
    grpc::ServerCompletionQueue *queue_;
    const pb::ModelInferResponse *reply_;
    grpc::ServerContext ctx_;
    pb::ModelInferRequest req_;
    pb::ModelInferResponse resp_;
    grpc::ServerAsyncResponseWriter<pb::ModelInferResponse> writer_{&ctx_};
    bool answered_ = false;
};

/* Calls asked for at once, so that calls arriving together need not wait
 * for one to be asked for after another (the server's count). */
constexpr int kCallsAsked = 8;

/* The server's rule (options.c): half the cores, two to eight. */
unsigned default_threads()
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores < 4 ? 2u : cores > 16 ? 8u : static_cast<unsigned>(cores / 2);
}

void drain(grpc::ServerCompletionQueue *queue)
{
    pthread_setname_np(pthread_self(), "grpc-serving"); /* the server's name for its threads */
    void *tag;
    bool ok;
    while (queue->Next(&tag, &ok))
        static_cast<QueueCall *>(tag)->proceed(ok);
}

int usage(const char *prog)
{
    std::fprintf(stderr, "usage: %s [--threads N | --callback] [PORT]\n", prog);
    return 2;
}

} // namespace

int main(int argc, char **argv)
{
    unsigned threads = default_threads(); /* 0: the callback API */
    const char *port_arg = "0";
    for (int i = 1; i < argc; i++) {
        if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            char *end;
            unsigned long n = std::strtoul(argv[++i], &end, 10);
            if (*end || n == 0 || n > 256)
                return usage(argv[0]);
            threads = static_cast<unsigned>(n);
        } else if (std::strcmp(argv[i], "--callback") == 0) {
            threads = 0;
        } else if (argv[i][0] != '-') {
            port_arg = argv[i];
        } else {
            return usage(argv[0]);
        }
    }
    /* Blocked before gRPC starts its threads, which inherit the mask: the
     * signals wait for sigwait below rather than ending the process. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop, nullptr);
    std::string address = "127.0.0.1:" + std::string(port_arg);
    CallbackService callback_service;
    pb::GRPCInferenceService::AsyncService queue_service;
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
    std::unique_ptr<grpc::ServerCompletionQueue> queue;
    if (threads == 0) {
        builder.RegisterService(&callback_service);
    } else {
        builder.RegisterService(&queue_service);
        queue = builder.AddCompletionQueue();
    }
    std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
    if (!server || port == 0) {
        std::fprintf(stderr, "error: cannot listen for gRPC on %s\n", address.c_str());
        return 1;
    }
    const pb::ModelInferResponse reply = fixed_reply();
    std::vector<std::thread> serving;
    for (int i = 0; queue && i < kCallsAsked; i++)
        new QueueCall(&queue_service, queue.get(), &reply);
    for (unsigned i = 0; i < threads; i++)
        serving.emplace_back(drain, queue.get());
    std::printf("grpc listening on 127.0.0.1:%d\n", port);
    std::fflush(stdout);
    /* The serving threads answer the calls; this one only waits for the
     * signal. */
    int sig;
    sigwait(&stop, &sig);
    server->Shutdown();
    if (queue)
        queue->Shutdown(); /* after the server's: no call is asked for on a queue shut down */
    for (auto &t : serving)
        t.join();
    server->Wait();
    return 0;
}
