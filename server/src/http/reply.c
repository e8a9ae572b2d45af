/* Building replies; failures get their HTTP statuses from common/status.h's table. */
#include "http/reply.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void reply_empty(reply *r)
{
    *r = (reply){.status = 200};
}

/* Last resort when even an error body cannot be allocated: the status alone. */
static void reply_bare(reply *r, unsigned status)
{
    *r = (reply){.status = status};
}

void reply_text(reply *r, jbuf *b)
{
    size_t len;
    char *text = jbuf_take(b, &len);
    if (!text)
        reply_bare(r, 500);
    else
        *r = (reply){.status = 200, .body = text, .len = len};
}

void reply_written(reply *r, unsigned status, jbuf *b)
{
    reply_text(r, b);
    if (r->body)
        r->status = status;
}

/* Written, not built: jbuf_str turns bytes that are not UTF-8 (a client's
 * name, in a message) into U+FFFD, so that the reply is still JSON. */
static void reply_message(reply *r, unsigned status, const char *message)
{
    jbuf b = {0};
    jbuf_lit(&b, "{\"error\":");
    jbuf_str(&b, message);
    jbuf_lit(&b, "}");
    reply_written(r, status, &b);
}

static void reply_vmessage(reply *r, unsigned status, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
static void reply_vmessage(reply *r, unsigned status, const char *fmt, va_list ap)
{
    char message[1024];
    vsnprintf(message, sizeof message, fmt, ap);
    reply_message(r, status, message);
}

void reply_error(reply *r, unsigned status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    reply_vmessage(r, status, fmt, ap);
    va_end(ap);
}

unsigned http_status_of(server_status st)
{
    switch (st) {
#define STATUS_HTTP_CASE(name, http, grpc) \
    case STATUS_##name: return http;
        STATUS_MAP(STATUS_HTTP_CASE)
#undef STATUS_HTTP_CASE
    default: return 500;
    }
}

void reply_failure(reply *r, server_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    reply_vmessage(r, http_status_of(st), fmt, ap);
    va_end(ap);
}

void reply_shmreg_error(reply *r, shmreg_err err)
{
    const char *message = shmreg_last_error();
    reply_message(r, http_status_of(status_from_shmreg(err, message)),
                  message[0] ? message : shmreg_err_description(err));
}
