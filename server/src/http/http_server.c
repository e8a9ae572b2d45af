/*
 * libmicrohttpd glue. A request's life here:
 *   access_handler, first call   -> request_new
 *   access_handler, body chunks  -> request_append
 *   access_handler, last call    -> (in_flight + 1) route, then handle and
 *                                   queue the reply; or suspend the
 *                                   connection and hand the request to the
 *                                   device (run_on_device) or a worker
 *   device_answered/run_suspended -> the answer in rq->answer: resume
 *   access_handler, once resumed -> queue that answer
 *   request_completed            -> request_finish: releases every region
 *                                   reference the request took (in_flight - 1)
 * libmicrohttpd calls request_completed after the response has been sent,
 * or when the connection fails or the daemon stops: all paths release.
 */
#include "http/http_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "http/json_write.h"
#include "core/infer_core.h"
#include "http/endpoints.h"
#include "http/header_block.h"
#include "http/infer.h"
#include "http/metrics.h"
#include "models/models.h"
#include "http/reply.h"
#include "http/request.h"
#include "http/router.h"

/* --http-restricted-api and --tenants: 1 with the refusal in out. */
static int refuse_shm(const request *rq, reply *out)
{
    char why[256];
    server_status st = access_refusal(&rq->who, why, sizeof why);
    if (st)
        reply_failure(out, st, "%s", why);
    return st != STATUS_OK;
}

/* The request's caller, from its headers (they are complete on the first
 * call of access_handler; a worker must not read them later). */
static void read_caller(const http_server *s, struct MHD_Connection *conn, request *rq)
{
    const access_options *a = s->cfg.access;
    /* With their lengths, NULs included: a value cut at a NUL by strlen
     * would let "Bearer <token>\0junk" pass as the token. libmicrohttpd
     * 0.9.75 cuts them all the same; refuse_header_block answers those. */
    const char *value = NULL, *auth = NULL;
    size_t value_len = 0, auth_len = 0;
    if (a->http.header &&
        MHD_lookup_connection_value_n(conn, MHD_HEADER_KIND, a->http.header,
                                      strlen(a->http.header), &value, &value_len) != MHD_YES)
        value = NULL;
    if (MHD_lookup_connection_value_n(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION,
                                      strlen(MHD_HTTP_HEADER_AUTHORIZATION), &auth,
                                      &auth_len) != MHD_YES)
        auth = NULL;
    access_caller(a, &a->http, value, value ? value_len : 0, auth, auth ? auth_len : 0, &rq->who);
}

static void dispatch(http_server *s, request *rq, reply *out)
{
    switch (rq->rt.id) {
    case ROUTE_NONE: reply_error(out, 404, "Not Found"); break;
    case ROUTE_MODEL_INFER: infer_handle(s->registry, s->remote_turns, rq, &rq->rt, out); break;
    case ROUTE_METRICS: metrics_handle(s->registry, &rq->who.scope, out); break;
    case ROUTE_SHM_STATUS:
    case ROUTE_SHM_REGISTER:
    case ROUTE_SHM_UNREGISTER:
    case ROUTE_REMOTE_CONNECT:
    case ROUTE_REMOTE_ENGINE:
        if (!refuse_shm(rq, out))
            shm_endpoints_handle(s->registry, s->cfg.allow_client_shm, rq, &rq->rt, out);
        break;
    default: model_endpoints_handle(&rq->rt, &rq->who.scope, out); break;
    }
}

/* Triton's words and status (400) for a request past its
 * --http-max-input-size; a chunked body has no length to quote. */
static void reply_too_large(reply *out, const request *rq, size_t max_body)
{
    char size[48] = "more than the maximum";
    if (rq->content_length >= 0)
        snprintf(size, sizeof size, "%" PRId64 " bytes", rq->content_length);
    reply_error(out, 400, "request JSON size of %s exceeds the maximum allowed input size of %zu "
                "bytes. Use --max-body-mb to increase the limit.", size, max_body);
}

/* A percent escape that decodes to NUL ("%00") would cut the path short:
 * libmicrohttpd decodes the path in place and hands it over as a C string,
 * so "v2/models/simple%00x/ready" reached the router as simple's metadata.
 * Each decoded NUL becomes DEL instead, which triage refuses (no model or
 * region name may hold a control character). Arguments after '?' are
 * decoded the same way; the server reads none. */
static size_t unescape_without_nul(void *cls, struct MHD_Connection *conn, char *s)
{
    (void)cls;
    (void)conn;
    size_t len = MHD_http_unescape(s);
    for (char *p = memchr(s, 0, len); p; p = memchr(p + 1, 0, len - (size_t)(p + 1 - s)))
        *p = 0x7f;
    return len;
}

/* While the server drains, health still answers (live, not ready) and
 * every other request is refused. */
static void reply_draining(request *rq, reply *out)
{
    if (strcmp(rq->method, MHD_HTTP_METHOD_GET) == 0 && route_match(rq->url, &rq->rt) == 0 &&
        (rq->rt.id == ROUTE_HEALTH_LIVE || rq->rt.id == ROUTE_HEALTH_READY))
        reply_health(out, rq->rt.id == ROUTE_HEALTH_READY, 1);
    else
        reply_error(out, 503, "the server is shutting down");
}

/* Answer what can be answered at once into out and return 0; return 1 for
 * an inference, which runs here (run_inline), is handed to the device from
 * here (run_on_device) or goes to a worker. */
static int triage(http_server *s, request *rq, reply *out)
{
    if (atomic_load(&s->draining)) {
        reply_draining(rq, out);
    } else if (rq->body_too_large) {
        reply_too_large(out, rq, s->cfg.max_body);
    } else if (rq->over_budget) {
        reply_error(out, 503, "the server holds %zu bytes of request bodies already "
                              "(--max-buffered-mb); retry later", byte_budget_cap(s->bodies));
    } else if (rq->header_length == -2) {
        reply_error(out, 400, "Inference-Header-Content-Length must be a non-negative integer "
                              "in decimal digits");
    } else if (strchr(rq->url, 0x7f)) { /* unescape_without_nul */
        reply_error(out, 400, "the request's path holds a NUL or DEL character (%%00, %%7F), which "
                              "no model or region name may contain");
    } else if (route_match(rq->url, &rq->rt) != 0) {
        reply_error(out, 500, "out of memory");
    } else if (rq->rt.id != ROUTE_NONE &&
               rq->rt.post != (strcmp(rq->method, MHD_HTTP_METHOD_POST) == 0)) {
        reply_error(out, 405, "%s is not allowed on %s", rq->method, rq->url);
    } else if (rq->rt.id == ROUTE_MODEL_INFER) {
        return 1;
    } else {
        dispatch(s, rq, out);
    }
    return 0;
}

/* An inference short enough for this thread (infer_runs_inline) runs here:
 * 0 with the answer in out. 1: it goes on, to the device (run_on_device) or
 * to a worker, as one that may be slow does (a GPU model, a delay, a large
 * body, a shared-memory region), so that the thread serving status and
 * register never waits on a model. */
static int run_inline(http_server *s, request *rq, reply *out)
{
    const model *m = model_find_version(rq->rt.model, rq->rt.version);
    if (!infer_runs_inline(m, rq->body_len))
        return 1;
    return infer_handle_inline(s->registry, rq, &rq->rt, out) != 0;
}

/* A run handed to the device has ended, on the thread it ended on (the GPU
 * model's finishing thread, or the HTTP thread itself: infer.h says which),
 * its answer in rq->answer: wake the connection, as a worker does. */
static void device_answered(request *rq, void *arg)
{
    http_server *s = arg;
    rq->answered = 1; /* published to the HTTP thread by MHD's resume lock */
    MHD_resume_connection(rq->connection); /* the last touch of rq: it may be sent and freed */
    /* The last touch of s: halt may free it once this reaches 0. seq_cst,
     * as every use of the server's counters. */
    atomic_fetch_sub(&s->on_device, 1);
}

/* A GPU model's inference whose tensors all lie where the device reaches
 * them (CUDA regions, pinned system regions) is handed to the device from
 * here, with no worker in between (infer_handle_on_device). rq's connection
 * is suspended already: the run may end, and resume it, before the start
 * returns, on this thread or another. 0: the run was handed over, or the
 * request answered into rq->answer and resumed; 1: it goes to a worker (a
 * tensor to copy by CPU, another model, a larger request). */
static int run_on_device(http_server *s, request *rq)
{
    const model *m = model_find_version(rq->rt.model, rq->rt.version);
    if (!infer_device_runs_inline(m, rq->body_len))
        return 1;
    atomic_fetch_add(&s->on_device, 1); /* before the start: its end may come first */
    server_status st = infer_handle_on_device(s->registry, rq, &rq->rt, &rq->answer,
                                              device_answered, s);
    if (st == INFER_STARTED)
        return 0; /* rq is device_answered's: it may be gone already */
    atomic_fetch_sub(&s->on_device, 1);
    if (st == INFER_DEFERRED)
        return 1;
    rq->answered = 1;
    MHD_resume_connection(rq->connection); /* from its own callback: queued on the next pass */
    return 0;
}

/* Worker thread: run the inference, then wake the connection so that
 * libmicrohttpd calls access_handler again to queue the answer. */
static void run_suspended(void *ctx, void *item)
{
    http_server *s = ctx;
    request *rq = item;
    dispatch(s, rq, &rq->answer);
    rq->answered = 1; /* published to the HTTP thread by MHD's resume lock */
    MHD_resume_connection(rq->connection);
}

/* Shutdown, past the drain time: a request still queued is answered 503
 * without running (it holds no reference yet: those are taken by the run). */
static void cancel_queued(void *ctx, void *item)
{
    (void)ctx;
    request *rq = item;
    reply_error(&rq->answer, 503, "the server is shutting down: the request was not started "
                                  "within the drain time");
    rq->answered = 1;
    MHD_resume_connection(rq->connection);
}

/* Hand the reply to libmicrohttpd, which frees its body once sent. In an
 * upgrade's pause the connection closes after it: a client that keeps its
 * connection alive opens a new one for its next request, which the next
 * server takes, rather than meeting this one's 503 again and again. (A
 * stop keeps them: a balancer probing v2/health/ready on a kept-alive
 * connection reads "not ready" there, and no server would take a new one.) */
static enum MHD_Result queue_reply(http_server *s, struct MHD_Connection *conn, request *rq, reply *r)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(r->len, r->body ? r->body : "", r->body ? MHD_RESPMEM_MUST_FREE
                                                                          : MHD_RESPMEM_PERSISTENT);
    if (!resp) {
        free(r->body);
        return MHD_NO;
    }
    if (r->json_len) {
        char len[32];
        snprintf(len, sizeof len, "%zu", r->json_len);
        MHD_add_response_header(resp, "Inference-Header-Content-Length", len);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/octet-stream");
    } else if (r->len && rq->rt.id == ROUTE_METRICS && r->status == 200) {
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, METRICS_CONTENT_TYPE);
    } else if (r->len) {
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    }
    if (r->status == 401) /* RFC 7235: a 401 names the scheme it wants */
        MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    if (atomic_load(&s->handing_over))
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    rq->status = r->status;
    enum MHD_Result ok = MHD_queue_response(conn, r->status, resp);
    MHD_destroy_response(resp);
    return ok;
}

/* A header value of decimal digits only, as HTTP writes lengths (1*DIGIT),
 * or -1 when absent; -2 for anything else: strtoll alone would take a sign,
 * leading white space (a vertical tab, which libmicrohttpd keeps) and more. */
static int64_t header_number(struct MHD_Connection *conn, const char *name)
{
    const char *v = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, name);
    if (!v)
        return -1;
    size_t digits = strspn(v, "0123456789");
    /* 18 digits always fit int64_t; no body here is near 10^18 bytes. */
    if (digits == 0 || v[digits] != 0 || digits > 18)
        return -2;
    return strtoll(v, NULL, 10);
}

/* A client that sends Expect: 100-continue waits for our word before it
 * sends the body: a body that would be refused is refused now, instead of
 * asking for it (and reading it all to refuse it after). 1 with out set, or
 * 0: go on. A length that is absent or malformed is left to the body's end. */
static int refuse_before_body(http_server *s, struct MHD_Connection *conn, const request *rq,
                              reply *out)
{
    const char *expect = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);
    int64_t len = rq->content_length;
    if (!expect || strcasecmp(expect, "100-continue") != 0 || len < 0)
        return 0;
    if ((uint64_t)len > s->cfg.max_body) {
        reply_error(out, 413, "request body of %lld bytes is larger than %zu bytes", (long long)len,
                    s->cfg.max_body);
        return 1;
    }
    if (!byte_budget_fits(s->bodies, (size_t)len)) {
        reply_error(out, 503, "the server holds %zu bytes of request bodies already "
                              "(--max-buffered-mb); retry later", byte_budget_cap(s->bodies));
        return 1;
    }
    return 0;
}

/* A header value holding a NUL, or a header folded over lines: 1 with a 400
 * in out, before the body is read (header_block.h says why libmicrohttpd's
 * own calls cannot show either). */
static int refuse_header_block(struct MHD_Connection *conn, const char *method, reply *out)
{
    char name[HEADER_BLOCK_NAME_MAX + 1];
    if (header_block_check(conn, method, name, sizeof name) == 0)
        return 0;
    reply_error(out, 400, "header '%s' holds a NUL byte or is folded over lines", name);
    return 1;
}

static enum MHD_Result access_handler(void *cls, struct MHD_Connection *conn, const char *url,
                                      const char *method, const char *version,
                                      const char *upload_data, size_t *upload_data_size,
                                      void **con_cls)
{
    http_server *s = cls;
    request *rq = *con_cls;
    if (atomic_load(&s->closing) && (!rq || !rq->dispatched))
        return MHD_NO; /* past an upgrade's pause: closed unanswered, for the next server */
    if (!rq) { /* headers are in: set up, body follows */
        rq = request_new(method, url, s->bodies);
        if (!rq)
            return MHD_NO;
        rq->header_length = header_number(conn, "Inference-Header-Content-Length");
        rq->content_length = header_number(conn, MHD_HTTP_HEADER_CONTENT_LENGTH);
        read_caller(s, conn, rq);
        *con_cls = rq;
        reply early;
        /* A response queued now means no 100 Continue; the body is not read.
         * method is libmicrohttpd's own pointer into the header block. */
        if (refuse_header_block(conn, method, &early) || refuse_before_body(s, conn, rq, &early))
            return queue_reply(s, conn, rq, &early);
        return MHD_YES;
    }
    if (*upload_data_size) {
        if (request_append(rq, upload_data, *upload_data_size, s->cfg.max_body) != 0)
            return MHD_NO; /* out of memory: drop the connection; completion still runs */
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (rq->answered) { /* back from a worker */
        enum MHD_Result ok = queue_reply(s, conn, rq, &rq->answer);
        rq->answer.body = NULL; /* libmicrohttpd owns it now */
        return ok;
    }
    rq->dispatched = 1;
    atomic_fetch_add(&s->in_flight, 1);
    atomic_fetch_add(&s->dispatched, 1);
    reply r;
    if (triage(s, rq, &r) == 0 || run_inline(s, rq, &r) == 0)
        return queue_reply(s, conn, rq, &r);
    rq->connection = conn;
    /* Before the run is handed on: the device or the worker may resume at
     * once, even before this returns. */
    MHD_suspend_connection(conn);
    if (run_on_device(s, rq) == 0)
        return MHD_YES;
    if (worker_pool_submit(s->workers, rq) != 0) {
        MHD_resume_connection(conn);
        reply_error(&rq->answer, 503, "cannot queue the request");
        rq->answered = 1;
    }
    return MHD_YES;
}

static double ms_since(const struct timespec *t0)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - t0->tv_sec) * 1e3 + (double)(now.tv_nsec - t0->tv_nsec) / 1e6;
}

static void request_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                              enum MHD_RequestTerminationCode toe)
{
    http_server *s = cls;
    request *rq = *con_cls;
    if (!rq)
        return;
    if (s->cfg.verbose)
        fprintf(stderr, "%s %s %u %.3f ms%s\n", rq->method, rq->log_url, rq->status, ms_since(&rq->started),
                toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (connection ended early)");
    int dispatched = rq->dispatched;
    request_finish(rq); /* the lifetime rule: release when the response is done */
    *con_cls = NULL;
    if (dispatched)
        atomic_fetch_sub(&s->in_flight, 1);
}

static int bind_address(const char *host, unsigned port, struct sockaddr_storage *ss,
                        unsigned *flags)
{
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)port);
        return 0;
    }
    if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)port);
        *flags |= MHD_USE_IPv6;
        return 0;
    }
    fprintf(stderr, "error: --host wants a numeric IPv4 or IPv6 address, got '%s'\n", host);
    return -1;
}

/* The port a listening socket is bound to, 0 when it cannot be read. */
static unsigned bound_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
        return 0;
    return ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                          : ((struct sockaddr_in *)&ss)->sin_port);
}

/* Where the daemon listens: host:port, or the inherited socket. MHD is given
 * a duplicate of that socket, so that cfg->listen_fd stays ours to close
 * whatever MHD does with its own on a failed start. */
static int listen_option(const http_config *cfg, struct sockaddr_storage *addr, unsigned *flags,
                         struct MHD_OptionItem *out)
{
    if (cfg->listen_fd < 0) {
        if (bind_address(cfg->host, cfg->port, addr, flags) != 0)
            return -1;
        *out = (struct MHD_OptionItem){MHD_OPTION_SOCK_ADDR, 0, addr};
        return 0;
    }
    int fd = fcntl(cfg->listen_fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) {
        fprintf(stderr, "error: HTTP: cannot duplicate the inherited listening socket: %s\n",
                strerror(errno));
        return -1;
    }
    *out = (struct MHD_OptionItem){MHD_OPTION_LISTEN_SOCKET, fd, NULL};
    return 0;
}

/* A failed start with an inherited socket: MHD may or may not have closed
 * its duplicate. It is closed here only while its number still names the
 * same socket as the original, then the original goes (the server took it). */
static void drop_inherited(const http_config *cfg, const struct MHD_OptionItem *where)
{
    if (where->option != MHD_OPTION_LISTEN_SOCKET)
        return;
    struct stat a, b;
    int dup_fd = (int)where->value;
    if (fstat(dup_fd, &b) == 0 && fstat(cfg->listen_fd, &a) == 0 && a.st_ino == b.st_ino &&
        a.st_dev == b.st_dev)
        close(dup_fd);
    close(cfg->listen_fd);
}

/* The daemon, with the bounds every connection has. One HTTP thread moves
 * bytes, answers the quick endpoints, runs the short inferences
 * (run_inline) and hands a GPU model's runs to the device (run_on_device);
 * the workers run the others. Connections are bounded: per client address,
 * so that one client's idle half-open requests cannot take every
 * connection libmicrohttpd allows, and in time, so that stalled ones go (a
 * suspended connection, whose request a worker or the device runs, is not
 * idle). MHD_ALLOW_SUSPEND_RESUME: MHD_resume_connection may be called from
 * any thread, even from the access handler that suspended the connection
 * (its next pass of the event loop resumes it). */
static struct MHD_Daemon *start_daemon(http_server *s, const http_config *cfg, unsigned flags,
                                       struct MHD_OptionItem *where)
{
    struct MHD_OptionItem opts[] = {*where, {MHD_OPTION_END, 0, NULL}};
    return MHD_start_daemon(flags, (uint16_t)cfg->port, NULL, NULL, access_handler, s,
                            MHD_OPTION_ARRAY, opts,
                            MHD_OPTION_NOTIFY_COMPLETED, request_completed, s,
                            MHD_OPTION_CONNECTION_TIMEOUT, cfg->request_timeout_s,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, cfg->max_client_connections,
                            MHD_OPTION_UNESCAPE_CALLBACK, unescape_without_nul, NULL,
                            MHD_OPTION_END);
}

/* http_server_start on s, allocated: 0, or -1 with a message on stderr
 * and nothing left running (an inherited socket closed too). */
static int start(http_server *s, const http_config *cfg)
{
    struct sockaddr_storage addr;
    struct MHD_OptionItem where = {MHD_OPTION_END, 0, NULL};
    /* ITC lets MHD_quiesce_daemon stop the listener while workers run. */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ITC |
                     MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME;
    if (listen_option(cfg, &addr, &flags, &where) != 0) {
        if (cfg->listen_fd >= 0)
            close(cfg->listen_fd);
        return -1;
    }
    s->remote_turns = remote_turns_new(cfg->workers.working, "HTTP");
    s->workers = s->remote_turns ? worker_pool_start(&cfg->workers, run_suspended, s) : NULL;
    s->daemon = s->workers ? start_daemon(s, cfg, flags, &where) : NULL;
    if (!s->daemon) {
        if (!s->workers)
            fprintf(stderr, "error: cannot start %u worker threads\n", cfg->workers.working);
        else
            fprintf(stderr, "error: cannot listen on %s:%u\n", cfg->host, cfg->port);
        worker_pool_stop(s->workers, NULL);
        remote_turns_free(s->remote_turns);
        drop_inherited(cfg, &where);
        return -1;
    }
    if (cfg->listen_fd >= 0)
        close(cfg->listen_fd); /* the daemon serves its duplicate */
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_LISTEN_FD);
    s->port = info ? bound_port(info->listen_fd) : 0;
    return 0;
}

http_server *http_server_start(const http_config *cfg, shmreg_registry *reg,
                               byte_budget *bodies)
{
    http_server *s = malloc(sizeof *s);
    if (!s) {
        fprintf(stderr, "error: out of memory for the HTTP server\n");
        return NULL;
    }
    *s = (http_server){.registry = reg, .cfg = *cfg, .bodies = bodies};
    atomic_init(&s->in_flight, 0);
    atomic_init(&s->draining, 0);
    atomic_init(&s->handing_over, 0);
    atomic_init(&s->closing, 0);
    atomic_init(&s->dispatched, 0);
    atomic_init(&s->on_device, 0);
    if (start(s, cfg) != 0) {
        free(s);
        return NULL;
    }
    return s;
}

unsigned http_server_port(const http_server *s)
{
    return s->port;
}

/* Wait until every run handed to the device has been answered: a GPU run
 * ends on its own (none waits on a delay), and the daemon must not stop
 * while one holds a suspended connection, nor its answer reach a
 * connection that is gone. */
static void wait_device_runs(http_server *s)
{
    struct timespec tick = {.tv_nsec = 1000 * 1000};
    while (atomic_load(&s->on_device) > 0)
        nanosleep(&tick, NULL);
}

/* Wait until no request is in flight, or for at most ms milliseconds. */
static void wait_in_flight(http_server *s, unsigned ms)
{
    struct timespec tick = {.tv_nsec = 10 * 1000 * 1000};
    for (unsigned waited = 0; atomic_load(&s->in_flight) > 0 && waited < ms / 10; waited++)
        nanosleep(&tick, NULL);
}

/* An upgrade's pause: how long no request must come, with none in flight,
 * before the clients of the connections still open are taken to have
 * moved on (each answer in the pause closed its connection); at most
 * PAUSE_LIMIT_MS, since clients that do not wait for answers never fall
 * quiet. */
#define PAUSE_QUIET_MS 10
#define PAUSE_LIMIT_MS 250

/* Serve on until no request is in flight and none has come for
 * PAUSE_QUIET_MS, or PAUSE_LIMIT_MS have passed. */
static void serve_out_the_pause(http_server *s)
{
    struct timespec tick = {.tv_nsec = 1000 * 1000};
    unsigned seen = atomic_load(&s->dispatched), quiet = 0;
    for (unsigned waited = 0; waited < PAUSE_LIMIT_MS && quiet < PAUSE_QUIET_MS; waited++) {
        nanosleep(&tick, NULL);
        unsigned now = atomic_load(&s->dispatched);
        quiet = (now == seen && atomic_load(&s->in_flight) == 0) ? quiet + 1 : 0;
        seen = now;
    }
}

/* Stop accepting, drain, stop every thread and free s (http_server_stop);
 * the listening socket, which quiesce handed back, is returned open. */
static int halt(http_server *s)
{
    MHD_socket listener = MHD_quiesce_daemon(s->daemon);
    if (atomic_load(&s->handing_over)) {
        serve_out_the_pause(s);
        atomic_store(&s->closing, 1);
    }
    atomic_store(&s->draining, 1);
    /* Requests already queued or running finish and send their responses;
     * requests arriving on kept-alive connections get 503 meanwhile (past
     * an upgrade's pause they are closed unanswered instead: closing). */
    wait_in_flight(s, s->cfg.drain_s * 1000);
    if (atomic_load(&s->in_flight) > 0) {
        fprintf(stderr, "shutdown: %u requests still in flight after %u s; stopping them\n",
                atomic_load(&s->in_flight), s->cfg.drain_s);
        models_cut_delays(); /* the running ones answer 503 soon */
    }
    /* Queued requests are answered 503 and resumed, workers finish what they
     * hold and resume those connections, so that no connection is left
     * suspended when the daemon stops. */
    worker_pool_stop(s->workers, cancel_queued);
    s->workers = NULL;
    remote_turns_free(s->remote_turns); /* no worker copies any more */
    s->remote_turns = NULL;
    wait_device_runs(s); /* as the workers' runs were, to their end */
    /* A moment for those answers to go out; a client that does not read
     * them is closed below all the same. */
    wait_in_flight(s, 1000);
    MHD_stop_daemon(s->daemon); /* completion callbacks of the rest run here */
    s->daemon = NULL;
    free(s);
    return listener == MHD_INVALID_SOCKET ? -1 : (int)listener;
}

void http_server_stop(http_server *s)
{
    if (!s)
        return;
    int listener = halt(s);
    if (listener >= 0)
        close(listener);
}

int http_server_detach(http_server *s)
{
    if (!s)
        return -1;
    atomic_store(&s->handing_over, 1);
    return halt(s);
}
