/*
 * UTF-8 well-formedness: names a client gives are echoed in JSON and
 * protobuf strings, which must be UTF-8 (core/triton.h refuses a region
 * name that is not; http/json_write.h replaces bad bytes in what it writes).
 */
#ifndef SERVER_UTF8_H
#define SERVER_UTF8_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Length of the well-formed UTF-8 sequence at s (RFC 3629: no overlong
 * forms, no surrogates, nothing past U+10FFFF) of at most left bytes, or 0. */
size_t utf8_seq_len(const unsigned char *s, size_t left);
/* Whether the len bytes at s are well-formed UTF-8. */
int utf8_valid(const char *s, size_t len);

#ifdef __cplusplus
}
#endif

#endif
