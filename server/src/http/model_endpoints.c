/* Health, server metadata and the models' metadata, config and statistics. */
#include "http/endpoints.h"

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
    json_object *j = json_object_new_object(), *list = json_object_new_array();
    for (size_t i = 0; i < model_count(); i++)
        if (!m || m == model_at(i))
            jarr_add(list, model_stats_json(model_at(i), book));
    jobj_add(j, "model_stats", list);
    reply_json(out, 200, j);
}

/* 200 when the model can run; else (the GPU model without a GPU) 400 with
 * the reason, where Triton answers a model that is not ready with 400. */
static void model_ready_reply(const model *m, reply *out)
{
    char why[600];
    unsigned st = model_ready(m, why, sizeof why);
    if (st)
        reply_error(out, st, "%s", why);
    else
        reply_empty(out);
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
        reply_empty(out);
        return;
    }
    if (rt->id == ROUTE_SERVER_METADATA) {
        reply_json(out, 200, server_metadata_json());
        return;
    }
    const model *m = rt->model ? model_find_version(rt->model, rt->version) : NULL;
    if (rt->model && !m) {
        reply_unknown_model(out, rt);
        return;
    }
    switch (rt->id) {
    case ROUTE_MODEL_METADATA: reply_json(out, 200, model_metadata_json(m)); break;
    case ROUTE_MODEL_READY: model_ready_reply(m, out); break;
    case ROUTE_MODEL_CONFIG: reply_json(out, 200, model_config_json(m)); break;
    case ROUTE_MODEL_STATS: model_stats(m, scope, out); break;
    default: reply_error(out, 404, "Not Found"); break;
    }
}
