/*
 * The region references one request holds, whatever protocol carried it.
 *
 * The lifetime rule of libshmreg, in one place: every region a request names
 * is acquired while the request is parsed (refs_hold) and released only when
 * its response has been sent or the call has failed (refs_release_all, from
 * the protocol's completion callback: libmicrohttpd's for HTTP, the gRPC
 * reactor's OnDone for gRPC).
 */
#ifndef SERVER_REFS_H
#define SERVER_REFS_H

#include <stddef.h>

#include <shmreg/shmreg.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct refs {
    shmreg_region **held;
    size_t n, cap;
} refs;

/* Take ownership of ref until refs_release_all. On failure (out of memory)
 * ref is released here and -1 returned: the caller must not use it. */
int refs_hold(refs *r, shmreg_region *ref);
/* Release every held reference; r is empty (and reusable) afterwards. */
void refs_release_all(refs *r);

#ifdef __cplusplus
}
#endif

#endif
