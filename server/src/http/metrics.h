/* GET /metrics: the registry's counters and the models' statistics in the
 * Prometheus text exposition format (version 0.0.4). */
#ifndef FRONTEND_METRICS_H
#define FRONTEND_METRICS_H

#include <shmreg/shmreg.h>

#include "http/reply.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the reply's Content-Type must say (server.c sets it). */
#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* 200 with every field of shmreg_registry_stats (shmreg_...) and each
 * model's /v2/models/stats figures under Triton's metric names
 * (nv_inference_...); 500 when the stats cannot be read or memory runs out.
 * The text is a fixed set of lines: its size does not grow with clients,
 * regions or requests. */
void metrics_handle(shmreg_registry *reg, reply *out);

#ifdef __cplusplus
}
#endif

#endif
