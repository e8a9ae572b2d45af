/*
 * Triton's shared-memory extension over the registry:
 *   GET  v2/{kind}sharedmemory[/region/{name}]/status
 *   POST v2/{kind}sharedmemory/region/{name}/register
 *   POST v2/{kind}sharedmemory[/region/{name}]/unregister
 * with kind "system" or "cuda". Bodies are parsed with jansson; every error
 * is {"error": "..."} with the status of http_status_from_shmreg.
 */
#include "endpoints.h"

#include <resolv.h>
#include <string.h>

/* A size field of a register body: a JSON integer >= 0. */
static int body_size(const json_t *body, const char *field, int required, size_t *out, reply *r)
{
    const json_t *v = json_object_get(body, field);
    if (!v && !required) {
        *out = 0;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0) {
        reply_error(r, 400, "'%s' must be %sa non-negative integer", field,
                    required ? "given as " : "");
        return -1;
    }
    *out = (size_t)json_integer_value(v);
    return 0;
}

static json_t *parse_body(const request *rq, reply *r)
{
    json_error_t jerr;
    json_t *body = json_loadb(rq->body ? rq->body : "", rq->body_len, 0, &jerr);
    if (!body) {
        reply_error(r, 400, "failed to parse the request JSON buffer: %s at line %d, column %d",
                    jerr.text, jerr.line, jerr.column);
        return NULL;
    }
    if (!json_is_object(body)) {
        json_decref(body);
        reply_error(r, 400, "the register request must be a JSON object");
        return NULL;
    }
    return body;
}

static void register_system(shmreg_registry *reg, const char *name, const json_t *body, reply *r)
{
    const json_t *key = json_object_get(body, "key");
    size_t offset, byte_size;
    if (!json_is_string(key)) {
        reply_error(r, 400, "'key' must be given as a string");
        return;
    }
    if (body_size(body, "offset", 0, &offset, r) || body_size(body, "byte_size", 1, &byte_size, r))
        return;
    shmreg_err e = shmreg_register_system(reg, name, json_string_value(key), offset, byte_size, 0);
    if (e != SHMREG_OK)
        reply_shmreg_error(r, e);
    else
        reply_empty(r);
}

static void register_cuda(shmreg_registry *reg, const char *name, const json_t *body, reply *r)
{
    const json_t *b64 = json_object_get(json_object_get(body, "raw_handle"), "b64");
    const json_t *device = json_object_get(body, "device_id");
    size_t byte_size;
    if (!json_is_string(b64)) {
        reply_error(r, 400, "'raw_handle' must be given as {\"b64\": \"<base64>\"}");
        return;
    }
    if (!json_is_integer(device) || json_integer_value(device) < 0 ||
        json_integer_value(device) > 1 << 20) {
        reply_error(r, 400, "'device_id' must be given as a non-negative integer");
        return;
    }
    if (body_size(body, "byte_size", 1, &byte_size, r))
        return;
    /* A cudaIpcMemHandle_t is 64 bytes; decoding into a larger buffer lets
     * the library, not this parser, report a handle of the wrong size. */
    unsigned char handle[128];
    int n = b64_pton(json_string_value(b64), handle, sizeof handle);
    if (n < 0) {
        reply_error(r, 400, "'raw_handle' of region '%s' is not valid base64 of at most %zu bytes",
                    name, sizeof handle);
        return;
    }
    shmreg_err e = shmreg_register_cuda_ipc(reg, name, handle, (size_t)n,
                                            (int)json_integer_value(device), byte_size, 0);
    if (e != SHMREG_OK)
        reply_shmreg_error(r, e);
    else
        reply_empty(r);
}

static json_t *status_entry(const shmreg_region_status *s)
{
    /* "in_use" is the key clients of this frontend read; its value is the
     * references callers hold (a request holds one per tensor it places in
     * the region), which is what the library counts. */
    json_t *e = json_pack("{s:s,s:I,s:I,s:b}", "name", s->name, "byte_size",
                          (json_int_t)s->byte_size, "in_use", (json_int_t)s->references,
                          "pending_unregister", s->pending_unregister);
    if (!e)
        return NULL;
    int bad = s->kind == SHMREG_KIND_SYSTEM
                  ? json_object_set_new(e, "key", json_string(s->key)) ||
                        json_object_set_new(e, "offset", json_integer((json_int_t)s->offset))
                  : json_object_set_new(e, "device_id", json_integer(s->device_id));
    if (bad) {
        json_decref(e);
        return NULL;
    }
    return e;
}

static void status(shmreg_registry *reg, const route *rt, reply *r)
{
    shmreg_region_status *st;
    size_t count;
    shmreg_err e = shmreg_status(reg, rt->region, rt->kind, &st, &count);
    if (e != SHMREG_OK) {
        reply_shmreg_error(r, e);
        return;
    }
    json_t *list = json_array();
    for (size_t i = 0; list && i < count; i++) {
        if (json_array_append_new(list, status_entry(&st[i])) != 0) {
            json_decref(list);
            list = NULL;
        }
    }
    shmreg_status_free(st, count);
    reply_json(r, 200, list);
}

/* Unregistering a name that nothing holds is success, as in Triton (whose
 * clients and tests rely on it); a name registered as the other kind is
 * WRONG_KIND, reported with the library's message. One call tells the two
 * apart. */
shmreg_err shm_unregister_as_triton(shmreg_registry *reg, const char *name, shmreg_kind kind)
{
    shmreg_err e = name ? shmreg_unregister(reg, name, kind) : shmreg_unregister_all(reg, kind);
    return e == SHMREG_ERR_NOT_FOUND ? SHMREG_OK : e; /* absent: success, as in Triton */
}

static void unregister(shmreg_registry *reg, const route *rt, reply *r)
{
    shmreg_err e = shm_unregister_as_triton(reg, rt->region, rt->kind);
    if (e == SHMREG_OK)
        reply_empty(r);
    else
        reply_shmreg_error(r, e);
}

void shm_endpoints_handle(shmreg_registry *reg, const request *rq, const route *rt, reply *r)
{
    if (rt->id == ROUTE_SHM_STATUS) {
        status(reg, rt, r);
    } else if (rt->id == ROUTE_SHM_UNREGISTER) {
        unregister(reg, rt, r);
    } else {
        json_t *body = parse_body(rq, r);
        if (!body)
            return;
        if (rt->kind == SHMREG_KIND_SYSTEM)
            register_system(reg, rt->region, body, r);
        else
            register_cuda(reg, rt->region, body, r);
        json_decref(body);
    }
}
