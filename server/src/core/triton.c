/* Triton's answers for every adapter (triton.h). */
#include "core/triton.h"

#include <stdio.h>
#include <string.h>

#include "common/utf8.h"
#include "core/remote_engine.h"

void unknown_model_message(char *buf, size_t len, const char *name, const char *version)
{
    int versioned = version != NULL;
    snprintf(buf, len, "Request for unknown model: '%s'%s%s is not found", name,
             versioned ? " version " : "", versioned ? version : "");
}

void server_get_metadata(server_metadata *out)
{
    /* Listed whatever --allow-client-shm says, as Triton lists its two
     * shared-memory extensions: their status endpoints answer either way.
     * remote_memory only while its engine runs: a client that reads the
     * list need not connect to learn that it cannot (remote_engine.h). */
    *out = (server_metadata){.name = "shmreg-server", .version = shmreg_version(),
                             .extensions = {"binary_tensor_data", "statistics",
                                            "system_shared_memory", "cuda_shared_memory"},
                             .n_extensions = 4};
    if (remote_engine_get(NULL))
        out->extensions[out->n_extensions++] = "remote_memory";
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
