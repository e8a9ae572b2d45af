/*
 * The inference request path without its protocol: what HTTP (infer.c) and
 * gRPC (grpc/service.cc) share once each has parsed its own wire format.
 *
 *   0. the model must be able to run now (infer_ready): the GPU model
 *      without a device is refused before anything is parsed or acquired;
 *   1. for every input and output placed in shared memory, shmreg_acquire the
 *      window it names and hand the reference to the request's refs: from
 *      here on the bytes stay mapped until the response has been sent,
 *      whatever unregister does meanwhile (infer_input_from_window,
 *      infer_place_output); an output's view must be writable;
 *   2. bind the inputs to the model and describe its outputs (infer_bind);
 *   3. run the model on those windows (infer_compute), each tensor by one
 *      of the paths of core/tensor_paths.h: a system region is read and
 *      written only through the library's guarded copies (a client may
 *      truncate its object: that request gets FAULT, the server lives on),
 *      once per direction: into a host buffer for a model on the CPU, or,
 *      for a GPU model, into its instance's pinned staging buffer; a
 *      pinned one a GPU model reaches by DMA where it lies; a CUDA region
 *      is staged through a host buffer for a model on the CPU and handed
 *      over as a device pointer to a GPU model;
 *   4. the protocol builds its response from c->out, sends it, and its
 *      completion callback releases the references (refs_release_all).
 *
 * Every failure returns a status (common/status.h, which each protocol maps
 * once) with the message in c->err and leaves the references already
 * taken in the request's refs, released by that same completion callback.
 */
#ifndef SERVER_INFER_CORE_H
#define SERVER_INFER_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <shmreg/shmreg.h>

#include "models/models.h"
#include "core/refs.h"
#include "core/region_scope.h"
#include "core/remote_turns.h"
#include "common/status.h"
#include "core/tensor_paths.h"
#include "common/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define INFER_MAX_INPUTS 8

/* Where an output's bytes go. */
typedef enum placement {
    PLACE_NONE = 0, /* not requested */
    PLACE_JSON,     /* HTTP: elements in the JSON response */
    PLACE_BINARY,   /* HTTP: binary data after the JSON; gRPC: raw_output_contents */
    PLACE_SHM       /* a registered region */
} placement;

/* A tensor's window in a registered region, as the request names it. */
typedef struct shm_window {
    const char *region; /* NULL: the tensor is not in shared memory */
    size_t offset, byte_size;
} shm_window;

/* Which thread a request runs on, and so what it may wait for. */
typedef enum infer_thread {
    INFER_ON_WORKER = 0,
    /* a transport's thread, for a short model (infer_runs_inline): a
     * request that names a region stops with INFER_DEFERRED, before
     * acquiring it */
    INFER_ON_TRANSPORT,
    /* a transport's thread, for a GPU model (infer_device_runs_inline): the
     * run is handed to the device (infer_compute_start) if every tensor is
     * one the device reaches where it lies (a CUDA or pinned region); else
     * INFER_DEFERRED, after the regions were acquired (the protocol
     * releases them) */
    INFER_ON_TRANSPORT_DEVICE,
} infer_thread;

typedef struct infer_ctx {
    shmreg_registry *reg;
    infer_thread on_transport;
    refs *held;                  /* the request's references: released after its response */
    region_scope scope;          /* the regions it may name (--tenants: its tenant's) */
    remote_turns *remote_turns;  /* the turns of its pool's threads for remote copies, or
                                    NULL: none taken (remote_turns.h) */
    const model *m;
    const char *request_id;      /* the client's request id, or NULL: Triton's messages carry it */
    tensor in[INFER_MAX_INPUTS];
    size_t n_in;
    tensor out[MODEL_MAX_OUTPUTS];
    placement out_place[MODEL_MAX_OUTPUTS];
    /* An output staged through a host buffer and copied into its region
     * after the model has run (a CUDA region for a model on the CPU, or a
     * system region the CPU writes: infer_core.c says why): its region's
     * name (NULL for any other output), the window and the reference. */
    const char *out_region[MODEL_MAX_OUTPUTS];
    shmreg_view out_view[MODEL_MAX_OUTPUTS];
    shmreg_region *out_ref[MODEL_MAX_OUTPUTS];
    /* The windows a GPU model copies itself (tensor.window points here),
     * and the path each shared-memory tensor takes (TENSOR_PATH_NONE for
     * one that is not in shared memory): counted when the request succeeds. */
    tensor_window in_window[INFER_MAX_INPUTS];
    tensor_window out_window[MODEL_MAX_OUTPUTS];
    tensor_path in_path[INFER_MAX_INPUTS];
    tensor_path out_path[MODEL_MAX_OUTPUTS];
    /* A run handed over (infer_compute_start): the model's record of it, and
     * the protocol's completion. */
    model_pending pending;
    void (*started_done)(struct infer_ctx *c, server_status st);
    void *owner; /* the protocol's request, for started_done */
    char err[1024];
} infer_ctx;

/* No answer: the request cannot finish on the transport's thread
 * (c->on_transport says why). The protocol releases what the request
 * holds and queues it to its workers, which run it from the start, so that
 * where it runs never changes its answer. */
#define INFER_DEFERRED STATUS_PRIVATE_WORD(1)

/* The largest request (bytes on the wire) that may run on the transport's
 * thread that received it; infer_core.c says why this size. */
#define INFER_INLINE_MAX_BYTES (16u * 1024u)

/* 1 when a request of request_bytes for m may run on the transport's thread
 * instead of a worker's: m's run is short and needs only the CPU
 * (model_runs_short), and the request is small enough that parsing it is
 * short too. Such a run still stops at any shared-memory region
 * (INFER_DEFERRED): a region's copy may wait on a device or the network. */
int infer_runs_inline(const model *m, size_t request_bytes);
/* 1 when a request of request_bytes for m may try INFER_ON_TRANSPORT_DEVICE:
 * m runs on a device, and the request is small (its tensors are in
 * regions, not in its body). */
int infer_device_runs_inline(const model *m, size_t request_bytes);
/* Count a request that ran on the transport's thread to its end (not one
 * deferred); and the total so far, process-wide (/metrics). */
void infer_count_inline(void);
uint64_t infer_inline_total(void);

/* A failure: its status, with the message in c->err. */
server_status infer_fail(infer_ctx *c, server_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* STATUS_OK when c->m can run now; else its status, the reason in c->err. */
server_status infer_ready(infer_ctx *c);
/* The byte size t's datatype and shape demand, checked against what the
 * client supplied (BYTES has no fixed size: anything goes). The message is
 * Triton's core's, with its "[request id: ...] " prefix. */
server_status infer_check_input_size(infer_ctx *c, const tensor *t, size_t given);
/* Acquire w for input t (one of c->in): a system region is copied to a host
 * buffer with a guarded copy for a model on the CPU, or handed to a GPU
 * model as a window it copies itself (a pinned one: where it lies); a CUDA
 * one is copied to a host buffer first, or handed over as a device pointer
 * to a GPU model (model_device_tensors). Call infer_check_input_size after it,
 * before the tensor is used: Triton checks the window against its region
 * first (a bounds error wins over a size mismatch). */
server_status infer_input_from_window(infer_ctx *c, tensor *t, const shm_window *w);

/* What the request path is told (options_infer fills it from the flags). */
typedef struct infer_config {
    /* The most bytes one request may make the server hold for a tensor it
     * copies out of a region, or for its response (--max-body-mb, the bound
     * on what a client may send: shared memory must not be a way around
     * it). */
    size_t max_copy;
    int log_paths; /* -v: infer_finish logs each shared-memory tensor's path on stderr */
} infer_config;

/* The request path's rules are the server's, one set for every adapter
 * (a client must not find a larger bound on another protocol), read by
 * every request on any thread: they are set once, here, at start-up
 * before any request, rather than carried by each request. Until then:
 * no bound, no log. */
void infer_configure(const infer_config *cfg);
/* infer_config.max_copy. */
size_t infer_max_copy(void);
/* Bind c->in to the model into ordered and describe c->out. */
server_status infer_bind(infer_ctx *c, const tensor **ordered);
/* The index in c->out of the output named name, or -1. */
int infer_output_index(const infer_ctx *c, const char *name);
/* Place output i (shared memory: checked to fit, acquired, writable). */
server_status infer_place_output(infer_ctx *c, size_t i, placement place, const shm_window *w);
/* Buffers for outputs not in a system region, the model (which may fail: its
 * status, the message in c->err), the copies to CUDA regions: when this
 * returns 0, every output is where the response says. */
server_status infer_compute(infer_ctx *c, const tensor *const *ordered);
/* No answer: infer_compute_start handed the run over. */
#define INFER_STARTED STATUS_PRIVATE_WORD(2)
/* infer_compute for INFER_ON_TRANSPORT_DEVICE, without waiting: INFER_STARTED
 * when the model's run was handed over (model_start), and done(c, st) is
 * called when it ends, perhaps before this returns, on whichever thread it
 * ends: the protocol passes st through infer_compute_end and answers.
 * INFER_DEFERRED when the run cannot be handed over; or a failure's status
 * (done is not called). */
server_status infer_compute_start(infer_ctx *c, const tensor *const *ordered,
                                  void (*done)(infer_ctx *c, server_status st));
/* After the model's run ended with st: a guarded copy's failure in place of
 * the model's, the outputs staged for regions copied there; 0 when every
 * output is where the response says. */
server_status infer_compute_end(infer_ctx *c, server_status st);
/* Free the tensors' buffers and count the request (st == 0: a success) in
 * the model's statistics; a success counts its tensors' paths
 * (tensor_paths.h). The references stay in c->held. A request deferred
 * (INFER_DEFERRED) is not counted: its run on a worker is. */
void infer_finish(infer_ctx *c, server_status st, const struct timespec *started);

#ifdef __cplusplus
}
#endif

#endif
