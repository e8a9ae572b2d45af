/*
 * The gRPC service's answers, held back for a moment of a live upgrade
 * (service.cc's detach). gRPC's Shutdown sends each connection a GOAWAY and
 * at the same moment starts failing the calls that still arrive, so a
 * client that sends its next call just before it reads the GOAWAY sees it
 * cancelled (a call its server has seen is never retried by gRPC itself).
 * A client that waits for its answer before its next call cannot be in that
 * window if its answer comes after the GOAWAY: the gate holds every answer
 * from the moment the old server stops accepting until calls have stopped
 * arriving (each such client is then waiting for one held here), Shutdown
 * has begun and its GOAWAY has had a moment to go out; then it lets them
 * all go, and each client sends its next call on a new connection, to the
 * new server.
 *
 * Thread-safety: pass() and arrived() from any serving or worker thread;
 * hold(), settle() and release() from the one thread that detaches. While
 * the gate is open pass() costs one atomic load.
 */
#ifndef SERVER_GRPC_ANSWER_GATE_H
#define SERVER_GRPC_ANSWER_GATE_H

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace grpc_service {

class AnswerGate {
  public:
    /* Call send now, or keep it for release() while the gate holds (only
     * then is it copied into a std::function). */
    template <class Send> void pass(Send &&send)
    {
        if (holding_.load(std::memory_order_acquire)) {
            std::lock_guard<std::mutex> lock(mu_);
            if (holding_.load(std::memory_order_relaxed)) {
                held_.emplace_back(std::forward<Send>(send));
                return;
            }
        }
        send();
    }
    /* A call has arrived (counted only while the gate holds). */
    void arrived()
    {
        if (holding_.load(std::memory_order_relaxed))
            arrivals_.fetch_add(1, std::memory_order_relaxed);
    }

    void hold()
    {
        std::lock_guard<std::mutex> lock(mu_);
        holding_.store(true, std::memory_order_release);
    }
    /* Wait until no call has arrived for quiet, or for at most limit. */
    void settle(std::chrono::milliseconds quiet, std::chrono::milliseconds limit) const
    {
        using clock = std::chrono::steady_clock;
        const auto end = clock::now() + limit;
        auto seen = arrivals_.load(std::memory_order_relaxed);
        auto still_since = clock::now();
        while (clock::now() < end && clock::now() - still_since < quiet) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
            auto now_seen = arrivals_.load(std::memory_order_relaxed);
            if (now_seen != seen) {
                seen = now_seen;
                still_since = clock::now();
            }
        }
    }
    /* Send every answer held, in the order they came, and pass the next at once. */
    void release()
    {
        std::vector<std::function<void()>> held;
        {
            std::lock_guard<std::mutex> lock(mu_);
            holding_.store(false, std::memory_order_release);
            held.swap(held_);
        }
        for (auto &send : held)
            send();
    }

  private:
    std::atomic<bool> holding_{false};
    std::atomic<unsigned long> arrivals_{0};
    std::mutex mu_;
    std::vector<std::function<void()>> held_;
};

} // namespace grpc_service

#endif
