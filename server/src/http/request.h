/*
 * One HTTP request in flight: its body as it arrives, and the region
 * references it holds.
 *
 * The lifetime rule of libshmreg, in one place: every region a request names
 * is acquired while the request is parsed (refs_hold on rq->held, in
 * infer_core.c) and released only when its response has been sent or the
 * connection has failed (request_finish, from libmicrohttpd's completion
 * callback). Between the two, the mapping cannot go away, whatever unregister
 * does meanwhile.
 */
#ifndef SERVER_REQUEST_H
#define SERVER_REQUEST_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <shmreg/shmreg.h>

#include "common/byte_budget.h"
#include "core/access.h"
#include "core/refs.h"
#include "http/reply.h"
#include "http/router.h"

struct json_doc;


typedef struct request {
    char *body;            /* the bytes uploaded so far (not NUL-terminated) */
    size_t body_len, body_cap;
    byte_budget *budget;   /* charged body_len bytes until request_finish */
    int body_too_large;    /* past --max-body-mb: the rest is discarded, 413 follows */
    int over_budget;       /* past --max-buffered-mb: the rest is discarded, 503 follows */
    int dispatched;        /* the body is in and the request is being answered */
    int64_t header_length; /* Inference-Header-Content-Length, or -1 */
    int64_t content_length; /* Content-Length, for messages; -1 when absent */
    refs held;             /* references acquired for this request */
    struct timespec started;
    char *method, *url;    /* copies: method made printable, url as decoded */
    char *log_url;         /* url made printable, for the log line */
    unsigned status;       /* the status queued, for the log line */
    route rt;              /* what the URL matched (owned) */
    reply answer;          /* set for a suspended request by its worker, or by the
                              end of its run on the device (any thread) */
    int answered;          /* answer is ready to be queued: written before
                              MHD_resume_connection, whose lock publishes it
                              to the HTTP thread */
    void *connection;      /* the MHD connection, while suspended */
    caller who;            /* what its headers allow (access.h), read with them */
    /* The JSON header of an inference that the transport's thread parsed and
     * then handed to a worker (it names a region): the worker starts from it
     * instead of parsing the body again. Owned; NULL otherwise. */
    struct json_doc *parsed_header;
} request;

request *request_new(const char *method, const char *url, byte_budget *budget);
/* Append uploaded bytes; past max_body the request is marked too large, past
 * the budget over budget, and what it held is freed. -1: out of memory. */
int request_append(request *rq, const char *data, size_t len, size_t max_body);
/* Release every held reference and free rq. NULL is a no-op. */
void request_finish(request *rq);

#endif
