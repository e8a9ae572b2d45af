/* Triton's answers for every adapter (triton.h). */
#include "core/triton.h"

#include <stdio.h>
#include <string.h>

#include "core/remote_engine.h"

unsigned http_status_from_shmreg(shmreg_err err)
{
    switch (err) {
#define TRITON_HTTP_CASE(name, http, grpc) \
    case SHMREG_##name: return http;
        TRITON_STATUS_MAP(TRITON_HTTP_CASE)
#undef TRITON_HTTP_CASE
    }
    return 500;
}

void unknown_model_message(char *buf, size_t len, const char *name, const char *version)
{
    int versioned = version != NULL;
    snprintf(buf, len, "Request for unknown model: '%s'%s%s is not found", name,
             versioned ? " version " : "", versioned ? version : "");
}

json_object *server_metadata_json(void)
{
    /* Listed whatever --allow-client-shm says, as Triton lists its two
     * shared-memory extensions: their status endpoints answer either way.
     * remote_memory only while its engine runs: a client that reads the
     * list need not connect to learn that it cannot (remote_engine.h). */
    static const char *const extensions[] = {"binary_tensor_data", "statistics",
                                             "system_shared_memory", "cuda_shared_memory"};
    json_object *j = json_object_new_object(), *ext = json_object_new_array();
    for (size_t i = 0; i < sizeof extensions / sizeof extensions[0]; i++)
        jarr_add(ext, json_object_new_string(extensions[i]));
    if (remote_engine_get(NULL))
        jarr_add(ext, json_object_new_string("remote_memory"));
    jobj_add(j, "name", json_object_new_string("shmreg-server"));
    jobj_add(j, "version", json_object_new_string(shmreg_version()));
    jobj_add(j, "extensions", ext);
    return j;
}

int shm_name_is_valid(const char *name, char *err, size_t errlen)
{
    if (utf8_valid(name, strlen(name)))
        return 1;
    /* The name is echoed through jbuf_str, which shows its bad bytes as U+FFFD. */
    snprintf(err, errlen, "cannot register shared memory region '%s': the name is not valid UTF-8",
             name);
    return 0;
}

/* Unregistering a name that nothing holds is success, as in Triton (whose
 * clients and tests rely on it); a name registered as the other kind is
 * WRONG_KIND, reported with the library's message. One call tells the two
 * apart. */
shmreg_err shm_unregister_as_triton(shmreg_registry *reg, const region_scope *scope,
                                    const char *name, shmreg_kind kind)
{
    shmreg_err e = scope_unregister(reg, scope, name, kind);
    return e == SHMREG_ERR_NOT_FOUND ? SHMREG_OK : e; /* absent: success, as in Triton */
}
