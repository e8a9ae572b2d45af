/* Per-request state: body accumulation and the references the request holds. */
#include "http/request.h"

#include <stdlib.h>
#include <string.h>


/* A copy for the log line, with control characters (a percent-decoded
 * newline, say) shown as '?', so that a client cannot forge log lines. */
static char *printable_copy(const char *s)
{
    char *copy = strdup(s);
    for (char *p = copy; p && *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
    return copy;
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

request *request_new(const char *method, const char *url, byte_budget *budget)
{
    request *rq = calloc(1, sizeof *rq);
    if (!rq)
        return NULL;
    rq->budget = budget;
    rq->method = printable_copy(method);
    rq->url = strdup(url);
    rq->log_url = printable_copy(url);
    if (!rq->method || !rq->url || !rq->log_url) {
        request_finish(rq);
        return NULL;
    }
    rq->header_length = -1;
    clock_gettime(CLOCK_MONOTONIC, &rq->started);
    return rq;
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
        size_t cap = rq->body_cap ? rq->body_cap : 4096;
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
    free(rq->answer.body); /* NULL once handed to libmicrohttpd */
    byte_budget_give(rq->budget, rq->body_len);
    free(rq->body);
    free(rq->method);
    free(rq->url);
    free(rq->log_url);
    free(rq);
}
