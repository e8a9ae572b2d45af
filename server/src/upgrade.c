/* A live upgrade: both sides of the protocol of upgrade.h, and the
 * app_state both read and write. */
#include "upgrade.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/unix_socket.h"

#define APP_MAGIC "shmreg-server-upgrade 1\n"
#define LINE_MAX_BYTES 512
#define CONN_PREFIX "uds-conn-"
/* After "A": the old server removes its socket file and closes at once. */
#define LET_GO_TIMEOUT_MS 10000

/* -------------------------------------------------------------- helpers */

/* Now on the monotonic clock, in milliseconds: what the handover's lines time. */
static double now_ms(void)
{
    return (double)monotonic_ns() / 1e6;
}

/* Write all of buf; 0, or -1 (the peer is gone). */
static int write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

__attribute__((format(printf, 2, 3))) static void say(int fd, const char *fmt, ...)
{
    char line[LINE_MAX_BYTES];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    size_t len = n < 0 ? 0 : (size_t)n < sizeof line - 1 ? (size_t)n : sizeof line - 2;
    line[len++] = '\n';
    (void)write_all(fd, line, len);
}

/* One byte within timeout_ms: the byte, or -1 (end, error or time out). */
static int read_byte(int fd, int timeout_ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int r;
    while ((r = poll(&p, 1, timeout_ms)) < 0 && errno == EINTR)
        continue;
    unsigned char b;
    if (r <= 0 || recv(fd, &b, 1, 0) != 1)
        return -1;
    return b;
}

/* A line, one byte at a time: the library's frames that follow it are
 * never read here (their descriptors ride on their first byte). */
static int read_line(int fd, char *line, size_t size)
{
    size_t n = 0;
    for (;;) {
        int b = read_byte(fd, -1);
        if (b < 0)
            return -1;
        if (b == '\n' || n + 1 == size)
            break;
        line[n++] = (char)b;
    }
    line[n] = 0;
    return 0;
}

/* ---------------------------------------------------------- app_state */

/* The text of upgrade.h, for the connections of s. NULL out of memory. */
static char *app_state_write(const adapter_sockets *s, size_t *len)
{
    size_t cap = 64 + s->uds.n_connections * (UDS_TAG_MAX + 32);
    char *text = malloc(cap);
    if (!text)
        return NULL;
    size_t n = (size_t)snprintf(text, cap, APP_MAGIC "uds-tags %llu\n", s->uds.tags_made);
    for (size_t i = 0; i < s->uds.n_connections; i++)
        n += (size_t)snprintf(text + n, cap - n, "conn %u %s\n", (unsigned)s->uds.connections[i].uid,
                              s->uds.connections[i].tag);
    *len = n;
    return text;
}

/* One "conn UID TAG" line into c; 0, or -1 when malformed. */
static int read_conn(const char *line, size_t len, uds_connection *c)
{
    char text[LINE_MAX_BYTES];
    unsigned uid;
    int tag_at = 0;
    if (len >= sizeof text)
        return -1;
    memcpy(text, line, len);
    text[len] = 0;
    if (sscanf(text, "conn %u %n", &uid, &tag_at) != 1 || tag_at == 0 || !text[tag_at] ||
        strlen(text + tag_at) >= sizeof c->tag)
        return -1;
    c->uid = (uid_t)uid;
    snprintf(c->tag, sizeof c->tag, "%s", text + tag_at);
    return 0;
}

/* Read app_state into u (the connections' fds left -1): 0, or -1 with
 * why set. Its sender is a process of this uid, but it is checked whole. */
static int app_state_read(const char *text, size_t len, uds_handoff *u, const char **why)
{
    size_t magic = strlen(APP_MAGIC), at = magic;
    *why = "its state is not this server's (another program or version)";
    if (len < magic || memcmp(text, APP_MAGIC, magic) != 0 ||
        sscanf(text + magic, "uds-tags %llu", &u->tags_made) != 1)
        return -1;
    while (at < len && text[at++] != '\n')
        continue;
    u->connections = calloc(len / 8 + 1, sizeof *u->connections);
    if (!u->connections) {
        *why = "out of memory";
        return -1;
    }
    while (at < len) {
        const char *end = memchr(text + at, '\n', len - at);
        size_t line = end ? (size_t)(end - (text + at)) : len - at;
        uds_connection *c = &u->connections[u->n_connections];
        if (read_conn(text + at, line, c) != 0)
            return -1;
        c->fd = -1;
        u->n_connections++;
        at += line + 1;
    }
    return 0;
}

/* ------------------------------------------------------ the old server */

struct upgrade_listener {
    int fd;
    const char *path; /* argv's */
    struct stat made;
};

upgrade_listener *upgrade_listen(const char *path)
{
    upgrade_listener *l = malloc(sizeof *l);
    if (!l) {
        fprintf(stderr, "error: --handover-socket: out of memory\n");
        return NULL;
    }
    l->path = path;
    /* 0600: the state it hands out is every region's memory */
    l->fd = unix_socket_listen("--handover-socket", path, SOCK_STREAM, 0600, &l->made);
    if (l->fd < 0) {
        free(l);
        return NULL;
    }
    return l;
}

int upgrade_listener_fd(const upgrade_listener *l)
{
    return l->fd;
}

void upgrade_listener_close(upgrade_listener *l)
{
    if (!l)
        return;
    unix_socket_remove(l->path, &l->made);
    close(l->fd);
    free(l);
}

/* The peer's credentials; 0 when it is of this process's uid, else -1
 * with why set, which both sides print. */
static int check_peer(int conn, struct ucred *cred, char *why, size_t len)
{
    socklen_t cred_len = sizeof *cred;
    if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, cred, &cred_len) != 0) {
        snprintf(why, len, "cannot read the peer's credentials: %s", strerror(errno));
        return -1;
    }
    if (cred->uid != geteuid()) {
        snprintf(why, len, "uid %u may not take over this server, which runs as uid %u",
                 (unsigned)cred->uid, (unsigned)geteuid());
        return -1;
    }
    return 0;
}

/* The state and the sockets, each descriptor under its name (*sockets: how
 * many). 0, or -1 with a message. s stays the caller's: the library sends
 * duplicates. */
static int send_state(int conn, shmreg_registry *reg, const adapter_sockets *s, size_t *sockets)
{
    size_t n = 0, app_len = 0;
    shmreg_handover_fd *extra = calloc(3 + s->uds.n_connections, sizeof *extra);
    char *app = app_state_write(s, &app_len);
    int rc = -1;
    if (extra && app) {
        const struct { const char *name; int fd; } socks[] = {
            {"http", s->http}, {"grpc", s->grpc}, {"uds", s->uds.listen_fd}};
        for (size_t i = 0; i < 3; i++) {
            if (socks[i].fd < 0)
                continue;
            extra[n].fd = socks[i].fd;
            snprintf(extra[n++].name, sizeof extra->name, "%s", socks[i].name);
        }
        for (size_t i = 0; i < s->uds.n_connections; i++, n++) {
            extra[n].fd = s->uds.connections[i].fd;
            snprintf(extra[n].name, sizeof extra->name, CONN_PREFIX "%zu", i);
        }
        *sockets = n;
        say(conn, "ok");
        rc = shmreg_handover_send(reg, conn, app, app_len, extra, n) == SHMREG_OK ? 0 : -1;
        if (rc != 0)
            fprintf(stderr, "upgrade: sending the state: %s\n", shmreg_last_error());
    } else {
        fprintf(stderr, "upgrade: out of memory for the state\n");
    }
    free(extra);
    free(app);
    return rc;
}

/* A successor that stops reading must not keep this server detached: a
 * send blocked past the time fails, and this server serves again. */
static void bound_sends(int conn)
{
    struct timeval t = {.tv_sec = UPGRADE_READY_TIMEOUT_S};
    (void)setsockopt(conn, SOL_SOCKET, SO_SNDTIMEO, &t, sizeof t);
}

/* "R" within the time, answered "A": 0 (the successor serves). */
static int await_ready(int conn)
{
    int b = read_byte(conn, UPGRADE_READY_TIMEOUT_S * 1000);
    if (b != 'R') {
        fprintf(stderr, "upgrade: the successor %s before it was ready\n",
                b < 0 ? "ended or fell silent" : "answered something else");
        return -1;
    }
    return write_all(conn, "A", 1);
}

/* Send the state and take the successor's "R" (await_ready); then print
 * what went and how long it took since the successor connected (at
 * connected_ms: the adapters' drain, the state's send, the successor's
 * restore and start), the send apart. 0, or -1 after a message. */
static int hand_state(int conn, shmreg_registry *reg, const adapter_sockets *s, double connected_ms)
{
    shmreg_stats st = {0};
    (void)shmreg_registry_stats(reg, &st); /* quiet: what the state holds */
    size_t sockets = 0;
    double send_ms = now_ms();
    if (send_state(conn, reg, s, &sockets) != 0)
        return -1;
    send_ms = now_ms() - send_ms;
    if (await_ready(conn) != 0)
        return -1;
    fprintf(stderr, "upgrade: handed over %zu regions, %zu sockets in %.1f ms (the state sent in %.1f ms)\n",
            st.regions - st.pending_regions, sockets, now_ms() - connected_ms, send_ms);
    return 0;
}

enum upgrade_outcome upgrade_hand_over(int conn, shmreg_registry *reg, const server_options *o,
                                       running *run)
{
    double connected_ms = now_ms(); /* the caller has just accepted conn */
    struct ucred peer;
    char why[256];
    if (check_peer(conn, &peer, why, sizeof why) != 0) {
        say(conn, "refused: %s", why);
        fprintf(stderr, "upgrade: refused a successor: %s\n", why);
        return UPGRADE_RESUMED;
    }
    fprintf(stderr, "upgrade: pid %d takes over; every adapter stops accepting and drains\n",
            (int)peer.pid);
    adapter_sockets kept;
    bound_sends(conn);
    adapters_detach(run, &kept); /* no request runs and none can come: the registry is quiet */
    if (hand_state(conn, reg, &kept, connected_ms) == 0) {
        fprintf(stderr, "upgrade: pid %d serves now; this server stops\n", (int)peer.pid);
        adapter_sockets_close(&kept);
        return UPGRADE_HANDED_OVER;
    }
    fprintf(stderr, "upgrade: serving again\n");
    if (adapters_start(o, reg, run, &kept) != 0) {
        /* No word: to the successor, if it lives, this server is gone. */
        fprintf(stderr, "upgrade: error: the adapters could not start again\n");
        return UPGRADE_FAILED;
    }
    /* Serving again, said so: a successor still there stops, where an end
     * without this word would tell it that this server died. */
    (void)write_all(conn, UPGRADE_RESUMING, 1);
    return UPGRADE_RESUMED;
}

/* ------------------------------------------------------ the new server */

/* Whether a failed connect means that no server is there any more: its
 * file gone, or left by a server that died (nothing listens). */
static int nobody_there(int why)
{
    return why == ECONNREFUSED || why == ENOENT;
}

/* Connect to the old server and read its first answer: the connection, or
 * -1 after a message, *gone set when the old server is not there or ended
 * the connection without a word (it died). */
static int connect_old(const char *path, int *gone)
{
    struct sockaddr_un addr;
    *gone = 0;
    if (unix_socket_address("--take-over", path, &addr) != 0)
        return -1;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (const struct sockaddr *)&addr, sizeof addr) != 0) {
        int why = errno;
        *gone = fd >= 0 && nobody_there(why);
        fprintf(stderr, "error: --take-over %s: %s; is a server running with --handover-socket %s?\n",
                path, why == ECONNREFUSED ? "nothing listens there (connection refused)"
                      : why == ENOENT     ? "no such socket"
                                          : strerror(why), path);
        if (fd >= 0)
            close(fd);
        return -1;
    }
    /* No bound here: the old server answers once its requests have
     * drained, which its --drain-s bounds. */
    char line[LINE_MAX_BYTES];
    int got = read_line(fd, line, sizeof line);
    if (got != 0 || strcmp(line, "ok") != 0) {
        *gone = got != 0;
        fprintf(stderr, "error: --take-over %s: %s\n", path,
                got != 0 ? "the running server closed the connection without an answer" : line);
        close(fd);
        return -1;
    }
    return fd;
}

/* After a failed receive: whether the old server has ended the connection
 * (it died, or cut it), as opposed to sending something refused and
 * waiting for an answer. What is left is read and dropped (a plain recv
 * closes the descriptors riding on it); a peer that sends nothing more for
 * a second is taken to be there. */
static int peer_ended(int fd)
{
    char buf[4096];
    for (;;) {
        ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0 || (n < 0 && errno == EINTR))
            continue;
        if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
            return 1;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 1000) <= 0)
            return 0;
    }
}

static void close_extra(shmreg_handover_fd *extra, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (extra[i].fd >= 0)
            close(extra[i].fd);
}

/* The descriptor named name out of extra (-1 there now), or -1. */
static int take_fd(shmreg_handover_fd *extra, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++) {
        if (extra[i].fd >= 0 && strcmp(extra[i].name, name) == 0) {
            int fd = extra[i].fd;
            extra[i].fd = -1;
            return fd;
        }
    }
    return -1;
}

/* The sockets and connections of extra into c, by name; whatever is left
 * in extra is closed. 0, or -1 with why set. */
static int take_sockets(upgrade_carried *c, shmreg_handover_fd *extra, size_t n, const char **why)
{
    adapter_sockets *s = &c->sockets;
    s->http = take_fd(extra, n, "http");
    s->grpc = take_fd(extra, n, "grpc");
    s->uds.listen_fd = take_fd(extra, n, "uds");
    int rc = s->http >= 0 ? 0 : -1;
    *why = "no HTTP socket came with the state";
    for (size_t i = 0; i < s->uds.n_connections && rc == 0; i++) {
        char name[sizeof extra->name];
        snprintf(name, sizeof name, CONN_PREFIX "%zu", i);
        s->uds.connections[i].fd = take_fd(extra, n, name);
        if (s->uds.connections[i].fd < 0) {
            *why = "a Unix-socket connection of the state came without its socket";
            rc = -1;
        }
    }
    close_extra(extra, n);
    return rc;
}

/* The address (into host) and port a listening TCP socket is bound to; 0
 * for none. */
static unsigned address_of(int fd, char *host, size_t len)
{
    struct sockaddr_storage ss;
    socklen_t ss_len = sizeof ss;
    if (fd < 0 || getsockname(fd, (struct sockaddr *)&ss, &ss_len) != 0)
        return 0;
    const struct sockaddr_in *v4 = (const struct sockaddr_in *)&ss;
    const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)&ss;
    if (host && !inet_ntop(ss.ss_family, ss.ss_family == AF_INET6 ? (const void *)&v6->sin6_addr
                                                                 : (const void *)&v4->sin_addr,
                           host, (socklen_t)len))
        return 0;
    return ntohs(ss.ss_family == AF_INET6 ? v6->sin6_port : v4->sin_port);
}

/* Whether two numeric addresses name the same one ("::1" and "0:0::1"). */
static int same_host(const char *a, const char *b)
{
    unsigned char x[16] = {0}, y[16] = {0};
    int family = strchr(a, ':') ? AF_INET6 : AF_INET;
    return inet_pton(family, a, x) == 1 && inet_pton(family, b, y) == 1 && memcmp(x, y, sizeof x) == 0;
}

__attribute__((format(printf, 1, 2))) static int differs(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "error: --take-over: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, ": leave the flag out or give the same\n");
    va_end(ap);
    return -1;
}

/* The flags given must name what is inherited; o then names it (upgrade.h). */
static int match_flags(server_options *o, upgrade_carried *c)
{
    unsigned http = address_of(c->sockets.http, c->host, sizeof c->host);
    unsigned grpc = address_of(c->sockets.grpc, NULL, 0);
    struct sockaddr_un un;
    socklen_t un_len = sizeof un;
    memset(&un, 0, sizeof un);
    if (c->sockets.uds.listen_fd >= 0 && getsockname(c->sockets.uds.listen_fd, (struct sockaddr *)&un, &un_len) == 0)
        snprintf(c->uds_path, sizeof c->uds_path, "%.*s", (int)sizeof un.sun_path, un.sun_path);
    if (!http)
        return differs("the inherited HTTP socket has no address");
    if (options_given(o, "host") && !same_host(o->host, c->host))
        return differs("--host %s is not the running server's address, %s", o->host, c->host);
    if (options_given(o, "port") && o->port && o->port != http)
        return differs("--port %u is not the running server's port, %u", o->port, http);
    if (options_given(o, "grpc-port") && o->grpc_port && o->grpc_port != grpc)
        return differs("--grpc-port %u is not the running server's gRPC port, %u (0: none)",
                       o->grpc_port, grpc);
    if (options_given(o, "uds") && strcmp(o->uds_path, c->uds_path) != 0)
        return differs("--uds %s is not the running server's socket, '%s'", o->uds_path, c->uds_path);
    if (c->uds_path[0] && o->access.tenants)
        return differs("--tenants: the running server has a --uds socket, which tenants do not mix with");
    o->host = c->host;
    o->port = http;
    o->grpc_port = grpc;
    o->uds_path = c->uds_path[0] ? c->uds_path : NULL;
    return 0;
}

static void print_report(const shmreg_restore_report *r)
{
    fprintf(stderr, "upgrade: %zu region(s) restored, %zu failed, %zu not carried\n", r->restored,
            r->failed, r->skipped);
    for (size_t i = 0; i < r->entry_count; i++) {
        const shmreg_restore_entry *e = &r->entries[i];
        fprintf(stderr, "upgrade: region '%s'%s%s: %s: %s\n", e->name, e->tag ? " of " : "",
                e->tag ? e->tag : "", e->skipped ? "not carried" : shmreg_err_name(e->err),
                e->message ? e->message : "");
    }
}

/* Receive the state into reg and the sockets into c: 0, or -1 after a
 * message with nothing left open, *gone set when the old server ended the
 * connection part way (the library refuses a state cut short whole). */
static int receive(int fd, const char *path, shmreg_registry *reg, upgrade_carried *c, int *gone)
{
    shmreg_restore_report *report = NULL;
    shmreg_handover_fd *extra = NULL;
    size_t n = 0;
    /* A sender that stops part way must not hold this server for ever. */
    struct timeval t = {.tv_sec = UPGRADE_READY_TIMEOUT_S};
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &t, sizeof t);
    double ms = now_ms();
    if (shmreg_handover_receive(reg, fd, &report, &extra, &n) != SHMREG_OK) {
        fprintf(stderr, "error: --take-over %s: receiving the state: %s\n", path, shmreg_last_error());
        *gone = peer_ended(fd);
        return -1;
    }
    ms = now_ms() - ms;
    print_report(report);
    fprintf(stderr, "upgrade: restored %zu regions in %.1f ms\n", report->restored, ms);
    const char *why = NULL;
    int rc = app_state_read(report->app_state, report->app_len, &c->sockets.uds, &why);
    shmreg_restore_report_free(report);
    if (rc == 0)
        rc = take_sockets(c, extra, n, &why); /* closes what it does not take */
    else
        close_extra(extra, n);
    free(extra);
    if (rc != 0) {
        fprintf(stderr, "error: --take-over %s: %s\n", path, why);
        adapter_sockets_close(&c->sockets);
    }
    return rc;
}

enum upgrade_take upgrade_take_over(const char *path, shmreg_registry *reg, server_options *o,
                                   upgrade_carried *c, int *conn)
{
    memset(c, 0, sizeof *c);
    adapter_sockets_init(&c->sockets);
    c->old_conn = -1;
    int gone = 0, fd = connect_old(path, &gone);
    if (fd >= 0 && receive(fd, path, reg, c, &gone) != 0) {
        close(fd);
        fd = -1;
    }
    if (fd < 0)
        return gone ? UPGRADE_OLD_GONE : UPGRADE_NOT_TAKEN;
    if (match_flags(o, c) != 0) {
        adapter_sockets_close(&c->sockets);
        close(fd);
        return UPGRADE_NOT_TAKEN;
    }
    *conn = fd;
    return UPGRADE_TAKEN;
}

enum upgrade_answer upgrade_confirm(int conn)
{
    /* A failed write is read on: an old server that served again may have
     * said so before it closed. */
    (void)write_all(conn, "R", 1);
    int b = read_byte(conn, UPGRADE_READY_TIMEOUT_S * 1000);
    if (b == 'A')
        return UPGRADE_CONFIRMED;
    if (b >= 0) {
        fprintf(stderr, "error: --take-over: the running server %s; this one stops. A region "
                        "registered with this one since its listening lines is not known there\n",
                b == UPGRADE_RESUMING[0] ? "serves again (it gave up waiting, or could not answer)"
                                         : "answered something else, and serves on");
        return UPGRADE_OLD_RESUMED;
    }
    struct pollfd p = {.fd = conn, .events = POLLIN};
    if (b < 0 && poll(&p, 1, 0) == 0) {
        fprintf(stderr, "warning: --take-over: the running server said nothing for %d s after this "
                        "one was ready; this one serves on (the old one, detached, stops once it "
                        "reads the word), and cannot be taken over in turn\n",
                UPGRADE_READY_TIMEOUT_S);
        return UPGRADE_OLD_SILENT;
    }
    /* A server of a release before the word "X" also ends so when it
     * serves again: both would serve then, which this line says. */
    fprintf(stderr, "warning: --take-over: the running server ended the connection without a word "
                    "before it answered that this one was ready: it died, and this one serves on "
                    "(a server of an earlier release ends so when it serves again: both serve then, "
                    "on registries that differ from now on)\n");
    return UPGRADE_OLD_DIED;
}

void upgrade_finish(int conn)
{
    (void)read_byte(conn, LET_GO_TIMEOUT_MS); /* its end: the old server let go of its path */
    close(conn);
}
