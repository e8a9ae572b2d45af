/* Passing descriptors and a small payload over an AF_UNIX socket
 * (SCM_RIGHTS), for VMM file descriptors sent from a client to the server:
 * one (shmreg_send_fd / shmreg_recv_fd), or several in one message
 * (shmreg_send_fds / shmreg_recv_fds: the chunks of a VMM range), both
 * halves of each here.
 *
 * Each message is one frame: an 8-byte header (magic, payload size) and the
 * payload, the descriptor riding on its first byte. The header lets the
 * receiver find the end of the payload on a stream socket, which keeps no
 * message boundaries, and tell a truncated payload from a short one on any
 * socket type. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "base/err.h"
#include "base/sys.h"
#include "shmreg/shmreg.h"
#include "wire/fd_passing.h"

#define FRAME_MAGIC 0x46524853u /* "SHRF" in little-endian memory */

struct frame_header {
    uint32_t magic;
    uint32_t size;
};

struct frame {
    struct frame_header h;
    unsigned char payload[SHMREG_FD_PAYLOAD_MAX];
};

/* Control buffer for receiving what shmreg_send_fd sends, one descriptor,
 * aligned for cmsghdr, with room for the SCM_CREDENTIALS message the
 * kernel adds to every message when the receiving socket has SO_PASSCRED
 * set (how a server authenticates its peer): without that room the kernel
 * truncates the control data and every receive fails. */
union recv_control {
    struct cmsghdr align;
    char buf[CMSG_SPACE(sizeof(int)) + CMSG_SPACE(sizeof(struct ucred))];
};

/* Send all of buf[0, len) after the first `sent` bytes went with sendmsg. */
static shmreg_err send_rest(int sock, const unsigned char *buf, size_t len, size_t sent)
{
    while (sent < len) {
        ssize_t n = send(sock, buf + sent, len - sent, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return shmreg__fail_errno(SHMREG_ERR_SYSTEM, errno, "shmreg_send_fd: send");
        sent += (size_t)n;
    }
    return SHMREG_OK;
}

/* Send the frame [frame, +len) with count descriptors on its first byte
 * (one SCM_RIGHTS message); who names the caller in messages. */
static shmreg_err send_with_rights(int sock, const void *frame, size_t len, const int *fds, size_t count,
                                   const char *who)
{
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int) * SHMREG_FDS_MAX)];
    } control;
    memset(&control, 0, sizeof control);
    struct iovec iov = {.iov_base = (void *)frame, .iov_len = len};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    if (count > 0) { /* a frame may carry none (a CUDA IPC region request) */
        msg.msg_control = control.buf;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * count);
        struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
        cmsg->cmsg_level = SOL_SOCKET;
        cmsg->cmsg_type = SCM_RIGHTS;
        cmsg->cmsg_len = CMSG_LEN(sizeof(int) * count);
        memcpy(CMSG_DATA(cmsg), fds, sizeof(int) * count);
    }
    ssize_t n;
    do
        n = sendmsg(sock, &msg, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return count == 1 ? shmreg__fail_errno(SHMREG_ERR_SYSTEM, errno, "%s: sendmsg of descriptor %d", who, fds[0])
                          : shmreg__fail_errno(SHMREG_ERR_SYSTEM, errno, "%s: sendmsg of %zu descriptors", who,
                                               count);
    /* A stream socket may take only part of the frame; the descriptors went
     * with the first byte, so the rest goes plain. */
    return send_rest(sock, frame, len, (size_t)n);
}

SHMREG_API shmreg_err shmreg_send_fd(int sock, int fd, const void *payload, size_t payload_size)
{
    if (sock < 0 || fd < 0)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG,
                            "shmreg_send_fd: socket %d and descriptor %d must not be negative",
                            sock, fd);
    if (payload == NULL || payload_size == 0 || payload_size > SHMREG_FD_PAYLOAD_MAX)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG,
                            "shmreg_send_fd: the payload must be 1..%d bytes, got %zu%s",
                            SHMREG_FD_PAYLOAD_MAX, payload_size,
                            payload == NULL ? " at NULL" : "");
    struct frame f = {.h = {FRAME_MAGIC, (uint32_t)payload_size}};
    memcpy(f.payload, payload, payload_size);
    size_t len = sizeof f.h + payload_size;

    return send_with_rights(sock, &f, len, &fd, 1, "shmreg_send_fd");
}

/* Close every descriptor a received message carried. */
static void close_received(struct msghdr *msg)
{
    for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c != NULL; c = CMSG_NXTHDR(msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            shmreg__sys.close(fd);
        }
    }
}

/* One recvmsg into buf and control (zeroed here), retried on EINTR; msg
 * describes it (its iov is *iov) and *got is its byte count. An empty
 * message is the end of the stream, or an empty record or datagram, which
 * can still carry descriptors: they must not stay open in this process.
 * who and sender name the receiving and sending calls in messages. */
static shmreg_err receive_message(int sock, struct iovec *iov, int flags, char *control, size_t control_len,
                                  struct msghdr *msg, size_t *got, const char *who, const char *sender)
{
    memset(control, 0, control_len);
    *msg = (struct msghdr){.msg_iov = iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = control_len};
    ssize_t n;
    do
        n = recvmsg(sock, msg, flags | MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    *got = n > 0 ? (size_t)n : 0;
    if (n < 0)
        return shmreg__fail_errno(SHMREG_ERR_SYSTEM, errno, "%s: recvmsg", who);
    if (n == 0) {
        bool carried = CMSG_FIRSTHDR(msg) != NULL;
        close_received(msg);
        if (carried)
            return shmreg__fail(SHMREG_ERR_SYSTEM, "%s: not a %s message (empty); the descriptors received were "
                                                   "closed", who, sender);
        return shmreg__fail(SHMREG_ERR_SYSTEM, "%s: connection closed", who);
    }
    return SHMREG_OK;
}

/* The one descriptor of a received message: OK, OUT_OF_BOUNDS when the
 * control data was truncated (all received closed), NOT_FOUND when none.
 * SCM_CREDENTIALS beside it (SO_PASSCRED) is passed over. */
static shmreg_err take_fd(struct msghdr *msg, int *fd_out)
{
    if (msg->msg_flags & MSG_CTRUNC) {
        close_received(msg);
        return shmreg__fail(SHMREG_ERR_OUT_OF_BOUNDS,
                            "shmreg_recv_fd: control data truncated (more descriptors sent than "
                            "one); the descriptors received were closed");
    }
    struct cmsghdr *c = CMSG_FIRSTHDR(msg);
    while (c != NULL && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS)
        c = CMSG_NXTHDR(msg, c);
    if (c == NULL || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
        close_received(msg);
        return shmreg__fail(SHMREG_ERR_NOT_FOUND, "shmreg_recv_fd: the message carries no "
                                                  "descriptor");
    }
    /* The control buffer's padding can hold a second descriptor: refuse it
     * as truncated too, since the message was not what shmreg_send_fd sends. */
    if (c->cmsg_len != CMSG_LEN(sizeof(int))) {
        close_received(msg);
        return shmreg__fail(SHMREG_ERR_OUT_OF_BOUNDS,
                            "shmreg_recv_fd: control data truncated (more than one descriptor "
                            "sent); the descriptors received were closed");
    }
    /* Anything after it but credentials is not shmreg_send_fd's either. */
    for (struct cmsghdr *rest = CMSG_NXTHDR(msg, c); rest != NULL; rest = CMSG_NXTHDR(msg, rest)) {
        if (rest->cmsg_level != SOL_SOCKET || rest->cmsg_type != SCM_CREDENTIALS) {
            close_received(msg);
            return shmreg__fail(SHMREG_ERR_OUT_OF_BOUNDS,
                                "shmreg_recv_fd: more control data than one descriptor; the descriptors "
                                "received were closed");
        }
    }
    memcpy(fd_out, CMSG_DATA(c), sizeof *fd_out);
    return SHMREG_OK;
}

/* Receive into buf with room for one descriptor, and take that descriptor
 * (take_fd's rules). On OK, *got is the byte count (at least 1) and
 * *msg_flags the message's flags. */
static shmreg_err receive_with_fd(int sock, void *buf, size_t len, int flags, size_t *got,
                                  int *msg_flags, int *fd_out)
{
    union recv_control control;
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    struct msghdr msg;
    shmreg_err rc = receive_message(sock, &iov, flags, control.buf, sizeof control.buf, &msg, got,
                                    "shmreg_recv_fd", "shmreg_send_fd");
    if (rc != SHMREG_OK)
        return rc;
    *msg_flags = msg.msg_flags;
    return take_fd(&msg, fd_out);
}

static shmreg_err malformed(int fd, const char *why)
{
    shmreg__sys.close(fd);
    return shmreg__fail(SHMREG_ERR_SYSTEM,
                        "shmreg_recv_fd: not a shmreg_send_fd message (%s); the descriptor "
                        "received was closed",
                        why);
}

static shmreg_err check_header(const struct frame_header *h, int fd)
{
    if (h->magic != FRAME_MAGIC)
        return malformed(fd, "bad header");
    if (h->size == 0 || h->size > SHMREG_FD_PAYLOAD_MAX)
        return malformed(fd, "payload size out of range");
    return SHMREG_OK;
}

static shmreg_err payload_too_large(int fd, size_t size, size_t cap)
{
    shmreg__sys.close(fd);
    return shmreg__fail(SHMREG_ERR_OUT_OF_BOUNDS,
                        "shmreg_recv_fd: payload truncated: %zu bytes sent, room for %zu; the "
                        "descriptor received was closed",
                        size, cap);
}

/* SOCK_SEQPACKET and SOCK_DGRAM: the frame is one record. */
static shmreg_err recv_record(int sock, int *fd_out, void *payload, size_t cap,
                              size_t *payload_size)
{
    struct frame f;
    size_t n;
    int msg_flags;
    int fd = -1;
    shmreg_err rc = receive_with_fd(sock, &f, sizeof f, 0, &n, &msg_flags, &fd);
    if (rc != SHMREG_OK)
        return rc;
    if (msg_flags & MSG_TRUNC) {
        shmreg__sys.close(fd);
        return shmreg__fail(SHMREG_ERR_OUT_OF_BOUNDS,
                            "shmreg_recv_fd: payload truncated: the message is longer than a "
                            "frame of %d payload bytes; the descriptor received was closed",
                            SHMREG_FD_PAYLOAD_MAX);
    }
    if (n < sizeof f.h)
        return malformed(fd, "shorter than its header");
    if ((rc = check_header(&f.h, fd)) != SHMREG_OK)
        return rc;
    if (n != sizeof f.h + f.h.size)
        return malformed(fd, "payload size does not match the header");
    if (f.h.size > cap)
        return payload_too_large(fd, f.h.size, cap);
    memcpy(payload, f.payload, f.h.size);
    *payload_size = f.h.size;
    *fd_out = fd;
    return SHMREG_OK;
}

/* Read exactly len bytes of a stream; SYSTEM when the peer closes first. */
static shmreg_err read_exact(int sock, void *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = recv(sock, (char *)buf + got, len - got, MSG_WAITALL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return shmreg__fail_errno(SHMREG_ERR_SYSTEM, errno, "shmreg_recv_fd: recv");
        if (n == 0)
            return shmreg__fail(SHMREG_ERR_SYSTEM,
                                "shmreg_recv_fd: connection closed in the middle of a message");
        got += (size_t)n;
    }
    return SHMREG_OK;
}

/* SOCK_STREAM, a message refused before its payload was read (got bytes
 * of it read, up to a header's): when those bytes are a frame's header, read
 * the rest of the frame, so that the next message starts where this one
 * ended. OK when it did; NOT_FOUND when the bytes are not a header (nothing
 * tells where the next message starts); SYSTEM when the read failed. The
 * thread's message is left alone on OK and NOT_FOUND. */
static shmreg_err drop_frame(int sock, struct frame *f, size_t got)
{
    if (got < sizeof f->h || f->h.magic != FRAME_MAGIC || f->h.size == 0 || f->h.size > SHMREG_FD_PAYLOAD_MAX)
        return SHMREG_ERR_NOT_FOUND;
    return read_exact(sock, f->payload, f->h.size);
}

/* SOCK_STREAM, a message that came without a descriptor: NOT_FOUND, its
 * frame read to its end when it is one; bytes that are not a frame's leave
 * no way to find the next message, and the message says so. */
static shmreg_err skip_frame(int sock, struct frame *f, size_t got)
{
    shmreg_err rc = drop_frame(sock, f, got);
    if (rc == SHMREG_ERR_SYSTEM)
        return rc;
    if (rc == SHMREG_OK)
        return shmreg__fail(SHMREG_ERR_NOT_FOUND, "shmreg_recv_fd: the message carries no descriptor (its %u "
                                                  "payload bytes were read and dropped)", (unsigned)f->h.size);
    if (got < sizeof f->h)
        return shmreg__fail(SHMREG_ERR_NOT_FOUND, "shmreg_recv_fd: the message carries no descriptor (and "
                                                  "is shorter than a frame's header)");
    return shmreg__fail(SHMREG_ERR_NOT_FOUND, "shmreg_recv_fd: the message carries no descriptor (and "
                                              "is not a shmreg_send_fd frame: the stream is out of step)");
}

/* SOCK_STREAM, a frame whose control data was refused (more descriptors
 * than one; take_fd closed them all): its payload is read and dropped too,
 * so that the next message is read whole (it used to be read as a header,
 * refused as "bad header" and its descriptor closed). OUT_OF_BOUNDS with
 * take_fd's message. */
static shmreg_err skip_refused_control(int sock, struct frame *f, size_t got)
{
    char why[256];
    snprintf(why, sizeof why, "%s", shmreg_last_error());
    shmreg_err rc = drop_frame(sock, f, got);
    if (rc == SHMREG_ERR_SYSTEM)
        return rc;
    return shmreg__fail(SHMREG_ERR_OUT_OF_BOUNDS, "%s%s", why,
                        rc == SHMREG_OK ? " (the frame's payload was read and dropped)"
                                        : " (and the bytes are not a shmreg_send_fd frame: the stream is out of step)");
}

/* SOCK_STREAM: the header with the descriptor, then exactly its payload, so
 * the next message starts where this one ended even when this one is
 * refused for its size. */
static shmreg_err recv_stream(int sock, int *fd_out, void *payload, size_t cap,
                              size_t *payload_size)
{
    struct frame f;
    size_t n;
    int msg_flags;
    int fd = -1;
    shmreg_err rc = receive_with_fd(sock, &f.h, sizeof f.h, MSG_WAITALL, &n, &msg_flags, &fd);
    if (rc == SHMREG_ERR_NOT_FOUND)
        return skip_frame(sock, &f, n);
    if (rc == SHMREG_ERR_OUT_OF_BOUNDS)
        return skip_refused_control(sock, &f, n);
    if (rc != SHMREG_OK)
        return rc;
    if (n < sizeof f.h) {
        shmreg__sys.close(fd);
        return shmreg__fail(SHMREG_ERR_SYSTEM,
                            "shmreg_recv_fd: connection closed in the middle of a message");
    }
    if ((rc = check_header(&f.h, fd)) != SHMREG_OK)
        return rc;
    if ((rc = read_exact(sock, f.payload, f.h.size)) != SHMREG_OK) {
        shmreg__sys.close(fd);
        return rc;
    }
    if (f.h.size > cap)
        return payload_too_large(fd, f.h.size, cap);
    memcpy(payload, f.payload, f.h.size);
    *payload_size = f.h.size;
    *fd_out = fd;
    return SHMREG_OK;
}

SHMREG_API shmreg_err shmreg_recv_fd(int sock, int *fd_out, void *payload, size_t cap,
                                     size_t *payload_size)
{
    if (sock < 0 || fd_out == NULL || payload == NULL || cap == 0 || payload_size == NULL)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG,
                            "shmreg_recv_fd: needs a socket, fd_out, a payload buffer of at "
                            "least 1 byte and payload_size");
    int type = 0;
    socklen_t type_len = sizeof type;
    if (getsockopt(sock, SOL_SOCKET, SO_TYPE, &type, &type_len) != 0)
        return shmreg__fail_errno(SHMREG_ERR_SYSTEM, errno, "shmreg_recv_fd: socket %d", sock);
    if (type == SOCK_STREAM)
        return recv_stream(sock, fd_out, payload, cap, payload_size);
    return recv_record(sock, fd_out, payload, cap, payload_size);
}

/* ------------------------------------------ several descriptors (1.3) */

/* The frame of shmreg_send_fds: a header of its own magic, so that neither
 * receiver mistakes the other's frame for its own, and the descriptor count,
 * so that the receiver tells a message the kernel cut short (SCM_MAX_FD,
 * RLIMIT_NOFILE) from a whole one. */

struct fds_header {
    uint32_t magic;
    uint32_t size;
    uint32_t count;
    uint32_t zero;
};

struct fds_frame {
    struct fds_header h;
    unsigned char payload[SHMREG_FD_PAYLOAD_MAX];
};

union fds_control {
    struct cmsghdr align;
    char buf[CMSG_SPACE(sizeof(int) * SHMREG_FDS_MAX) + CMSG_SPACE(sizeof(struct ucred))];
};

shmreg_err shmreg__send_fds_frame(int sock, const int *fds, size_t count, const void *payload, size_t payload_size,
                                  const char *who)
{
    if (sock < 0 || (fds == NULL && count > 0) || count > SHMREG_FDS_MAX)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG,
                            "%s: needs a socket and up to %d descriptors, got socket %d and %zu%s", who,
                            SHMREG_FDS_MAX, sock, count, fds == NULL ? " at NULL" : "");
    for (size_t i = 0; i < count; i++)
        if (fds[i] < 0)
            return shmreg__fail(SHMREG_ERR_INVALID_ARG, "%s: descriptor %zu is %d", who, i, fds[i]);
    if (payload == NULL || payload_size == 0 || payload_size > SHMREG_FD_PAYLOAD_MAX)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "%s: the payload must be 1..%d bytes, got %zu%s", who,
                            SHMREG_FD_PAYLOAD_MAX, payload_size, payload == NULL ? " at NULL" : "");
    struct fds_frame f = {.h = {SHMREG_FDS_FRAME_MAGIC, (uint32_t)payload_size, (uint32_t)count, 0}};
    memcpy(f.payload, payload, payload_size);
    return send_with_rights(sock, &f, sizeof f.h + payload_size, fds, count, who);
}

SHMREG_API shmreg_err shmreg_send_fds(int sock, const int *fds, size_t count, const void *payload,
                                      size_t payload_size)
{
    if (count == 0)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "shmreg_send_fds: needs 1..%d descriptors, got 0",
                            SHMREG_FDS_MAX);
    return shmreg__send_fds_frame(sock, fds, count, payload, payload_size, "shmreg_send_fds");
}

/* Where the received descriptors go, and how many came. */
struct fds_out {
    int *fds;
    size_t cap;
    size_t count;
    bool allow_none; /* a frame without descriptors is one */
};

static void close_taken(struct fds_out *o)
{
    for (size_t i = 0; i < o->count; i++)
        shmreg__sys.close(o->fds[i]);
    o->count = 0;
}

/* The descriptors of one SCM_RIGHTS message into o, credentials passed over;
 * on failure every descriptor the message carried is closed. */
static shmreg_err take_fds(struct msghdr *msg, struct fds_out *o)
{
    const char *why = NULL;
    shmreg_err code = SHMREG_ERR_OUT_OF_BOUNDS;
    struct cmsghdr *rights = NULL;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c != NULL && why == NULL; c = CMSG_NXTHDR(msg, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS)
            continue;
        if (rights != NULL || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            why = "control data other than one message of descriptors";
        rights = c;
    }
    size_t n = rights ? (rights->cmsg_len - CMSG_LEN(0)) / sizeof(int) : 0;
    if (why == NULL && (msg->msg_flags & MSG_CTRUNC))
        why = "control data truncated (more descriptors sent than SHMREG_FDS_MAX)";
    else if (why == NULL && n > o->cap)
        why = "more descriptors than the caller has room for";
    else if (why == NULL && n == 0 && !o->allow_none)
        why = "the message carries no descriptor", code = SHMREG_ERR_NOT_FOUND;
    if (why != NULL) {
        close_received(msg);
        return shmreg__fail(code, "shmreg_recv_fds: %s (%zu received, room for %zu); the descriptors "
                                  "received were closed", why, n, o->cap);
    }
    if (n > 0)
        memcpy(o->fds, CMSG_DATA(rights), n * sizeof(int));
    o->count = n;
    return SHMREG_OK;
}

/* One recvmsg with room for SHMREG_FDS_MAX descriptors; *got the bytes. */
static shmreg_err receive_with_fds(int sock, void *buf, size_t len, int flags, size_t *got, int *msg_flags,
                                   struct fds_out *o)
{
    union fds_control control;
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    struct msghdr msg;
    shmreg_err rc = receive_message(sock, &iov, flags, control.buf, sizeof control.buf, &msg, got,
                                    "shmreg_recv_fds", "shmreg_send_fds");
    if (rc != SHMREG_OK)
        return rc;
    *msg_flags = msg.msg_flags;
    return take_fds(&msg, o);
}

/* The header against what came: its magic, its payload size, and the count
 * it promises against the descriptors that arrived. */
static const char *fds_header_fault(const struct fds_header *h, size_t received)
{
    if (h->magic != SHMREG_FDS_FRAME_MAGIC || h->zero != 0)
        return "bad header";
    if (h->size == 0 || h->size > SHMREG_FD_PAYLOAD_MAX)
        return "payload size out of range";
    if (h->count != received)
        return "the descriptor count does not match the descriptors received";
    return NULL;
}

static shmreg_err fds_malformed(struct fds_out *o, const char *why)
{
    close_taken(o);
    return shmreg__fail(SHMREG_ERR_SYSTEM,
                        "shmreg_recv_fds: not a shmreg_send_fds message (%s); the descriptors received were closed",
                        why);
}

/* SOCK_STREAM, a frame refused after its header was read: read its payload
 * too when the header is one, so the next message is read whole. */
static shmreg_err fds_drop_rest(int sock, struct fds_frame *f, size_t got, shmreg_err refused)
{
    if (got < sizeof f->h || f->h.magic != SHMREG_FDS_FRAME_MAGIC || f->h.size == 0 ||
        f->h.size > SHMREG_FD_PAYLOAD_MAX)
        return refused;
    char why[256];
    snprintf(why, sizeof why, "%s", shmreg_last_error());
    shmreg_err rc = read_exact(sock, f->payload, f->h.size);
    if (rc != SHMREG_OK)
        return rc;
    return shmreg__fail(refused, "%s (the frame's payload was read and dropped)", why);
}

static shmreg_err recv_fds_frame(int sock, bool stream, struct fds_frame *f, struct fds_out *o)
{
    size_t n = 0;
    int msg_flags = 0;
    size_t want = stream ? sizeof f->h : sizeof *f;
    shmreg_err rc = receive_with_fds(sock, f, want, stream ? MSG_WAITALL : 0, &n, &msg_flags, o);
    if (rc != SHMREG_OK)
        return stream && n > 0 ? fds_drop_rest(sock, f, n, rc) : rc;
    if (!stream && (msg_flags & MSG_TRUNC)) {
        close_taken(o);
        return shmreg__fail(SHMREG_ERR_OUT_OF_BOUNDS,
                            "shmreg_recv_fds: payload truncated: the message is longer than a frame of %d "
                            "payload bytes; the descriptors received were closed", SHMREG_FD_PAYLOAD_MAX);
    }
    if (n < sizeof f->h)
        return fds_malformed(o, stream ? "connection closed in the middle of a message" : "shorter than its header");
    const char *why = fds_header_fault(&f->h, o->count);
    if (why != NULL) {
        rc = fds_malformed(o, why);
        return stream ? fds_drop_rest(sock, f, n, rc) : rc;
    }
    if (stream && (rc = read_exact(sock, f->payload, f->h.size)) != SHMREG_OK) {
        close_taken(o);
        return rc;
    }
    if (!stream && n != sizeof f->h + f->h.size)
        return fds_malformed(o, "payload size does not match the header");
    return SHMREG_OK;
}

shmreg_err shmreg__recv_fds_frame(int sock, int *fds, size_t fd_cap, size_t *count, void *payload, size_t cap,
                                  size_t *payload_size, bool allow_none)
{
    int type = 0;
    socklen_t type_len = sizeof type;
    if (getsockopt(sock, SOL_SOCKET, SO_TYPE, &type, &type_len) != 0)
        return shmreg__fail_errno(SHMREG_ERR_SYSTEM, errno, "shmreg_recv_fds: socket %d", sock);
    struct fds_frame f;
    struct fds_out o = {.fds = fds, .cap = fd_cap, .allow_none = allow_none};
    shmreg_err rc = recv_fds_frame(sock, type == SOCK_STREAM, &f, &o);
    if (rc != SHMREG_OK)
        return rc;
    if (f.h.size > cap) {
        close_taken(&o);
        return shmreg__fail(SHMREG_ERR_OUT_OF_BOUNDS,
                            "shmreg_recv_fds: payload truncated: %u bytes sent, room for %zu; the descriptors "
                            "received were closed", (unsigned)f.h.size, cap);
    }
    memcpy(payload, f.payload, f.h.size);
    *payload_size = f.h.size;
    *count = o.count;
    return SHMREG_OK;
}

SHMREG_API shmreg_err shmreg_recv_fds(int sock, int *fds, size_t fd_cap, size_t *count, void *payload,
                                      size_t cap, size_t *payload_size)
{
    if (count != NULL)
        *count = 0;
    if (sock < 0 || fds == NULL || fd_cap == 0 || count == NULL || payload == NULL || cap == 0 ||
        payload_size == NULL)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG,
                            "shmreg_recv_fds: needs a socket, room for at least one descriptor, count, a "
                            "payload buffer of at least 1 byte and payload_size");
    return shmreg__recv_fds_frame(sock, fds, fd_cap, count, payload, cap, payload_size, false);
}
