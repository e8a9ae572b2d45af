/* The models' and the server's descriptions as JSON (model_json.h). Keys are
 * written as literals with their punctuation; every value that is a string
 * goes through jbuf_str, numbers through jbuf_i64/jbuf_u64. */
#include "http/model_json.h"

#include <stdio.h>

/* A member: lead is what comes before the value (a brace or comma, the
 * quoted key and its colon). */
static void str_member(jbuf *b, const char *lead, const char *v)
{
    jbuf_lit(b, lead);
    jbuf_str(b, v);
}

static void i64_member(jbuf *b, const char *lead, int64_t v)
{
    jbuf_lit(b, lead);
    jbuf_i64(b, v);
}

static void u64_member(jbuf *b, const char *lead, uint64_t v)
{
    jbuf_lit(b, lead);
    jbuf_u64(b, v);
}

/* "[a,b,...]" of strings. */
static void strings(jbuf *b, const char *const *s, size_t n)
{
    jbuf_lit(b, "[");
    for (size_t i = 0; i < n; i++)
        str_member(b, i ? "," : "", s[i]);
    jbuf_lit(b, "]");
}

static void dims(jbuf *b, const int64_t *d, int n)
{
    jbuf_lit(b, "[");
    for (int i = 0; i < n; i++)
        i64_member(b, i ? "," : "", d[i]);
    jbuf_lit(b, "]");
}

void json_server_metadata(jbuf *b, const server_metadata *md)
{
    str_member(b, "{\"name\":", md->name);
    str_member(b, ",\"version\":", md->version);
    jbuf_lit(b, ",\"extensions\":");
    strings(b, md->extensions, md->n_extensions);
    jbuf_lit(b, "}");
}

static void metadata_tensors(jbuf *b, const model_tensor_info *t, size_t n)
{
    jbuf_lit(b, "[");
    for (size_t i = 0; i < n; i++) {
        str_member(b, i ? ",{\"name\":" : "{\"name\":", t[i].name);
        str_member(b, ",\"datatype\":", t[i].datatype);
        jbuf_lit(b, ",\"shape\":");
        dims(b, t[i].dims, t[i].ndims);
        jbuf_lit(b, "}");
    }
    jbuf_lit(b, "]");
}

void json_model_metadata(jbuf *b, const model_metadata *md)
{
    str_member(b, "{\"name\":", md->name);
    jbuf_lit(b, ",\"versions\":");
    strings(b, md->versions, md->n_versions);
    str_member(b, ",\"platform\":", md->platform);
    jbuf_lit(b, ",\"inputs\":");
    metadata_tensors(b, md->inputs, md->n_inputs);
    jbuf_lit(b, ",\"outputs\":");
    metadata_tensors(b, md->outputs, md->n_outputs);
    jbuf_lit(b, "}");
}

/* A config's inputs or outputs: its data_type is the datatype's "TYPE_" name. */
static void config_tensors(jbuf *b, const model_tensor_info *t, size_t n, const char *format)
{
    jbuf_lit(b, "[");
    for (size_t i = 0; i < n; i++) {
        char type[32];
        snprintf(type, sizeof type, "TYPE_%s", t[i].datatype);
        str_member(b, i ? ",{\"name\":" : "{\"name\":", t[i].name);
        str_member(b, ",\"data_type\":", type);
        str_member(b, ",\"format\":", format);
        jbuf_lit(b, ",\"dims\":");
        dims(b, t[i].dims, t[i].ndims);
        jbuf_lit(b, "}");
    }
    jbuf_lit(b, "]");
}

static void instance_group(jbuf *b, const model_instance_group *g)
{
    i64_member(b, "[{\"count\":", g->count);
    str_member(b, ",\"kind\":", g->kind);
    if (g->lists_gpus) {
        jbuf_lit(b, ",\"gpus\":[");
        for (size_t i = 0; i < g->n_gpus; i++)
            i64_member(b, i ? "," : "", g->gpus[i]);
        jbuf_lit(b, "]");
    }
    jbuf_lit(b, "}]");
}

static void parameters(jbuf *b, const model_config_parameter *p, size_t n)
{
    jbuf_lit(b, "{");
    for (size_t i = 0; i < n; i++) {
        str_member(b, i ? "," : "", p[i].key);
        str_member(b, ":{\"string_value\":", p[i].string_value);
        jbuf_lit(b, "}");
    }
    jbuf_lit(b, "}");
}

void json_model_config(jbuf *b, const model_config *cfg)
{
    str_member(b, "{\"name\":", cfg->name);
    str_member(b, ",\"platform\":", cfg->platform);
    str_member(b, ",\"backend\":", cfg->backend);
    i64_member(b, ",\"max_batch_size\":", cfg->max_batch_size);
    jbuf_lit(b, ",\"input\":");
    config_tensors(b, cfg->inputs, cfg->n_inputs, cfg->format);
    jbuf_lit(b, ",\"output\":");
    config_tensors(b, cfg->outputs, cfg->n_outputs, cfg->format);
    jbuf_lit(b, cfg->decoupled ? ",\"model_transaction_policy\":{\"decoupled\":true}"
                               : ",\"model_transaction_policy\":{\"decoupled\":false}");
    jbuf_lit(b, ",\"instance_group\":");
    instance_group(b, &cfg->group);
    if (cfg->n_parameters) {
        jbuf_lit(b, ",\"parameters\":");
        parameters(b, cfg->parameters, cfg->n_parameters);
    }
    jbuf_lit(b, "}");
}

/* "key":{"count":N,"ns":N}; lead: what comes before it, the quoted key last. */
static void duration(jbuf *b, const char *lead, const model_duration *d)
{
    jbuf_lit(b, lead);
    u64_member(b, ":{\"count\":", d->count);
    u64_member(b, ",\"ns\":", d->ns);
    jbuf_lit(b, "}");
}

void json_model_statistics(jbuf *b, const model_statistics *st)
{
    str_member(b, "{\"name\":", st->name);
    str_member(b, ",\"version\":", st->version);
    u64_member(b, ",\"last_inference\":", st->last_inference);
    u64_member(b, ",\"inference_count\":", st->inference_count);
    u64_member(b, ",\"execution_count\":", st->execution_count);
    /* Triton's inference_stats, in its order. */
    duration(b, ",\"inference_stats\":{\"success\"", &st->success);
    duration(b, ",\"fail\"", &st->fail);
    duration(b, ",\"queue\"", &st->queue);
    duration(b, ",\"compute_input\"", &st->compute_input);
    duration(b, ",\"compute_infer\"", &st->compute_infer);
    duration(b, ",\"compute_output\"", &st->compute_output);
    duration(b, ",\"cache_hit\"", &st->cache_hit);
    duration(b, ",\"cache_miss\"", &st->cache_miss);
    jbuf_lit(b, "},\"batch_stats\":[]}");
}
