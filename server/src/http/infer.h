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

/* infer_handle on the HTTP thread for a GPU model's request that
 * infer_device_runs_inline allows, its run handed to the device
 * (INFER_ON_TRANSPORT_DEVICE, infer_compute_start) where every tensor lies
 * where the device reaches it:
 *   INFER_STARTED: the run was handed over; once it has ended, its answer
 *     (the one infer_handle gives) is set in rq->answer and answered(rq,
 *     arg) called, on whichever thread the run ended, perhaps on this one
 *     before this returns. answered's is the last touch of rq: the caller
 *     must have made it ready to be resumed before this call, and touches
 *     rq no more after INFER_STARTED;
 *   STATUS_OK: the request ended here (a failure before the run), its
 *     answer in out, answered not called;
 *   INFER_DEFERRED: as infer_handle_inline's (the regions it acquired
 *     released, its parsed JSON header kept in rq->parsed_header), for a
 *     tensor the CPU must copy or a model that cannot take the run so. */
server_status infer_handle_on_device(shmreg_registry *reg, request *rq, const route *rt,
                                     reply *out, void (*answered)(request *rq, void *arg),
                                     void *arg);

#endif
