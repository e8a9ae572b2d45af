/* Health, server metadata and the models' metadata, config and statistics. */
#include "http/endpoints.h"

#include "http/model_json.h"
#include "models/models.h"

#include <stdio.h>

/* Under --tenants the caller's tenant's own figures: the server's would
 * tell one tenant when and how much the others infer. */
static void model_stats(const model *m, const region_scope *scope, reply *out)
{
    if (scope_refused(scope)) {
        reply_error(out, 401, "%s", SCOPE_NO_TOKEN_MESSAGE);
        return;
    }
    size_t book = scope_stats_book(scope);
    jbuf b = {0};
    int listed = 0;
    jbuf_lit(&b, "{\"model_stats\":[");
    for (size_t i = 0; i < model_count(); i++) {
        if (m && m != model_at(i))
            continue;
        model_statistics st;
        model_get_statistics(model_at(i), book, &st);
        if (listed++)
            jbuf_lit(&b, ",");
        json_model_statistics(&b, &st);
    }
    jbuf_lit(&b, "]}");
    reply_text(out, &b);
}

static void model_metadata_reply(const model *m, reply *out)
{
    model_metadata md;
    model_get_metadata(m, &md);
    jbuf b = {0};
    json_model_metadata(&b, &md);
    reply_text(out, &b);
}

static void model_config_reply(const model *m, reply *out)
{
    model_config cfg;
    model_get_config(m, &cfg);
    jbuf b = {0};
    json_model_config(&b, &cfg);
    reply_text(out, &b);
}

/* 200 when the model can run; else (the GPU model without a GPU) 400 with
 * the reason, where Triton answers a model that is not ready with 400. */
static void model_ready_reply(const model *m, reply *out)
{
    char why[600];
    server_status st = model_ready(m, why, sizeof why);
    if (st)
        reply_failure(out, st, "%s", why);
    else
        reply_empty(out);
}

/* The Open Inference Protocol's bodies, {"live": true} and {"ready": B},
 * beside Triton's statuses (Triton sends no body): KServe's clients read
 * the body, Triton's the status. A draining server is live and not ready,
 * with Triton's status for not ready (400), so that a balancer stops
 * sending it requests while those in flight finish. */
void reply_health(reply *out, int ready_route, int draining)
{
    jbuf b = {0};
    if (ready_route)
        jbuf_lit(&b, draining ? "{\"ready\":false}" : "{\"ready\":true}");
    else
        jbuf_lit(&b, "{\"live\":true}");
    reply_written(out, ready_route && draining ? 400 : 200, &b);
}

void reply_unknown_model(reply *out, const route *rt)
{
    char message[600];
    unknown_model_message(message, sizeof message, rt->model, rt->version);
    reply_error(out, 404, "%s", message);
}

void model_endpoints_handle(const route *rt, const region_scope *scope, reply *out)
{
    if (rt->id == ROUTE_HEALTH_LIVE || rt->id == ROUTE_HEALTH_READY) {
        reply_health(out, rt->id == ROUTE_HEALTH_READY, 0);
        return;
    }
    if (rt->id == ROUTE_SERVER_METADATA) {
        server_metadata md;
        server_get_metadata(&md);
        jbuf b = {0};
        json_server_metadata(&b, &md);
        reply_text(out, &b);
        return;
    }
    const model *m = rt->model ? model_find_version(rt->model, rt->version) : NULL;
    if (rt->model && !m) {
        reply_unknown_model(out, rt);
        return;
    }
    switch (rt->id) {
    case ROUTE_MODEL_METADATA: model_metadata_reply(m, out); break;
    case ROUTE_MODEL_READY: model_ready_reply(m, out); break;
    case ROUTE_MODEL_CONFIG: model_config_reply(m, out); break;
    case ROUTE_MODEL_STATS: model_stats(m, scope, out); break;
    default: reply_error(out, 404, "Not Found"); break;
    }
}
