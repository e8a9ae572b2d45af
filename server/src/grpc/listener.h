/*
 * The gRPC port's own listener (service.cc's, internal): it accepts each
 * connection itself, so that it can refuse one from an address that already
 * holds --max-client-connections (HTTP's per-address bound, which gRPC's
 * own listener has no hook for), and hands the others to the gRPC server
 * (grpc::AddInsecureChannelFromFd), which owns and closes them from then on.
 */
#ifndef SERVER_GRPC_LISTENER_H
#define SERVER_GRPC_LISTENER_H

#include <grpcpp/grpcpp.h>

#include <sys/socket.h>
#include <sys/types.h>

#include <thread>
#include <vector>

namespace grpc_service {

class Listener {
  public:
    Listener() = default;
    Listener(const Listener &) = delete;
    Listener &operator=(const Listener &) = delete;
    ~Listener() { stop(); }

    /* Bind and listen on host (a numeric address) and port (0: any free
     * one); false with a message on stderr. */
    bool listen_on(const char *host, unsigned port);
    /* Take fd, a socket already listening (a live upgrade), as listen_on's;
     * false with a message on stderr, fd closed. */
    bool adopt(int fd);
    /* The port bound. */
    unsigned port() const { return port_; }
    /* Accept for server on a thread of its own until stop; max_per_address
     * 0 is no limit. false (nothing started) when the thread cannot start. */
    bool start(grpc::Server *server, unsigned max_per_address);
    /* Stop accepting and close the listening socket; the connections given
     * to the server stay its own. Idempotent. */
    void stop();
    /* stop, except that the listening socket is returned open (-1: none):
     * connections that arrive meanwhile wait in its backlog. */
    int release();

  private:
    /* A connection handed to gRPC, remembered by its descriptor and its
     * socket's inode: gRPC closes the descriptor when the connection ends,
     * and the number may then be reused by another file, whose inode differs. */
    struct connection {
        int fd;
        dev_t dev;
        ino_t ino;
        sockaddr_storage peer;
    };

    void run();
    /* The port fd is bound to and the wake pipe: false after a message. */
    bool ready(int fd, const char *host, unsigned port);
    /* Whether peer may open one more connection (forgetting those gRPC has
     * closed since); remembers fd as one of its own when it may. */
    bool admit(int fd, const sockaddr_storage &peer);

    int fd_ = -1;
    int wake_[2] = {-1, -1}; /* stop writes to [1]; run polls [0] */
    unsigned port_ = 0;
    unsigned max_per_address_ = 0;
    grpc::Server *server_ = nullptr;
    std::thread thread_;
    std::vector<connection> live_; /* run's thread only */
};

} // namespace grpc_service

#endif
