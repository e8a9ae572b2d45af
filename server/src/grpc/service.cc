/*
 * The KServe v2 gRPC service over the registry, with the same models, the
 * same inference path (infer_core.h) and the same shared-memory calls as the
 * HTTP endpoints. gRPC's completion-queue API (queue_call.h): a few serving
 * threads drain one completion queue, and the thread that reads a call
 * answers it itself when it is short, as Triton serves.
 *
 * ModelInfer (a serving thread, a raw method) charges the message to the
 * budget, has it parsed, starts its InferCall (infer_call.cc, whose header
 * tells the rest of its life) and runs it there when it is short
 * (infer_runs_inline), or queues it to the service's workers.
 *
 * Memory (--max-buffered-mb, Budget below): gRPC's resource quota bounds
 * what its transport holds for messages still being received; a message
 * handed to ModelInfer moves from the quota to the budget, which shrinks
 * the quota by as much, so that the two together stay within the cap and
 * the quota's headroom.
 *
 * The quick calls (health, metadata, config, statistics, shared-memory control)
 * answer on the serving thread at once, as HTTP answers them on its own thread.
 *
 * The shared-memory calls are HTTP's, within the caller's scope
 * (region_scope.h: with --tenants, its tenant's regions only), after the
 * same admission (access.h: --grpc-restricted-protocol, the bearer token in
 * "authorization" metadata); the registry is held through the C++ header
 * <shmreg/shmreg.hpp>. The inference path is the C one the HTTP side runs
 * (infer_core.c), its references released through refs.h.
 *
 * The conversions (statuses, metadata, JSON -> protobuf, shared-memory
 * parameters) are in convert.cc. Status codes are Triton's (its
 * GrpcStatusUtil): the library's errors and the inference path's statuses
 * map through grpc_code_of, the gRPC column of common/status.h's table;
 * messages are the library's and the core's, which are Triton's words where
 * Triton has some.
 */
#include "grpc/grpc_server.h"

#include <grpc/grpc.h>
#include <grpcpp/grpcpp.h>
#include <shmreg/shmreg.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <pthread.h>

#include "common/worker_pool.h"
#include "core/triton.h"
#include "grpc/convert.h"
#include "grpc/infer_call.h"
#include "grpc/listener.h"
#include "grpc/queue_call.h"

namespace {

using namespace grpc_service;

/* sizeof(cudaIpcMemHandle_t); the server's build may have no CUDA headers. */
constexpr size_t kCudaIpcHandleSize = 64;

/* What scope_status returned, freed on every path. */
struct status_list {
    shmreg_region_status *st = nullptr;
    size_t n = 0;
    status_list() = default;
    status_list(const status_list &) = delete;
    status_list &operator=(const status_list &) = delete;
    ~status_list() { shmreg_status_free(st, n); }
};

/* ------------------------------------------------------------------ budget */

/* --max-buffered-mb for gRPC: the bytes of ModelInfer messages handed over
 * (held, main.c's budget: refused past it) and gRPC's resource quota (what
 * its transport holds for messages still arriving) as one cap. The quota is
 * the cap less the messages held, plus headroom, so a message counts once:
 * in the quota while it arrives, in held from ModelInfer until its call is
 * done. The quota is gRPC's soft limit: past it gRPC cancels calls still
 * arriving, picked at random (RST_STREAM ENHANCE_YOUR_CALM, which clients
 * read as RESOURCE_EXHAUSTED), and closes connections that have no call
 * (GOAWAY, likewise).
 *
 * headroom: what gRPC counts beyond the message bytes themselves. While a
 * message arrives gRPC counts its read buffers whole, filled or not, up to
 * about twice the message; with a headroom of 16 MiB a lone call of 63 MiB
 * against a cap of 64 was cancelled in one try out of three, with the
 * largest message's size (--max-body-mb) about one in thirty. Never less
 * than kMinHeadroom: small messages arriving together, each under the cap,
 * are the budget's to refuse, in its words. */
class Budget {
  public:
    Budget(byte_budget *held, size_t headroom)
        : held_(held), cap_(byte_budget_cap(held)), headroom_(std::max(headroom, kMinHeadroom))
    {
        quota_.Resize(quota_size());
    }
    Budget(const Budget &) = delete;
    Budget &operator=(const Budget &) = delete;

    const grpc::ResourceQuota &quota() const { return quota_; }
    size_t cap() const { return cap_; }

    /* Charge a message of len bytes, still in gRPC's buffers: false
     * (nothing charged) past the cap. Once those buffers are freed, settle
     * takes its bytes off the quota: before, the quota would count them
     * twice and cancel a call for it, perhaps this one. */
    bool take(size_t len)
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (!byte_budget_take(held_, len))
            return false;
        taken_ += len;
        return true;
    }
    void settle()
    {
        std::lock_guard<std::mutex> lock(mu_); /* so that resizes follow the counts' order */
        quota_.Resize(quota_size());
    }
    void give(size_t len)
    {
        std::lock_guard<std::mutex> lock(mu_);
        byte_budget_give(held_, len);
        taken_ -= len;
        quota_.Resize(quota_size());
    }

    static constexpr size_t kMinHeadroom = size_t(64) << 20;

  private:
    size_t quota_size() const { return cap_ - taken_ + headroom_; }

    byte_budget *held_;
    size_t cap_;
    size_t headroom_;
    grpc::ResourceQuota quota_{"grpc-messages"};
    std::mutex mu_;
    size_t taken_ = 0; /* under mu_ */
};


/* ----------------------------------------------------------------- service */

/* Every method through completion queues; ModelInfer raw (its messages as
 * bytes: parse_request), the rest typed. */
using ServiceBase =
    pb::GRPCInferenceService::WithRawMethod_ModelInfer<pb::GRPCInferenceService::AsyncService>;

class Service final : public ServiceBase, public CallOwner {
  public:
    /* reg stays main.c's: adopted here for shmreg.hpp's calls, given back
     * (disowned, not destroyed) when the service goes. The quota's headroom
     * is the largest message (Budget). */
    Service(shmreg_registry *reg, const grpc_config *cfg, byte_budget *held)
        : reg_(reg), cfg_(*cfg), budget_(held, cfg->max_body)
    {
    }
    ~Service()
    {
        remote_turns_free(turns_); /* stop_workers has run: no call copies any more */
        reg_.disown();
    }
    Service(const Service &) = delete;
    Service &operator=(const Service &) = delete;

    bool start_workers()
    {
        turns_ = remote_turns_new(cfg_.workers.working, "gRPC");
        if (turns_)
            workers_ = worker_pool_start(&cfg_.workers, run_call, this);
        return workers_ != nullptr;
    }
    /* Let calls run until deadline; then answer those still queued with
     * UNAVAILABLE, cut the running ones short (a slow model's delay), join
     * the workers and wait until every call object is gone: when this
     * returns no call holds a reference, and no serving thread will ask
     * for another call or answer one. Calls are counted from the moment
     * they are asked for, so one that arrived before the server's Shutdown
     * but waits in the queue behind others is still run, and the count
     * drains only once Shutdown has failed the calls still asked for. The
     * serving threads must still be draining the queue: they run each
     * call's end. */
    void stop_workers(std::chrono::system_clock::time_point deadline)
    {
        std::unique_lock<std::mutex> lock(mu_);
        if (!done_.wait_until(lock, deadline, [this] { return calls_ == 0; }))
            models_cut_delays();
        worker_pool *workers = workers_;
        workers_ = nullptr; /* submit refuses from here on */
        lock.unlock();
        worker_pool_stop(workers, cancel_call);
        lock.lock();
        done_.wait(lock, [this] { return calls_ == 0; });
    }

    /* Ask for the first calls of every method on queue; each asks for the
     * next as it arrives. */
    void ask_all(grpc::ServerCompletionQueue *queue)
    {
        for (int i = 0; i < kInferCallsAsked; i++)
            InferCall::ask(this, queue);
        ask<pb::ServerLiveRequest, pb::ServerLiveResponse>(
            &Service::RequestServerLive, &Service::server_live_call, queue);
        ask<pb::ServerReadyRequest, pb::ServerReadyResponse>(
            &Service::RequestServerReady, &Service::server_ready_call, queue);
        ask<pb::ModelReadyRequest, pb::ModelReadyResponse>(
            &Service::RequestModelReady, &Service::model_ready_call, queue);
        ask<pb::ServerMetadataRequest, pb::ServerMetadataResponse>(
            &Service::RequestServerMetadata, &Service::server_metadata_call, queue);
        ask<pb::ModelMetadataRequest, pb::ModelMetadataResponse>(
            &Service::RequestModelMetadata, &Service::model_metadata_call, queue);
        ask<pb::ModelConfigRequest, pb::ModelConfigResponse>(
            &Service::RequestModelConfig, &Service::model_config_call, queue);
        ask<pb::ModelStatisticsRequest, pb::ModelStatisticsResponse>(
            &Service::RequestModelStatistics, &Service::model_statistics_call, queue);
        ask<pb::SystemSharedMemoryStatusRequest, pb::SystemSharedMemoryStatusResponse>(
            &Service::RequestSystemSharedMemoryStatus, &Service::system_status_call, queue);
        ask<pb::CudaSharedMemoryStatusRequest, pb::CudaSharedMemoryStatusResponse>(
            &Service::RequestCudaSharedMemoryStatus, &Service::cuda_status_call, queue);
        ask<pb::SystemSharedMemoryRegisterRequest, pb::SystemSharedMemoryRegisterResponse>(
            &Service::RequestSystemSharedMemoryRegister, &Service::system_register_call, queue);
        ask<pb::CudaSharedMemoryRegisterRequest, pb::CudaSharedMemoryRegisterResponse>(
            &Service::RequestCudaSharedMemoryRegister, &Service::cuda_register_call, queue);
        ask<pb::SystemSharedMemoryUnregisterRequest, pb::SystemSharedMemoryUnregisterResponse>(
            &Service::RequestSystemSharedMemoryUnregister, &Service::system_unregister_call, queue);
        ask<pb::CudaSharedMemoryUnregisterRequest, pb::CudaSharedMemoryUnregisterResponse>(
            &Service::RequestCudaSharedMemoryUnregister, &Service::cuda_unregister_call, queue);
    }

    /* CallOwner: what each InferCall needs of the service (infer_call.h). */
    shmreg_registry *registry() const override { return reg_.handle(); }
    remote_turns *turns() const override { return turns_; }
    void give_back(size_t bytes) override { budget_.give(bytes); }
    void ask(InferCall *call, grpc::ServerContext *ctx, grpc::ByteBuffer *message,
             grpc::ServerAsyncResponseWriter<grpc::ByteBuffer> *writer,
             grpc::ServerCompletionQueue *queue) override
    {
        RequestModelInfer(ctx, message, writer, queue, queue, call);
    }

    /* What gRPC's transport may hold for messages arriving (Budget). */
    const grpc::ResourceQuota &quota() const { return budget_.quota(); }

    void call_started() override
    {
        std::lock_guard<std::mutex> lock(mu_);
        calls_++;
    }
    void call_done() override
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (--calls_ == 0)
            done_.notify_all();
    }
    AnswerGate &gate() override { return gate_; }

    /* -------------------------------------------------- health, metadata */

    grpc::Status server_live_call(const grpc::ServerContext &, const pb::ServerLiveRequest &,
                                  pb::ServerLiveResponse *resp)
    {
        resp->set_live(true);
        return grpc::Status::OK;
    }

    grpc::Status server_ready_call(const grpc::ServerContext &, const pb::ServerReadyRequest &,
                                   pb::ServerReadyResponse *resp)
    {
        resp->set_ready(true);
        return grpc::Status::OK;
    }

    /* A model that is not served, or cannot run now (the GPU model without a
     * device), is not ready; as in Triton, that is an answer, not an error:
     * the reason is HTTP's (model_endpoints.c), and ModelInfer's. */
    grpc::Status model_ready_call(const grpc::ServerContext &, const pb::ModelReadyRequest &req,
                                  pb::ModelReadyResponse *resp)
    {
        if (grpc::Status st = refuse_model_nul(req); !st.ok())
            return st;
        const model *m = model_find_version(req.name().c_str(), req.version().c_str());
        char why[600];
        resp->set_ready(m != nullptr && model_ready(m, why, sizeof why) == 0);
        return grpc::Status::OK;
    }

    grpc::Status server_metadata_call(const grpc::ServerContext &,
                                      const pb::ServerMetadataRequest &,
                                      pb::ServerMetadataResponse *resp)
    {
        server_metadata_pb(resp);
        return grpc::Status::OK;
    }

    grpc::Status model_metadata_call(const grpc::ServerContext &,
                                     const pb::ModelMetadataRequest &req,
                                     pb::ModelMetadataResponse *resp)
    {
        if (grpc::Status st = refuse_model_nul(req); !st.ok())
            return st;
        const model *m = model_find_version(req.name().c_str(), req.version().c_str());
        if (!m)
            return unknown_model(req.name(), req.version());
        model_metadata_pb(m, resp);
        return grpc::Status::OK;
    }

    grpc::Status model_config_call(const grpc::ServerContext &, const pb::ModelConfigRequest &req,
                                   pb::ModelConfigResponse *resp)
    {
        if (grpc::Status st = refuse_model_nul(req); !st.ok())
            return st;
        const model *m = model_find_version(req.name().c_str(), req.version().c_str());
        if (!m)
            return unknown_model(req.name(), req.version());
        model_config_pb(m, resp->mutable_config());
        return grpc::Status::OK;
    }

    /* Under --tenants the caller's tenant's own figures, as over HTTP
     * (model_endpoints.c): UNAUTHENTICATED without a known token. */
    grpc::Status model_statistics_call(const grpc::ServerContext &ctx,
                                       const pb::ModelStatisticsRequest &req,
                                       pb::ModelStatisticsResponse *resp)
    {
        if (grpc::Status st = refuse_model_nul(req); !st.ok())
            return st;
        caller who = caller_of(ctx, *cfg_.access);
        if (scope_refused(&who.scope))
            return grpc::Status(grpc_code_of(STATUS_UNAUTHENTICATED), SCOPE_NO_TOKEN_MESSAGE);
        size_t book = scope_stats_book(&who.scope);
        const model *only = nullptr;
        if (!req.name().empty()) {
            only = model_find_version(req.name().c_str(), req.version().c_str());
            if (!only)
                return unknown_model(req.name(), req.version());
        }
        for (size_t i = 0; i < model_count(); i++)
            if (!only || only == model_at(i))
                model_statistics_pb(model_at(i), book, resp->add_model_stats());
        return grpc::Status::OK;
    }

    /* ---------------------------------------------------------- inference */

    /* A ModelInfer call has arrived (InferCall::proceed, on a serving
     * thread). */
    void arrived(InferCall *call) override
    {
        gate_.arrived();
        /* The message has arrived whole (up to --max-body-mb), charged to
         * gRPC's quota; from here until its call is done it counts against
         * the budget instead (Budget). Past that it is refused at once, and
         * freed, instead of queueing without bound. */
        size_t bytes = call->message_bytes();
        if (!budget_.take(bytes)) {
            call->drop_message();
            char why[160];
            std::snprintf(why, sizeof why,
                          "the server holds %zu bytes of requests already (--max-buffered-mb); "
                          "retry later",
                          budget_.cap());
            call->refuse(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, why));
            return;
        }
        auto req = std::make_unique<pb::ModelInferRequest>();
        bool parsed = call->parse_message(req.get()); /* frees gRPC's buffers */
        budget_.settle();
        if (!parsed) {
            budget_.give(bytes);
            /* gRPC's own answer to a message it cannot parse, with words */
            call->refuse(grpc::Status(grpc::StatusCode::INTERNAL,
                                      "the request is not a valid ModelInferRequest"));
            return;
        }
        if (grpc::Status st = refuse_nul(*req); !st.ok()) {
            budget_.give(bytes);
            call->refuse(st);
            return;
        }
        const model *m = model_find_version(req->model_name().c_str(),
                                            req->model_version().c_str());
        infer_thread here = infer_runs_inline(m, bytes)          ? INFER_ON_TRANSPORT
                            : infer_device_runs_inline(m, bytes) ? INFER_ON_TRANSPORT_DEVICE
                                                                 : INFER_ON_WORKER;
        /* done gives the bytes back */
        call->start(caller_of(call->context(), *cfg_.access).scope, std::move(req), bytes);
        /* A short call runs here: queued, it would cost two thread wake-ups
         * more than its run, and a GPU model's run on an idle device is
         * short too. One that may be slow goes to a worker, so that the
         * serving threads stay free for the quick calls. */
        if (here != INFER_ON_WORKER && accepting() && call->run_inline(here))
            return;
        if (!submit(call))
            call->refuse(grpc::Status(grpc::StatusCode::UNAVAILABLE, "cannot queue the request"));
    }

    /* ------------------------------------------------------ shared memory */

    grpc::Status system_status_call(const grpc::ServerContext &ctx,
                                    const pb::SystemSharedMemoryStatusRequest &req,
                                    pb::SystemSharedMemoryStatusResponse *resp)
    {
        return status(ctx, req.name(), shmreg::kind::system,
                      [resp](const shmreg::region_status &s) {
                          auto &r = (*resp->mutable_regions())[s.name];
                          r.set_name(s.name);
                          r.set_key(s.key);
                          r.set_offset(s.offset);
                          r.set_byte_size(s.byte_size);
                          r.set_in_use(s.references);
                          r.set_pending_unregister(s.pending_unregister);
                      });
    }

    grpc::Status cuda_status_call(const grpc::ServerContext &ctx,
                                  const pb::CudaSharedMemoryStatusRequest &req,
                                  pb::CudaSharedMemoryStatusResponse *resp)
    {
        return status(ctx, req.name(), shmreg::kind::cuda, [resp](const shmreg::region_status &s) {
            auto &r = (*resp->mutable_regions())[s.name];
            r.set_name(s.name);
            r.set_device_id(static_cast<uint64_t>(s.device_id));
            r.set_byte_size(s.byte_size);
            r.set_in_use(s.references);
            r.set_pending_unregister(s.pending_unregister);
        });
    }

    /* offset and byte_size are uint64 on the wire and reach the library as
     * they are: its overflow and bounds checks answer, in Triton's words. */
    grpc::Status system_register_call(const grpc::ServerContext &ctx,
                                      const pb::SystemSharedMemoryRegisterRequest &req,
                                      pb::SystemSharedMemoryRegisterResponse *)
    {
        caller who = caller_of(ctx, *cfg_.access);
        if (grpc::Status refusal = refusal_of(who, shm_call::register_, req.name()); !refusal.ok())
            return refusal;
        if (grpc::Status st = refuse_nul({{"key", &req.key()}}); !st.ok())
            return st;
        shmreg_err e = scope_register_system(reg_.handle(), &who.scope, req.name().c_str(),
                                             req.key().c_str(), req.offset(), req.byte_size());
        return e == SHMREG_OK ? grpc::Status::OK : status_of(who.scope, e);
    }

    grpc::Status cuda_register_call(const grpc::ServerContext &ctx,
                                    const pb::CudaSharedMemoryRegisterRequest &req,
                                    pb::CudaSharedMemoryRegisterResponse *)
    {
        caller who = caller_of(ctx, *cfg_.access);
        if (grpc::Status refusal = refusal_of(who, shm_call::register_, req.name()); !refusal.ok())
            return refusal;
        /* Triton's gRPC endpoint reads a cudaIpcMemHandle_t from whatever it
         * is sent; its HTTP endpoint checks the size first, and that check
         * and its words are used here for both. */
        if (req.raw_handle().size() != kCudaIpcHandleSize)
            return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                "'raw_handle' must be a valid base64 encoded cudaIpcMemHandle_t");
        if (req.device_id() < 0 || req.device_id() > 1 << 20)
            return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                "'device_id' must be given as a non-negative integer");
        shmreg_err e = scope_register_cuda_ipc(
            reg_.handle(), &who.scope, req.name().c_str(), req.raw_handle().data(),
            req.raw_handle().size(), static_cast<int>(req.device_id()), req.byte_size());
        return e == SHMREG_OK ? grpc::Status::OK : status_of(who.scope, e);
    }

    grpc::Status system_unregister_call(const grpc::ServerContext &ctx,
                                        const pb::SystemSharedMemoryUnregisterRequest &req,
                                        pb::SystemSharedMemoryUnregisterResponse *)
    {
        return unregister(ctx, req.name(), SHMREG_KIND_SYSTEM);
    }

    grpc::Status cuda_unregister_call(const grpc::ServerContext &ctx,
                                      const pb::CudaSharedMemoryUnregisterRequest &req,
                                      pb::CudaSharedMemoryUnregisterResponse *)
    {
        return unregister(ctx, req.name(), SHMREG_KIND_CUDA);
    }

  private:
    /* Queue a call for the workers; false once stop_workers has taken them
     * (a call can still arrive while Shutdown starts on its thread). */
    bool submit(InferCall *call)
    {
        std::lock_guard<std::mutex> lock(mu_);
        return workers_ && worker_pool_submit(workers_, call) == 0;
    }

    /* A call may still start: false once stop_workers has taken the
     * workers, as submit would refuse it. A call started here is counted
     * (call_started) and stop_workers waits for its end. */
    bool accepting()
    {
        std::lock_guard<std::mutex> lock(mu_);
        return workers_ != nullptr;
    }

    static void run_call(void *, void *item) { static_cast<InferCall *>(item)->run(); }
    static void cancel_call(void *, void *item) { static_cast<InferCall *>(item)->cancel(); }

    /* ModelInfer calls asked for at once, so that calls arriving together
     * need not wait for one to be asked for after another; one of each
     * other method (each asks for the next as it arrives). */
    static constexpr int kInferCallsAsked = 8;

    template <class Req, class Resp>
    void ask(typename UnaryCall<Service, Req, Resp>::Ask asking,
             typename UnaryCall<Service, Req, Resp>::Handle handle,
             grpc::ServerCompletionQueue *queue)
    {
        UnaryCall<Service, Req, Resp>::ask(this, asking, handle, queue);
    }

    /* Triton 2.73's refusal without --allow-client-shm=true: UNSUPPORTED,
     * which its gRPC endpoint answers as UNIMPLEMENTED. */
    static grpc::Status client_shm_disabled()
    {
        return grpc::Status(grpc_code_of(STATUS_UNSUPPORTED), CLIENT_SHM_DISABLED_MESSAGE);
    }

    /* A model's name and version, as every model call names them. */
    template <typename Req> static grpc::Status refuse_model_nul(const Req &req)
    {
        return refuse_nul({{"name", &req.name()}, {"version", &req.version()}});
    }

    enum class shm_call { status, unregister, register_ };

    /* What refuses a shared-memory call before the library sees it, in the
     * HTTP side's order (http_server.c, then shm_endpoints.c): a restriction or a
     * missing token; for unregister and register, --allow-client-shm; for
     * register, a name that is not UTF-8 (shm_name_is_valid says why). A
     * name with a NUL is refused after the access check (refuse_nul). */
    grpc::Status refusal_of(const caller &who, shm_call call, const std::string &name) const
    {
        grpc::Status st;
        if (refused(who, &st) || !(st = refuse_nul({{"name", &name}})).ok() ||
            call == shm_call::status)
            return st;
        if (!cfg_.allow_client_shm)
            return client_shm_disabled();
        char why[600];
        if (call == shm_call::register_ && !shm_name_is_valid(name.c_str(), why, sizeof why))
            return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, why);
        return grpc::Status::OK;
    }

    /* An empty name is every region of the kind (in the caller's scope), as
     * in Triton. Names are shown as the caller knows them. */
    template <typename Fill>
    grpc::Status status(const grpc::ServerContext &ctx, const std::string &name, shmreg::kind kind,
                        Fill fill)
    {
        caller who = caller_of(ctx, *cfg_.access);
        if (grpc::Status refusal = refusal_of(who, shm_call::status, name); !refusal.ok())
            return refusal;
        status_list list;
        shmreg_err e =
            scope_status(reg_.handle(), &who.scope, name.empty() ? nullptr : name.c_str(),
                         static_cast<shmreg_kind>(kind), &list.st, &list.n);
        if (e != SHMREG_OK)
            return status_of(who.scope, e);
        for (size_t i = 0; i < list.n; i++) {
            shmreg::region_status s(list.st[i]);
            fill(s);
        }
        return grpc::Status::OK;
    }

    /* The HTTP endpoint's rule (absent is success), from the one place that
     * has it; its failure carries the library's message like any other. */
    grpc::Status unregister(const grpc::ServerContext &ctx, const std::string &name,
                            shmreg_kind kind)
    {
        caller who = caller_of(ctx, *cfg_.access);
        if (grpc::Status refusal = refusal_of(who, shm_call::unregister, name); !refusal.ok())
            return refusal;
        shmreg_err e = shm_unregister_as_triton(reg_.handle(), &who.scope,
                                                name.empty() ? nullptr : name.c_str(), kind);
        return e == SHMREG_OK ? grpc::Status::OK : status_of(who.scope, e);
    }

    shmreg::registry reg_;
    const grpc_config cfg_;
    Budget budget_; /* over main.c's held */
    worker_pool *workers_ = nullptr;
    remote_turns *turns_ = nullptr; /* the workers' turns for remote copies */
    AnswerGate gate_;
    std::mutex mu_;
    std::condition_variable done_;
    unsigned calls_ = 0; /* calls between their ask and their deletion */
};

} // namespace

/* ------------------------------------------------------------------ C API */

/* Members in the order they must outlive each other: the service its
 * server, the queue its server (gRPC's rule). */
struct kserve_grpc_server {
    std::unique_ptr<Service> service;
    std::unique_ptr<grpc::ServerCompletionQueue> queue;
    std::unique_ptr<grpc::Server> server;
    std::vector<std::thread> serving; /* cfg.serving_threads, each in drain_queue */
    Listener listener; /* the port; hands each connection it admits to server */
    grpc_config cfg;
};

namespace {

constexpr std::chrono::seconds kStrandedGrace{1};

/* After server's Shutdown has returned (gRPC's rule): shut the queue down
 * and join its threads, which delete the calls still asked for there; what
 * is left (no thread started) is drained here. */
void stop_serving(kserve_grpc_server *g)
{
    if (!g->queue)
        return;
    g->queue->Shutdown();
    for (auto &t : g->serving)
        t.join();
    g->serving.clear();
    drain_queue(g->queue.get());
}

/* Every call the service has seen is done (stop_workers), and Shutdown
 * (shut, started with it) has not returned within kStrandedGrace: cancel what gRPC
 * still holds, as Shutdown itself does at its deadline. gRPC 1.51's core can
 * strand a call that arrives just as Shutdown begins (after its sweep of the
 * calls waiting for a request, before it refuses new ones): matched to no
 * request, such a call is never seen here and would hold the stop, and its
 * client, until --drain-s. The grace lets an answer being sent go first. */
void cancel_stranded_calls(kserve_grpc_server *g, const std::future<void> &shut)
{
    if (shut.wait_for(kStrandedGrace) == std::future_status::timeout)
        grpc_server_cancel_all_calls(g->server->c_server());
}

/* Ask for every method's first calls and start the serving threads, all on
 * the one queue: the thread that reads a call off a connection then finds
 * it on the queue it waits on and runs it, where with a queue a thread it
 * would often have to wake that queue's thread instead. false (those
 * started are left running) when a thread cannot start. */
bool start_serving(kserve_grpc_server *g)
{
    g->service->ask_all(g->queue.get());
    try {
        for (unsigned i = 0; i < std::max(g->cfg.serving_threads, 1u); i++) {
            g->serving.emplace_back(drain_queue, g->queue.get());
            /* named before the server says it listens: per-thread CPU figures */
            pthread_setname_np(g->serving.back().native_handle(), "grpc-serving");
        }
    } catch (const std::system_error &) {
        return false;
    }
    return true;
}

} // namespace

extern "C" kserve_grpc_server *kserve_grpc_server_start(const grpc_config *cfg,
                                                        shmreg_registry *reg, byte_budget *held)
{
    auto g = std::make_unique<kserve_grpc_server>();
    g->cfg = *cfg;
    if (cfg->listen_fd >= 0 ? !g->listener.adopt(cfg->listen_fd)
                            : !g->listener.listen_on(cfg->host, cfg->port))
        return nullptr;
    g->service = std::make_unique<Service>(reg, cfg, held);
    if (!g->service->start_workers()) {
        std::fprintf(stderr, "error: cannot start %u gRPC worker threads\n", cfg->workers.working);
        return nullptr;
    }
    grpc::ServerBuilder builder; /* no listening port: the listener adds connections */
    builder.RegisterService(g->service.get());
    g->queue = builder.AddCompletionQueue();
    /* The same limit as an HTTP body; responses are as large as the outputs. */
    builder.SetMaxReceiveMessageSize(cfg->max_body > INT32_MAX ? INT32_MAX
                                                               : static_cast<int>(cfg->max_body));
    builder.SetMaxSendMessageSize(INT32_MAX);
    /* What the transport holds for messages arriving (Budget). */
    builder.SetResourceQuota(g->service->quota());
    /* --request-timeout-s, as HTTP closes an idle connection: a connection
     * with no call for that long is sent GOAWAY and closed (a client's
     * channel reconnects on its next call). */
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                               static_cast<int>(cfg->request_timeout_s * 1000));
    g->server = builder.BuildAndStart();
    bool serving = g->server && start_serving(g.get());
    if (!serving || !g->listener.start(g->server.get(), cfg->max_client_connections)) {
        std::fprintf(stderr, "error: cannot serve gRPC on %s:%u\n", cfg->host, cfg->port);
        if (g->server)
            g->server->Shutdown(std::chrono::system_clock::now());
        stop_serving(g.get()); /* no connection was taken: the calls asked for end here */
        g->service->stop_workers(std::chrono::system_clock::now());
        return nullptr;
    }
    return g.release();
}

extern "C" unsigned kserve_grpc_server_port(const kserve_grpc_server *g)
{
    return g->listener.port();
}

namespace {

/* A live upgrade's detach: how long no call must arrive, while answers are
 * held, before the clients waiting for one are taken to be all of them (at
 * most kHoldLimit: clients that send without waiting never fall quiet);
 * and how long gRPC's GOAWAY gets to go out before those answers follow. */
constexpr std::chrono::milliseconds kQuietBeforeGoaway{10};
constexpr std::chrono::milliseconds kHoldLimit{250};
constexpr std::chrono::milliseconds kGoawayLead{10};

/* Shutdown started on its own thread, which returns only once every call is
 * done; for a detach, so that no client's next call meets the shutdown
 * (answer_gate.h): answers are held until calls stop arriving, Shutdown
 * sends its GOAWAYs, and the answers follow them. */
std::future<void> start_shutdown(kserve_grpc_server *g, bool detaching,
                                 std::chrono::system_clock::time_point deadline)
{
    AnswerGate &gate = g->service->gate();
    if (detaching) {
        gate.hold();
        gate.settle(kQuietBeforeGoaway, kHoldLimit);
    }
    std::future<void> shut =
        std::async(std::launch::async, [g, deadline] { g->server->Shutdown(deadline); });
    if (detaching) {
        std::this_thread::sleep_for(kGoawayLead);
        gate.release();
    }
    return shut;
}

/* kserve_grpc_server_stop's work. keep (a detach): the listening socket is
 * returned open; else it is closed at once, so that a new connection is
 * refused while the calls in flight drain (-1 is returned). */
int halt(kserve_grpc_server *g, bool keep)
{
    /* New calls are refused from here on (Shutdown); calls in flight run to
     * their end until the deadline, after which the queued ones are answered
     * UNAVAILABLE and the running ones cut short, instead of all being run.
     * The serving threads drain the queue throughout: they finish the
     * calls and run each one's done. */
    int listening = keep ? g->listener.release() : (g->listener.stop(), -1); /* no new connection */
    auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(g->cfg.drain_s);
    std::future<void> shut = start_shutdown(g, keep, deadline);
    g->service->stop_workers(deadline); /* every call's done has run: no reference is held */
    cancel_stranded_calls(g, shut);
    shut.get();
    g->server->Wait();
    stop_serving(g);
    g->server.reset();
    delete g;
    return listening;
}

} // namespace

extern "C" void kserve_grpc_server_stop(kserve_grpc_server *g)
{
    if (!g)
        return;
    halt(g, false);
}

extern "C" int kserve_grpc_server_detach(kserve_grpc_server *g)
{
    return g ? halt(g, true) : -1;
}
