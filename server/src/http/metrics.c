/* The /metrics page: one table of the registry's counters, its CUDA
 * regions per GPU, the paths shared-memory tensors took, and one table of
 * the models' statistics, each written as HELP, TYPE and sample lines. */
#include "http/metrics.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/gpu_regions.h"
#include "http/json_write.h"
#include "common/worker_pool.h"
#include "core/infer_core.h"
#include "core/tensor_paths.h"
#include "models/gpu_instances.h"
#include "models/models.h"

typedef enum metric_type { GAUGE, COUNTER } metric_type;

/* One shmreg_stats field: the fields are size_t or uint64_t, so the table
 * keeps each one's offset and width instead of a getter per field. */
typedef struct registry_metric {
    const char *name; /* counters end in _total, as Prometheus names them */
    metric_type type;
    const char *help;
    size_t offset, width;
} registry_metric;

#define FIELD(f) offsetof(shmreg_stats, f), sizeof(((shmreg_stats *)0)->f)

/* Every field of shmreg_stats but the reserved tail, in the header's order. */
static const registry_metric registry_metrics[] = {
    {"shmreg_regions", GAUGE, "Regions listed by status: registered or pending.",
     FIELD(regions)},
    {"shmreg_pending_regions", GAUGE,
     "Regions unregistered under the defer policy that requests still hold.",
     FIELD(pending_regions)},
    {"shmreg_detached_regions", GAUGE,
     "Regions unregistered under the detach policy, still mapped for references held.",
     FIELD(detached_regions)},
    {"shmreg_references", GAUGE, "References requests hold on listed regions.",
     FIELD(references)},
    {"shmreg_mapped_regions", GAUGE, "Regions still mapped: listed and detached.",
     FIELD(mapped_regions)},
    {"shmreg_mapped_bytes", GAUGE,
     "Bytes mapped, cached and waiting for reclaim included (what --max-mapped-bytes counts).",
     FIELD(mapped_bytes)},
    {"shmreg_pinned_bytes", GAUGE,
     "Bytes page-locked, cached included (what --max-pinned-bytes counts).",
     FIELD(pinned_bytes)},
    {"shmreg_registrations_total", COUNTER, "Successful registrations.", FIELD(registrations)},
    {"shmreg_registration_refusals_total", COUNTER, "Registrations refused, for any reason.",
     FIELD(refusals)},
    {"shmreg_reclaim_waiting_bytes", GAUGE,
     "Bytes of released regions the reclaim thread has yet to unmap.",
     FIELD(reclaim_waiting_bytes)},
    {"shmreg_cached_bytes", GAUGE,
     "Bytes of mappings the registration cache keeps with no region on them.",
     FIELD(cached_bytes)},
    {"shmreg_cached_mappings", GAUGE, "Mappings the registration cache keeps.",
     FIELD(cached_mappings)},
    {"shmreg_cache_hits_total", COUNTER,
     "Registrations that reused a cached or live mapping.", FIELD(cache_hits)},
    {"shmreg_cache_misses_total", COUNTER,
     "Registrations of a cacheable source that opened a new mapping.", FIELD(cache_misses)},
    {"shmreg_cache_evictions_total", COUNTER,
     "Cached mappings unmapped for --cache-bytes, for room, or by trim.",
     FIELD(cache_evictions)},
};

/* One /v2/models/stats figure (a field of model_statistics), under
 * Triton's metric name: dashboards made for Triton read these as they are,
 * so they keep Triton's names (which end in neither _total nor a unit
 * suffix Prometheus would choose). ns_to_us: Triton counts durations in
 * microseconds where the statistics extension counts nanoseconds. */
typedef struct model_metric {
    const char *name;
    const char *help;
    size_t offset; /* of the uint64_t in model_statistics */
    int ns_to_us;
} model_metric;

#define STAT(field) offsetof(model_statistics, field)

static const model_metric model_metrics[] = {
    {"nv_inference_request_success", "Successful inference requests.", STAT(success.count), 0},
    {"nv_inference_request_failure", "Failed inference requests.", STAT(fail.count), 0},
    {"nv_inference_count", "Inferences performed (a batch of n counts n).",
     STAT(inference_count), 0},
    {"nv_inference_exec_count", "Inference executions.", STAT(execution_count), 0},
    {"nv_inference_request_duration_us",
     "Cumulative time of successful inference requests, in microseconds.", STAT(success.ns), 1},
    {"nv_inference_queue_duration_us",
     "Cumulative time requests waited in a queue, in microseconds.", STAT(queue.ns), 1},
    {"nv_inference_compute_input_duration_us",
     "Cumulative time spent on inputs, in microseconds.", STAT(compute_input.ns), 1},
    {"nv_inference_compute_infer_duration_us",
     "Cumulative time spent running models, in microseconds.", STAT(compute_infer.ns), 1},
    {"nv_inference_compute_output_duration_us",
     "Cumulative time spent on outputs, in microseconds.", STAT(compute_output.ns), 1},
};

#define COUNT(a) (sizeof a / sizeof a[0])

static void write_header(jbuf *b, const char *name, metric_type type, const char *help)
{
    jbuf_lit(b, "# HELP ");
    jbuf_lit(b, name);
    jbuf_lit(b, " ");
    jbuf_lit(b, help); /* ours, constant: nothing to escape */
    jbuf_lit(b, "\n# TYPE ");
    jbuf_lit(b, name);
    jbuf_lit(b, type == COUNTER ? " counter\n" : " gauge\n");
}

static uint64_t stats_field(const shmreg_stats *s, const registry_metric *m)
{
    const char *at = (const char *)s + m->offset;
    if (m->width == sizeof(uint64_t)) {
        uint64_t v;
        memcpy(&v, at, sizeof v);
        return v;
    }
    size_t v;
    memcpy(&v, at, sizeof v);
    return v;
}

static void write_registry(jbuf *b, const shmreg_stats *s)
{
    for (size_t i = 0; i < COUNT(registry_metrics); i++) {
        const registry_metric *m = &registry_metrics[i];
        write_header(b, m->name, m->type, m->help);
        jbuf_lit(b, m->name);
        jbuf_lit(b, " ");
        jbuf_u64(b, stats_field(s, m));
        jbuf_lit(b, "\n");
    }
}

/* One sample of a family with a single label: name{label="value"} v. */
static void write_labelled(jbuf *b, const char *name, const char *label, const char *value,
                           uint64_t v)
{
    jbuf_lit(b, name);
    jbuf_lit(b, "{");
    jbuf_lit(b, label);
    jbuf_lit(b, "=\"");
    jbuf_lit(b, value);
    jbuf_lit(b, "\"} ");
    jbuf_u64(b, v);
    jbuf_lit(b, "\n");
}

/* The CUDA regions st lists (registered or pending, as shmreg_regions
 * counts them) by their GPU's UUID: a sample per GPU, so the page stays
 * bounded however many regions there are; a region whose GPU the library
 * could not name is left out. No GPU, no sample: the families' HELP and
 * TYPE lines alone. */
static void write_cuda_regions(jbuf *b, const shmreg_region_status *st, size_t n)
{
    static const char *const family[2][2] = {
        {"shmreg_cuda_regions",
         "CUDA regions listed by status (registered or pending), by the UUID of the GPU that "
         "holds them; regions whose GPU has no UUID are not counted."},
        {"shmreg_cuda_region_bytes", "Bytes of those regions (their windows), by GPU UUID."},
    };
    gpu_regions *per_gpu = n ? calloc(n, sizeof *per_gpu) : NULL;
    if (n && !per_gpu) {
        b->failed = 1; /* the page is answered 500 */
        return;
    }
    for (size_t i = 0; i < n; i++)
        per_gpu[i] = (gpu_regions){st[i].device_uuid, 1, st[i].byte_size};
    size_t gpus = gpu_regions_fold(per_gpu, n);
    for (int f = 0; f < 2; f++) {
        write_header(b, family[f][0], GAUGE, family[f][1]);
        for (size_t g = 0; g < gpus; g++) /* a UUID: letters, digits and '-' (the fold's) */
            write_labelled(b, family[f][0], "device_uuid", per_gpu[g].uuid,
                           f == 0 ? per_gpu[g].regions : per_gpu[g].bytes);
    }
    free(per_gpu);
}

/* Two counter families, tensors and their bytes, with a sample per path
 * and direction (core/tensor_paths.h), zeros included, so that a dashboard
 * sees a path that is never taken as well as one that is. */
static void write_paths(jbuf *b)
{
    static const char *const family[2][2] = {
        {"shmreg_tensor_path_total",
         "Shared-memory tensors of successful inferences, by the way they travelled "
         "(dma_in_place, staged_copy, cpu_copy, device_copy, remote_copy) and direction."},
        {"shmreg_tensor_path_bytes_total",
         "Bytes of those tensors, by path and direction."},
    };
    for (int f = 0; f < 2; f++) {
        write_header(b, family[f][0], COUNTER, family[f][1]);
        for (int p = TENSOR_PATH_NONE + 1; p < TENSOR_PATH_COUNT; p++) {
            for (int d = TENSOR_INPUT; d <= TENSOR_OUTPUT; d++) {
                uint64_t tensors, bytes;
                tensor_path_totals((tensor_path)p, (tensor_direction)d, &tensors, &bytes);
                jbuf_lit(b, family[f][0]);
                jbuf_lit(b, "{path=\"");
                jbuf_lit(b, tensor_path_name((tensor_path)p));
                jbuf_lit(b, "\",direction=\"");
                jbuf_lit(b, tensor_direction_name((tensor_direction)d));
                jbuf_lit(b, "\"} ");
                jbuf_u64(b, f == 0 ? tensors : bytes);
                jbuf_lit(b, "\n");
            }
        }
    }
}

/* The GPU model's batches of copies (models/gpu_instances.h): runs over
 * batches is how many requests crossed the link together. */
static void write_copy_batches(jbuf *b)
{
    uint64_t value[2];
    gpu_instances_copy_batches(&value[0], &value[1]);
    static const char *const family[2][2] = {
        {"shmreg_gpu_copy_batches_total",
         "Batches queued on the GPU model's streams: the inputs' copies of their runs as one "
         "batch of copies, the outputs' as another."},
        {"shmreg_gpu_copy_batch_runs_total", "Runs (requests) in those batches."},
    };
    for (int f = 0; f < 2; f++) {
        write_header(b, family[f][0], COUNTER, family[f][1]);
        jbuf_lit(b, family[f][0]);
        jbuf_lit(b, " ");
        jbuf_u64(b, value[f]);
        jbuf_lit(b, "\n");
    }
}

/* The GPU model's tensors in CUDA regions that its kernel read or wrote
 * where they lie (models/gpu_instances.h): of the dma_in_place tensors in
 * CUDA regions, the others took a copy on the device. */
static void write_kernel_in_place(jbuf *b)
{
    static const char name[] = "shmreg_gpu_kernel_in_place_total";
    uint64_t in_place[2];
    gpu_instances_kernel_in_place(in_place);
    write_header(b, name, COUNTER,
                 "Tensors in CUDA regions that the GPU model's kernel read (input) or wrote "
                 "(output) where they lie, with no copy on the device; a CUDA tensor at an odd "
                 "offset, an output overlapping its input, or one on a peer device is copied "
                 "through the instance's own buffers instead.");
    for (int d = 0; d < 2; d++)
        write_labelled(b, name, "direction", tensor_direction_name((tensor_direction)d),
                       in_place[d]);
}

/* Where the GPU model's requests ran (models/placement.h): on the device
 * that holds their CUDA tensors, spilled to another device's free slot, or
 * on the least busy instance of all. */
static void write_placements(jbuf *b)
{
    static const char name[] = "shmreg_gpu_requests_placed_total";
    uint64_t placed[PLACEMENT_CASES];
    gpu_instances_placed(placed);
    write_header(b, name, COUNTER,
                 "Requests given an instance of the GPU model, by placement: tensor_gpu, on the "
                 "device that holds all their CUDA tensors; spilled, on another device's instance "
                 "with a free run slot since every instance of that device had all its slots "
                 "taken; fallback, on the least busy instance "
                 "of all since those tensors lie on several devices or on one with no instance; "
                 "no_cuda_tensors, on the least busy instance of all since none is in a CUDA "
                 "region.");
    for (int c = 0; c < PLACEMENT_CASES; c++)
        write_labelled(b, name, "placement", placement_case_name((placement_case)c), placed[c]);
}

/* The inference requests' wait for a worker thread (common/worker_pool.h),
 * HTTP and gRPC together: the queue no model's statistics see, since it
 * comes before a request reaches its model. The wait for a model's own
 * instance is each model's nv_inference_queue_duration_us. Seconds, with
 * the nanoseconds as decimals, as Prometheus wants durations. */
static void write_request_queue(jbuf *b)
{
    uint64_t items, wait_ns;
    worker_pool_queue_totals(&items, &wait_ns);
    static const char count[] = "shmreg_queued_requests_total",
                      wait[] = "shmreg_request_queue_seconds_total";
    write_header(b, count, COUNTER,
                 "Inference requests (HTTP and gRPC) taken from the queue of the server's worker "
                 "threads.");
    jbuf_lit(b, count);
    jbuf_lit(b, " ");
    jbuf_u64(b, items);
    jbuf_lit(b, "\n");
    write_header(b, wait, COUNTER,
                 "Time those requests waited in that queue for a thread, in seconds; a model's "
                 "own queue is nv_inference_queue_duration_us.");
    char seconds[32]; /* 20 digits, a point, 9 decimals, a newline */
    snprintf(seconds, sizeof seconds, "%" PRIu64 ".%09" PRIu64 "\n", wait_ns / 1000000000u,
             wait_ns % 1000000000u);
    jbuf_lit(b, wait);
    jbuf_lit(b, " ");
    jbuf_lit(b, seconds);
    static const char here[] = "shmreg_inline_requests_total";
    write_header(b, here, COUNTER,
                 "Inference requests (HTTP and gRPC) that never queued for a worker thread: "
                 "run on the thread that received them, or handed by it to a GPU instance.");
    jbuf_lit(b, here);
    jbuf_lit(b, " ");
    jbuf_u64(b, infer_inline_total());
    jbuf_lit(b, "\n");
}

/* One metric family: a sample per model. The statistics are read once per
 * page by the caller. Model names are the built-in ones (models.c), plain
 * identifiers, so the label values need no escaping. */
static void write_model_family(jbuf *b, const model_metric *m, const model_statistics *stats)
{
    write_header(b, m->name, COUNTER, m->help);
    for (size_t i = 0; i < model_count(); i++) {
        uint64_t v;
        memcpy(&v, (const char *)&stats[i] + m->offset, sizeof v);
        jbuf_lit(b, m->name);
        jbuf_lit(b, "{model=\"");
        jbuf_lit(b, model_name(model_at(i)));
        jbuf_lit(b, "\",version=\"1\"} ");
        jbuf_u64(b, m->ns_to_us ? v / 1000 : v);
        jbuf_lit(b, "\n");
    }
}

/* The models' figures of one book of statistics (models.h); 0, or -1 when
 * the built-in models outnumber the array. */
static int write_models(jbuf *b, size_t book)
{
    size_t n = model_count();
    model_statistics stats[16];
    if (n > COUNT(stats)) /* a new built-in model must grow the array */
        return -1;
    for (size_t i = 0; i < n; i++)
        model_get_statistics(model_at(i), book, &stats[i]);
    for (size_t i = 0; i < COUNT(model_metrics); i++)
        write_model_family(b, &model_metrics[i], stats);
    return 0;
}

/* One tenant's figures, counted from its own regions (scope_status): the
 * registry's totals, cache counters included, would tell one tenant what
 * the others hold and which keys they have mapped. */
typedef struct tenant_figures {
    uint64_t regions, pending, references, bytes, pinned_bytes;
} tenant_figures;

static const struct {
    const char *name, *help;
    size_t offset;
} tenant_metrics[] = {
    {"shmreg_tenant_regions", "Regions of the caller's tenant: registered or pending.",
     offsetof(tenant_figures, regions)},
    {"shmreg_tenant_pending_regions",
     "Regions of the caller's tenant unregistered under the defer policy, still held.",
     offsetof(tenant_figures, pending)},
    {"shmreg_tenant_references", "References requests hold on the caller's tenant's regions.",
     offsetof(tenant_figures, references)},
    {"shmreg_tenant_region_bytes", "Bytes of the caller's tenant's regions (their windows).",
     offsetof(tenant_figures, bytes)},
    {"shmreg_tenant_pinned_bytes", "Bytes of the caller's tenant's regions that are page-locked.",
     offsetof(tenant_figures, pinned_bytes)},
};

static int write_tenant(jbuf *b, shmreg_registry *reg, const region_scope *scope)
{
    shmreg_region_status *st = NULL;
    size_t n = 0;
    if (scope_status(reg, scope, NULL, SHMREG_KIND_ANY, &st, &n) != SHMREG_OK)
        return -1;
    tenant_figures f = {.regions = n};
    for (size_t i = 0; i < n; i++) {
        f.pending += st[i].pending_unregister != 0;
        f.references += st[i].references;
        f.bytes += st[i].byte_size;
        f.pinned_bytes += st[i].pinned ? st[i].byte_size : 0;
    }
    shmreg_status_free(st, n);
    for (size_t i = 0; i < COUNT(tenant_metrics); i++) {
        uint64_t v;
        memcpy(&v, (const char *)&f + tenant_metrics[i].offset, sizeof v);
        write_header(b, tenant_metrics[i].name, GAUGE, tenant_metrics[i].help);
        jbuf_lit(b, tenant_metrics[i].name);
        jbuf_lit(b, " ");
        jbuf_u64(b, v);
        jbuf_lit(b, "\n");
    }
    return 0;
}

void metrics_handle(shmreg_registry *reg, const region_scope *scope, reply *out)
{
    if (scope->per_tenant) {
        if (scope_refused(scope)) {
            reply_error(out, 401, "%s", SCOPE_NO_TOKEN_MESSAGE);
            return;
        }
        jbuf b = {0};
        jbuf_reserve(&b, 8192);
        if (write_tenant(&b, reg, scope) != 0) {
            jbuf_free(&b);
            reply_error(out, 500, "%s", shmreg_last_error());
            return;
        }
        if (write_models(&b, scope_stats_book(scope)) != 0)
            b.failed = 1;
        reply_text(out, &b);
        return;
    }
    shmreg_stats s;
    shmreg_region_status *cuda = NULL;
    size_t n_cuda = 0;
    /* The CUDA regions alone: the walk copies no system region's strings. */
    if (shmreg_registry_stats(reg, &s) != SHMREG_OK ||
        shmreg_status(reg, NULL, SHMREG_KIND_CUDA, &cuda, &n_cuda) != SHMREG_OK) {
        reply_error(out, 500, "%s", shmreg_last_error());
        return;
    }
    jbuf b = {0};
    /* About 130 bytes a line and 80 lines: one allocation in the usual case. */
    jbuf_reserve(&b, 12288);
    write_registry(&b, &s);
    write_cuda_regions(&b, cuda, n_cuda);
    shmreg_status_free(cuda, n_cuda);
    write_paths(&b);
    write_copy_batches(&b);
    write_kernel_in_place(&b);
    write_placements(&b);
    write_request_queue(&b);
    if (write_models(&b, 0) != 0)
        b.failed = 1;
    reply_text(out, &b); /* 500 with no body when the buffer failed */
}
