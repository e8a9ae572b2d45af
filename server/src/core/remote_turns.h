/*
 * Which requests may wait for a remote client on a worker pool's threads.
 *
 * A remote region's copy (shmreg_copy_from_view / _to_view of a remote
 * view) waits in the calling thread for the client's answer, for up to
 * --remote-timeout-ms: a client that stops answering holds that thread all
 * that time. The library's --remote-max-copies bounds one tenant's copies
 * in the whole process, not the threads of one pool, so a silent client's
 * copies could hold every worker of --threads and queue every other
 * tenant's requests behind them for the whole timeout.
 *
 * So each pool that runs inferences (HTTP's, gRPC's) has a table of turns:
 * a remote copy takes a turn before it starts and gives it back when it
 * returns. There are threads - 1 turns in all (at least one), so that a
 * thread is always left for requests that need no remote copy; under
 * --tenants one tenant holds at most max(1, (threads - 1) / 2) of them,
 * so that two silent tenants together still leave that thread, and one
 * leaves the others half the pool. A copy past either bound fails at once
 * with STATUS_OVER_LIMIT and a message naming the tenant and
 * --threads, as a copy past --remote-max-copies does: waiting for a turn
 * would hold the thread again.
 *
 * Why turns rather than copying asynchronously: the library's copy is
 * synchronous (it progresses UCX's worker in the caller's thread until the
 * answer or the timeout); an asynchronous one would need a completion API
 * in the library and a resumable request in both adapters, for a case
 * (a client that does not answer) that only needs to be contained.
 */
#ifndef SERVER_REMOTE_TURNS_H
#define SERVER_REMOTE_TURNS_H

#include <stddef.h>

#include "core/region_scope.h"
#include "common/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct remote_turns remote_turns;

/* The turns of a pool of threads worker threads at work (--threads), named
 * protocol ("HTTP", "gRPC") in refusals. NULL when out of memory. */
remote_turns *remote_turns_new(unsigned threads, const char *protocol);
/* NULL is a no-op. No turn may be held any more. */
void remote_turns_free(remote_turns *t);

/* Take a turn for a copy of scope's tenant (the whole registry without
 * --tenants): STATUS_OK, or STATUS_OVER_LIMIT with the reason in why. */
server_status remote_turns_take(remote_turns *t, const region_scope *scope, char *why, size_t len);
/* Give back a turn remote_turns_take gave for the same scope. */
void remote_turns_give_back(remote_turns *t, const region_scope *scope);

#ifdef __cplusplus
}
#endif

#endif
