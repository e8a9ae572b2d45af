/* The UCX calls the library makes, reached through dlopen("libucp.so.0")
 * at the first remote call, never linked: libshmreg.so then loads where
 * UCX is not installed, and answers UNSUPPORTED there (as the CUDA driver
 * is reached through the runtime, never linked). Built only with
 * SHMREG_WITH_UCX; the types come from Debian's libucx-dev headers. */
#ifndef SHMREG_UCX_CALLS_H
#define SHMREG_UCX_CALLS_H

#include <ucp/api/ucp.h>

#include "shmreg/shmreg.h"

struct shmreg__ucx {
    ucs_status_t (*config_read)(const char *, const char *, ucp_config_t **);
    void (*config_release)(ucp_config_t *);
    ucs_status_t (*init_version)(unsigned, unsigned, const ucp_params_t *, const ucp_config_t *,
                                 ucp_context_h *);
    void (*cleanup)(ucp_context_h);
    ucs_status_t (*worker_create)(ucp_context_h, const ucp_worker_params_t *, ucp_worker_h *);
    void (*worker_destroy)(ucp_worker_h);
    ucs_status_t (*worker_get_address)(ucp_worker_h, ucp_address_t **, size_t *);
    void (*worker_release_address)(ucp_worker_h, ucp_address_t *);
    unsigned (*worker_progress)(ucp_worker_h);
    ucs_status_t (*worker_get_efd)(ucp_worker_h, int *);
    ucs_status_t (*worker_arm)(ucp_worker_h);
    ucs_status_t (*worker_signal)(ucp_worker_h);
    ucs_status_t (*ep_create)(ucp_worker_h, const ucp_ep_params_t *, ucp_ep_h *);
    ucs_status_ptr_t (*ep_close_nbx)(ucp_ep_h, const ucp_request_param_t *);
    ucs_status_ptr_t (*ep_flush_nbx)(ucp_ep_h, const ucp_request_param_t *);
    ucs_status_t (*ep_rkey_unpack)(ucp_ep_h, const void *, ucp_rkey_h *);
    void (*rkey_destroy)(ucp_rkey_h);
    ucs_status_t (*rkey_pack)(ucp_context_h, ucp_mem_h, void **, size_t *);
    void (*rkey_buffer_release)(void *);
    ucs_status_t (*mem_map)(ucp_context_h, const ucp_mem_map_params_t *, ucp_mem_h *);
    ucs_status_t (*mem_unmap)(ucp_context_h, ucp_mem_h);
    ucs_status_t (*mem_query)(const ucp_mem_h, ucp_mem_attr_t *);
    ucs_status_ptr_t (*get_nbx)(ucp_ep_h, void *, size_t, uint64_t, ucp_rkey_h, const ucp_request_param_t *);
    ucs_status_ptr_t (*put_nbx)(ucp_ep_h, const void *, size_t, uint64_t, ucp_rkey_h,
                                const ucp_request_param_t *);
    ucs_status_t (*request_check_status)(void *);
    void (*request_free)(void *);
    const char *(*status_string)(ucs_status_t);
};

/* Load UCX once (thread-safe); later calls return the first answer. OK and
 * *out the table, or UNSUPPORTED with the reason (libucp.so.0 missing, a
 * symbol missing) as this thread's message. */
shmreg_err shmreg__ucx_load(const struct shmreg__ucx **out);

/* shmreg__fail with ": <UCX status string>" appended. */
shmreg_err shmreg__ucx_fail(shmreg_err code, ucs_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
