/* The UCX calls the library makes, reached through dlopen("libucp.so.0")
 * at the first remote call, never linked: libshmreg.so then loads where
 * UCX is not installed, and answers UNSUPPORTED there (as the CUDA driver
 * is reached through the runtime, never linked). Built only with
 * SHMREG_WITH_UCX; the types come from Debian's libucx-dev headers. */
#ifndef SHMREG_UCX_CALLS_H
#define SHMREG_UCX_CALLS_H

#include <stdio.h>
#include <ucp/api/ucp.h>
#include <ucs/debug/log_def.h>

#include "shmreg/shmreg.h"

struct shmreg__ucx {
    ucs_status_t (*config_read)(const char *, const char *, ucp_config_t **);
    void (*config_release)(ucp_config_t *);
    ucs_status_t (*init_version)(unsigned, unsigned, const ucp_params_t *, const ucp_config_t *,
                                 ucp_context_h *);
    void (*cleanup)(ucp_context_h);
    ucs_status_t (*worker_create)(ucp_context_h, const ucp_worker_params_t *, ucp_worker_h *);
    void (*worker_destroy)(ucp_worker_h);
    unsigned (*worker_progress)(ucp_worker_h);
    ucs_status_t (*worker_get_efd)(ucp_worker_h, int *);
    ucs_status_t (*worker_arm)(ucp_worker_h);
    ucs_status_t (*worker_signal)(ucp_worker_h);
    ucs_status_t (*ep_create)(ucp_worker_h, const ucp_ep_params_t *, ucp_ep_h *);
    ucs_status_ptr_t (*ep_close_nbx)(ucp_ep_h, const ucp_request_param_t *);
    void (*ep_print_info)(ucp_ep_h, FILE *);
    ucs_status_t (*config_modify)(ucp_config_t *, const char *, const char *);
    ucs_status_ptr_t (*am_send_nbx)(ucp_ep_h, unsigned, const void *, size_t, const void *, size_t,
                                    const ucp_request_param_t *);
    ucs_status_ptr_t (*am_recv_data_nbx)(ucp_worker_h, void *, void *, size_t, const ucp_request_param_t *);
    ucs_status_t (*worker_set_am_recv_handler)(ucp_worker_h, const ucp_am_handler_param_t *);
    ucs_status_t (*listener_create)(ucp_worker_h, const ucp_listener_params_t *, ucp_listener_h *);
    void (*listener_destroy)(ucp_listener_h);
    ucs_status_t (*listener_query)(ucp_listener_h, ucp_listener_attr_t *);
    ucs_status_t (*listener_reject)(ucp_listener_h, ucp_conn_request_h);
    ucs_status_t (*request_check_status)(void *);
    void (*request_free)(void *);
    const char *(*status_string)(ucs_status_t);
    ucs_status_t (*conn_request_query)(ucp_conn_request_h, ucp_conn_request_attr_t *);
};

/* Load UCX once (thread-safe); later calls return the first answer. OK and
 * *out the table, or UNSUPPORTED with the reason (libucp.so.0 missing, a
 * symbol missing) as this thread's message. */
shmreg_err shmreg__ucx_load(const struct shmreg__ucx **out);

/* shmreg__fail with ": <UCX status string>" appended. */
shmreg_err shmreg__ucx_fail(shmreg_err code, ucs_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
