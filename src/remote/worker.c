/* A UCX context, worker and progress thread (remote/worker.h). */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/err.h"
#include "remote/worker.h"

uint64_t shmreg__ucx_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* How long the progress thread spins after the last event before it sleeps. */
#define SHMREG__UCX_SPIN_NS 200000u

static void *progress_main(void *arg)
{
    struct shmreg__ucx_worker *w = arg;
    const struct shmreg__ucx *u = w->ucx;
    /* Relaxed: stop only ends the loop; stop()'s join orders the rest. */
    uint64_t last_event = 0;
    while (!atomic_load_explicit(&w->stop, memory_order_relaxed)) {
        if (atomic_load_explicit(&w->waiters, memory_order_relaxed)) {
            /* A caller progresses the worker now: a short nap, not a spin. */
            struct timespec nap = {0, 100000};
            nanosleep(&nap, NULL);
            continue;
        }
        if (u->worker_progress(w->worker) > 0) {
            last_event = shmreg__ucx_now_ns();
            continue;
        }
        /* Busy a moment after an event: a transfer (a tcp get served in
         * fragments) comes in bursts, and a sleep between two fragments
         * costs a wake-up each. */
        if (w->spin_after_event && shmreg__ucx_now_ns() - last_event < SHMREG__UCX_SPIN_NS)
            continue;
        if (w->efd < 0) {
            struct timespec ms = {0, 1000000};
            nanosleep(&ms, NULL);
            continue;
        }
        /* Arm, then sleep until an event or a signal from stop(); BUSY: an
         * event came in between, progress again. The timeout is a backstop
         * for transports whose events do not all reach the descriptor. */
        if (u->worker_arm(w->worker) == UCS_ERR_BUSY)
            continue;
        struct pollfd p = {.fd = w->efd, .events = POLLIN};
        (void)poll(&p, 1, 100);
    }
    return NULL;
}

/* UCX's settings that open only the transports p allows, on top of what
 * UCX read from the environment: its UCX_TLS never chooses. */
static shmreg_err configure_transports(const struct shmreg__ucx *u, ucp_config_t *config,
                                       const struct shmreg__ucx_worker_params *p, const char *tls)
{
    const struct shmreg__remote_transports *t = p->transports;
    bool tcp = strstr(tls, "tcp") != NULL; /* only with a tcp_device (the check) */
    char devices[512] = "";
    if (tcp)
        shmreg__remote_net_devices(t, getenv("UCX_NET_DEVICES"), devices, sizeof devices);
    const struct {
        const char *key, *value;
        bool apply;
    } settings[] = {
        {"TLS", tls, true},
        /* tcp listens on every device UCX may use: the trusted one only. */
        {"NET_DEVICES", devices, tcp},
        /* UCX_TCP_PORT_RANGE and UCX_TCP_CM_REUSEADDR: UCX applies a key
         * it does not know to its transports' settings, which it names
         * without the transport's prefix. */
        {"PORT_RANGE", t->tcp_ports, t->tcp_ports != NULL},
        {"CM_REUSEADDR", "y", p->reuse_address},
    };
    for (size_t i = 0; i < sizeof settings / sizeof settings[0]; i++) {
        if (!settings[i].apply)
            continue;
        ucs_status_t st = u->config_modify(config, settings[i].key, settings[i].value);
        if (st != UCS_OK)
            return shmreg__ucx_fail(SHMREG_ERR_SYSTEM, st, "%s: UCX refused its setting %s=%s", p->what,
                                    settings[i].key, settings[i].value);
    }
    return SHMREG_OK;
}

/* Active messages only: a context with UCP_FEATURE_RMA would have its
 * worker serve the software-emulated gets and puts of any peer that
 * connects (tcp, shared-memory active messages), at any address, with no
 * check of ours in the way; and since UCX serves them on those transports
 * even without it, the transports themselves are chosen here too. */
static shmreg_err create_context(struct shmreg__ucx_worker *w, const struct shmreg__ucx_worker_params *p,
                                 bool wakeup)
{
    const struct shmreg__ucx *u = w->ucx;
    char tls[256];
    shmreg__remote_tls(p->transports, tls, sizeof tls);
    if (!tls[0])
        return shmreg__remote_no_device(p->transports, p->what, "no RDMA device");
    ucp_config_t *config;
    ucs_status_t st = u->config_read(NULL, NULL, &config);
    if (st != UCS_OK)
        return shmreg__ucx_fail(SHMREG_ERR_SYSTEM, st, "%s: ucp_config_read", p->what);
    shmreg_err err = configure_transports(u, config, p, tls);
    if (err != SHMREG_OK) {
        u->config_release(config);
        return err;
    }
    ucp_params_t params = {
        .field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED,
        .features = UCP_FEATURE_AM | (wakeup ? UCP_FEATURE_WAKEUP : 0),
        .mt_workers_shared = 1,
    };
    st = u->init_version(UCP_API_MAJOR, UCP_API_MINOR, &params, config, &w->context);
    u->config_release(config);
    if (st == UCS_ERR_NO_DEVICE)
        return shmreg__remote_no_device(p->transports, p->what, u->status_string(st));
    if (st != UCS_OK)
        return shmreg__ucx_fail(SHMREG_ERR_SYSTEM, st, "%s: ucp_init", p->what);
    return SHMREG_OK;
}

shmreg_err shmreg__ucx_worker_start(struct shmreg__ucx_worker *w, const struct shmreg__ucx_worker_params *p)
{
    const char *what = p->what;
    memset(w, 0, sizeof *w);
    w->spin_after_event = p->serves_peers;
    w->efd = -1;
    shmreg_err err = shmreg__ucx_load(&w->ucx);
    if (err != SHMREG_OK)
        return err;
    const struct shmreg__ucx *u = w->ucx;
    /* Wakeup where the transports support it; without, the thread polls. */
    bool wakeup = true;
    if ((err = create_context(w, p, true)) != SHMREG_OK) {
        if (err == SHMREG_ERR_UNSUPPORTED || err == SHMREG_ERR_INVALID_ARG)
            return err; /* no device: without wakeup there is none either */
        wakeup = false;
        if ((err = create_context(w, p, false)) != SHMREG_OK)
            return err;
    }
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_MULTI};
    ucs_status_t st = u->worker_create(w->context, &wp, &w->worker);
    if (st != UCS_OK) {
        u->cleanup(w->context);
        return shmreg__ucx_fail(SHMREG_ERR_SYSTEM, st, "%s: ucp_worker_create", what);
    }
    if (wakeup && u->worker_get_efd(w->worker, &w->efd) != UCS_OK)
        w->efd = -1;
    ucp_am_handler_param_t am = {
        .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                      UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS,
        .id = p->am_id,
        .flags = UCP_AM_FLAG_WHOLE_MSG,
        .cb = p->am_cb,
        .arg = p->am_arg,
    };
    if ((st = u->worker_set_am_recv_handler(w->worker, &am)) != UCS_OK) {
        u->worker_destroy(w->worker);
        u->cleanup(w->context);
        return shmreg__ucx_fail(SHMREG_ERR_SYSTEM, st, "%s: ucp_worker_set_am_recv_handler", what);
    }
    int rc = pthread_create(&w->thread, NULL, progress_main, w);
    if (rc != 0) {
        u->worker_destroy(w->worker);
        u->cleanup(w->context);
        return shmreg__fail_errno(SHMREG_ERR_SYSTEM, rc, "%s: starting the UCX progress thread", what);
    }
    pthread_setname_np(w->thread, p->thread_name);
    return SHMREG_OK;
}

void shmreg__ucx_worker_stop(struct shmreg__ucx_worker *w)
{
    atomic_store_explicit(&w->stop, true, memory_order_relaxed);
    if (w->efd >= 0)
        w->ucx->worker_signal(w->worker);
    pthread_join(w->thread, NULL);
    w->ucx->worker_destroy(w->worker);
    w->ucx->cleanup(w->context);
}

ucs_status_t shmreg__ucx_wait(struct shmreg__ucx_worker *w, ucs_status_ptr_t request, uint64_t deadline_ns)
{
    const struct shmreg__ucx *u = w->ucx;
    if (request == NULL)
        return UCS_OK;
    if (UCS_PTR_IS_ERR(request))
        return UCS_PTR_STATUS(request);
    for (unsigned spin = 0;; spin++) {
        ucs_status_t st = u->request_check_status(request);
        if (st != UCS_INPROGRESS) {
            u->request_free(request);
            return st;
        }
        if (u->worker_progress(w->worker) == 0 && (spin & 255) == 0 && shmreg__ucx_now_ns() > deadline_ns)
            return UCS_ERR_TIMED_OUT;
    }
}
