/* POST v2/models/{m}/infer: parse, acquire the named regions, run, reply. */
#ifndef SERVER_INFER_H
#define SERVER_INFER_H

#include <shmreg/shmreg.h>

#include "http/reply.h"
#include "http/request.h"
#include "http/router.h"

void infer_handle(shmreg_registry *reg, request *rq, const route *rt, reply *out);

#endif
