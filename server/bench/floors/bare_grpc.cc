/* The gRPC floor: the KServe v2 service of proto/inference.proto on the same
 * gRPC as the server, with nothing of the server's in the way. ModelInfer
 * answers on the callback thread, inline, with one fixed response the shape
 * of the `simple` model's (two INT32 [1,16] outputs as raw contents); every
 * other method is left to the generated base class (UNIMPLEMENTED). No
 * registry, no worker pool, no checks of the request: what a call costs here
 * is what the transport costs on this machine, which bench_request_cost.py
 * divides the server's figures by.
 *
 *     shmreg-bare-grpc [PORT]   prints "grpc listening on 127.0.0.1:PORT"
 *                               (PORT 0 or absent: a free one); SIGTERM or
 *                               SIGINT stops it. */
#include <grpcpp/grpcpp.h>

#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "inference.grpc.pb.h"

namespace pb = inference;

namespace {

class BareService final : public pb::GRPCInferenceService::CallbackService {
  public:
    BareService()
    {
        /* Built once: a call copies it, as a server that answers from a
         * cache would. */
        reply_.set_model_name("simple");
        reply_.set_model_version("1");
        std::string zeros(16 * sizeof(int32_t), '\0');
        for (const char *name : {"OUTPUT0", "OUTPUT1"}) {
            auto *out = reply_.add_outputs();
            out->set_name(name);
            out->set_datatype("INT32");
            out->add_shape(1);
            out->add_shape(16);
            reply_.add_raw_output_contents(zeros);
        }
    }

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
    pb::ModelInferResponse reply_;
};

} // namespace

int main(int argc, char **argv)
{
    /* Blocked before gRPC starts its threads, which inherit the mask: the
     * signals wait for sigwait below rather than ending the process. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop, nullptr);
    std::string address = "127.0.0.1:" + std::string(argc > 1 ? argv[1] : "0");
    BareService service;
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service);
    std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
    if (!server || port == 0) {
        std::fprintf(stderr, "error: cannot listen for gRPC on %s\n", address.c_str());
        return 1;
    }
    std::printf("grpc listening on 127.0.0.1:%d\n", port);
    std::fflush(stdout);
    /* gRPC's threads serve the calls; this one only waits for the signal. */
    int sig;
    sigwait(&stop, &sig);
    server->Shutdown();
    server->Wait();
    return 0;
}
