/*
 * The models' and the server's descriptions (models/models.h, core/triton.h)
 * written as the JSON Triton answers, key for key and in its order: clients
 * and the parity tests compare the bytes.
 */
#ifndef SERVER_MODEL_JSON_H
#define SERVER_MODEL_JSON_H

#include "http/json_write.h"
#include "core/triton.h"
#include "models/models.h"

#ifdef __cplusplus
extern "C" {
#endif

void json_server_metadata(jbuf *b, const server_metadata *md);
void json_model_metadata(jbuf *b, const model_metadata *md);
void json_model_config(jbuf *b, const model_config *cfg);
/* One model's object of the statistics extension's "model_stats" list. */
void json_model_statistics(jbuf *b, const model_statistics *st);

#ifdef __cplusplus
}
#endif

#endif
