/*
 * The request's header block as libmicrohttpd left it: whether the headers
 * it hands out are all the header block holds.
 *
 * libmicrohttpd 0.9.75 measures every header value with strlen, so a value
 * with a NUL in it reaches the server cut at the NUL ("Bearer <token>\0junk"
 * reads as the bare token) and obs-fold continuation lines are mislaid; the
 * server cannot see either through libmicrohttpd's calls. RFC 9110 section
 * 5.5 has a recipient reject a field value holding NUL, and RFC 9112 section
 * 5.2 lets a server answer obs-fold with 400: both are refused here, by
 * checking the bytes around each header in the block it was parsed in.
 */
#ifndef SERVER_HEADER_BLOCK_H
#define SERVER_HEADER_BLOCK_H

#include <stddef.h>

#include <microhttpd.h>

/* The longest header name a refusal quotes (longer ones are cut). */
#define HEADER_BLOCK_NAME_MAX 64

/* 0 when the block starting at method (the access handler's argument, on
 * its first call) holds exactly the headers libmicrohttpd hands out; -1 when
 * it does not, with the name of the first header that breaks it written to
 * bad (NUL-terminated, cut to fit bad_size, which must be at least 1).
 * Always 0 on a libmicrohttpd this check was not written against
 * (header_block.c says which). */
int header_block_check(struct MHD_Connection *conn, const char *method, char *bad,
                       size_t bad_size);

#endif
