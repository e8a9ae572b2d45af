/* The protocol-neutral half of an inference (infer_core.h says which half). */
#include "infer_core.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datatype.h"
#include "device_copy.h"
#include "reply.h"

unsigned infer_fail(infer_ctx *c, unsigned status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
    return status;
}

static unsigned fail_shmreg(infer_ctx *c, shmreg_err e)
{
    return infer_fail(c, http_status_from_shmreg(e), "%s", shmreg_last_error());
}

/* Acquire the window for this request: the reference belongs to the request
 * from here on, and view->addr stays valid until its response has been sent. */
static unsigned acquire_window(infer_ctx *c, const shm_window *w, shmreg_view *view)
{
    shmreg_region *ref;
    shmreg_err e = shmreg_acquire(c->reg, w->region, w->offset, w->byte_size, &ref, view);
    if (e != SHMREG_OK)
        return fail_shmreg(c, e);
    if (refs_hold(c->held, ref) != 0)
        return infer_fail(c, 500, "out of memory holding region '%s'", w->region);
    return 0;
}

/* A device copy's failure, with the tensor and region named in the message. */
static unsigned fail_copy(infer_ctx *c, unsigned status, const char *name, const char *region,
                          const char *why)
{
    return infer_fail(c, status, "tensor '%s' in CUDA shared memory region '%s': %s", name, region,
                      why);
}

unsigned infer_ready(infer_ctx *c)
{
    return model_ready(c->m, c->err, sizeof c->err);
}

unsigned infer_check_input_size(infer_ctx *c, const tensor *t, size_t given)
{
    size_t expected;
    if (datatype_size(t->datatype) == 0)
        return 0;
    if (tensor_expected_size(t, &expected) != 0)
        return infer_fail(c, 400, "input '%s': shape too large", t->name);
    if (expected != given)
        return infer_fail(c, 400, "input byte size mismatch for input '%s' for model '%s'. "
                                  "Expected %zu, got %zu",
                          t->name, model_name(c->m), expected, given);
    return 0;
}

unsigned infer_input_from_window(infer_ctx *c, tensor *t, const shm_window *w)
{
    shmreg_view view;
    unsigned st = acquire_window(c, w, &view);
    if (st)
        return st;
    t->byte_size = w->byte_size;
    if (view.kind == SHMREG_KIND_SYSTEM || model_device_tensors(c->m)) {
        t->data = view.addr;
        t->pinned = view.pinned;
        t->on_device = view.kind != SHMREG_KIND_SYSTEM;
        t->device_id = view.device_id;
        return 0;
    }
    t->owned = malloc(t->byte_size ? t->byte_size : 1);
    if (!t->owned)
        return infer_fail(c, 500, "out of memory staging input '%s'", t->name);
    char why[512];
    st = device_copy_to_host(t->owned, view.addr, t->byte_size, view.device_id, why, sizeof why);
    if (st)
        return fail_copy(c, st, t->name, w->region, why);
    t->data = t->owned;
    return 0;
}

unsigned infer_bind(infer_ctx *c, const tensor **ordered)
{
    if (model_bind_inputs(c->m, c->in, c->n_in, ordered, c->err, sizeof c->err) != 0)
        return 400;
    model_describe_outputs(c->m, ordered, c->out);
    return 0;
}

int infer_output_index(const infer_ctx *c, const char *name)
{
    for (size_t i = 0; i < model_n_outputs(c->m); i++)
        if (strcmp(c->out[i].name, name) == 0)
            return (int)i;
    return -1;
}

/* An output in a CUDA region is computed into a buffer (allocate_outputs)
 * and copied to the device after the model has run (outputs_to_device),
 * unless the model writes device memory itself (a GPU model). */
unsigned infer_place_output(infer_ctx *c, size_t i, placement place, const shm_window *w)
{
    tensor *t = &c->out[i];
    if (place == PLACE_SHM) {
        if (w->byte_size < t->byte_size)
            return infer_fail(c, 400, "shared memory size specified with the request for output "
                                      "'%s' (%zu bytes) should be at least %zu bytes to hold the "
                                      "results", t->name, w->byte_size, t->byte_size);
        /* Acquire only the bytes the output fills. */
        shm_window exact = {.region = w->region, .offset = w->offset, .byte_size = t->byte_size};
        shmreg_view view;
        c->out_place[i] = PLACE_SHM;
        unsigned st = acquire_window(c, &exact, &view);
        if (st)
            return st;
        /* The model would write through a mapping without write access: a
         * SIGSEGV for a system region, a failed copy for a CUDA one. Refused
         * here, before any model runs; the reference just taken is the
         * request's and is released with the others when the reply is sent. */
        if (!view.writable)
            return infer_fail(c, 400, "output '%s' cannot be written to shared memory region "
                                      "'%s': it was registered read-only", t->name, w->region);
        if (view.kind == SHMREG_KIND_SYSTEM || model_device_tensors(c->m)) {
            t->data = view.addr; /* a GPU model writes a CUDA region itself */
            t->pinned = view.pinned;
            t->on_device = view.kind != SHMREG_KIND_SYSTEM;
            t->device_id = view.device_id;
        } else {
            c->out_device[i] = view;
            c->out_region[i] = w->region;
        }
        return 0;
    }
    if (place == PLACE_JSON && !datatype_has_json(t->datatype))
        return infer_fail(c, 400, "output '%s' is %s: request it as binary data or in shared "
                                  "memory", t->name, t->datatype);
    c->out_place[i] = place;
    return 0;
}

/* Outputs not in a system region (those in a CUDA region, in the response
 * or not requested) get a buffer. */
static unsigned allocate_outputs(infer_ctx *c)
{
    for (size_t i = 0; i < model_n_outputs(c->m); i++) {
        tensor *t = &c->out[i];
        if (c->out_place[i] == PLACE_SHM && !c->out_region[i])
            continue;
        t->owned = malloc(t->byte_size ? t->byte_size : 1);
        if (!t->owned)
            return infer_fail(c, 500, "out of memory for output '%s'", t->name);
        t->data = t->owned;
    }
    return 0;
}

/* Copy the outputs placed in CUDA regions to the device. Each copy has
 * finished when this returns: the response that follows tells the client the
 * bytes are there, and the references are released once it has been sent. */
static unsigned outputs_to_device(infer_ctx *c)
{
    for (size_t i = 0; i < model_n_outputs(c->m); i++) {
        const shmreg_view *v = &c->out_device[i];
        if (!c->out_region[i])
            continue;
        char why[512];
        unsigned st = device_copy_to_device(v->addr, c->out[i].data, c->out[i].byte_size,
                                            v->device_id, why, sizeof why);
        if (st)
            return fail_copy(c, st, c->out[i].name, c->out_region[i], why);
    }
    return 0;
}

unsigned infer_compute(infer_ctx *c, const tensor *const *ordered)
{
    unsigned st = allocate_outputs(c);
    if (st)
        return st;
    if ((st = model_run(c->m, ordered, c->out, c->err, sizeof c->err)) != 0)
        return st;
    return outputs_to_device(c);
}

void infer_finish(infer_ctx *c, unsigned st, const struct timespec *started)
{
    for (size_t i = 0; i < c->n_in; i++)
        tensor_free(&c->in[i]);
    for (size_t i = 0; i < MODEL_MAX_OUTPUTS; i++)
        tensor_free(&c->out[i]);
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    model_record(c->m, st == 0,
                 (uint64_t)(now.tv_sec - started->tv_sec) * 1000000000u +
                     (uint64_t)(now.tv_nsec - started->tv_nsec));
}
