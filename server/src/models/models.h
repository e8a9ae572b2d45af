/*
 * The built-in models:
 *   simple          INT32 INPUT0, INPUT1 [-1,16] -> OUTPUT0 = sum, OUTPUT1 = difference
 *   simple_delayed  the same after sleeping --delay-ms, so that a test can
 *                   unregister regions while a request holds them
 *   identity        OUTPUT0 = INPUT0, any datatype and shape
 *   yolo            FP16 images [3,H,W] -> FP16 output0 [84,anchors], a CUDA
 *                   kernel on the GPU instances of --gpus (model_yolo.h);
 *                   unavailable without CUDA or a device
 */
#ifndef SERVER_MODELS_H
#define SERVER_MODELS_H

#include <stddef.h>
#include <stdint.h>

#include "common/tensor.h"
#include "models/gpu_instances.h"
#include "models/model_ops.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MODEL_MAX_OUTPUTS 2

typedef struct model model;

/* What the models are told (options_models fills it from the flags). */
typedef struct models_config {
    unsigned delay_ms;        /* --delay-ms: how long simple_delayed sleeps */
    size_t tenants;           /* the tenants of --tenants: a book of statistics each */
    gpu_instances_config gpu; /* yolo's instances: --gpus, --instances-per-gpu, ... */
} models_config;

/* The models are one table for the whole process, which every adapter's
 * requests run: they are configured once, here, at start-up before any
 * request, rather than per adapter. Keeps a statistics book for each
 * tenant, all at zero, and starts yolo's GPU instances (whose failure
 * never fails this: the model says why it cannot run). 0, or -1 after a
 * message on stderr (out of memory for the books). */
int models_start(const models_config *cfg);
/* Stop yolo's GPU instances; no run may be in progress. */
void models_stop(void);
/* Shutdown's drain time is over: cut short every delay, running and to come
 * (those runs answer STATUS_UNAVAILABLE). Idempotent. */
void models_cut_delays(void);
const model *model_find(const char *name);
/* model_find, for a request naming version (NULL or "" for any): every
 * built-in model has exactly version "1". */
const model *model_find_version(const char *name, const char *version);
size_t model_count(void);
const model *model_at(size_t i);
const char *model_name(const model *m);
size_t model_n_outputs(const model *m);

/* What a model says of itself, as plain structs that each adapter renders
 * in its protocol (HTTP as JSON, gRPC as protobuf, /metrics as samples).
 * Strings point at the model's constant table; the structs own nothing and
 * need no release. Fields are listed in Triton's order for each answer. */
#define MODEL_MAX_DIMS 4
#define MODEL_MAX_INPUTS 2
#define MODEL_MAX_GPUS 64

/* One input or output: its name, the protocol's datatype ("INT32", "FP16";
 * a config's data_type is "TYPE_" and this) and its dimensions, -1 for any
 * size. */
typedef struct model_tensor_info {
    const char *name;
    const char *datatype;
    int64_t dims[MODEL_MAX_DIMS];
    int ndims;
} model_tensor_info;

/* The metadata extension's answer. shape is what clients send: the batch
 * dimension first (-1) when the model batches. */
typedef struct model_metadata {
    const char *name;
    const char *versions[1]; /* every built-in model has exactly version "1" */
    size_t n_versions;
    const char *platform;
    model_tensor_info inputs[MODEL_MAX_INPUTS], outputs[MODEL_MAX_OUTPUTS];
    size_t n_inputs, n_outputs;
} model_metadata;

/* Triton's model-config fields that its clients read. dims are without the
 * batch dimension, as Triton's config has them. */
typedef struct model_instance_group {
    int count;
    const char *kind; /* "KIND_CPU" or "KIND_GPU" */
    int lists_gpus;   /* a GPU group lists its devices, even none */
    int gpus[MODEL_MAX_GPUS];
    size_t n_gpus;
} model_instance_group;

typedef struct model_config_parameter {
    const char *key;
    char string_value[24];
} model_config_parameter;

typedef struct model_config {
    const char *name, *platform, *backend;
    int max_batch_size;
    model_tensor_info inputs[MODEL_MAX_INPUTS], outputs[MODEL_MAX_OUTPUTS];
    size_t n_inputs, n_outputs;
    const char *format; /* every tensor's: "FORMAT_NONE" */
    int decoupled;      /* model_transaction_policy */
    model_instance_group group;
    model_config_parameter parameters[1];
    size_t n_parameters;
} model_config;

/* A count and its cumulative nanoseconds (Triton's StatisticDuration). */
typedef struct model_duration {
    uint64_t count, ns;
} model_duration;

/* The statistics extension's figures of one model in one book; its
 * batch_stats are always empty (no dynamic batching is reported). */
typedef struct model_statistics {
    const char *name, *version;
    uint64_t last_inference; /* milliseconds since the epoch; 0: never */
    uint64_t inference_count, execution_count;
    model_duration success, fail, queue, compute_input, compute_infer, compute_output,
        cache_hit, cache_miss;
} model_statistics;

void model_get_metadata(const model *m, model_metadata *out);
void model_get_config(const model *m, model_config *out);
/* Statistics are kept in books: book 0 is the server's, and under
 * --tenants book 1 + N is tenant N's own (region_scope.h, scope_stats_book),
 * so that one tenant's counts and timings never show in another's. A book
 * past those kept reads and counts as book 0. */
void model_get_statistics(const model *m, size_t book, model_statistics *out);

/* Match the request's inputs against the model: ordered[i] becomes the input
 * for the model's i-th input. Returns 0, or -1 with a message in err. */
int model_bind_inputs(const model *m, const tensor *in, size_t n, const tensor **ordered,
                      char *err, size_t errlen);
/* Name, datatype, shape and byte size of each output for these inputs. */
void model_describe_outputs(const model *m, const tensor *const *in, tensor *out);
/* STATUS_OK when the model can run now; else its status with the reason in err. */
server_status model_ready(const model *m, char *err, size_t errlen);
/* 1: the model takes tensors in CUDA regions where they lie (device
 * pointers, tensor.on_device) and places outputs there itself; 0: they are
 * staged through host buffers for it. */
int model_device_tensors(const model *m);
/* 1: a run needs only the CPU and its work has a small fixed bound (every
 * tensor's shape is fixed up to a bounded batch) and no delay: `simple`.
 * Not the GPU model, identity (a tensor of any size) or simple_delayed. */
int model_runs_short(const model *m);
/* Compute the outputs into out[i].data (each out[i].byte_size bytes); a
 * model with ops counts the run's phases in book. Returns STATUS_OK, or the
 * failure's status with the message in err. */
server_status model_run(const model *m, size_t book, const tensor *const *in, tensor *out,
                        char *err, size_t errlen);
/* A run handed over by model_start. The caller fills done, err, errlen and
 * book and keeps the struct until done has been called; the rest is the
 * model's. */
typedef struct model_pending {
    /* Called once, on whichever thread the run ends: st STATUS_OK, or the
     * failure's status with the message in err. */
    void (*done)(struct model_pending *p, server_status st);
    char *err;
    size_t errlen;
    size_t book; /* the statistics' book that counts the run */
    const model *m;
    model_phases ph;
    gpu_pending gpu; /* the GPU model's run */
} model_pending;

/* model_run for a caller that must not wait (a transport's thread): the run
 * is handed to the model and p->done called when it ends, perhaps before
 * this returns. 0 (done is or will be called); MODEL_BUSY: the model cannot
 * take this run so (a tensor needs a CPU copy, or the model has no such
 * run), nothing was done, and the caller runs it with model_run elsewhere;
 * or the failure's status with the message in p->err (done is not called). */
server_status model_start(const model *m, const tensor *const *in, tensor *out, model_pending *p);
/* For a model's ops->start: its run has ended (st as p->done's); counts
 * it in the statistics and calls p->done. */
void model_run_ended(model_pending *p, server_status st);
/* Count one request in book of the statistics. */
void model_record(const model *m, size_t book, int ok, uint64_t ns);

#ifdef __cplusplus
}
#endif

#endif
