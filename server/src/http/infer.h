/* POST v2/models/{m}/infer: parse, acquire the named regions, run, reply. */
#ifndef SERVER_INFER_H
#define SERVER_INFER_H

#include <shmreg/shmreg.h>

#include "core/remote_turns.h"
#include "http/reply.h"
#include "http/request.h"
#include "http/router.h"

/* turns: the turns of the workers' threads for remote copies (remote_turns.h). */
void infer_handle(shmreg_registry *reg, remote_turns *turns, request *rq, const route *rt,
                  reply *out);

/* infer_handle on the HTTP thread, for a request infer_runs_inline allows:
 * STATUS_OK with out set, or INFER_DEFERRED (out untouched, no reference held,
 * nothing counted; its parsed JSON header kept in rq->parsed_header) when the
 * request names a shared-memory region: the caller queues it to a worker,
 * which runs it with infer_handle from that header. */
server_status infer_handle_inline(shmreg_registry *reg, request *rq, const route *rt, reply *out);

#endif
