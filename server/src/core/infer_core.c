/* The protocol-neutral half of an inference (infer_core.h says which half). */
#include "core/infer_core.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/datatype.h"
#include "core/access.h"
#include "core/remote_turns.h"
#include "core/triton.h"
#include "models/device_copy.h"
#include "models/model_ops.h"

server_status infer_fail(infer_ctx *c, server_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
    return st;
}

/* The library's failure, with its message. */
static server_status fail_shmreg(infer_ctx *c, shmreg_err e)
{
    const char *message = shmreg_last_error();
    return infer_fail(c, status_from_shmreg(e, message), "%s", message);
}

/* Acquire the window for this request: the reference belongs to the request
 * from here on (*ref is lent for guarded copies), and view->addr stays
 * mapped until its response has been sent. */
static server_status acquire_window(infer_ctx *c, const shm_window *w, shmreg_view *view,
                                    shmreg_region **ref)
{
    if (c->on_transport == INFER_ON_TRANSPORT)
        return INFER_DEFERRED;
    if (scope_refused(&c->scope)) /* --tenants: a region of no tenant is nobody's to name */
        return infer_fail(c, STATUS_UNAUTHENTICATED, "%s", SCOPE_NO_TOKEN_MESSAGE);
    shmreg_err e = scope_acquire(c->reg, &c->scope, w->region, w->offset, w->byte_size, ref, view);
    if (e != SHMREG_OK)
        return fail_shmreg(c, e);
    if (refs_hold(c->held, *ref) != 0)
        return infer_fail(c, STATUS_INTERNAL, "out of memory holding region '%s'", w->region);
    /* An empty window (a region named without a byte size, which Triton's
     * HTTP reads as 0) holds no tensor: Triton refuses it with these words
     * (its end, offset + 0 - 1, wraps past the region). */
    if (w->byte_size == 0)
        return infer_fail(c, STATUS_INVALID_ARG,
                          "Invalid offset + byte size for shared memory region: '%s'",
                          w->region);
    return STATUS_OK;
}

/* The path a tensor in this view takes (tensor_paths.h). A client can
 * truncate a named shm object under the mapping, and a CPU access to the
 * lost pages raises SIGBUS, which would kill the server with every tenant's
 * requests: so the CPU touches a system region only through guarded copies.
 * A GPU model reaches a pinned system region by DMA, which reads the pages
 * the pin holds whatever the client does to its object, and a CUDA region
 * is device memory, which no client can shrink. */
static tensor_path path_of(const infer_ctx *c, const shmreg_view *view)
{
    return tensor_path_for(model_device_tensors(c->m), view);
}

/* Hand t over where it lies (DMA_IN_PLACE), or as a window the GPU model
 * copies itself (STAGED_COPY); for any other path the caller copies. */
static void hand_over(tensor *t, const shmreg_view *view, shmreg_region *ref, tensor_path path,
                      tensor_window *window)
{
    if (path == TENSOR_PATH_STAGED_COPY) {
        *window = (tensor_window){.ref = ref, .view = *view, .failed = SHMREG_OK};
        t->window = window;
        t->data = NULL;
        return;
    }
    t->data = view->addr;
    t->pinned = view->pinned;
    t->on_device = view->kind != SHMREG_KIND_SYSTEM;
    t->device_id = view->device_id;
}

/* A guarded copy's failure (FAULT: the client truncated its object; a
 * remote region's copy over its tenant's limit, OVER_LIMIT as every limit), with
 * the tensor named; the library's message names the region. */
static server_status fail_guarded(infer_ctx *c, shmreg_err e, const char *what, const char *name)
{
    const char *message = shmreg_last_error();
    return infer_fail(c, status_from_shmreg(e, message), "%s '%s': %s", what, name, message);
}

/* A guarded copy between buf and the view of region ref, into the region
 * (output) or out of it (input), for tensor name. A remote region's copy
 * waits for its client: it takes a turn of this pool's threads first
 * (remote_turns.h), so that a client that does not answer holds no other
 * tenant's request. 0, or the failure's status with the message in c->err. */
static server_status guarded_copy(infer_ctx *c, tensor_direction d, shmreg_region *ref,
                                  const shmreg_view *view, void *buf, size_t n, const char *name)
{
    const char *what = tensor_direction_name(d);
    int turn = view->kind == SHMREG_KIND_REMOTE && c->remote_turns;
    if (turn) {
        char why[512];
        server_status st = remote_turns_take(c->remote_turns, &c->scope, why, sizeof why);
        if (st)
            return infer_fail(c, st, "%s '%s': %s", what, name, why);
    }
    shmreg_err e = d == TENSOR_INPUT ? shmreg_copy_from_view(ref, view, 0, buf, n)
                                     : shmreg_copy_to_view(ref, view, 0, buf, n);
    if (turn)
        remote_turns_give_back(c->remote_turns, &c->scope);
    return e == SHMREG_OK ? STATUS_OK : fail_guarded(c, e, what, name);
}

/* A device copy's failure, with the tensor and region named in the message. */
static server_status fail_copy(infer_ctx *c, server_status st, const char *name, const char *region,
                               const char *why)
{
    return infer_fail(c, st, "tensor '%s' in CUDA shared memory region '%s': %s", name, region,
                      why);
}

/* 16 KiB: every valid request for a short model fits with room to spare
 * (`simple` at its largest batch, 2 x 8 x 16 INT32 elements written as JSON
 * numbers, is about 3.5 KiB), and the reader parses that much in well under a
 * millisecond; a larger body is a request the transport's thread, which also
 * serves status and register, does not parse. */
int infer_runs_inline(const model *m, size_t request_bytes)
{
    return m && request_bytes <= INFER_INLINE_MAX_BYTES && model_runs_short(m);
}

int infer_device_runs_inline(const model *m, size_t request_bytes)
{
    return m && request_bytes <= INFER_INLINE_MAX_BYTES && model_device_tensors(m);
}

/* Relaxed: a counter, nothing is published through it. */
static _Atomic uint64_t inline_runs;

void infer_count_inline(void)
{
    atomic_fetch_add_explicit(&inline_runs, 1, memory_order_relaxed);
}

uint64_t infer_inline_total(void)
{
    return atomic_load_explicit(&inline_runs, memory_order_relaxed);
}

server_status infer_ready(infer_ctx *c)
{
    return model_ready(c->m, c->err, sizeof c->err);
}

server_status infer_check_input_size(infer_ctx *c, const tensor *t, size_t given)
{
    size_t expected;
    if (datatype_size(t->datatype) == 0)
        return STATUS_OK;
    if (tensor_expected_size(t, &expected) != 0)
        return infer_fail(c, STATUS_INVALID_ARG, "input '%s': shape too large", t->name);
    if (expected != given)
        return infer_fail(c, STATUS_INVALID_ARG,
                          "[request id: %s] input byte size mismatch for input '%s' for "
                                  "model '%s'. Expected %zu, got %zu",
                          c->request_id && *c->request_id ? c->request_id : "<id_unknown>",
                          t->name, model_name(c->m), expected, given);
    return STATUS_OK;
}

/* infer_configure's; written before any request. */
static size_t max_copy = SIZE_MAX;
static int log_paths;

void infer_configure(const infer_config *cfg)
{
    max_copy = cfg->max_copy;
    log_paths = cfg->log_paths;
}

size_t infer_max_copy(void)
{
    return max_copy;
}

server_status infer_input_from_window(infer_ctx *c, tensor *t, const shm_window *w)
{
    shmreg_view view;
    shmreg_region *ref;
    server_status st = acquire_window(c, w, &view, &ref);
    if (st)
        return st;
    t->byte_size = w->byte_size;
    size_t k = (size_t)(t - c->in); /* t is one of c->in: its path and window sit beside it */
    tensor_path path = path_of(c, &view);
    c->in_path[k] = path;
    if (path == TENSOR_PATH_DMA_IN_PLACE) {
        hand_over(t, &view, ref, path, &c->in_window[k]);
        return STATUS_OK;
    }
    /* A region may be far larger than any body; the copy is what
     * the server pays for (a host buffer, or the instance's staging buffer
     * grown to fit), so it is bounded as a body is. */
    if (t->byte_size > max_copy)
        return infer_fail(c, STATUS_INVALID_ARG,
                          "input '%s' takes %zu bytes of shared memory region '%s', more "
                                  "than this server copies for one tensor (%zu, --max-body-mb)",
                          t->name, t->byte_size, w->region, max_copy);
    if (path == TENSOR_PATH_STAGED_COPY) {
        hand_over(t, &view, ref, path, &c->in_window[k]);
        return STATUS_OK;
    }
    /* A copy may wait (a remote region's, for its client, up to
     * --remote-timeout-ms): never on a transport's thread, which serves
     * every other call (a GPU model's request, INFER_ON_TRANSPORT_DEVICE). */
    if (c->on_transport != INFER_ON_WORKER)
        return INFER_DEFERRED;
    t->owned = malloc(t->byte_size ? t->byte_size : 1);
    if (!t->owned)
        return infer_fail(c, STATUS_INTERNAL, "out of memory staging input '%s'", t->name);
    /* A remote region's copy is a request to its client, bounded by the
     * registry's timeout. */
    if (view.kind == SHMREG_KIND_SYSTEM || view.kind == SHMREG_KIND_REMOTE) {
        st = guarded_copy(c, TENSOR_INPUT, ref, &view, t->owned, t->byte_size, t->name);
        if (st)
            return st;
        t->data = t->owned;
        return STATUS_OK;
    }
    char why[512];
    st = device_copy_to_host(t->owned, view.addr, t->byte_size, view.device_id, why, sizeof why);
    if (st)
        return fail_copy(c, st, t->name, w->region, why);
    t->data = t->owned;
    return STATUS_OK;
}

server_status infer_bind(infer_ctx *c, const tensor **ordered)
{
    if (model_bind_inputs(c->m, c->in, c->n_in, ordered, c->err, sizeof c->err) != 0)
        return STATUS_INVALID_ARG;
    model_describe_outputs(c->m, ordered, c->out);
    return STATUS_OK;
}

int infer_output_index(const infer_ctx *c, const char *name)
{
    for (size_t i = 0; i < model_n_outputs(c->m); i++)
        if (strcmp(c->out[i].name, name) == 0)
            return (int)i;
    return -1;
}

/* An output is computed into a buffer (allocate_outputs) and copied into its
 * region after the model has run (outputs_to_regions), unless a GPU model
 * writes the region itself (hand_over). */
server_status infer_place_output(infer_ctx *c, size_t i, placement place, const shm_window *w)
{
    tensor *t = &c->out[i];
    if (place == PLACE_SHM) {
        /* The whole window the client declared is acquired, not just the
         * bytes the output fills: one that runs past the region's end is
         * refused with Triton's "Invalid offset + byte size" even when the
         * tensor would fit, as Triton refuses it; and before the size
         * check, in Triton's order (its bounds at parse, the size when the
         * output is allocated). */
        shmreg_view view;
        shmreg_region *ref;
        c->out_place[i] = PLACE_SHM;
        server_status st = acquire_window(c, w, &view, &ref);
        if (st)
            return st;
        if (w->byte_size < t->byte_size)
            return infer_fail(c, STATUS_INVALID_ARG,
                              "shared memory size specified with the request for output "
                                      "'%s' (%zu bytes) should be at least %zu bytes to hold the "
                                      "results", t->name, w->byte_size, t->byte_size);
        /* The model would write through a mapping without write access: a
         * SIGSEGV for a system region, a failed copy for a CUDA one. Refused
         * here, before any model runs; the reference just taken is the
         * request's and is released with the others when the reply is sent. */
        if (!view.writable)
            return infer_fail(c, STATUS_INVALID_ARG,
                              "output '%s' cannot be written to shared memory region "
                                      "'%s': it was registered read-only", t->name, w->region);
        tensor_path path = path_of(c, &view);
        c->out_path[i] = path;
        if (path == TENSOR_PATH_DMA_IN_PLACE || path == TENSOR_PATH_STAGED_COPY) {
            hand_over(t, &view, ref, path, &c->out_window[i]); /* a GPU model writes it itself */
        } else {
            c->out_view[i] = view;
            c->out_ref[i] = ref;
            c->out_region[i] = w->region;
        }
        return STATUS_OK;
    }
    if (place == PLACE_JSON && !datatype_has_json(t->datatype))
        return infer_fail(c, STATUS_INVALID_ARG,
                          "output '%s' is %s: request it as binary data or in shared "
                                  "memory", t->name, t->datatype);
    c->out_place[i] = place;
    return STATUS_OK;
}

/* Outputs the model does not write in place (staged for a region, in the
 * response or not requested) get a buffer. */
static server_status allocate_outputs(infer_ctx *c)
{
    for (size_t i = 0; i < model_n_outputs(c->m); i++) {
        tensor *t = &c->out[i];
        if (c->out_place[i] == PLACE_SHM && !c->out_region[i])
            continue;
        t->owned = malloc(t->byte_size ? t->byte_size : 1);
        if (!t->owned)
            return infer_fail(c, STATUS_INTERNAL, "out of memory for output '%s'", t->name);
        t->data = t->owned;
    }
    return STATUS_OK;
}

/* Copy the staged outputs into their regions: a guarded copy into a system
 * region, a device copy into a CUDA one. Each copy has finished when this
 * returns: the response that follows tells the client the bytes are there,
 * and the references are released once it has been sent. */
static server_status outputs_to_regions(infer_ctx *c)
{
    for (size_t i = 0; i < model_n_outputs(c->m); i++) {
        const shmreg_view *v = &c->out_view[i];
        if (!c->out_region[i])
            continue;
        if (v->kind == SHMREG_KIND_SYSTEM || v->kind == SHMREG_KIND_REMOTE) {
            server_status st = guarded_copy(c, TENSOR_OUTPUT, c->out_ref[i], v, c->out[i].data,
                                            c->out[i].byte_size, c->out[i].name);
            if (st)
                return st;
            continue;
        }
        char why[512];
        server_status st = device_copy_to_device(v->addr, c->out[i].data, c->out[i].byte_size,
                                                 v->device_id, why, sizeof why);
        if (st)
            return fail_copy(c, st, c->out[i].name, c->out_region[i], why);
    }
    return STATUS_OK;
}

/* A GPU model's guarded copy that failed (the client truncated its object):
 * its status and message replace the model's, in the words of the CPU
 * path's. The library's message is this thread's: the model ran the copy
 * on it (gpu_instances_run is synchronous). 0 when none failed. */
static server_status window_failure(infer_ctx *c)
{
    for (size_t i = 0; i < c->n_in; i++)
        if (c->in[i].window && c->in_window[i].failed != SHMREG_OK)
            return fail_guarded(c, c->in_window[i].failed, "input", c->in[i].name);
    for (size_t i = 0; i < model_n_outputs(c->m); i++)
        if (c->out[i].window && c->out_window[i].failed != SHMREG_OK)
            return fail_guarded(c, c->out_window[i].failed, "output", c->out[i].name);
    return STATUS_OK;
}

/* A run handed over from a transport's thread must be one the device
 * reads and writes where every tensor lies: an input in the request's
 * body, an output returned in the response, or one staged for a region is a
 * CPU copy, which a worker makes. */
static int all_in_place(const infer_ctx *c)
{
    for (size_t i = 0; i < c->n_in; i++)
        if (!c->in[i].on_device && !c->in[i].pinned)
            return 0;
    for (size_t i = 0; i < model_n_outputs(c->m); i++)
        if (c->out_place[i] != PLACE_SHM || c->out_region[i] || c->out[i].window ||
            (!c->out[i].on_device && !c->out[i].pinned))
            return 0;
    return 1;
}

server_status infer_compute(infer_ctx *c, const tensor *const *ordered)
{
    server_status st = allocate_outputs(c);
    if (st)
        return st;
    return infer_compute_end(c, model_run(c->m, scope_stats_book(&c->scope), ordered, c->out,
                                          c->err, sizeof c->err));
}

server_status infer_compute_end(infer_ctx *c, server_status st)
{
    if (st != 0) {
        server_status guarded = window_failure(c);
        return guarded ? guarded : st;
    }
    return outputs_to_regions(c);
}

/* The model's end of a started run, to the protocol's. */
static void started_run_ended(model_pending *p, server_status st)
{
    infer_ctx *c = (infer_ctx *)((char *)p - offsetof(infer_ctx, pending));
    c->started_done(c, st);
}

server_status infer_compute_start(infer_ctx *c, const tensor *const *ordered,
                                  void (*done)(infer_ctx *c, server_status st))
{
    if (!all_in_place(c))
        return INFER_DEFERRED;
    c->started_done = done;
    c->pending = (model_pending){.done = started_run_ended, .err = c->err, .errlen = sizeof c->err,
                                 .book = scope_stats_book(&c->scope)};
    server_status st = model_start(c->m, ordered, c->out, &c->pending);
    return st == MODEL_BUSY ? INFER_DEFERRED : st ? st : INFER_STARTED;
}

/* Count (and with -v log, one line per request) the path of each tensor in
 * shared memory. */
static void count_paths(const infer_ctx *c)
{
    char line[1024];
    size_t len = 0;
    for (size_t d = 0; d < 2; d++) {
        size_t n = d == TENSOR_INPUT ? c->n_in : model_n_outputs(c->m);
        for (size_t i = 0; i < n; i++) {
            tensor_path p = d == TENSOR_INPUT ? c->in_path[i] : c->out_path[i];
            const tensor *t = d == TENSOR_INPUT ? &c->in[i] : &c->out[i];
            if (p == TENSOR_PATH_NONE)
                continue;
            tensor_path_count(p, (tensor_direction)d, t->byte_size);
            if (log_paths && len < sizeof line) {
                int k = snprintf(line + len, sizeof line - len, "%s %s '%s' %s %zu bytes",
                                 len ? ";" : "", tensor_direction_name((tensor_direction)d),
                                 t->name, tensor_path_name(p), t->byte_size);
                len += k > 0 ? (size_t)k : 0;
            }
        }
    }
    if (log_paths && len)
        fprintf(stderr, "infer '%s' tensor paths:%s\n", model_name(c->m), line);
}

void infer_finish(infer_ctx *c, server_status st, const struct timespec *started)
{
    if (st == 0)
        count_paths(c);
    for (size_t i = 0; i < c->n_in; i++)
        tensor_free(&c->in[i]);
    for (size_t i = 0; i < MODEL_MAX_OUTPUTS; i++)
        tensor_free(&c->out[i]);
    if (st == INFER_DEFERRED)
        return;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    model_record(c->m, scope_stats_book(&c->scope), st == 0,
                 (uint64_t)(now.tv_sec - started->tv_sec) * 1000000000u +
                     (uint64_t)(now.tv_nsec - started->tv_nsec));
}
