/* Building replies, and the one place where library errors become statuses. */
#include "http/reply.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

unsigned http_status_from_shmreg(shmreg_err err)
{
    /* The table of docs/errors.md, with Triton's statuses where Triton has
     * one: clients test for them. */
    switch (err) {
    case SHMREG_OK: return 200;
    case SHMREG_ERR_INVALID_ARG:
    case SHMREG_ERR_ALREADY_EXISTS:
    case SHMREG_ERR_OUT_OF_BOUNDS:
    case SHMREG_ERR_BUSY:
    case SHMREG_ERR_FAULT: return 400; /* the request cannot be done as asked (FAULT:
                                          the client truncated its own region) */
    case SHMREG_ERR_NOT_FOUND:
    case SHMREG_ERR_WRONG_KIND: return 404; /* the name is not one of this endpoint's kind */
    case SHMREG_ERR_UNSUPPORTED: return 501;
    case SHMREG_ERR_NO_MEMORY: return 507;
    case SHMREG_ERR_SYSTEM:
    case SHMREG_ERR_CUDA: break;
    }
    return 500;
}

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

void reply_json(reply *r, unsigned status, json_object *j)
{
    jbuf b = {0};
    if (j)
        jbuf_json(&b, j);
    else
        b.failed = 1;
    json_object_put(j);
    reply_text(r, &b);
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
    reply_text(r, &b);
    if (r->body)
        r->status = status;
}

void reply_error(reply *r, unsigned status, const char *fmt, ...)
{
    char message[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    reply_message(r, status, message);
}

void reply_shmreg_error(reply *r, shmreg_err err)
{
    const char *message = shmreg_last_error();
    reply_message(r, http_status_from_shmreg(err), message[0] ? message : shmreg_err_description(err));
}
