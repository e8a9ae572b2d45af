/* GET /metrics: the registry's counters and the models' statistics in the
 * Prometheus text exposition format (version 0.0.4). */
#ifndef SERVER_METRICS_H
#define SERVER_METRICS_H

#include <shmreg/shmreg.h>

#include "core/region_scope.h"
#include "http/reply.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the reply's Content-Type must say (http_server.c sets it). */
#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* 200 with every field of shmreg_registry_stats (shmreg_...) and each
 * model's /v2/models/stats figures under Triton's metric names
 * (nv_inference_...), with the tensor paths, the GPU model's copy batches and
 * the worker threads' queue (shmreg_...); 500 when the stats cannot be read or memory runs out.
 * The text is a fixed set of lines: its size does not grow with clients,
 * regions or requests. With --tenants (scope->per_tenant) the caller must
 * send a known token (401 otherwise) and sees its own tenant's figures
 * (shmreg_tenant_...) instead of the registry's totals, which would show
 * the other tenants' usage and, through the cache counters, their keys. */
void metrics_handle(shmreg_registry *reg, const region_scope *scope, reply *out);

#ifdef __cplusplus
}
#endif

#endif
