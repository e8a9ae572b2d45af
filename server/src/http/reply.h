/* What a handler answers: a status and a body, built here and sent by http_server.c. */
#ifndef SERVER_REPLY_H
#define SERVER_REPLY_H

#include <stddef.h>

#include <shmreg/shmreg.h>

#include "http/json_write.h"
#include "common/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct reply {
    unsigned status;  /* HTTP status */
    char *body;       /* malloc'ed, or NULL for an empty body */
    size_t len;       /* bytes in body */
    size_t json_len;  /* > 0: body is this much JSON followed by binary tensor data */
} reply;

/* 200 with no body. */
void reply_empty(reply *r);
/* status with the text written into b as body; b is empty after. */
void reply_written(reply *r, unsigned status, jbuf *b);
/* 200 with the text written into b as body; b is empty after. */
void reply_text(reply *r, jbuf *b);
/* status with {"error": message}. */
void reply_error(reply *r, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The HTTP status of st: its column of common/status.h's table, which HTTP
 * reads here only; 500 for a value of no row. */
unsigned http_status_of(server_status st);
/* The core's or a model's failure st with {"error": message}. */
void reply_failure(reply *r, server_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The library's failure err, with this thread's message from the library. */
void reply_shmreg_error(reply *r, shmreg_err err);

#ifdef __cplusplus
}
#endif

#endif
