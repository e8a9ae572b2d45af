/* Per-request state: body accumulation and the references the request holds. */
#include "http/request.h"

#include <stdlib.h>
#include <string.h>

#include "http/json_doc.h"


/* s made printable for the log line, in place: control characters (a
 * percent-decoded newline, say) shown as '?', so that a client cannot forge
 * log lines. */
static void make_printable(char *s)
{
    for (char *p = s; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
}

/* Free what a refused body held, at once: the client may keep sending (or
 * stall) for long, and the memory is the point of the refusal. */
static void drop_body(request *rq)
{
    byte_budget_give(rq->budget, rq->body_len);
    free(rq->body);
    rq->body = NULL;
    rq->body_len = rq->body_cap = 0;
}

/* The request and its three strings in one allocation: a request costs
 * one malloc and one free, not four of each. */
request *request_new(const char *method, const char *url, byte_budget *budget)
{
    size_t method_size = strlen(method) + 1, url_size = strlen(url) + 1;
    request *rq = calloc(1, sizeof *rq + method_size + 2 * url_size);
    if (!rq)
        return NULL;
    rq->budget = budget;
    rq->method = memcpy((char *)(rq + 1), method, method_size);
    rq->url = memcpy(rq->method + method_size, url, url_size);
    rq->log_url = memcpy(rq->url + url_size, url, url_size);
    make_printable(rq->method);
    make_printable(rq->log_url);
    rq->header_length = -1;
    clock_gettime(CLOCK_MONOTONIC, &rq->started);
    return rq;
}

/* The body's first buffer: as long as Content-Length says when that is
 * short, so that a small body is one allocation of its own size; 4 KiB,
 * growing, otherwise (a claimed length is not allocated before it arrives). */
static size_t first_capacity(const request *rq)
{
    if (rq->content_length > 0 && rq->content_length < 4096)
        return (size_t)rq->content_length;
    return 4096;
}

int request_append(request *rq, const char *data, size_t len, size_t max_body)
{
    if (rq->body_too_large || rq->over_budget)
        return 0;
    if (len > max_body - rq->body_len) {
        rq->body_too_large = 1;
        drop_body(rq);
        return 0;
    }
    /* Charged as received: the buffer's spare capacity is never touched,
     * so the bytes received are the memory the body takes. */
    if (!byte_budget_take(rq->budget, len)) {
        rq->over_budget = 1;
        drop_body(rq);
        return 0;
    }
    if (rq->body_len + len > rq->body_cap) {
        size_t cap = rq->body_cap ? rq->body_cap : first_capacity(rq);
        while (cap < rq->body_len + len)
            cap = cap > max_body / 2 ? max_body : cap * 2;
        char *grown = realloc(rq->body, cap);
        if (!grown) {
            byte_budget_give(rq->budget, len);
            return -1;
        }
        rq->body = grown;
        rq->body_cap = cap;
    }
    memcpy(rq->body + rq->body_len, data, len);
    rq->body_len += len;
    return 0;
}

void request_finish(request *rq)
{
    if (!rq)
        return;
    refs_release_all(&rq->held); /* the response is on the wire, or the connection is gone */
    route_free(&rq->rt);
    json_doc_free(rq->parsed_header); /* a deferred inference that never ran */
    free(rq->answer.body); /* NULL once handed to libmicrohttpd */
    byte_budget_give(rq->budget, rq->body_len);
    free(rq->body);
    free(rq);
}
