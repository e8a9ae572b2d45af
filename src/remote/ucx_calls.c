/* UCX through dlopen (ucx_calls.h). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/err.h"
#include "remote/ucx_calls.h"

static struct shmreg__ucx ucx;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static shmreg_err load_status = SHMREG_ERR_UNSUPPORTED;
static char load_reason[512];

#define SHMREG_UCX_SYM_(field, symbol) {(void **)&ucx.field, #symbol}

/* ---- UCX's log, bounded
 *
 * UCX logs what peers make it see (an active message of an unknown id is
 * two warnings, a hex dump of the peer's bytes and a backtrace), and any
 * host that reaches a listener can send those at will: written through,
 * they fill the disk and forge lines. So at most one line a second passes,
 * cut at its first line break, with the count of those held back. */
#define SHMREG__UCX_LOG_GAP_NS 1000000000ull

static _Atomic uint64_t log_next_ns; /* when the next line may pass */
static atomic_ulong log_held;        /* lines held back since the last one */

static uint64_t log_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static ucs_log_func_rc_t log_bounded(const char *file, unsigned line, const char *function, ucs_log_level_t level,
                                     const ucs_log_component_config_t *comp, const char *format, va_list ap)
    __attribute__((format(printf, 6, 0)));

static ucs_log_func_rc_t log_bounded(const char *file, unsigned line, const char *function, ucs_log_level_t level,
                                     const ucs_log_component_config_t *comp, const char *format, va_list ap)
{
    (void)function;
    (void)comp;
    uint64_t now = log_now_ns();
    /* Relaxed: only which thread's line passes depends on it. */
    uint64_t next = atomic_load_explicit(&log_next_ns, memory_order_relaxed);
    if (now < next || !atomic_compare_exchange_strong_explicit(&log_next_ns, &next, now + SHMREG__UCX_LOG_GAP_NS,
                                                               memory_order_relaxed, memory_order_relaxed)) {
        atomic_fetch_add_explicit(&log_held, 1, memory_order_relaxed);
        return UCS_LOG_FUNC_RC_STOP;
    }
    char msg[240];
    vsnprintf(msg, sizeof msg, format, ap);
    msg[strcspn(msg, "\r\n")] = '\0'; /* what follows a break is a dump or a backtrace */
    for (char *c = msg; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = '?';
    static const char *const levels[] = {"FATAL", "ERROR", "WARN", "DIAG", "INFO"};
    const char *base = file ? strrchr(file, '/') : NULL;
    unsigned long held = atomic_exchange_explicit(&log_held, 0, memory_order_relaxed);
    fprintf(stderr, "shmreg: UCX %s %s:%u: %s", (unsigned)level < 5 ? levels[level] : "DEBUG",
            base ? base + 1 : file ? file : "?", line, msg);
    if (held)
        fprintf(stderr, " (%lu line%s of UCX's log held back before this one)", held, held == 1 ? "" : "s");
    fputc('\n', stderr);
    return UCS_LOG_FUNC_RC_STOP;
}

/* libucs is libucp's dependency: its symbols are found through h. A UCX
 * without the call logs as it always did. */
static void log_bound(void *h)
{
    void (*push)(ucs_log_func_t) = (void (*)(ucs_log_func_t))dlsym(h, "ucs_log_push_handler");
    if (push)
        push(log_bounded); /* for the life of the process, as UCX itself */
}

static void load(void)
{
    /* UCX installs handlers for SIGSEGV and SIGBUS by default, which would
     * take the faults guarded copies handle; leave it none unless the
     * process says otherwise. Once, before UCX reads its settings. */
    setenv("UCX_ERROR_SIGNALS", "", 0);
    void *h = dlopen("libucp.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(load_reason, sizeof load_reason, "UCX is not installed on this machine (dlopen libucp.so.0: %s)",
                 dlerror());
        return;
    }
    const struct {
        void **slot;
        const char *name;
    } syms[] = {
        SHMREG_UCX_SYM_(config_read, ucp_config_read),
        SHMREG_UCX_SYM_(config_release, ucp_config_release),
        SHMREG_UCX_SYM_(init_version, ucp_init_version),
        SHMREG_UCX_SYM_(cleanup, ucp_cleanup),
        SHMREG_UCX_SYM_(worker_create, ucp_worker_create),
        SHMREG_UCX_SYM_(worker_destroy, ucp_worker_destroy),
        SHMREG_UCX_SYM_(worker_progress, ucp_worker_progress),
        SHMREG_UCX_SYM_(worker_get_efd, ucp_worker_get_efd),
        SHMREG_UCX_SYM_(worker_arm, ucp_worker_arm),
        SHMREG_UCX_SYM_(worker_signal, ucp_worker_signal),
        SHMREG_UCX_SYM_(ep_create, ucp_ep_create),
        SHMREG_UCX_SYM_(ep_close_nbx, ucp_ep_close_nbx),
        SHMREG_UCX_SYM_(ep_print_info, ucp_ep_print_info),
        SHMREG_UCX_SYM_(config_modify, ucp_config_modify),
        SHMREG_UCX_SYM_(am_send_nbx, ucp_am_send_nbx),
        SHMREG_UCX_SYM_(am_recv_data_nbx, ucp_am_recv_data_nbx),
        SHMREG_UCX_SYM_(worker_set_am_recv_handler, ucp_worker_set_am_recv_handler),
        SHMREG_UCX_SYM_(listener_create, ucp_listener_create),
        SHMREG_UCX_SYM_(listener_destroy, ucp_listener_destroy),
        SHMREG_UCX_SYM_(listener_query, ucp_listener_query),
        SHMREG_UCX_SYM_(listener_reject, ucp_listener_reject),
        SHMREG_UCX_SYM_(request_check_status, ucp_request_check_status),
        SHMREG_UCX_SYM_(request_free, ucp_request_free),
        SHMREG_UCX_SYM_(status_string, ucs_status_string),
        SHMREG_UCX_SYM_(conn_request_query, ucp_conn_request_query),
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        if (!(*syms[i].slot = dlsym(h, syms[i].name))) {
            snprintf(load_reason, sizeof load_reason, "the UCX found (libucp.so.0) lacks %s: not a UCX >= 1.10",
                     syms[i].name);
            dlclose(h);
            return;
        }
    }
    log_bound(h);
    /* Kept loaded for the life of the process: the workers live as long. */
    load_status = SHMREG_OK;
}

shmreg_err shmreg__ucx_load(const struct shmreg__ucx **out)
{
    pthread_once(&once, load);
    if (load_status != SHMREG_OK)
        return shmreg__fail(load_status, "remote regions are unavailable: %s", load_reason);
    *out = &ucx;
    return SHMREG_OK;
}

shmreg_err shmreg__ucx_fail(shmreg_err code, ucs_status_t status, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return shmreg__fail(code, "%s: %s", msg, ucx.status_string ? ucx.status_string(status) : "UCX error");
}
