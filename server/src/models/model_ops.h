/*
 * A built-in model with code of its own (model_yolo.c), beyond the table of
 * models.c: its own shape rules, readiness, a run that can fail, and the
 * phases Triton's statistics extension reports (queue, compute input, infer,
 * output). models.c calls these where a model has them.
 */
#ifndef SERVER_MODEL_OPS_H
#define SERVER_MODEL_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "common/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Nanoseconds of one run, by phase, as Triton names them. */
typedef struct model_phases {
    uint64_t queue_ns;  /* waiting for a free model instance (the GPU model's:
                         * a run slot, then its batch) */
    uint64_t input_ns;  /* inputs to the instance's device buffers */
    uint64_t infer_ns;  /* the kernel */
    uint64_t output_ns; /* outputs to where the request wants them */
} model_phases;

/* No answer: model_start cannot hand this run over (it needs a
 * CPU copy of a tensor, or the model has no such run), and did nothing. */
#define MODEL_BUSY STATUS_PRIVATE_WORD(0)

struct model_pending;
struct model_config;

typedef struct model_ops {
    /* Checks beyond the spec's datatype and dimensions: 0, or -1 with a message. */
    int (*check_input)(const tensor *in, const char *model, char *err, size_t errlen);
    /* Name, datatype, shape and byte size of each output. */
    void (*describe)(const tensor *const *in, tensor *out);
    /* STATUS_OK when the model can run; else its status and the reason. */
    server_status (*ready)(char *err, size_t errlen);
    /* Run; inputs and outputs may be device pointers (tensor.on_device).
     * STATUS_OK, or the failure's status with the message in err. */
    server_status (*run)(const tensor *const *in, tensor *out, model_phases *ph, char *err,
                         size_t errlen);
    /* Hand the run over without waiting for it (models.h, model_start):
     * STATUS_OK (p->done is or will be called), MODEL_BUSY, or the failure's
     * status with the message in p->err. NULL: the model has no such run. */
    server_status (*start)(const tensor *const *in, tensor *out, struct model_pending *p);
    /* Change or add what this model's config says beyond the common fields. */
    void (*config)(struct model_config *config);
} model_ops;

#ifdef __cplusplus
}
#endif

#endif
