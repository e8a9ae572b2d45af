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
 *   3. run the model straight from and into those views (a CUDA region is
 *      staged through a host buffer: device_copy.h);
 *   4. build the response; server.c queues it, and libmicrohttpd's completion
 *      callback releases the references once it has been sent.
 *
 * Steps 2 and 3 are infer_core.c, shared with the gRPC service.
 *
 * Every error return leaves the references already taken in the request, so
 * they are released by the same completion callback: there is no second
 * release path to forget.
 */
#include "infer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datatype.h"
#include "endpoints.h"
#include "infer_core.h"
#include "models.h"
#include "tensor.h"

/* infer_fail (infer_core.h), under the short name the parsers below use. */
#define fail infer_fail

/* An HTTP inference: the shared part, and the request's JSON header and
 * binary section. */
typedef struct http_infer {
    infer_ctx c;
    request *rq;
    json_t *root;                /* the request's JSON header */
    const char *binary;          /* binary tensor data not yet claimed by an input */
    size_t binary_left;
} http_infer;

/* ---------------------------------------------------- shared-memory tensors */

/* A JSON integer >= 0 that fits size_t, or -1. */
static int json_size(const json_t *v, size_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return -1;
    *out = (size_t)json_integer_value(v);
    return 0;
}

/* Read shared_memory_{region,offset,byte_size} of a tensor's parameters.
 * Returns 0 (w->region NULL when the tensor is not in shared memory) or a
 * status. */
static unsigned shm_window_from_params(infer_ctx *c, const json_t *params, const char *what,
                                       const char *name, shm_window *w)
{
    *w = (shm_window){0};
    const json_t *region = json_object_get(params, "shared_memory_region");
    const json_t *offset = json_object_get(params, "shared_memory_offset");
    const json_t *size = json_object_get(params, "shared_memory_byte_size");
    if (!region) {
        if (offset || size)
            return fail(c, 400, "%s '%s' gives a shared-memory offset or size but no "
                                "'shared_memory_region'", what, name);
        return 0;
    }
    if (!json_is_string(region))
        return fail(c, 400, "'shared_memory_region' of %s '%s' must be a string", what, name);
    if (!size)
        return fail(c, 400, "'shared_memory_byte_size' must be given along with "
                            "'shared_memory_region' for %s '%s'", what, name);
    if (json_size(size, &w->byte_size) != 0)
        return fail(c, 400, "'shared_memory_byte_size' of %s '%s' must be a non-negative integer",
                    what, name);
    if (offset && json_size(offset, &w->offset) != 0)
        return fail(c, 400, "'shared_memory_offset' of %s '%s' must be a non-negative integer",
                    what, name);
    w->region = json_string_value(region);
    return 0;
}

/* ------------------------------------------------------------------ inputs */

/* Copy nested JSON arrays of elements into buf, row-major. */
static int flatten(const json_t *v, const char *datatype, void *buf, size_t cap, size_t *n)
{
    if (json_is_array(v)) {
        size_t i;
        const json_t *e;
        json_array_foreach(v, i, e)
            if (flatten(e, datatype, buf, cap, n) != 0)
                return -1;
        return 0;
    }
    if (*n == cap || datatype_from_json(datatype, v, buf, *n) != 0)
        return -1;
    (*n)++;
    return 0;
}

static unsigned input_from_json_data(infer_ctx *c, tensor *t, const json_t *data)
{
    if (!datatype_has_json(t->datatype))
        return fail(c, 400, "input '%s': %s tensors must be sent as binary data or in shared "
                            "memory, not as JSON", t->name, t->datatype);
    size_t expected;
    if (tensor_expected_size(t, &expected) != 0)
        return fail(c, 400, "input '%s': shape too large", t->name);
    size_t elems = expected / (size_t)datatype_size(t->datatype), n = 0;
    t->owned = malloc(expected ? expected : 1);
    if (!t->owned)
        return fail(c, 500, "out of memory for input '%s'", t->name);
    if (flatten(data, t->datatype, t->owned, elems, &n) != 0 || n != elems)
        return fail(c, 400, "unable to parse 'data' of input '%s': expected %zu %s elements "
                            "matching its shape", t->name, elems, t->datatype);
    t->data = t->owned;
    t->byte_size = expected;
    return 0;
}

static unsigned parse_input(http_infer *h, const json_t *j, tensor *t)
{
    infer_ctx *c = &h->c;
    const json_t *name = json_object_get(j, "name"), *dt = json_object_get(j, "datatype");
    const json_t *params = json_object_get(j, "parameters"), *data = json_object_get(j, "data");
    if (!json_is_object(j) || !json_is_string(name) || !json_is_string(dt))
        return fail(c, 400, "each input needs a string 'name', a string 'datatype' and a 'shape'");
    t->name = json_string_value(name);
    t->datatype = json_string_value(dt);
    if (datatype_size(t->datatype) < 0)
        return fail(c, 400, "input '%s' has an unknown datatype '%s'", t->name, t->datatype);
    if (tensor_shape_from_json(json_object_get(j, "shape"), t, c->err, sizeof c->err) != 0)
        return 400;
    if (params && !json_is_object(params))
        return fail(c, 400, "'parameters' of input '%s' must be an object", t->name);

    shm_window w;
    unsigned st = shm_window_from_params(c, params, "input", t->name, &w);
    if (st)
        return st;
    const json_t *binary_size = json_object_get(params, "binary_data_size");
    int sources = (w.region != NULL) + (binary_size != NULL) + (data != NULL);
    if (sources != 1)
        return fail(c, 400, "input '%s' must give exactly one of 'data', 'binary_data_size' and "
                            "'shared_memory_region'", t->name);
    if (data)
        return input_from_json_data(c, t, data);
    if (w.region) {
        if ((st = infer_check_input_size(c, t, w.byte_size)) != 0)
            return st;
        return infer_input_from_window(c, t, &w);
    }
    size_t n;
    if (json_size(binary_size, &n) != 0)
        return fail(c, 400, "'binary_data_size' of input '%s' must be a non-negative integer",
                    t->name);
    if (n > h->binary_left)
        return fail(c, 400, "input '%s' claims %zu bytes of binary data but only %zu remain in "
                            "the request", t->name, n, h->binary_left);
    if ((st = infer_check_input_size(c, t, n)) != 0)
        return st;
    t->data = (void *)h->binary; /* the request body outlives the request's work */
    t->byte_size = n;
    h->binary += n;
    h->binary_left -= n;
    return 0;
}

static unsigned parse_inputs(http_infer *h)
{
    infer_ctx *c = &h->c;
    const json_t *inputs = json_object_get(h->root, "inputs");
    if (!json_is_array(inputs) || json_array_size(inputs) == 0)
        return fail(c, 400, "the request needs a non-empty 'inputs' array");
    if (json_array_size(inputs) > INFER_MAX_INPUTS)
        return fail(c, 400, "at most %d inputs are accepted", INFER_MAX_INPUTS);
    size_t i;
    const json_t *j;
    json_array_foreach(inputs, i, j) {
        c->n_in = i + 1; /* counted before parsing, so that a half-built one is freed too */
        unsigned st = parse_input(h, j, &c->in[i]);
        if (st)
            return st;
    }
    if (h->binary_left)
        return fail(c, 400, "the request carries %zu bytes of binary data that no input claims",
                    h->binary_left);
    return 0;
}

/* ----------------------------------------------------------------- outputs */

static unsigned parse_outputs(http_infer *h)
{
    infer_ctx *c = &h->c;
    const json_t *params = json_object_get(h->root, "parameters");
    int binary_all = json_is_true(json_object_get(params, "binary_data_output"));
    const json_t *outputs = json_object_get(h->root, "outputs");
    if (!outputs) { /* no list: every output, binary if the request says so */
        for (size_t i = 0; i < model_n_outputs(c->m); i++) {
            unsigned st = infer_place_output(c, i, binary_all ? PLACE_BINARY : PLACE_JSON, NULL);
            if (st)
                return st;
        }
        return 0;
    }
    if (!json_is_array(outputs))
        return fail(c, 400, "'outputs' must be an array");
    size_t k;
    const json_t *j;
    json_array_foreach(outputs, k, j) {
        const json_t *name = json_object_get(j, "name");
        const json_t *oparams = json_object_get(j, "parameters");
        if (!json_is_string(name))
            return fail(c, 400, "each requested output needs a string 'name'");
        int i = infer_output_index(c, json_string_value(name));
        if (i < 0 || c->out_place[i] != PLACE_NONE)
            return fail(c, 400, "unexpected inference output '%s' for model '%s'",
                        json_string_value(name), model_name(c->m));
        if (oparams && !json_is_object(oparams))
            return fail(c, 400, "'parameters' of output '%s' must be an object",
                        json_string_value(name));
        shm_window w;
        unsigned st = shm_window_from_params(c, oparams, "output", json_string_value(name), &w);
        if (st)
            return st;
        const json_t *binary = json_object_get(oparams, "binary_data");
        placement place = w.region ? PLACE_SHM
                          : (binary ? json_is_true(binary) : binary_all) ? PLACE_BINARY
                                                                         : PLACE_JSON;
        if ((st = infer_place_output(c, (size_t)i, place, &w)) != 0)
            return st;
    }
    return 0;
}

/* ---------------------------------------------------------------- response */

static json_t *output_json(const infer_ctx *c, size_t i)
{
    const tensor *t = &c->out[i];
    json_t *o = json_pack("{s:s,s:s,s:o}", "name", t->name, "datatype", t->datatype, "shape",
                          tensor_shape_to_json(t));
    if (!o)
        return NULL;
    /* An output in shared memory gets nothing more: its bytes are in the
     * region the client named. No "parameters" either, as from Triton:
     * Triton's C++ client (under perf_analyzer) reads them as binary data. */
    int bad = 0;
    if (c->out_place[i] == PLACE_BINARY) {
        bad = json_object_set_new(o, "parameters",
                                  json_pack("{s:I}", "binary_data_size", (json_int_t)t->byte_size));
    } else if (c->out_place[i] == PLACE_JSON) {
        json_t *data = json_array();
        size_t n = t->byte_size / (size_t)datatype_size(t->datatype);
        for (size_t e = 0; data && e < n && !bad; e++)
            bad = json_array_append_new(data, datatype_to_json(t->datatype, t->data, e));
        bad = bad || json_object_set_new(o, "data", data);
    }
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* The JSON header, then the binary outputs in the order the header lists them. */
static unsigned build_response(http_infer *h, reply *out)
{
    infer_ctx *c = &h->c;
    json_t *outputs = json_array();
    json_t *root = json_pack("{s:s,s:s,s:o}", "model_name", model_name(c->m), "model_version", "1",
                             "outputs", outputs);
    const json_t *id = json_object_get(h->root, "id");
    if (!root || (json_is_string(id) && json_object_set(root, "id", (json_t *)id) != 0)) {
        json_decref(root);
        return fail(c, 500, "out of memory building the response");
    }
    size_t binary = 0;
    for (size_t i = 0; i < model_n_outputs(c->m); i++) {
        if (c->out_place[i] == PLACE_NONE)
            continue;
        if (json_array_append_new(outputs, output_json(c, i)) != 0) {
            json_decref(root);
            return fail(c, 500, "out of memory building the response");
        }
        if (c->out_place[i] == PLACE_BINARY)
            binary += c->out[i].byte_size;
    }
    char *header = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    size_t header_len = header ? strlen(header) : 0;
    char *body = header && binary ? realloc(header, header_len + binary) : header;
    if (!body) {
        free(header);
        return fail(c, 500, "out of memory building the response");
    }
    size_t at = header_len;
    for (size_t i = 0; i < model_n_outputs(c->m); i++) {
        if (c->out_place[i] == PLACE_BINARY) {
            memcpy(body + at, c->out[i].data, c->out[i].byte_size);
            at += c->out[i].byte_size;
        }
    }
    *out = (reply){.status = 200, .body = body, .len = at, .json_len = binary ? header_len : 0};
    return 0;
}

/* ------------------------------------------------------------------- entry */

static unsigned locate_header(http_infer *h)
{
    infer_ctx *c = &h->c;
    request *rq = h->rq;
    size_t header_len = rq->body_len;
    if (rq->header_length >= 0) {
        if ((uint64_t)rq->header_length > rq->body_len || rq->header_length == 0)
            return fail(c, 400, "Inference-Header-Content-Length %lld is outside the request body "
                                "of %zu bytes", (long long)rq->header_length, rq->body_len);
        header_len = (size_t)rq->header_length;
    }
    json_error_t jerr;
    h->root = json_loadb(rq->body ? rq->body : "", header_len, 0, &jerr);
    if (!h->root)
        return fail(c, 400, "failed to parse the request JSON buffer: %s at line %d, column %d",
                    jerr.text, jerr.line, jerr.column);
    if (!json_is_object(h->root))
        return fail(c, 400, "the inference request must be a JSON object");
    const json_t *params = json_object_get(h->root, "parameters");
    if (params && !json_is_object(params))
        return fail(c, 400, "request 'parameters' must be an object");
    h->binary = rq->body + header_len;
    h->binary_left = rq->body_len - header_len;
    return 0;
}

static unsigned run(http_infer *h, reply *out)
{
    infer_ctx *c = &h->c;
    unsigned st;
    const tensor *ordered[INFER_MAX_INPUTS];
    if ((st = infer_ready(c)) || (st = locate_header(h)) || (st = parse_inputs(h)) ||
        (st = infer_bind(c, ordered)) || (st = parse_outputs(h)) || (st = infer_compute(c, ordered)))
        return st;
    return build_response(h, out);
}

void infer_handle(shmreg_registry *reg, request *rq, const route *rt, reply *out)
{
    http_infer h = {.c = {.reg = reg, .held = &rq->held,
                          .m = model_find_version(rt->model, rt->version)},
                    .rq = rq};
    if (!h.c.m) {
        reply_unknown_model(out, rt);
        return;
    }
    unsigned st = run(&h, out);
    if (st)
        reply_error(out, st, "%s", h.c.err);
    infer_finish(&h.c, st, &rq->started);
    json_decref(h.root);
}
