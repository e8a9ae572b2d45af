/*
 * --uds PATH: sealed memfd regions and GPU memory registered over a Unix
 * socket.
 *
 * One thread polls the listening socket and every connection, all
 * non-blocking, so a silent or slow client costs one slot and nothing else:
 * SOCK_SEQPACKET keeps each request one record, which a single recvmsg reads
 * whole once poll says it is there, and an answer the client does not read
 * (its socket buffer full) closes that client instead of waiting for it.
 *
 * Bounds against a hostile peer: at most --uds-max-connections connections
 * (one more is answered "too many" and closed), at most --uds-max-regions
 * regions per connection (counted by the registry under the connection's
 * tag, pending ones included), a share of --max-regions and
 * --max-mapped-bytes per peer uid when --allow-uid accepts several (one
 * uid cannot make another's registrations fail), requests of a fixed
 * maximum size (the library refuses longer ones and closes their
 * descriptors), and every received descriptor is closed once the registry
 * has mapped or imported what it names.
 *
 * Two request formats share the socket, both the library's (shmreg.h): a
 * memfd region (shmreg_recv_region) and GPU memory (shmreg_recv_cuda_region:
 * a VMM range, a pool allocation or a legacy IPC handle). Each is read,
 * checked and answered (shmreg_answer_region) by the library; this file is
 * policy only (connections, slots, tags, limits), the same for both.
 */
#include "uds/uds_server.h"

#include <fcntl.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/unix_socket.h"
#include "uds/orphans.h"

/* A closed connection whose regions are still busy under the refuse policy
 * keeps its slot (so disconnecting cannot escape the connection limit) and
 * is retried this often until its regions are idle. */
#define DRAIN_RETRY_MS 100
/* Accepted per poll round, so a connect flood cannot starve the connections
 * already open. */
#define ACCEPTS_PER_ROUND 32

enum slot_state { SLOT_FREE, SLOT_OPEN, SLOT_DRAINING };

struct slot {
    enum slot_state state;
    int fd;
    uid_t uid;         /* the peer's (SO_PEERCRED) */
    char tag[UDS_TAG_MAX]; /* owner tag of every region this connection registers */
};

struct uds_server {
    shmreg_registry *reg;
    uds_config cfg;
    int listen_fd;
    int wake_fd; /* eventfd: uds_server_stop wakes the poll loop */
    struct stat sock_st; /* the socket file we made, so stop removes only that */
    pthread_t thread;
    unsigned long long connections; /* ever accepted: makes each tag unique */
    unsigned uids;                  /* uids --allow-uid accepts; 0: any */
    size_t uid_regions, uid_mapped; /* each uid's share of the limits; 0: none */
    bool accept_paused;             /* out of descriptors: skip accepting for a while */
    struct slot *slots;             /* cfg.max_connections */
    struct pollfd *pfds;            /* wake, listen, then open slots */
    size_t *pfd_slot;               /* pfds[i + 2] belongs to slots[pfd_slot[i]] */
    uds_orphans *orphans;           /* carried regions that came without their connection */
};

/* ---------------------------------------------------------------- answers */

/* Send "<code name> <message>" as one record (shmreg_answer_region: one
 * line, never blocks). -1 when the client's socket cannot take it now, and
 * the caller then drops the client. */
__attribute__((format(printf, 3, 4))) static int answer(int fd, shmreg_err code, const char *fmt, ...)
{
    char msg[SHMREG_REGION_ANSWER_MAX + 1];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return shmreg_answer_region(fd, code, msg) == SHMREG_OK ? 0 : -1;
}

/* --------------------------------------------------------------- requests */

/* What the regions of every connection of uid hold (closed connections
 * still draining included): the registry counts per tag, pending regions
 * included, until they are unmapped. */
static shmreg_err uid_usage(const uds_server *u, uid_t uid, shmreg_tag_stats *sum)
{
    memset(sum, 0, sizeof *sum);
    for (unsigned i = 0; i < u->cfg.max_connections; i++) {
        const struct slot *s = &u->slots[i];
        shmreg_tag_stats one;
        if (s->state == SLOT_FREE || s->uid != uid)
            continue;
        shmreg_err e = shmreg_tag_stats_get(u->reg, s->tag, &one);
        if (e != SHMREG_OK)
            return e;
        sum->regions += one.regions;
        sum->mapped_bytes += one.mapped_bytes;
    }
    return SHMREG_OK;
}

/* With several uids allowed, each has its share of the registry's
 * limits, so that one uid's connections cannot fill them for the others.
 * The refusal quotes that uid's usage only. Only this thread registers
 * under these tags, so the check cannot race another registration. */
static shmreg_err check_uid_share(const uds_server *u, const struct slot *s, size_t byte_size, char *why,
                                  size_t why_len)
{
    if (!u->uid_regions && !u->uid_mapped)
        return SHMREG_OK;
    shmreg_tag_stats used;
    shmreg_err e = uid_usage(u, s->uid, &used);
    if (e != SHMREG_OK) {
        snprintf(why, why_len, "%s", shmreg_last_error());
        return e;
    }
    if (u->uid_regions && used.regions >= u->uid_regions) {
        snprintf(why, why_len, "uid %u's connections hold %zu regions, its share of --max-regions among the "
                               "%u uids --allow-uid accepts", (unsigned)s->uid, used.regions, u->uids);
        return SHMREG_ERR_NO_MEMORY;
    }
    if (u->uid_mapped && (byte_size > u->uid_mapped || used.mapped_bytes > u->uid_mapped - byte_size)) {
        snprintf(why, why_len, "%zu more mapped bytes would pass uid %u's share of --max-mapped-bytes, %zu "
                               "(%zu in use by its connections)",
                 byte_size, (unsigned)s->uid, u->uid_mapped, used.mapped_bytes);
        return SHMREG_ERR_NO_MEMORY;
    }
    return SHMREG_OK;
}

/* OK while the connection's tag holds fewer regions than the limit, and
 * its uid is within its share. The registry counts them, so a region
 * unregistered over HTTP frees its place once it is really gone, and a
 * pending one still takes it. */
static shmreg_err check_room(const uds_server *u, const struct slot *s, size_t byte_size, char *why,
                             size_t why_len)
{
    shmreg_tag_stats own;
    shmreg_err e = shmreg_tag_stats_get(u->reg, s->tag, &own);
    if (e != SHMREG_OK) {
        snprintf(why, why_len, "%s", shmreg_last_error());
        return e;
    }
    if (own.regions >= u->cfg.max_regions) {
        snprintf(why, why_len, "this connection already holds %zu regions, the limit per connection "
                               "(--uds-max-regions %u); unregister one or use another connection",
                 own.regions, u->cfg.max_regions);
        return SHMREG_ERR_NO_MEMORY;
    }
    return check_uid_share(u, s, byte_size, why, why_len);
}

/* Without tenants the server's names are one namespace, as before tags were
 * namespaces:
 * a name another connection (or HTTP, gRPC) holds is taken, though the
 * library would let each connection's tag hold it. The holder's own tag is
 * left to the library, which then says whether the name is pending. */
static shmreg_err check_name_free(const uds_server *u, const struct slot *s, const char *name, char *why,
                                  size_t why_len)
{
    shmreg_region_status *st = NULL;
    size_t n = 0;
    if (shmreg_status(u->reg, name, SHMREG_KIND_ANY, &st, &n) != SHMREG_OK)
        return SHMREG_OK; /* none, or one the library answers about */
    bool mine = n > 0 && st[0].tag && strcmp(st[0].tag, s->tag) == 0;
    shmreg_status_free(st, n);
    if (mine)
        return SHMREG_OK;
    snprintf(why, why_len, "shared memory region '%s' already in manager", name);
    return SHMREG_ERR_ALREADY_EXISTS;
}

/* The server's checks (the name, this connection's room, its uid's share),
 * then the library's registration of r under the connection's tag. */
static shmreg_err register_tagged(const uds_server *u, const struct slot *s, shmreg_registration *r, char *why,
                                  size_t why_len)
{
    shmreg_err e = check_name_free(u, s, r->name, why, why_len);
    if (e == SHMREG_OK)
        e = check_room(u, s, r->byte_size, why, why_len);
    if (e != SHMREG_OK)
        return e;
    r->tag = s->tag;
    e = shmreg_register(u->reg, r);
    if (e != SHMREG_OK)
        snprintf(why, why_len, "%s", shmreg_last_error());
    return e;
}

static shmreg_err register_window(const uds_server *u, const struct slot *s, const shmreg_region_request *rq,
                                  char *why, size_t why_len)
{
    shmreg_registration r;
    shmreg_registration_init(&r);
    r.source = SHMREG_SOURCE_FD;
    r.name = rq->name;
    r.fd = rq->fd;
    r.offset = rq->offset;
    r.byte_size = rq->byte_size;
    r.flags = rq->flags;
    shmreg_err e = register_tagged(u, s, &r, why, why_len);
    if (e == SHMREG_OK)
        snprintf(why, why_len, "registered system shared memory region '%s' (%zu bytes of a sealed descriptor)",
                 rq->name, rq->byte_size);
    return e;
}

static const char *gpu_memory_kind(const shmreg_cuda_region_request *q)
{
    switch (q->source) {
    case SHMREG_SOURCE_CUDA_VMM_RANGE:
        return "a range of CUDA VMM allocations";
    case SHMREG_SOURCE_CUDA_POOL:
        return "an allocation of a CUDA memory pool";
    default:
        return "a legacy CUDA IPC allocation";
    }
}

static shmreg_err register_gpu_memory(const uds_server *u, const struct slot *s,
                                      const shmreg_cuda_region_request *q, char *why, size_t why_len)
{
    shmreg_registration r;
    shmreg_registration_init(&r);
    shmreg_cuda_region_registration(q, &r); /* points into q, which outlives the call */
    shmreg_err e = register_tagged(u, s, &r, why, why_len);
    if (e == SHMREG_OK)
        snprintf(why, why_len, "registered CUDA shared memory region '%s' (%zu bytes of %s on %s)", q->name,
                 q->byte_size, gpu_memory_kind(q), q->device_uuid);
    return e;
}

static int report(const uds_server *u, const struct slot *s, shmreg_err e, const char *why)
{
    if (u->cfg.verbose)
        fprintf(stderr, "uds %s: %s %s\n", s->tag, shmreg_err_name(e), why);
    return answer(s->fd, e, "%s", why);
}

/* Read one memfd-region request, register it, answer it. -1 when the
 * client must go. */
static int serve_memfd_request(const uds_server *u, const struct slot *s)
{
    shmreg_region_request rq;
    shmreg_err e = shmreg_recv_region(s->fd, &rq);
    if (e != SHMREG_OK) /* the library closed whatever descriptor came */
        return answer(s->fd, e, "%s", shmreg_last_error());
    char why[SHMREG_REGION_ANSWER_MAX];
    e = register_window(u, s, &rq, why, sizeof why);
    close(rq.fd); /* the registry maps what it needs and keeps no descriptor */
    return report(u, s, e, why);
}

/* The same for GPU memory. The descriptors that came (a range's chunks, a
 * pool's) are closed whether the registration worked or not: the registry
 * imports what it needs and keeps none. */
static int serve_gpu_request(const uds_server *u, const struct slot *s)
{
    shmreg_cuda_region_request q;
    shmreg_err e = shmreg_recv_cuda_region(s->fd, &q);
    if (e != SHMREG_OK) /* the library closed every descriptor that came */
        return answer(s->fd, e, "%s", shmreg_last_error());
    char why[SHMREG_REGION_ANSWER_MAX];
    e = register_gpu_memory(u, s, &q, why, sizeof why);
    shmreg_cuda_region_request_close(&q);
    return report(u, s, e, why);
}

/* The frames of shmreg.h that carry the two requests: a memfd region rides
 * in shmreg_send_fd's frame, GPU memory in shmreg_send_fds's, each header
 * starting with its own magic. */

/* Which receiver reads the next record, from its first bytes, peeked: a
 * peek without room for control data installs none of the record's
 * descriptors, and leaves the record whole for the receiver, which reads it
 * and its descriptors once. A shmreg_send_fds frame goes to the GPU
 * receiver, which names what is wrong with a payload that is not its
 * request; anything else to the memfd one, which refuses it as before. */
static bool is_gpu_request(int fd)
{
    uint32_t magic = 0;
    ssize_t n = recv(fd, &magic, sizeof magic, MSG_PEEK | MSG_DONTWAIT);
    return n == (ssize_t)sizeof magic && magic == SHMREG_FDS_FRAME_MAGIC;
}

/* Read one request, register it, answer it. -1 when the client must go. */
static int serve_request(const uds_server *u, const struct slot *s)
{
    return is_gpu_request(s->fd) ? serve_gpu_request(u, s) : serve_memfd_request(u, s);
}

/* ------------------------------------------------------------ connections */

/* Unregister every region of the slot's tag under the registry's policy.
 * False when the refuse policy left busy ones: try again later. */
static bool release_regions(const uds_server *u, struct slot *s)
{
    shmreg_filter f;
    shmreg_filter_init(&f);
    f.tag = s->tag;
    shmreg_err e = shmreg_unregister_matching(u->reg, &f);
    if (e == SHMREG_ERR_BUSY)
        return false;
    if (e != SHMREG_OK && e != SHMREG_ERR_NOT_FOUND)
        fprintf(stderr, "uds %s: unregistering its regions: %s\n", s->tag, shmreg_last_error());
    return true;
}

static void close_connection(uds_server *u, struct slot *s)
{
    close(s->fd);
    s->fd = -1;
    if (u->cfg.verbose)
        fprintf(stderr, "uds %s: closed\n", s->tag);
    s->state = release_regions(u, s) ? SLOT_FREE : SLOT_DRAINING;
}

static struct slot *free_slot(uds_server *u)
{
    for (unsigned i = 0; i < u->cfg.max_connections; i++)
        if (u->slots[i].state == SLOT_FREE)
            return &u->slots[i];
    return NULL;
}

/* The tag names the peer the kernel vouches for (SO_PEERCRED, taken at
 * connect) and a counter, so two connections of one process never share
 * regions. */
static void open_connection(uds_server *u, struct slot *s, int fd)
{
    struct ucred cred = {.pid = 0, .uid = (uid_t)-1, .gid = (gid_t)-1};
    socklen_t cred_len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) != 0)
        cred = (struct ucred){.pid = 0, .uid = (uid_t)-1, .gid = (gid_t)-1};
    snprintf(s->tag, sizeof s->tag, UDS_TAG_PREFIX "uid=%u:pid=%d:%llu", (unsigned)cred.uid, (int)cred.pid,
             ++u->connections);
    s->uid = cred.uid;
    s->fd = fd;
    s->state = SLOT_OPEN;
    if (u->cfg.verbose)
        fprintf(stderr, "uds %s: connected\n", s->tag);
}

static void accept_connections(uds_server *u)
{
    for (int i = 0; i < ACCEPTS_PER_ROUND; i++) {
        int fd = accept4(u->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        /* Out of descriptors, the pending connection stays queued and poll
         * would report it again at once: wait a retry period instead of
         * spinning. EAGAIN: none left; anything else is that client's. */
        if (fd < 0 && (errno == EMFILE || errno == ENFILE))
            u->accept_paused = true;
        if (fd < 0)
            return;
        struct ucred cred;
        socklen_t cred_len = sizeof cred;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) != 0 ||
            !access_uid_allowed(u->cfg.access, cred.uid)) {
            /* The socket file's mode says who may connect; --allow-uid says
             * whose memory the server maps: a memfd's owner is its sender,
             * and so is the owner of the GPU memory a request names. */
            (void)answer(fd, SHMREG_ERR_INVALID_ARG,
                         "uid %u is not accepted by this server (--allow-uid)", (unsigned)cred.uid);
            close(fd);
            continue;
        }
        struct slot *s = free_slot(u);
        if (s) {
            open_connection(u, s, fd);
            continue;
        }
        (void)answer(fd, SHMREG_ERR_NO_MEMORY, "too many connections to %s (--uds-max-connections %u); "
                                               "try again later", u->cfg.path,
                     u->cfg.max_connections);
        close(fd);
    }
}

/* A zero-length record, which SOCK_SEQPACKET carries like any other: a
 * malformed request, answered as the library answers one, with the
 * connection kept (docs/security.md). Read here, with no room for control
 * data, so that the kernel drops any descriptor it carried. -1 when the
 * client must go. */
static int answer_empty_record(int fd)
{
    char byte;
    if (recv(fd, &byte, 1, MSG_DONTWAIT) != 0)
        return -1;
    return answer(fd, SHMREG_ERR_INVALID_ARG,
                  "an empty record is not a request: send a region request "
                  "(shmreg_send_region, shmreg_send_cuda_region)");
}

/* poll said the connection has something: a request, its end, or an error. */
static void serve_connection(uds_server *u, struct slot *s, short revents)
{
    char byte;
    ssize_t n = recv(s->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR) && !(revents & (POLLERR | POLLNVAL)))
        return;
    /* 0 is both an empty record and the client's end (close, or shutdown of
     * its sending side): only poll tells them apart. An error: the
     * connection is broken. */
    bool ended = revents & (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL);
    if (n == 0 && !ended && answer_empty_record(s->fd) == 0)
        return;
    if (n <= 0 || serve_request(u, s) != 0)
        close_connection(u, s);
}

/* ---------------------------------------------------------------- the loop */

/* Fill pfds with the wake and listening sockets and the open connections;
 * the count of entries, and whether some slot waits to drain. */
static nfds_t gather(uds_server *u, bool *draining)
{
    nfds_t n = 2;
    u->pfds[0] = (struct pollfd){.fd = u->wake_fd, .events = POLLIN};
    u->pfds[1] = (struct pollfd){.fd = u->listen_fd, .events = u->accept_paused ? 0 : POLLIN};
    *draining = false;
    for (unsigned i = 0; i < u->cfg.max_connections; i++) {
        struct slot *s = &u->slots[i];
        *draining |= s->state == SLOT_DRAINING;
        if (s->state != SLOT_OPEN)
            continue;
        u->pfd_slot[n - 2] = i;
        /* POLLRDHUP: a client that shut down its sending side reads as an
         * empty record would (serve_connection) */
        u->pfds[n++] = (struct pollfd){.fd = s->fd, .events = POLLIN | POLLRDHUP};
    }
    return n;
}

static void retry_draining(uds_server *u)
{
    for (unsigned i = 0; i < u->cfg.max_connections; i++) {
        struct slot *s = &u->slots[i];
        if (s->state == SLOT_DRAINING && release_regions(u, s))
            s->state = SLOT_FREE;
    }
}

/* How long poll may sleep: until a retry, or the orphans' sweep is due. */
static int poll_timeout(const uds_server *u, bool draining)
{
    int wait = draining || u->accept_paused ? DRAIN_RETRY_MS : -1;
    int orphans = uds_orphans_wait_ms(u->orphans);
    return orphans >= 0 && (wait < 0 || orphans < wait) ? orphans : wait;
}

static void *serve(void *arg)
{
    uds_server *u = arg;
    for (;;) {
        bool draining;
        nfds_t n = gather(u, &draining);
        if (poll(u->pfds, n, poll_timeout(u, draining)) < 0 && errno != EINTR) {
            perror("uds: poll");
            return NULL;
        }
        u->accept_paused = false;
        if (u->pfds[0].revents)
            return NULL; /* uds_server_stop */
        if (draining)
            retry_draining(u);
        uds_orphans_sweep(u->orphans, u->reg);
        for (nfds_t i = 2; i < n; i++)
            if (u->pfds[i].revents)
                serve_connection(u, &u->slots[u->pfd_slot[i - 2]], u->pfds[i].revents);
        if (u->pfds[1].revents)
            accept_connections(u);
    }
}

/* ------------------------------------------------------------ the socket */

/* Remove the socket file only while it is still the one we made. */
static void remove_socket_file(const uds_server *u)
{
    unix_socket_remove(u->cfg.path, &u->sock_st);
}

static void destroy(uds_server *u)
{
    if (u->listen_fd >= 0)
        close(u->listen_fd);
    for (unsigned i = 0; u->slots && i < u->cfg.max_connections; i++)
        if (u->slots[i].state == SLOT_OPEN && u->slots[i].fd >= 0)
            close(u->slots[i].fd); /* adopted, never served: a failed start */
    uds_orphans_free(u->orphans);
    if (u->wake_fd >= 0)
        close(u->wake_fd);
    free(u->slots);
    free(u->pfds);
    free(u->pfd_slot);
    free(u);
}

/* ------------------------------------------------------- a live upgrade */

/* Every descriptor a live upgrade gave the start: closed when it fails
 * before the server holds them. */
static void close_given(const uds_config *cfg)
{
    if (cfg->listen_fd >= 0)
        close(cfg->listen_fd);
    for (size_t i = 0; i < cfg->n_adopt; i++)
        close(cfg->adopt[i].fd);
}

/* Take the socket already listening at the path: it must be the socket
 * file there, which stop removes at exit as if it had made it. */
static int adopt_socket(uds_server *u, int fd)
{
    struct sockaddr_un bound;
    socklen_t len = sizeof bound;
    memset(&bound, 0, sizeof bound);
    int flags = fcntl(fd, F_GETFL);
    u->listen_fd = fd; /* destroy closes it from here on */
    if (getsockname(fd, (struct sockaddr *)&bound, &len) != 0 || bound.sun_family != AF_UNIX ||
        strncmp(bound.sun_path, u->cfg.path, sizeof bound.sun_path) != 0 ||
        lstat(u->cfg.path, &u->sock_st) != 0 || !S_ISSOCK(u->sock_st.st_mode) || flags < 0 ||
        fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
        fprintf(stderr, "error: --uds %s: the inherited socket is not the one listening there\n",
                u->cfg.path);
        return -1;
    }
    return 0;
}

/* Serve each carried connection in a slot of its own, under its tag; one
 * without a slot, or of a uid --allow-uid refuses here, is closed, and its
 * regions are swept as orphans. */
static void adopt_connections(uds_server *u)
{
    for (size_t i = 0; i < u->cfg.n_adopt; i++) {
        const uds_connection *c = &u->cfg.adopt[i];
        struct slot *s = access_uid_allowed(u->cfg.access, c->uid) ? free_slot(u) : NULL;
        int flags = fcntl(c->fd, F_GETFL);
        if (!s || flags < 0 || fcntl(c->fd, F_SETFL, flags | O_NONBLOCK) != 0) {
            fprintf(stderr, "uds %s: not adopted (%s); closed\n", c->tag,
                    s ? strerror(errno) : "no slot under --uds-max-connections, or --allow-uid");
            close(c->fd);
            continue;
        }
        *s = (struct slot){.state = SLOT_OPEN, .fd = c->fd, .uid = c->uid};
        snprintf(s->tag, sizeof s->tag, "%s", c->tag);
    }
    u->cfg.adopt = NULL; /* the caller's array: not kept */
    u->cfg.n_adopt = 0;
}

static bool tag_held(const void *ctx, const char *tag)
{
    const uds_server *u = ctx;
    for (unsigned i = 0; i < u->cfg.max_connections; i++)
        if (u->slots[i].state == SLOT_OPEN && strcmp(u->slots[i].tag, tag) == 0)
            return true;
    return false;
}

/* The socket: bound at the path, or adopted with its connections; then
 * the orphans among the registry's Unix-socket regions. */
static int open_socket(uds_server *u)
{
    if (u->cfg.listen_fd < 0) {
        u->listen_fd = unix_socket_listen("--uds", u->cfg.path, SOCK_SEQPACKET, u->cfg.mode, &u->sock_st);
        if (u->listen_fd < 0)
            return -1;
    } else {
        u->connections = u->cfg.tags_made;
        if (adopt_socket(u, u->cfg.listen_fd) != 0) {
            for (size_t i = 0; i < u->cfg.n_adopt; i++)
                close(u->cfg.adopt[i].fd);
            return -1;
        }
        u->cfg.listen_fd = -1;
        adopt_connections(u);
    }
    /* Regions a live upgrade carried without their connection, or that a
     * restart after a crash restored (no connection survives one). */
    u->orphans = uds_orphans_find(u->reg, tag_held, u, u->cfg.orphan_grace_s, &u->connections);
    return 0;
}

/* The server, its slots and each uid's share; NULL after a message. */
static uds_server *new_server(const uds_config *cfg, shmreg_registry *reg)
{
    uds_server *u = calloc(1, sizeof *u);
    if (!u) {
        fprintf(stderr, "error: --uds: out of memory\n");
        return NULL;
    }
    *u = (uds_server){.reg = reg, .cfg = *cfg, .listen_fd = -1, .wake_fd = -1};
    /* Each uid's share: the limits divided among the uids --allow-uid
     * accepts. One uid (the default, the server's own) has them whole: the
     * registry's own limits are its share. "any" names no number of uids
     * to divide among: no share then (docs/security.md). */
    const access_options *a = cfg->access;
    u->uids = a->any_uid ? 0 : a->n_allow_uids ? (unsigned)a->n_allow_uids : 1;
    if (u->uids > 1) {
        u->uid_regions = a->max_regions / u->uids;
        u->uid_mapped = a->max_mapped_bytes / u->uids;
    }
    size_t cap = cfg->max_connections;
    u->slots = calloc(cap, sizeof *u->slots);
    u->pfds = calloc(cap + 2, sizeof *u->pfds);
    u->pfd_slot = calloc(cap, sizeof *u->pfd_slot);
    u->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (!u->slots || !u->pfds || !u->pfd_slot || u->wake_fd < 0) {
        fprintf(stderr, "error: --uds: out of memory or descriptors\n");
        destroy(u);
        return NULL;
    }
    return u;
}

uds_server *uds_server_start(const uds_config *cfg, shmreg_registry *reg, byte_budget *held)
{
    (void)held; /* uds_server.h: no request bytes are held past one record */
    struct sockaddr_un addr;
    uds_server *u = NULL;
    if (unix_socket_address("--uds", cfg->path, &addr) != 0 || (u = new_server(cfg, reg)) == NULL) {
        close_given(cfg);
        return NULL;
    }
    if (open_socket(u) != 0) {
        destroy(u);
        return NULL;
    }
    if (pthread_create(&u->thread, NULL, serve, u) != 0) {
        fprintf(stderr, "error: --uds: cannot start its thread\n");
        if (cfg->listen_fd < 0)
            remove_socket_file(u); /* an adopted one is still the other server's */
        destroy(u);
        return NULL;
    }
    return u;
}

unsigned uds_server_port(const uds_server *u)
{
    (void)u;
    return 0;
}

/* Wake the thread and wait for it to end. */
static void stop_thread(uds_server *u)
{
    uint64_t one = 1;
    if (write(u->wake_fd, &one, sizeof one) != sizeof one)
        perror("uds: waking the server thread");
    pthread_join(u->thread, NULL);
}

void uds_server_stop(uds_server *u)
{
    if (!u)
        return;
    stop_thread(u);
    remove_socket_file(u);
    /* Draining slots are left to registry_destroy, which unregisters every
     * region whatever the policy once requests are done. */
    for (unsigned i = 0; i < u->cfg.max_connections; i++)
        if (u->slots[i].state == SLOT_OPEN)
            close_connection(u, &u->slots[i]);
    destroy(u);
}

/* Hand over every open connection; 0, or -1 out of memory (then none is). */
static int hand_connections(uds_server *u, uds_handoff *out)
{
    out->connections = calloc(u->cfg.max_connections, sizeof *out->connections);
    if (!out->connections)
        return -1;
    for (unsigned i = 0; i < u->cfg.max_connections; i++) {
        struct slot *s = &u->slots[i];
        if (s->state != SLOT_OPEN)
            continue; /* closed already: its regions, if carried, are orphans there */
        uds_connection *c = &out->connections[out->n_connections++];
        *c = (uds_connection){.fd = s->fd, .uid = s->uid};
        memcpy(c->tag, s->tag, sizeof c->tag);
        s->fd = -1; /* the caller's now */
        s->state = SLOT_FREE;
    }
    return 0;
}

void uds_server_detach(uds_server *u, uds_handoff *out)
{
    *out = (uds_handoff){.listen_fd = -1};
    if (!u)
        return;
    stop_thread(u);
    if (hand_connections(u, out) != 0)
        fprintf(stderr, "uds: out of memory handing over the connections: they are closed\n");
    out->listen_fd = u->listen_fd;
    out->tags_made = u->connections;
    u->listen_fd = -1;
    destroy(u); /* closes what was not handed over */
}
