/*
 * The inference request path over HTTP, the worked example of
 * docs/integration.md:
 *
 *   1. parse the JSON header (and find the binary section after it);
 *   2. for every input and output placed in shared memory, shmreg_acquire the
 *      window it names and hand the reference to the request (rq->held, in
 *      infer_core.c): from here on the bytes stay mapped until the response
 *      has been sent, whatever unregister does meanwhile; an output's view
 *      must be writable (a region registered SHMREG_READONLY is refused with
 *      400);
 *   3. run the model on those windows: a system region through guarded
 *      copies (a truncated object is a 400, not a SIGBUS), a CUDA region
 *      staged through a host buffer (device_copy.h);
 *   4. build the response; http_server.c queues it, and libmicrohttpd's completion
 *      callback releases the references once it has been sent.
 *
 * A GPU model's request whose tensors all lie where the device reaches them
 * skips the worker: the HTTP thread parses it, acquires its regions and
 * hands the run to the device (infer_handle_on_device); the run's end
 * builds the response, on whichever thread that is.
 *
 * Steps 2 and 3 are infer_core.c, shared with the gRPC service.
 *
 * Every error return leaves the references already taken in the request, so
 * they are released by the same completion callback: there is no second
 * release path to forget.
 */
#include "http/infer.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/datatype.h"
#include "http/endpoints.h"
#include "core/infer_core.h"
#include "models/models.h"
#include "common/tensor.h"
#include "http/json_tensor.h"

/* The inputs of a short inference, as JSON, fit here without an allocation
 * of their own: `simple` at its largest batch takes 1 KiB. */
#define HTTP_SMALL_INPUT_BYTES 1024

/* infer_fail (infer_core.h), under the short name the parsers below use. */
#define fail infer_fail

/* The accessors of json_doc.h under the short names the parsers below use. */
#define get jv_get
#define is_string jv_is_string
#define is_object jv_is_object
#define is_array jv_is_array
#define str jv_str
#define is_true jv_true

/* An HTTP inference: the shared part, and the request's JSON header and
 * binary section. */
typedef struct http_infer {
    infer_ctx c;
    request *rq;
    json_doc *doc;               /* the request's JSON header */
    const json_val *root;        /* its root */
    const char *binary;          /* binary tensor data not yet claimed by an input */
    size_t binary_left;
    /* Small inputs sent as JSON are stored here rather than each in its own
     * allocation (a short inference's inputs are a few hundred bytes). */
    _Alignas(max_align_t) unsigned char small[HTTP_SMALL_INPUT_BYTES];
    size_t small_used;
    /* A run handed to the device (infer_handle_on_device): told once the
     * answer is in rq->answer. */
    void (*answered)(request *rq, void *arg);
    void *answered_arg;
} http_infer;

/* n bytes of h->small, aligned for any element type, or NULL when they do
 * not fit (the caller allocates). */
static void *small_take(http_infer *h, size_t n)
{
    size_t align = _Alignof(max_align_t);
    size_t at = (h->small_used + align - 1) / align * align;
    if (n == 0 || at > sizeof h->small || n > sizeof h->small - at)
        return NULL;
    h->small_used = at + n;
    return h->small + at;
}

/* ---------------------------------------------------- shared-memory tensors */

/* An unsigned 64-bit JSON integer (all of it: offsets and sizes past 2^63
 * go on to the bounds and overflow checks, as in Triton), or -1. */
static int json_size(const json_val *v, size_t *out)
{
    uint64_t u;
    if (jv_u64(v, &u) != 0)
        return -1;
    *out = (size_t)u; /* size_t is 64 bits wide on every target of this example */
    return 0;
}

/* Read shared_memory_{region,offset,byte_size} of a tensor's parameters.
 * Returns 0 (w->region NULL when the tensor is not in shared memory) or a
 * status. As in Triton's HTTP: an offset or size without a region is not
 * looked at, and a region without a size is an empty window (refused when
 * acquired, after the region's own checks). */
static server_status shm_window_from_params(infer_ctx *c, const json_val *params, const char *what,
                                            const char *name, shm_window *w)
{
    *w = (shm_window){0};
    const json_val *region = get(params, "shared_memory_region");
    const json_val *offset = get(params, "shared_memory_offset");
    const json_val *size = get(params, "shared_memory_byte_size");
    if (!region)
        return STATUS_OK;
    if (!is_string(region))
        return fail(c, STATUS_INVALID_ARG,
                    "'shared_memory_region' of %s '%s' must be a string", what, name);
    if (size && json_size(size, &w->byte_size) != 0)
        return fail(c, STATUS_INVALID_ARG,
                    "'shared_memory_byte_size' of %s '%s' must be a non-negative integer",
                    what, name);
    if (offset && json_size(offset, &w->offset) != 0)
        return fail(c, STATUS_INVALID_ARG,
                    "'shared_memory_offset' of %s '%s' must be a non-negative integer",
                    what, name);
    w->region = str(region);
    return STATUS_OK;
}

/* ------------------------------------------------------------------ inputs */

/* Copy nested JSON arrays of elements into buf, row-major. type is
 * datatype_find's, looked up once rather than per element. */
static int flatten(const json_val *v, int type, void *buf, size_t cap, size_t *n)
{
    if (is_array(v)) {
        for (size_t i = 0; i < jv_len(v); i++)
            if (flatten(jv_at(v, i), type, buf, cap, n) != 0)
                return -1;
        return 0;
    }
    if (*n == cap || datatype_from_json(type, v, buf, *n) != 0)
        return -1;
    (*n)++;
    return 0;
}

/* The elements of nested JSON arrays, counted before anything is allocated:
 * at most the body's size, whatever the shape claims. */
static size_t leaf_count(const json_val *v)
{
    if (!is_array(v))
        return 1;
    size_t n = 0;
    for (size_t i = 0; i < jv_len(v); i++)
        n += leaf_count(jv_at(v, i));
    return n;
}

/* type: t's datatype, from datatype_find. */
static server_status input_from_json_data(http_infer *h, tensor *t, int type, const json_val *data)
{
    infer_ctx *c = &h->c;
    if (!datatype_type_has_json(type))
        return fail(c, STATUS_INVALID_ARG,
                    "input '%s': %s tensors must be sent as binary data or in shared "
                            "memory, not as JSON", t->name, t->datatype);
    size_t expected;
    if (tensor_expected_size(t, &expected) != 0)
        return fail(c, STATUS_INVALID_ARG, "input '%s': shape too large", t->name);
    size_t elems = expected / (size_t)datatype_type_size(type), n = 0;
    /* A shape that the data does not fill is the client's error, found
     * before the shape's bytes are asked of malloc (a huge shape with a
     * short 'data' was a 500 "out of memory"). */
    if (leaf_count(data) != elems)
        goto mismatch;
    void *buf = small_take(h, expected);
    if (!buf)
        buf = t->owned = malloc(expected ? expected : 1);
    if (!buf)
        return fail(c, STATUS_INTERNAL, "out of memory for input '%s'", t->name);
    if (flatten(data, type, buf, elems, &n) != 0 || n != elems)
        goto mismatch;
    t->data = buf;
    t->byte_size = expected;
    return STATUS_OK;
mismatch:
    return fail(c, STATUS_INVALID_ARG,
                "unable to parse 'data' of input '%s': expected %zu %s elements "
                        "matching its shape", t->name, elems, t->datatype);
}

static server_status parse_input(http_infer *h, const json_val *j, tensor *t)
{
    infer_ctx *c = &h->c;
    const json_val *name = get(j, "name"), *dt = get(j, "datatype");
    const json_val *params = get(j, "parameters"), *data = get(j, "data");
    if (!is_object(j) || !is_string(name) || !is_string(dt))
        return fail(c, STATUS_INVALID_ARG,
                    "each input needs a string 'name', a string 'datatype' and a 'shape'");
    t->name = str(name);
    t->datatype = str(dt);
    int type = datatype_find(t->datatype);
    if (type < 0)
        return fail(c, STATUS_INVALID_ARG,
                    "input '%s' has an unknown datatype '%s'", t->name, t->datatype);
    if (tensor_shape_from_json(get(j, "shape"), t, c->err, sizeof c->err) != 0)
        return STATUS_INVALID_ARG;
    if (params && !is_object(params))
        return fail(c, STATUS_INVALID_ARG, "'parameters' of input '%s' must be an object", t->name);

    shm_window w;
    server_status st = shm_window_from_params(c, params, "input", t->name, &w);
    if (st)
        return st;
    const json_val *binary_size = get(params, "binary_data_size");
    int sources = (w.region != NULL) + (binary_size != NULL) + (data != NULL);
    if (sources != 1) /* Triton's words */
        return fail(c, STATUS_INVALID_ARG,
                    "Input must set only one of the following fields: 'data', "
                            "'binary_data_size' in 'parameters', 'shared_memory_region' in "
                            "'parameters'. But%s%s%s%s", sources ? " set" : " no field is set",
                    data ? " 'data'" : "", binary_size ? " 'binary_data_size'" : "",
                    w.region ? " 'shared_memory_region'" : "");
    if (data)
        return input_from_json_data(h, t, type, data);
    if (w.region) { /* the window's bounds first, then its size: Triton's order */
        if ((st = infer_input_from_window(c, t, &w)) != 0)
            return st;
        return infer_check_input_size(c, t, w.byte_size);
    }
    size_t n;
    if (json_size(binary_size, &n) != 0)
        return fail(c, STATUS_INVALID_ARG,
                    "'binary_data_size' of input '%s' must be a non-negative integer",
                    t->name);
    if (n > h->binary_left)
        return fail(c, STATUS_INVALID_ARG,
                    "input '%s' claims %zu bytes of binary data but only %zu remain in "
                            "the request", t->name, n, h->binary_left);
    if ((st = infer_check_input_size(c, t, n)) != 0)
        return st;
    t->data = (void *)h->binary; /* the request body outlives the request's work */
    t->byte_size = n;
    h->binary += n;
    h->binary_left -= n;
    return STATUS_OK;
}

static server_status parse_inputs(http_infer *h)
{
    infer_ctx *c = &h->c;
    const json_val *inputs = get(h->root, "inputs");
    if (!is_array(inputs) || jv_len(inputs) == 0)
        return fail(c, STATUS_INVALID_ARG, "the request needs a non-empty 'inputs' array");
    if (jv_len(inputs) > INFER_MAX_INPUTS)
        return fail(c, STATUS_INVALID_ARG, "at most %d inputs are accepted", INFER_MAX_INPUTS);
    for (size_t i = 0; i < jv_len(inputs); i++) {
        c->n_in = i + 1; /* counted before parsing, so that a half-built one is freed too */
        server_status st = parse_input(h, jv_at(inputs, i), &c->in[i]);
        if (st)
            return st;
    }
    if (h->binary_left)
        return fail(c, STATUS_INVALID_ARG,
                    "the request carries %zu bytes of binary data that no input claims",
                    h->binary_left);
    return STATUS_OK;
}

/* ----------------------------------------------------------------- outputs */

static server_status parse_outputs(http_infer *h)
{
    infer_ctx *c = &h->c;
    const json_val *params = get(h->root, "parameters");
    int binary_all = is_true(get(params, "binary_data_output"));
    const json_val *outputs = get(h->root, "outputs");
    if (!outputs) { /* no list: every output, binary if the request says so */
        for (size_t i = 0; i < model_n_outputs(c->m); i++) {
            server_status st =
                infer_place_output(c, i, binary_all ? PLACE_BINARY : PLACE_JSON, NULL);
            if (st)
                return st;
        }
        return STATUS_OK;
    }
    if (!is_array(outputs))
        return fail(c, STATUS_INVALID_ARG, "'outputs' must be an array");
    for (size_t k = 0; k < jv_len(outputs); k++) {
        const json_val *j = jv_at(outputs, k);
        const json_val *name = get(j, "name");
        const json_val *oparams = get(j, "parameters");
        if (!is_string(name))
            return fail(c, STATUS_INVALID_ARG, "each requested output needs a string 'name'");
        int i = infer_output_index(c, str(name));
        if (i < 0 || c->out_place[i] != PLACE_NONE)
            return fail(c, STATUS_INVALID_ARG, "unexpected inference output '%s' for model '%s'",
                        str(name), model_name(c->m));
        if (oparams && !is_object(oparams))
            return fail(c, STATUS_INVALID_ARG, "'parameters' of output '%s' must be an object",
                        str(name));
        shm_window w;
        server_status st = shm_window_from_params(c, oparams, "output", str(name), &w);
        if (st)
            return st;
        const json_val *binary = get(oparams, "binary_data");
        placement place = w.region ? PLACE_SHM
                          : (binary ? is_true(binary) : binary_all) ? PLACE_BINARY
                                                                         : PLACE_JSON;
        if ((st = infer_place_output(c, (size_t)i, place, &w)) != 0)
            return st;
    }
    return STATUS_OK;
}

/* ---------------------------------------------------------------- response */

/* Output i's entry of the response. An output in shared memory gets no
 * more than its name, datatype and shape: its bytes are in the region the
 * client named. No "parameters" either, as from Triton: Triton's C++ client
 * (under perf_analyzer) reads them as binary data. */
static void write_output(jbuf *b, const infer_ctx *c, size_t i)
{
    const tensor *t = &c->out[i];
    jbuf_lit(b, "{\"name\":");
    jbuf_str(b, t->name);
    jbuf_lit(b, ",\"datatype\":");
    jbuf_str(b, t->datatype);
    jbuf_lit(b, ",\"shape\":");
    tensor_shape_write(b, t);
    if (c->out_place[i] == PLACE_BINARY) {
        jbuf_lit(b, ",\"parameters\":{\"binary_data_size\":");
        jbuf_u64(b, t->byte_size);
        jbuf_lit(b, "}");
    } else if (c->out_place[i] == PLACE_JSON) {
        /* NaN and Infinity are written as Triton writes them. */
        jbuf_lit(b, ",\"data\":");
        datatype_write_json(b, t->datatype, t->data,
                            t->byte_size / (size_t)datatype_size(t->datatype));
    }
    jbuf_lit(b, "}");
}

/* The JSON header, written straight into the buffer the binary outputs then
 * follow in (the order the header lists them): no tree of elements, no copy
 * of the text (json_write.h says why). */
/* JSON text takes at most this many bytes per byte of tensor data: a
 * BYTES element escapes a byte as \u00XX, and no number (FP64, INT8, BOOL)
 * takes more per byte with its comma. */
#define JSON_BYTES_PER_DATA_BYTE 7

/* An upper bound on the response's size, checked before any of it is
 * written: a large output as JSON would otherwise cost ~48 bytes of
 * server memory per byte. */
static server_status check_response_size(infer_ctx *c)
{
    size_t total = 0, max = infer_max_copy();
    for (size_t i = 0; i < model_n_outputs(c->m); i++) {
        size_t n = c->out[i].byte_size;
        if (c->out_place[i] == PLACE_JSON)
            n = n > SIZE_MAX / JSON_BYTES_PER_DATA_BYTE ? SIZE_MAX : n * JSON_BYTES_PER_DATA_BYTE;
        else if (c->out_place[i] != PLACE_BINARY)
            n = 0;
        total = n > SIZE_MAX - total ? SIZE_MAX : total + n;
    }
    if (total <= max)
        return STATUS_OK;
    return fail(c, STATUS_INVALID_ARG,
                "the response could take up to %zu bytes, more than this server sends "
                        "(%zu, --max-body-mb): ask for large outputs in shared memory, or as "
                        "binary data rather than JSON", total, max);
}

/* Room for the JSON header of an answer with a few outputs. */
#define RESPONSE_HEADER_HINT 512

static server_status build_response(http_infer *h, reply *out)
{
    infer_ctx *c = &h->c;
    server_status st = check_response_size(c);
    if (st)
        return st;
    jbuf b = {0};
    /* One allocation for most answers: the header's JSON of a few outputs
     * and the binary outputs after it (a JSON output reserves its own). */
    size_t binary_bytes = 0;
    for (size_t i = 0; i < model_n_outputs(c->m); i++)
        if (c->out_place[i] == PLACE_BINARY)
            binary_bytes += c->out[i].byte_size;
    jbuf_reserve(&b, RESPONSE_HEADER_HINT + binary_bytes);
    const json_val *id = get(h->root, "id");
    jbuf_lit(&b, "{\"model_name\":");
    jbuf_str(&b, model_name(c->m));
    jbuf_lit(&b, ",\"model_version\":\"1\"");
    if (is_string(id)) {
        jbuf_lit(&b, ",\"id\":");
        jbuf_str(&b, str(id));
    }
    jbuf_lit(&b, ",\"outputs\":[");
    size_t listed = 0;
    for (size_t i = 0; i < model_n_outputs(c->m); i++) {
        if (c->out_place[i] == PLACE_NONE)
            continue;
        if (listed++)
            jbuf_lit(&b, ",");
        write_output(&b, c, i);
    }
    jbuf_lit(&b, "]}");
    size_t header_len = b.len;
    for (size_t i = 0; i < model_n_outputs(c->m); i++)
        if (c->out_place[i] == PLACE_BINARY)
            jbuf_raw(&b, c->out[i].data, c->out[i].byte_size);
    size_t len;
    char *body = jbuf_take(&b, &len);
    if (!body)
        return fail(c, STATUS_INTERNAL, "out of memory building the response");
    *out = (reply){.status = 200, .body = body, .len = len,
                   .json_len = binary_bytes ? header_len : 0};
    return STATUS_OK;
}

/* ------------------------------------------------------------------- entry */

static server_status locate_header(http_infer *h)
{
    infer_ctx *c = &h->c;
    request *rq = h->rq;
    size_t header_len = rq->body_len;
    if (rq->header_length >= 0) {
        if ((uint64_t)rq->header_length > rq->body_len || rq->header_length == 0)
            return fail(c, STATUS_INVALID_ARG,
                        "Inference-Header-Content-Length %lld is outside the request body "
                                "of %zu bytes", (long long)rq->header_length, rq->body_len);
        header_len = (size_t)rq->header_length;
    }
    if (rq->parsed_header) { /* parsed on the transport's thread, which deferred it */
        h->doc = rq->parsed_header;
        rq->parsed_header = NULL;
    } else {
        h->doc = json_doc_parse(rq->body ? rq->body : "", header_len, c->err, sizeof c->err);
        if (!h->doc)
            return STATUS_INVALID_ARG;
    }
    h->root = json_doc_root(h->doc);
    if (!is_object(h->root))
        return fail(c, STATUS_INVALID_ARG, "the inference request must be a JSON object");
    const json_val *id = get(h->root, "id");
    c->request_id = is_string(id) ? str(id) : NULL;
    const json_val *params = get(h->root, "parameters");
    if (params && !is_object(params))
        return fail(c, STATUS_INVALID_ARG, "request 'parameters' must be an object");
    h->binary = rq->body + header_len;
    h->binary_left = rq->body_len - header_len;
    return STATUS_OK;
}

/* Parse the request, acquire the regions it names and bind its inputs
 * (ordered) and outputs: what runs the model needs. */
static server_status prepare(http_infer *h, const tensor **ordered)
{
    infer_ctx *c = &h->c;
    server_status st;
    if ((st = infer_ready(c)) || (st = locate_header(h)) || (st = parse_inputs(h)) ||
        (st = infer_bind(c, ordered)) || (st = parse_outputs(h)))
        return st;
    return STATUS_OK;
}

static server_status run(http_infer *h, reply *out)
{
    const tensor *ordered[INFER_MAX_INPUTS];
    server_status st;
    if ((st = prepare(h, ordered)) || (st = infer_compute(&h->c, ordered)))
        return st;
    return build_response(h, out);
}

static void setup(http_infer *h, shmreg_registry *reg, remote_turns *turns, request *rq,
                  const route *rt, infer_thread on_transport)
{
    *h = (http_infer){.c = {.reg = reg, .held = &rq->held, .scope = rq->who.scope,
                            .remote_turns = turns, .on_transport = on_transport,
                            .m = model_find_version(rt->model, rt->version)},
                      .rq = rq};
}

/* The end of a request whose run has ended, or that never ran: a failure's
 * answer in out (a success's is there already), the request counted, and
 * a deferred one's JSON header kept for the worker that runs it. Returns
 * STATUS_OK, or INFER_DEFERRED. */
static server_status conclude(http_infer *h, server_status st, reply *out)
{
    if (st && st != INFER_DEFERRED)
        reply_failure(out, st, "%s", h->c.err);
    infer_finish(&h->c, st, &h->rq->started);
    if (st == INFER_DEFERRED) { /* the worker starts from this parse */
        h->rq->parsed_header = h->doc;
        h->doc = NULL;
    }
    json_doc_free(h->doc);
    h->doc = NULL;
    return st == INFER_DEFERRED ? st : STATUS_OK;
}

static server_status handle(shmreg_registry *reg, remote_turns *turns, request *rq, const route *rt,
                            reply *out, infer_thread on_transport)
{
    http_infer h;
    setup(&h, reg, turns, rq, rt, on_transport);
    if (!h.c.m) {
        reply_unknown_model(out, rt);
        return STATUS_OK;
    }
    return conclude(&h, run(&h, out), out);
}

void infer_handle(shmreg_registry *reg, remote_turns *turns, request *rq, const route *rt,
                  reply *out)
{
    handle(reg, turns, rq, rt, out, INFER_ON_WORKER);
}

server_status infer_handle_inline(shmreg_registry *reg, request *rq, const route *rt,
                                  reply *out)
{
    /* no copy here: INFER_DEFERRED */
    server_status st = handle(reg, NULL, rq, rt, out, INFER_ON_TRANSPORT);
    if (st == STATUS_OK)
        infer_count_inline();
    return st;
}

/* The end of a run handed to the device, on the thread it ended on: the
 * GPU model's finishing thread, or the HTTP thread inside
 * infer_compute_start (a short run on an idle instance), or a thread that
 * handed over another run and passed its run slot on (release_slot). The
 * answer is built as a worker builds it, into rq->answer; answered is the
 * last touch of rq, which may be sent and freed at once after it. */
static void device_run_ended(infer_ctx *c, server_status st)
{
    http_infer *h = c->owner;
    request *rq = h->rq;
    void (*answered)(request *rq, void *arg) = h->answered;
    void *arg = h->answered_arg;
    st = infer_compute_end(c, st);
    if (!st)
        st = build_response(h, &rq->answer);
    conclude(h, st, &rq->answer);
    free(h);
    answered(rq, arg);
}

server_status infer_handle_on_device(shmreg_registry *reg, request *rq, const route *rt,
                                     reply *out, void (*answered)(request *rq, void *arg),
                                     void *arg)
{
    /* On the heap: the run outlives this call. */
    http_infer *h = malloc(sizeof *h);
    if (!h)
        return INFER_DEFERRED; /* a worker runs it on its stack */
    setup(h, reg, NULL, rq, rt, INFER_ON_TRANSPORT_DEVICE);
    h->answered = answered;
    h->answered_arg = arg;
    h->c.owner = h; /* h->c.m is set: infer_device_runs_inline found the model */
    const tensor *ordered[INFER_MAX_INPUTS];
    server_status st = prepare(h, ordered);
    if (!st && (st = infer_compute_start(&h->c, ordered, device_run_ended)) == INFER_STARTED) {
        infer_count_inline();
        return st; /* h, and perhaps rq, are device_run_ended's now */
    }
    st = conclude(h, st, out);
    free(h);
    if (st == INFER_DEFERRED) {
        refs_release_all(&rq->held); /* the regions acquired before it was deferred */
        return st;
    }
    infer_count_inline();
    return STATUS_OK;
}
