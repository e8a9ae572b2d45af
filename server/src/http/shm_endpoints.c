/*
 * Triton's shared-memory extension over the registry:
 *   GET  v2/{kind}sharedmemory[/region/{name}]/status
 *   POST v2/{kind}sharedmemory/region/{name}/register
 *   POST v2/{kind}sharedmemory[/region/{name}]/unregister
 * with kind "system" or "cuda", and the remote_memory extension,
 * the same verbs under v2/remotememory, whose register body is
 *   {"descriptor": {"b64": "<shmreg_remote_descriptor, base64>"},
 *    "byte_size": N, "offset": O (optional, 0)}
 * and whose
 *   POST v2/remotememory/connect
 * invites one client connection for the caller's tenant, answering
 *   {"address": "IP:PORT", "secret": {"b64": "<a one-time secret of 32 bytes>"}}
 * which the client hands to shmreg_remote_client_connect: the listener's
 * address (an IP of 0.0.0.0 or [::]: any of this host's, so the client
 * dials the host it reached this server by) and the secret that lets the
 * connection in, as this tenant. The secret goes only to a caller that
 * passed the same gate as register (--allow-client-shm, the restrictions,
 * the tenant's token). Behind the same gate,
 *   GET v2/remotememory/engine
 * answers {"listen": "IP:PORT", "transports": "...", "tcp_device": "lo" or
 * null, "tcp_ports": "LOW-HIGH" or null, "open_to_any_host_on_tcp_device":
 * true or false}. While the engine is off (remote_engine.h), connect,
 * engine and a remote register answer 501 with the reason.
 * Bodies are read as json_doc (http/json_doc.h); every error is {"error": "..."}
 * with the status of the library's error (common/status.h's table).
 */
#include "http/endpoints.h"

#include <resolv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/json_doc.h"
#include "core/access.h"
#include "core/region_scope.h"
#include "core/remote_engine.h"

/* A size field of a register body: an unsigned 64-bit JSON integer, all of
 * it, so that the library's bounds and overflow checks answer for values
 * past 2^63 with Triton's messages. */
static int body_size(const json_val *body, const char *field, int required, size_t *out,
                     reply *r)
{
    const json_val *v = jv_get(body, field);
    uint64_t u = 0;
    int64_t negative = 0;
    int rc = v || required ? jv_u64(v, &u) : 0;
    if (rc == -2) {
        jv_i64(v, &negative);
        reply_error(r, 400, "'%s' must be an unsigned integer, got the negative %lld", field,
                    (long long)negative);
        return -1;
    }
    if (rc != 0) {
        reply_error(r, 400, "'%s' must be %san unsigned integer", field,
                    required ? "given as " : "");
        return -1;
    }
    *out = (size_t)u; /* size_t is 64 bits wide on every target of this example */
    return 0;
}

/* The library's failure, with its message. */
static void reply_scope_error(reply *r, const region_scope *scope, shmreg_err e)
{
    (void)scope;
    reply_shmreg_error(r, e);
}

static json_doc *parse_body(const request *rq, reply *r)
{
    char err[512];
    json_doc *body = json_doc_parse(rq->body ? rq->body : "", rq->body_len, err, sizeof err);
    if (!body) {
        reply_error(r, 400, "%s", err);
        return NULL;
    }
    if (!jv_is_object(json_doc_root(body))) {
        json_doc_free(body);
        reply_error(r, 400, "the register request must be a JSON object");
        return NULL;
    }
    return body;
}

static const char *string_member(const json_val *o, const char *key)
{
    return jv_str(jv_get(o, key));
}

static void register_system(shmreg_registry *reg, const region_scope *scope, const char *name,
                            const json_val *body, reply *r)
{
    const char *key = string_member(body, "key");
    size_t offset, byte_size;
    if (!key) { /* Triton's words when there is none */
        reply_error(r, 400, jv_has(body, "key")
                                ? "'key' must be given as a string"
                                : "Shared memory register request has no 'key' field");
        return;
    }
    if (body_size(body, "offset", 0, &offset, r) || body_size(body, "byte_size", 1, &byte_size, r))
        return;
    shmreg_err e = scope_register_system(reg, scope, name, key, offset, byte_size);
    if (e != SHMREG_OK)
        reply_scope_error(r, scope, e);
    else
        reply_empty(r);
}

/* A cudaIpcMemHandle_t, as the CUDA runtime defines it. */
#define CUDA_IPC_HANDLE_SIZE 64

/* The base64 of raw_handle decoded into handle: 0, or -1 after Triton's
 * answer to a handle that is not base64 of exactly 64 bytes. */
static int decode_handle(const char *b64, unsigned char handle[CUDA_IPC_HANDLE_SIZE], reply *r)
{
    /* One byte more than a handle: b64_pton fails on a longer one instead
     * of truncating it, and a shorter one shows in the count. */
    unsigned char decoded[CUDA_IPC_HANDLE_SIZE + 1];
    int n = b64_pton(b64, decoded, sizeof decoded);
    if (n != CUDA_IPC_HANDLE_SIZE) {
        reply_error(r, 400, "'raw_handle' must be a valid base64 encoded cudaIpcMemHandle_t");
        return -1;
    }
    memcpy(handle, decoded, CUDA_IPC_HANDLE_SIZE);
    return 0;
}

static void register_cuda(shmreg_registry *reg, const region_scope *scope, const char *name,
                          const json_val *body, reply *r)
{
    const char *b64 = string_member(jv_get(body, "raw_handle"), "b64");
    const json_val *device = jv_get(body, "device_id");
    uint64_t device_id;
    size_t byte_size;
    if (!b64) { /* Triton's words when there is none */
        reply_error(r, 400, jv_has(body, "raw_handle")
                                ? "'raw_handle' must be given as {\"b64\": \"<base64>\"}"
                                : "Shared memory register request has no 'raw_handle' field");
        return;
    }
    if (jv_u64(device, &device_id) != 0 || device_id > 1 << 20) {
        reply_error(r, 400, "'device_id' must be given as a non-negative integer");
        return;
    }
    if (body_size(body, "byte_size", 1, &byte_size, r))
        return;
    unsigned char handle[CUDA_IPC_HANDLE_SIZE];
    if (decode_handle(b64, handle, r) != 0)
        return;
    shmreg_err e = scope_register_cuda_ipc(reg, scope, name, handle, sizeof handle,
                                           (int)device_id, byte_size);
    if (e != SHMREG_OK)
        reply_scope_error(r, scope, e);
    else
        reply_empty(r);
}

/* The longest descriptor text decoded: version 1's largest (32 bytes and
 * two blobs of 8192) in base64, with room to spare. */
#define REMOTE_DESCRIPTOR_TEXT_MAX 65536

/* A remote client's region (SHMREG_SOURCE_REMOTE): its descriptor decoded
 * and handed to the library, which checks every field of it. */
static void register_remote(shmreg_registry *reg, const region_scope *scope, const char *name,
                            const json_val *body, reply *r)
{
    const char *b64 = string_member(jv_get(body, "descriptor"), "b64");
    size_t offset, byte_size;
    if (!b64) {
        reply_error(r, 400, jv_has(body, "descriptor")
                                ? "'descriptor' must be given as {\"b64\": \"<base64>\"}"
                                : "Remote memory register request has no 'descriptor' field");
        return;
    }
    if (body_size(body, "offset", 0, &offset, r) || body_size(body, "byte_size", 1, &byte_size, r))
        return;
    /* Decoded whatever its length up to a bound far past any descriptor,
     * so that the library, which checks every field, names what is wrong
     * with it: a descriptor of the old version 1 is longer than today's. */
    size_t len = strlen(b64);
    if (len > REMOTE_DESCRIPTOR_TEXT_MAX) {
        reply_error(r, 400, "'descriptor' must be the base64 of a remote memory descriptor (%d bytes), "
                            "got %zu characters", SHMREG_REMOTE_DESCRIPTOR_SIZE, len);
        return;
    }
    size_t room = len / 4 * 3 + 3;
    unsigned char *descriptor = malloc(room);
    if (!descriptor) {
        reply_error(r, 500, "out of memory decoding the descriptor of '%s'", name);
        return;
    }
    int n = b64_pton(b64, descriptor, room);
    if (n <= 0) {
        free(descriptor);
        reply_error(r, 400, "'descriptor' must be the base64 of a remote memory descriptor (%d bytes)",
                    SHMREG_REMOTE_DESCRIPTOR_SIZE);
        return;
    }
    shmreg_registration reg_r;
    shmreg_registration_init(&reg_r);
    reg_r.source = SHMREG_SOURCE_REMOTE;
    reg_r.name = name;
    reg_r.raw_handle = descriptor;
    reg_r.raw_handle_size = (size_t)n;
    reg_r.offset = offset;
    reg_r.byte_size = byte_size;
    shmreg_err e = scope_register(reg, scope, &reg_r);
    free(descriptor);
    if (e != SHMREG_OK)
        reply_scope_error(r, scope, e);
    else
        reply_empty(r);
}

/* An invitation for the caller's tenant: where the client connects and
 * the one-time secret that proves the connection (shmreg_remote_invite). */
static void remote_connect(shmreg_registry *reg, const region_scope *scope, reply *r)
{
    const char *address;
    unsigned char secret[SHMREG_REMOTE_SECRET_SIZE];
    /* The secret in base64: 44 characters and the NUL. */
    char text[(SHMREG_REMOTE_SECRET_SIZE + 2) / 3 * 4 + 1];
    shmreg_err e = shmreg_remote_server_address(&address);
    if (e == SHMREG_OK)
        e = scope_remote_invite(reg, scope, secret);
    if (e != SHMREG_OK) {
        reply_scope_error(r, scope, e);
        return;
    }
    int n = b64_ntop(secret, sizeof secret, text, sizeof text);
    explicit_bzero(secret, sizeof secret);
    if (n < 0) { /* cannot happen: text has room for it */
        reply_error(r, 500, "cannot write a remote connection's secret in base64");
        return;
    }
    jbuf b = {0};
    jbuf_lit(&b, "{\"address\":");
    jbuf_str(&b, address);
    jbuf_lit(&b, ",\"secret\":{\"b64\":");
    jbuf_str(&b, text);
    jbuf_lit(&b, "}}");
    explicit_bzero(text, sizeof text);
    reply_text(r, &b);
}

/* One region's status, written as text (json_write.h: a tree per region was
 * most of the time of a status call). "in_use" is the key clients of this
 * server read; its value is the references callers hold (a request holds
 * one per tensor it places in the region), which is what the library counts. */
static void write_status_entry(jbuf *b, const region_scope *scope,
                               const shmreg_region_status *s)
{
    jbuf_lit(b, "{\"name\":");
    jbuf_str(b, s->name);
    jbuf_lit(b, ",\"byte_size\":");
    jbuf_u64(b, s->byte_size);
    jbuf_lit(b, ",\"in_use\":");
    jbuf_u64(b, s->references);
    jbuf_lit(b, s->pending_unregister ? ",\"pending_unregister\":true"
                                      : ",\"pending_unregister\":false");
    if (s->kind == SHMREG_KIND_REMOTE) {
        jbuf_lit(b, ",\"offset\":");
        jbuf_u64(b, s->offset);
        jbuf_lit(b, ",\"transports\":"); /* the UCX transports of its client's connection */
        if (s->transports)
            jbuf_str(b, s->transports);
        else
            jbuf_lit(b, "null");
    } else if (s->kind == SHMREG_KIND_SYSTEM) {
        jbuf_lit(b, ",\"key\":");
        jbuf_str(b, s->key ? s->key : ""); /* NULL: a memfd (--uds) */
        jbuf_lit(b, ",\"offset\":");
        jbuf_u64(b, s->offset);
    } else {
        jbuf_lit(b, ",\"device_id\":");
        jbuf_i64(b, s->device_id);
    }
    jbuf_lit(b, "}");
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const shmreg_region_status *)a)->name, ((const shmreg_region_status *)b)->name);
}

static void status(shmreg_registry *reg, const region_scope *scope, const route *rt, reply *r)
{
    shmreg_region_status *st;
    size_t count;
    /* A dead client's regions are gone from a listing (remote_sweep.h). */
    if (rt->kind == SHMREG_KIND_REMOTE)
        (void)shmreg_remote_sweep(reg, NULL);
    shmreg_err e = scope_status(reg, scope, rt->region, rt->kind, &st, &count);
    if (e != SHMREG_OK) {
        reply_scope_error(r, scope, e);
        return;
    }
    /* In name order, as Triton lists them (its regions are a std::map);
     * the library's snapshot is in table order. */
    if (count > 1) /* st is NULL when there is none */
        qsort(st, count, sizeof *st, by_name);
    jbuf b = {0};
    jbuf_reserve(&b, 128 * count + 2); /* about one entry's text each */
    jbuf_lit(&b, "[");
    for (size_t i = 0; i < count; i++) {
        if (i)
            jbuf_lit(&b, ",");
        write_status_entry(&b, scope, &st[i]);
    }
    jbuf_lit(&b, "]");
    shmreg_status_free(st, count);
    reply_text(r, &b);
}

static void unregister(shmreg_registry *reg, const region_scope *scope, const route *rt, reply *r)
{
    shmreg_err e = shm_unregister_as_triton(reg, scope, rt->region, rt->kind);
    if (e == SHMREG_OK)
        reply_empty(r);
    else
        reply_scope_error(r, scope, e);
}

static void register_region(shmreg_registry *reg, const request *rq, const route *rt, reply *r)
{
    char why[600];
    /* Refused here, so that no status (HTTP or gRPC) has a name it cannot
     * write as JSON or protobuf text (a status of all would answer 500). */
    if (!shm_name_is_valid(rt->region, why, sizeof why)) {
        reply_error(r, 400, "%s", why);
        return;
    }
    json_doc *doc = parse_body(rq, r);
    if (!doc)
        return;
    const json_val *body = json_doc_root(doc);
    if (rt->kind == SHMREG_KIND_SYSTEM)
        register_system(reg, &rq->who.scope, rt->region, body, r);
    else if (rt->kind == SHMREG_KIND_REMOTE)
        register_remote(reg, &rq->who.scope, rt->region, body, r);
    else
        register_cuda(reg, &rq->who.scope, rt->region, body, r);
    json_doc_free(doc);
}

/* GET v2/remotememory/engine: where clients connect and by which
 * transports, and whether tcp opens the server's memory to every host that
 * reaches its device (remote_engine.h). */
static void remote_engine(const remote_engine_view *e, reply *r)
{
    jbuf b = {0};
    jbuf_lit(&b, "{\"listen\":");
    jbuf_str(&b, e->listen);
    jbuf_lit(&b, ",\"transports\":");
    jbuf_str(&b, e->transports);
    jbuf_lit(&b, ",\"tcp_device\":");
    if (e->tcp_device)
        jbuf_str(&b, e->tcp_device);
    else
        jbuf_lit(&b, "null");
    jbuf_lit(&b, ",\"tcp_ports\":");
    if (e->tcp_ports)
        jbuf_str(&b, e->tcp_ports);
    else
        jbuf_lit(&b, "null");
    jbuf_lit(&b, e->open_on_tcp ? ",\"open_to_any_host_on_tcp_device\":true}"
                                : ",\"open_to_any_host_on_tcp_device\":false}");
    reply_text(r, &b);
}

/* A call that needs the remote engine, which did not start: 501 (as for
 * a server without UCX), with the reason it gave at start. */
static int remote_engine_off(const route *rt, reply *r)
{
    const char *why;
    int needs = rt->id == ROUTE_REMOTE_CONNECT || rt->id == ROUTE_REMOTE_ENGINE ||
                (rt->id == ROUTE_SHM_REGISTER && rt->kind == SHMREG_KIND_REMOTE);
    if (!needs || remote_engine_get(&why))
        return 0;
    reply_failure(r, STATUS_UNSUPPORTED, "remote_memory is off: %s", why);
    return 1;
}

void shm_endpoints_handle(shmreg_registry *reg, int allow_client_shm, const request *rq,
                          const route *rt, reply *r)
{
    if (rt->id == ROUTE_SHM_STATUS)
        status(reg, &rq->who.scope, rt, r);
    else if (!allow_client_shm) /* Triton 2.73: status stays open, the rest is refused */
        reply_failure(r, STATUS_UNSUPPORTED, "%s", CLIENT_SHM_DISABLED_MESSAGE);
    else if (rt->id == ROUTE_SHM_UNREGISTER)
        unregister(reg, &rq->who.scope, rt, r);
    else if (remote_engine_off(rt, r))
        return;
    else if (rt->id == ROUTE_REMOTE_CONNECT)
        remote_connect(reg, &rq->who.scope, r);
    else if (rt->id == ROUTE_REMOTE_ENGINE)
        remote_engine(remote_engine_get(NULL), r);
    else
        register_region(reg, rq, rt, r);
}
