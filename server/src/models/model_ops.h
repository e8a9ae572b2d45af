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

/* Not an HTTP status: model_start cannot hand this run over (it needs a
 * CPU copy of a tensor, or the model has no such run), and did nothing. */
#define MODEL_BUSY 1u

struct model_pending;
struct model_config;

typedef struct model_ops {
    /* Checks beyond the spec's datatype and dimensions: 0, or -1 with a message. */
    int (*check_input)(const tensor *in, const char *model, char *err, size_t errlen);
    /* Name, datatype, shape and byte size of each output. */
    void (*describe)(const tensor *const *in, tensor *out);
    /* 0 when the model can run; else an HTTP status and the reason. */
    unsigned (*ready)(char *err, size_t errlen);
    /* Run; inputs and outputs may be device pointers (tensor.on_device).
     * 0, or an HTTP status with the message in err. */
    unsigned (*run)(const tensor *const *in, tensor *out, model_phases *ph, char *err,
                    size_t errlen);
    /* Hand the run over without waiting for it (models.h, model_start):
     * 0 (p->done is or will be called), MODEL_BUSY, or an HTTP status with
     * the message in p->err. NULL: the model has no such run. */
    unsigned (*start)(const tensor *const *in, tensor *out, struct model_pending *p);
    /* Change or add what this model's config says beyond the common fields. */
    void (*config)(struct model_config *config);
} model_ops;

#ifdef __cplusplus
}
#endif

#endif
