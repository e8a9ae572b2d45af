/* The models' descriptions, kernels and statistics. */
#include "models/models.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "models/model_ops.h"
#include "models/model_yolo.h"

typedef struct tensor_spec {
    const char *name;
    const char *datatype;
    int64_t dims[3]; /* without the batch dimension; -1: any size */
    int ndims;
} tensor_spec;

typedef void (*kernel_fn)(const tensor *const *in, tensor *out);

/* One book's statistics of one model; relaxed: they are counters, nothing
 * is published through them. */
typedef struct model_counters {
    _Atomic uint64_t success, success_ns, fail, fail_ns, last_ms;
    /* A model with ops: its runs and their phases (model_phases). */
    _Atomic uint64_t runs, queue_ns, input_ns, infer_ns, output_ns;
} model_counters;

struct model {
    const char *name;
    int max_batch_size; /* > 0: the first dimension is the batch */
    int any_input;      /* identity: any datatype and shape is accepted */
    int delayed;        /* sleeps --delay-ms before running */
    tensor_spec inputs[2], outputs[MODEL_MAX_OUTPUTS];
    size_t n_inputs, n_outputs;
    kernel_fn kernel;
    const model_ops *ops; /* a model with code of its own (model_ops.h), or NULL */
    model_counters stats; /* book 0's */
};

/* simple: element-wise sum and difference, wrapping like the int32 hardware
 * would (done in uint32 so that overflow is defined). Elements may sit at
 * any alignment in shared memory, hence memcpy. */
static void simple_kernel(const tensor *const *in, tensor *out)
{
    size_t n = in[0]->byte_size / sizeof(uint32_t);
    for (size_t i = 0; i < n; i++) {
        uint32_t a, b, sum, diff;
        memcpy(&a, (const char *)in[0]->data + i * 4, 4);
        memcpy(&b, (const char *)in[1]->data + i * 4, 4);
        sum = a + b;
        diff = a - b;
        memcpy((char *)out[0].data + i * 4, &sum, 4);
        memcpy((char *)out[1].data + i * 4, &diff, 4);
    }
}

/* identity: a copy; the output may be the same shared memory as the input. */
static void identity_kernel(const tensor *const *in, tensor *out)
{
    memmove(out[0].data, in[0]->data, in[0]->byte_size);
}

#define SIMPLE_TENSORS                                                                          \
    .max_batch_size = 8,                                                                        \
    .inputs = {{"INPUT0", "INT32", {16}, 1}, {"INPUT1", "INT32", {16}, 1}}, .n_inputs = 2,      \
    .outputs = {{"OUTPUT0", "INT32", {16}, 1}, {"OUTPUT1", "INT32", {16}, 1}}, .n_outputs = 2,  \
    .kernel = simple_kernel

static model models[] = {
    {.name = "simple", SIMPLE_TENSORS},
    {.name = "simple_delayed", .delayed = 1, SIMPLE_TENSORS},
    /* identity accepts every datatype and shape; its metadata must still name
     * one, because clients such as perf_analyzer generate data from it: FP16
     * [3,-1,-1], a detector's image (perf_analyzer --shape INPUT0:3,384,640). */
    {.name = "identity", .any_input = 1,
     .inputs = {{"INPUT0", "FP16", {3, -1, -1}, 3}}, .n_inputs = 1,
     .outputs = {{"OUTPUT0", "FP16", {3, -1, -1}, 3}}, .n_outputs = 1,
     .kernel = identity_kernel},
    /* The built-in detector-shaped GPU workload (model_yolo.h): listed in every
     * build, available where CUDA is. */
    {.name = "yolo",
     .inputs = {{"images", "FP16", {3, -1, -1}, 3}}, .n_inputs = 1,
     .outputs = {{"output0", "FP16", {YOLO_ROWS, -1}, 2}}, .n_outputs = 1,
     .ops = &yolo_ops},
};

static unsigned delay_ms_;
/* simple_delayed sleeps on this, so that shutdown can cut the sleep short. */
static pthread_mutex_t delay_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t delay_cut = PTHREAD_COND_INITIALIZER;
static int delays_cut;

void models_cut_delays(void)
{
    pthread_mutex_lock(&delay_lock);
    delays_cut = 1;
    pthread_cond_broadcast(&delay_cut);
    pthread_mutex_unlock(&delay_lock);
}

/* Sleep --delay-ms: 0, or -1 when shutdown cut it short. The deadline is on
 * the realtime clock, the condition variable's default: a clock step only
 * lengthens or shortens a test model's sleep. */
static int delay(void)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += delay_ms_ / 1000;
    until.tv_nsec += (long)(delay_ms_ % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&delay_lock);
    int rc = 0;
    while (!delays_cut && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&delay_cut, &delay_lock, &until);
    int cut = delays_cut;
    pthread_mutex_unlock(&delay_lock);
    return cut ? -1 : 0;
}

size_t model_count(void)
{
    return sizeof models / sizeof models[0];
}

const model *model_at(size_t i)
{
    return i < model_count() ? &models[i] : NULL;
}

/* The tenants' books (models.h), tenant by tenant, each a row of counters
 * in the table's order; written once before any request. */
static model_counters *tenant_books;
static size_t n_tenant_books;

/* A book for each of tenants tenants, all at zero: 0, or -1 when out of
 * memory. */
static int keep_tenant_books(size_t tenants)
{
    if (tenants == 0)
        return 0;
    /* calloc's zero bytes are each counter's 0: 64-bit atomics are
     * lock-free here, plain integers with no lock beside them */
    model_counters *books = calloc(tenants, model_count() * sizeof *books);
    if (!books)
        return -1;
    tenant_books = books;
    n_tenant_books = tenants;
    return 0;
}

int models_start(const models_config *cfg)
{
    delay_ms_ = cfg->delay_ms;
    if (keep_tenant_books(cfg->tenants) != 0) {
        fprintf(stderr, "error: out of memory for each tenant's statistics\n");
        return -1;
    }
    yolo_start(&cfg->gpu);
    return 0;
}

void models_stop(void)
{
    yolo_stop();
}

/* m's counters in book (models.h). The table is static and writable; only
 * the statistics change. */
static model_counters *counters(const model *m, size_t book)
{
    if (book == 0 || book > n_tenant_books)
        return &((model *)m)->stats;
    return &tenant_books[(book - 1) * model_count() + (size_t)(m - models)];
}

const model *model_find(const char *name)
{
    for (size_t i = 0; i < model_count(); i++)
        if (name && strcmp(models[i].name, name) == 0)
            return &models[i];
    return NULL;
}

const model *model_find_version(const char *name, const char *version)
{
    if (version && version[0] && strcmp(version, "1") != 0)
        return NULL;
    return model_find(name);
}

const char *model_name(const model *m)
{
    return m->name;
}

size_t model_n_outputs(const model *m)
{
    return m->n_outputs;
}

static void tensor_info(const tensor_spec *s, int batch, model_tensor_info *out)
{
    *out = (model_tensor_info){.name = s->name, .datatype = s->datatype};
    if (batch)
        out->dims[out->ndims++] = -1;
    for (int i = 0; i < s->ndims; i++)
        out->dims[out->ndims++] = s->dims[i];
}

void model_get_metadata(const model *m, model_metadata *out)
{
    *out = (model_metadata){.name = m->name, .versions = {"1"}, .n_versions = 1,
                            .platform = "shmreg_builtin", .n_inputs = m->n_inputs,
                            .n_outputs = m->n_outputs};
    for (size_t i = 0; i < m->n_inputs; i++)
        tensor_info(&m->inputs[i], m->max_batch_size > 0, &out->inputs[i]);
    for (size_t i = 0; i < m->n_outputs; i++)
        tensor_info(&m->outputs[i], m->max_batch_size > 0, &out->outputs[i]);
}

void model_get_config(const model *m, model_config *out)
{
    *out = (model_config){.name = m->name, .platform = "shmreg_builtin",
                          .backend = "shmreg_builtin", .max_batch_size = m->max_batch_size,
                          .n_inputs = m->n_inputs, .n_outputs = m->n_outputs,
                          .format = "FORMAT_NONE", .group = {.count = 1, .kind = "KIND_CPU"}};
    for (size_t i = 0; i < m->n_inputs; i++)
        tensor_info(&m->inputs[i], 0, &out->inputs[i]);
    for (size_t i = 0; i < m->n_outputs; i++)
        tensor_info(&m->outputs[i], 0, &out->outputs[i]);
    if (m->ops && m->ops->config)
        m->ops->config(out);
}

static uint64_t load(_Atomic uint64_t *counter)
{
    return atomic_load_explicit(counter, memory_order_relaxed);
}

void model_get_statistics(const model *m, size_t book, model_statistics *out)
{
    model_counters *w = counters(m, book);
    uint64_t ok = load(&w->success), ok_ns = load(&w->success_ns);
    *out = (model_statistics){.name = m->name, .version = "1", .last_inference = load(&w->last_ms),
                              .inference_count = ok, .execution_count = ok,
                              .success = {ok, ok_ns},
                              .fail = {load(&w->fail), load(&w->fail_ns)}};
    /* The whole request is compute_infer here: no queue, no batching. A
     * model with ops reports the phases of its runs instead. */
    if (!m->ops) {
        out->queue = out->compute_input = out->compute_output = (model_duration){ok, 0};
        out->compute_infer = (model_duration){ok, ok_ns};
        return;
    }
    uint64_t runs = load(&w->runs);
    out->queue = (model_duration){runs, load(&w->queue_ns)};
    out->compute_input = (model_duration){runs, load(&w->input_ns)};
    out->compute_infer = (model_duration){runs, load(&w->infer_ns)};
    out->compute_output = (model_duration){runs, load(&w->output_ns)};
}

void model_record(const model *m, size_t book, int ok, uint64_t ns)
{
    model_counters *w = counters(m, book);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    atomic_fetch_add_explicit(ok ? &w->success : &w->fail, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(ok ? &w->success_ns : &w->fail_ns, ns, memory_order_relaxed);
    atomic_store_explicit(&w->last_ms, (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000,
                          memory_order_relaxed);
}

/* Whether t has the shape spec s allows: batch first when the model batches. */
static int shape_matches(const model *m, const tensor_spec *s, const tensor *t)
{
    int batch = m->max_batch_size > 0;
    if (t->ndims != s->ndims + batch)
        return 0;
    if (batch && (t->shape[0] < 1 || t->shape[0] > m->max_batch_size))
        return 0;
    for (int i = 0; i < s->ndims; i++)
        if (s->dims[i] >= 0 && t->shape[i + batch] != s->dims[i])
            return 0;
    return 1;
}

static int bind_one(const model *m, const tensor_spec *s, const tensor *t, char *err, size_t errlen)
{
    if (m->any_input)
        return 0;
    if (strcmp(t->datatype, s->datatype) != 0) {
        snprintf(err, errlen, "inference input '%s' data-type is '%s', but model '%s' expects '%s'",
                 t->name, t->datatype, m->name, s->datatype);
        return -1;
    }
    if (!shape_matches(m, s, t)) {
        char want[128], got[128];
        model_tensor_info clients; /* the shape clients see: batch first */
        tensor_info(s, m->max_batch_size > 0, &clients);
        snprintf(err, errlen,
                 "unexpected shape for input '%s' for model '%s'. Expected %s (batch at most %d), got %s",
                 t->name, m->name, tensor_shape_string(clients.dims, clients.ndims, want, sizeof want),
                 m->max_batch_size, tensor_shape_string(t->shape, t->ndims, got, sizeof got));
        return -1;
    }
    if (m->ops && m->ops->check_input && m->ops->check_input(t, m->name, err, errlen) != 0)
        return -1;
    return 0;
}

int model_bind_inputs(const model *m, const tensor *in, size_t n, const tensor **ordered,
                      char *err, size_t errlen)
{
    if (n != m->n_inputs) {
        snprintf(err, errlen, "expected %zu inputs but got %zu inputs for model '%s'", m->n_inputs,
                 n, m->name);
        return -1;
    }
    for (size_t i = 0; i < m->n_inputs; i++)
        ordered[i] = NULL;
    for (size_t j = 0; j < n; j++) {
        size_t i = 0;
        while (i < m->n_inputs && strcmp(m->inputs[i].name, in[j].name) != 0)
            i++;
        if (i == m->n_inputs || ordered[i]) {
            snprintf(err, errlen, "unexpected inference input '%s' for model '%s'", in[j].name,
                     m->name);
            return -1;
        }
        if (bind_one(m, &m->inputs[i], &in[j], err, errlen) != 0)
            return -1;
        ordered[i] = &in[j];
    }
    if (m->n_inputs == 2 && memcmp(ordered[0]->shape, ordered[1]->shape,
                                   sizeof(int64_t) * (size_t)ordered[0]->ndims) != 0) {
        snprintf(err, errlen, "inputs of model '%s' must have the same shape", m->name);
        return -1;
    }
    return 0;
}

void model_describe_outputs(const model *m, const tensor *const *in, tensor *out)
{
    if (m->ops && m->ops->describe) {
        m->ops->describe(in, out);
        return;
    }
    /* Every output here has the datatype, shape and size of the first input. */
    for (size_t i = 0; i < m->n_outputs; i++) {
        out[i] = (tensor){.name = m->outputs[i].name,
                          .datatype = m->any_input ? in[0]->datatype : m->outputs[i].datatype,
                          .ndims = in[0]->ndims,
                          .byte_size = in[0]->byte_size};
        memcpy(out[i].shape, in[0]->shape, sizeof out[i].shape);
    }
}

server_status model_ready(const model *m, char *err, size_t errlen)
{
    return m->ops && m->ops->ready ? m->ops->ready(err, errlen) : STATUS_OK;
}

int model_device_tensors(const model *m)
{
    return m->ops != NULL;
}

int model_runs_short(const model *m)
{
    if (m->ops || m->delayed || m->any_input || m->max_batch_size <= 0)
        return 0;
    for (size_t i = 0; i < m->n_inputs; i++)
        for (int d = 0; d < m->inputs[i].ndims; d++)
            if (m->inputs[i].dims[d] < 0)
                return 0;
    return 1;
}

/* A model with ops: one successful run's phases into its statistics. */
static void count_phases(const model *m, size_t book, const model_phases *ph)
{
    model_counters *w = counters(m, book);
    atomic_fetch_add_explicit(&w->runs, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&w->queue_ns, ph->queue_ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&w->input_ns, ph->input_ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&w->infer_ns, ph->infer_ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&w->output_ns, ph->output_ns, memory_order_relaxed);
}

server_status model_run(const model *m, size_t book, const tensor *const *in, tensor *out,
                        char *err, size_t errlen)
{
    if (m->ops) {
        model_phases ph = {0};
        server_status st = m->ops->run(in, out, &ph, err, errlen);
        if (st == 0)
            count_phases(m, book, &ph);
        return st;
    }
    if (m->delayed && delay_ms_ && delay() != 0) {
        snprintf(err, errlen, "the server is shutting down: model '%s' was stopped after the "
                              "drain time", m->name);
        return STATUS_UNAVAILABLE;
    }
    m->kernel(in, out);
    return STATUS_OK;
}

void model_run_ended(model_pending *p, server_status st)
{
    if (st == 0)
        count_phases(p->m, p->book, &p->ph);
    p->done(p, st);
}

server_status model_start(const model *m, const tensor *const *in, tensor *out, model_pending *p)
{
    if (!m->ops || !m->ops->start)
        return MODEL_BUSY;
    p->m = m;
    p->ph = (model_phases){0};
    return m->ops->start(in, out, p);
}
