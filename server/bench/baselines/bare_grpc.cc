/* The gRPC floor: the KServe v2 service of proto/inference.proto on the same
 * gRPC as the server, with nothing of the server's in the way. ModelInfer
 * answers with one fixed response the shape of the `simple` model's (two
 * INT32 [1,16] outputs as raw contents). No registry, no worker pool, no
 * checks of the request: what a call costs here is what the transport costs
 * on this machine, which bench_request_cost.py and light_model_cost.py
 * divide the server's figures by.
 *
 * Besides ModelInfer it answers what perf_analyzer asks before and between
 * its measurements, so that the same client measures the floor and the
 * server: ServerLive, ServerReady, ServerMetadata (the statistics
 * extension, as the server's), ModelReady, and ModelMetadata and
 * ModelConfig of `simple` in the server's own words (so that perf_analyzer
 * builds the same request for both; bench_request_cost.py checks they
 * match), and ModelStatistics, which counts the ModelInfer calls answered
 * (every count, as the server counts a `simple` request, with no duration:
 * the floor times nothing; perf_analyzer reads the queue count to find the
 * model it measures). That count, a relaxed increment a call, is what a call adds to
 * the floor; with it the floor's CPU per call is its CPU over the calls it
 * counted, as the server's is. Every other method is UNIMPLEMENTED through
 * the callback API, and never answered through the completion queue (no
 * call is asked of gRPC for it).
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
#include <google/protobuf/text_format.h>
#include <grpcpp/grpcpp.h>

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
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

/* The server's ModelMetadata and ModelConfig answers for `simple`, as
 * tritonclient.grpc prints them (get_model_metadata, get_model_config). */
constexpr char kSimpleMetadata[] = R"(
name: "simple" versions: "1" platform: "shmreg_builtin"
inputs { name: "INPUT0" datatype: "INT32" shape: -1 shape: 16 }
inputs { name: "INPUT1" datatype: "INT32" shape: -1 shape: 16 }
outputs { name: "OUTPUT0" datatype: "INT32" shape: -1 shape: 16 }
outputs { name: "OUTPUT1" datatype: "INT32" shape: -1 shape: 16 }
)";
constexpr char kSimpleConfig[] = R"(
config {
  name: "simple" platform: "shmreg_builtin" max_batch_size: 8
  input { name: "INPUT0" data_type: TYPE_INT32 dims: 16 }
  input { name: "INPUT1" data_type: TYPE_INT32 dims: 16 }
  output { name: "OUTPUT0" data_type: TYPE_INT32 dims: 16 }
  output { name: "OUTPUT1" data_type: TYPE_INT32 dims: 16 }
  instance_group { count: 1 kind: KIND_CPU }
  backend: "shmreg_builtin"
  model_transaction_policy { }
}
)";

/* What the floor says about itself and `simple`, shared by both APIs. */
class Floor {
  public:
    Floor()
    {
        using google::protobuf::TextFormat;
        if (!TextFormat::ParseFromString(kSimpleMetadata, &metadata_) ||
            !TextFormat::ParseFromString(kSimpleConfig, &config_)) {
            std::fprintf(stderr, "error: the model descriptions do not parse\n");
            std::abort();
        }
    }

    /* The answer to one ModelInfer call, counted. */
    void infer(const pb::ModelInferRequest &req, pb::ModelInferResponse *resp)
    {
        *resp = reply_;
        resp->set_id(req.id()); /* clients match answers to requests by id */
        /* Relaxed: a count read by ModelStatistics, nothing published by it. */
        calls_.fetch_add(1, std::memory_order_relaxed);
    }

    grpc::Status live(const pb::ServerLiveRequest &, pb::ServerLiveResponse *resp)
    {
        resp->set_live(true);
        return grpc::Status::OK;
    }

    grpc::Status ready(const pb::ServerReadyRequest &, pb::ServerReadyResponse *resp)
    {
        resp->set_ready(true);
        return grpc::Status::OK;
    }

    grpc::Status server_metadata(const pb::ServerMetadataRequest &,
                                 pb::ServerMetadataResponse *resp)
    {
        resp->set_name("shmreg-bare-grpc");
        resp->set_version("1");
        resp->add_extensions("statistics");
        return grpc::Status::OK;
    }

    grpc::Status model_ready(const pb::ModelReadyRequest &req, pb::ModelReadyResponse *resp)
    {
        resp->set_ready(known(req.name(), req.version()));
        return grpc::Status::OK;
    }

    grpc::Status model_metadata(const pb::ModelMetadataRequest &req,
                                pb::ModelMetadataResponse *resp)
    {
        if (!known(req.name(), req.version()))
            return unknown(req.name());
        *resp = metadata_;
        return grpc::Status::OK;
    }

    grpc::Status model_config(const pb::ModelConfigRequest &req, pb::ModelConfigResponse *resp)
    {
        if (!known(req.name(), req.version()))
            return unknown(req.name());
        *resp = config_;
        return grpc::Status::OK;
    }

    grpc::Status statistics(const pb::ModelStatisticsRequest &req,
                            pb::ModelStatisticsResponse *resp)
    {
        if (!req.name().empty() && !known(req.name(), req.version()))
            return unknown(req.name());
        uint64_t calls = calls_.load(std::memory_order_relaxed);
        auto *st = resp->add_model_stats();
        st->set_name("simple");
        st->set_version("1");
        st->set_inference_count(calls);
        st->set_execution_count(calls);
        pb::InferStatistics *inf = st->mutable_inference_stats();
        for (pb::StatisticDuration *d : {inf->mutable_success(), inf->mutable_queue(),
                                         inf->mutable_compute_input(), inf->mutable_compute_infer(),
                                         inf->mutable_compute_output()})
            d->set_count(calls);
        return grpc::Status::OK;
    }

  private:
    static bool known(const std::string &name, const std::string &version)
    {
        return name == "simple" && (version.empty() || version == "1");
    }

    static grpc::Status unknown(const std::string &name)
    {
        return grpc::Status(grpc::StatusCode::NOT_FOUND,
                            "Request for unknown model: '" + name + "' is not found");
    }

    const pb::ModelInferResponse reply_ = fixed_reply();
    pb::ModelMetadataResponse metadata_;
    pb::ModelConfigResponse config_;
    std::atomic<uint64_t> calls_{0};
};

/* The methods besides ModelInfer: each method, its request and answer, and
 * the Floor's handler; both APIs serve them from this one list. */
#define FLOOR_DESCRIPTIONS(X)                                                                   \
    X(ServerLive, ServerLiveRequest, ServerLiveResponse, live)                                  \
    X(ServerReady, ServerReadyRequest, ServerReadyResponse, ready)                              \
    X(ServerMetadata, ServerMetadataRequest, ServerMetadataResponse, server_metadata)           \
    X(ModelReady, ModelReadyRequest, ModelReadyResponse, model_ready)                           \
    X(ModelMetadata, ModelMetadataRequest, ModelMetadataResponse, model_metadata)               \
    X(ModelConfig, ModelConfigRequest, ModelConfigResponse, model_config)                       \
    X(ModelStatistics, ModelStatisticsRequest, ModelStatisticsResponse, statistics)

/* The callback API: each call answers on the thread gRPC runs it on. */
class CallbackService final : public pb::GRPCInferenceService::CallbackService {
  public:
    explicit CallbackService(Floor *floor) : floor_(floor) {}

    grpc::ServerUnaryReactor *ModelInfer(grpc::CallbackServerContext *ctx,
                                         const pb::ModelInferRequest *req,
                                         pb::ModelInferResponse *resp) override
    {
        floor_->infer(*req, resp);
        return finish(ctx, grpc::Status::OK);
    }

#define CALLBACK_METHOD(method, req_type, resp_type, handler)                                    \
    grpc::ServerUnaryReactor *method(grpc::CallbackServerContext *ctx, const pb::req_type *req,  \
                                     pb::resp_type *resp) override                              \
    {                                                                                            \
        return finish(ctx, floor_->handler(*req, resp));                                         \
    }
    FLOOR_DESCRIPTIONS(CALLBACK_METHOD)
#undef CALLBACK_METHOD

  private:
    static grpc::ServerUnaryReactor *finish(grpc::CallbackServerContext *ctx,
                                            const grpc::Status &st)
    {
        grpc::ServerUnaryReactor *r = ctx->DefaultReactor();
        r->Finish(st);
        return r;
    }

    Floor *floor_;
};

/* What the completion queue hands back: a call of one method or another. */
class QueueTag {
  public:
    virtual void proceed(bool ok) = 0;

  protected:
    ~QueueTag() = default;
};

/* The completion-queue API: one ModelInfer call, from the request gRPC is
 * asked to match to its end. The queue hands it back twice: when a call has
 * arrived (it asks for the next one and answers) and when the answer is
 * sent (it is deleted). */
class QueueCall final : public QueueTag {
  public:
    QueueCall(pb::GRPCInferenceService::AsyncService *service, grpc::ServerCompletionQueue *queue,
              Floor *floor)
        : service_(service), queue_(queue), floor_(floor)
    {
        service_->RequestModelInfer(&ctx_, &req_, &writer_, queue_, queue_, this);
    }

    /* ok false: the server is shutting down (no call came) or the answer
     * could not be sent; either way the call is over. */
    void proceed(bool ok) override
    {
        if (!ok || answered_) {
            delete this;
            return;
        }
        new QueueCall(service_, queue_, floor_); /* the next call may now be matched */
        floor_->infer(req_, &resp_);
        answered_ = true;
        writer_.Finish(resp_, grpc::Status::OK, this);
    }

  private:
    pb::GRPCInferenceService::AsyncService *service_;
    grpc::ServerCompletionQueue *queue_;
    Floor *floor_;
    grpc::ServerContext ctx_;
    pb::ModelInferRequest req_;
    pb::ModelInferResponse resp_;
    grpc::ServerAsyncResponseWriter<pb::ModelInferResponse> writer_{&ctx_};
    bool answered_ = false;
};

/* One call of a method other than ModelInfer, through the same queue: asked
 * for one at a time (they come before and between measurements, not under
 * load), answered by the Floor's handler. */
template <class Req, class Resp>
class DescribeCall final : public QueueTag {
  public:
    using Ask = void (pb::GRPCInferenceService::AsyncService::*)(
        grpc::ServerContext *, Req *, grpc::ServerAsyncResponseWriter<Resp> *,
        grpc::CompletionQueue *, grpc::ServerCompletionQueue *, void *);
    using Answer = grpc::Status (Floor::*)(const Req &, Resp *);

    DescribeCall(pb::GRPCInferenceService::AsyncService *service,
                 grpc::ServerCompletionQueue *queue, Floor *floor, Ask ask, Answer answer)
        : service_(service), queue_(queue), floor_(floor), ask_(ask), answer_(answer)
    {
        (service_->*ask_)(&ctx_, &req_, &writer_, queue_, queue_, this);
    }

    void proceed(bool ok) override
    {
        if (!ok || answered_) {
            delete this;
            return;
        }
        new DescribeCall(service_, queue_, floor_, ask_, answer_);
        grpc::Status st = (floor_->*answer_)(req_, &resp_);
        answered_ = true;
        if (st.ok())
            writer_.Finish(resp_, st, this);
        else
            writer_.FinishWithError(st, this);
    }

  private:
    pb::GRPCInferenceService::AsyncService *service_;
    grpc::ServerCompletionQueue *queue_;
    Floor *floor_;
    Ask ask_;
    Answer answer_;
    grpc::ServerContext ctx_;
    Req req_;
    Resp resp_;
    grpc::ServerAsyncResponseWriter<Resp> writer_{&ctx_};
    bool answered_ = false;
};

template <class Req, class Resp>
void ask_describe(pb::GRPCInferenceService::AsyncService *service,
                  grpc::ServerCompletionQueue *queue, Floor *floor,
                  typename DescribeCall<Req, Resp>::Ask ask,
                  typename DescribeCall<Req, Resp>::Answer answer)
{
    new DescribeCall<Req, Resp>(service, queue, floor, ask, answer); /* deleted by its last proceed */
}

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
        static_cast<QueueTag *>(tag)->proceed(ok);
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
    Floor floor;
    CallbackService callback_service(&floor);
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
    std::vector<std::thread> serving;
    for (int i = 0; queue && i < kCallsAsked; i++)
        new QueueCall(&queue_service, queue.get(), &floor);
    if (queue) {
        using S = pb::GRPCInferenceService::AsyncService;
        grpc::ServerCompletionQueue *q = queue.get();
#define ASK(method, req_type, resp_type, handler)                                                \
    ask_describe<pb::req_type, pb::resp_type>(&queue_service, q, &floor, &S::Request##method,   \
                                              &Floor::handler);
        FLOOR_DESCRIPTIONS(ASK)
#undef ASK
    }
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
