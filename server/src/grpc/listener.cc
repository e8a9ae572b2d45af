/* The gRPC port's listener: per-address connection bound (listener.h). */
#include "grpc/listener.h"

#include <grpcpp/server_posix.h>

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

namespace grpc_service {

namespace {

bool same_address(const sockaddr_storage &a, const sockaddr_storage &b)
{
    if (a.ss_family != b.ss_family)
        return false;
    if (a.ss_family == AF_INET)
        return std::memcmp(&reinterpret_cast<const sockaddr_in &>(a).sin_addr,
                           &reinterpret_cast<const sockaddr_in &>(b).sin_addr,
                           sizeof(in_addr)) == 0;
    if (a.ss_family == AF_INET6)
        return std::memcmp(&reinterpret_cast<const sockaddr_in6 &>(a).sin6_addr,
                           &reinterpret_cast<const sockaddr_in6 &>(b).sin6_addr,
                           sizeof(in6_addr)) == 0;
    return false;
}

} // namespace

bool Listener::listen_on(const char *host, unsigned port)
{
    addrinfo hints{}, *found = nullptr;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST | AI_NUMERICSERV;
    std::string service = std::to_string(port);
    int rc = getaddrinfo(host, service.c_str(), &hints, &found);
    if (rc != 0) {
        std::fprintf(stderr, "error: gRPC address %s: %s\n", host, gai_strerror(rc));
        return false;
    }
    int fd = socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int on = 1;
    /* SO_REUSEADDR but not SO_REUSEPORT: a second server on a port in use
     * fails to start, as the HTTP side does. */
    bool ok = fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) == 0 &&
              bind(fd, found->ai_addr, found->ai_addrlen) == 0 && listen(fd, 1024) == 0;
    freeaddrinfo(found);
    if (!ok) {
        std::fprintf(stderr, "error: cannot listen for gRPC on %s:%u: %s\n", host, port,
                     std::strerror(errno));
        if (fd >= 0)
            close(fd);
        return false;
    }
    return ready(fd, host, port);
}

bool Listener::adopt(int fd)
{
    return ready(fd, "the inherited socket", 0);
}

bool Listener::ready(int fd, const char *host, unsigned port)
{
    sockaddr_storage bound{};
    socklen_t len = sizeof bound;
    if (getsockname(fd, reinterpret_cast<sockaddr *>(&bound), &len) == 0)
        port_ = ntohs(bound.ss_family == AF_INET6
                          ? reinterpret_cast<sockaddr_in6 &>(bound).sin6_port
                          : reinterpret_cast<sockaddr_in &>(bound).sin_port);
    /* Non-blocking: poll's word that a connection waits may be stale once
     * another process (an upgrade's other side) holds the socket too. */
    int flags = fcntl(fd, F_GETFL);
    if (port_ == 0 || flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0 ||
        pipe2(wake_, O_CLOEXEC) != 0) {
        std::fprintf(stderr, "error: cannot listen for gRPC on %s:%u: %s\n", host, port,
                     std::strerror(errno));
        close(fd);
        return false;
    }
    fd_ = fd;
    return true;
}

bool Listener::start(grpc::Server *server, unsigned max_per_address)
{
    server_ = server;
    max_per_address_ = max_per_address;
    try {
        thread_ = std::thread(&Listener::run, this);
    } catch (const std::system_error &) {
        return false;
    }
    return true;
}

int Listener::release()
{
    if (thread_.joinable()) {
        char one = 1;
        while (write(wake_[1], &one, 1) < 0 && errno == EINTR)
            continue;
        thread_.join();
    }
    for (int *fd : {&wake_[0], &wake_[1]})
        if (*fd >= 0) {
            close(*fd);
            *fd = -1;
        }
    int fd = fd_;
    fd_ = -1;
    return fd;
}

void Listener::stop()
{
    int fd = release();
    if (fd >= 0)
        close(fd);
}

bool Listener::admit(int fd, const sockaddr_storage &peer)
{
    unsigned same = 0;
    size_t kept = 0;
    for (const connection &c : live_) {
        struct stat st;
        if (fstat(c.fd, &st) != 0 || !S_ISSOCK(st.st_mode) || st.st_dev != c.dev ||
            st.st_ino != c.ino)
            continue; /* gRPC has closed it */
        live_[kept++] = c;
        same += same_address(c.peer, peer);
    }
    live_.resize(kept);
    struct stat st;
    if ((max_per_address_ && same >= max_per_address_) || fstat(fd, &st) != 0)
        return false;
    live_.push_back(connection{fd, st.st_dev, st.st_ino, peer});
    return true;
}

void Listener::run()
{
    pollfd fds[2] = {{fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    for (;;) {
        if (poll(fds, 2, -1) < 0 && errno != EINTR)
            return;
        if (fds[1].revents)
            return;
        if (!(fds[0].revents & POLLIN))
            continue;
        sockaddr_storage peer{};
        socklen_t len = sizeof peer;
        int fd = accept4(fd_, reinterpret_cast<sockaddr *>(&peer), &len,
                         SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            /* Out of descriptors: wait a little rather than spin on the
             * connection that stays pending. */
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                poll(nullptr, 0, 100);
            continue;
        }
        if (!admit(fd, peer)) {
            close(fd); /* as HTTP refuses one over --max-client-connections */
            continue;
        }
        int on = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
        grpc::AddInsecureChannelFromFd(server_, fd); /* gRPC's from here on */
    }
}

} // namespace grpc_service
