/* POST v2/models/{m}/infer: parse, acquire the named regions, run, reply. */
#ifndef FRONTEND_INFER_H
#define FRONTEND_INFER_H

#include <shmreg/shmreg.h>

#include "reply.h"
#include "request.h"
#include "router.h"

void infer_handle(shmreg_registry *reg, request *rq, const route *rt, reply *out);

#endif
