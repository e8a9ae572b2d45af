/* Guarded copies: memcpy from or into a region's view that turns a SIGBUS
 * of a truncated object into SHMREG_ERR_FAULT instead of killing the process.
 *
 * How: shmreg_guard_install puts one SIGBUS handler in place (opt-in, once).
 * A guarded copy publishes, in a thread-specific pointer, a frame holding the
 * address range of the region's mapping and a sigjmp_buf. The handler
 * jumps back to the copy only when the faulting thread has a frame and the
 * fault address (si_addr) lies inside that frame's range; any other SIGBUS,
 * in this thread or another, goes to the handler that was installed before,
 * so the host program's own handling is unchanged.
 *
 * The common case costs no system call: sigsetjmp does not save the signal
 * mask (savemask 0); only the rare fault path unblocks SIGBUS, which the
 * kernel blocked for the handler we jumped out of. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "base/err.h"
#include "core/region.h"

struct guard_frame {
    const char *lo, *hi;           /* the region's whole mapping */
    const char *volatile fault_at; /* set by the handler */
    sigjmp_buf jump;
};

/* The frame of the calling thread's guarded copy, or NULL. A pthread key,
 * not a _Thread_local: the handler reads it in whichever thread takes a
 * SIGBUS, and a first access to dynamic TLS in a thread may allocate, which
 * a handler must not do; pthread_getspecific only reads (glibc: the thread
 * descriptor's key slots, never allocating). Initial-exec TLS would avoid
 * that too, but would put libshmreg's whole TLS block (the 4 KiB error
 * message of err.c) in static TLS, which a dlopen of the library cannot get
 * (the consumer tier's dlopen check). */
static pthread_key_t current_key;

static struct sigaction previous; /* written once, before the handler is installed */
static atomic_bool installed;
static pthread_mutex_t install_lock = PTHREAD_MUTEX_INITIALIZER;

/* A SIGBUS that is not ours: do what the previous disposition would have. */
static void chain(int sig, siginfo_t *info, void *ctx)
{
    if (previous.sa_flags & SA_SIGINFO) {
        previous.sa_sigaction(sig, info, ctx);
        return;
    }
    if (previous.sa_handler == SIG_IGN && info && info->si_code <= 0)
        return; /* sent with kill(): ignored, as before */
    if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
        previous.sa_handler(sig);
        return;
    }
    /* SIG_DFL (or an ignored fault, which the kernel would not ignore): end
     * the process as SIGBUS does. The signal stays pending while this
     * handler runs and is delivered, with the default action, on return. */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    raise(sig);
}

static void on_sigbus(int sig, siginfo_t *info, void *ctx)
{
    struct guard_frame *f = atomic_load_explicit(&installed, memory_order_acquire) ?
                                pthread_getspecific(current_key) : NULL;
    const char *addr = info ? (const char *)info->si_addr : NULL;
    if (f && addr && addr >= f->lo && addr < f->hi) {
        pthread_setspecific(current_key, NULL);
        f->fault_at = addr;
        siglongjmp(f->jump, 1);
    }
    chain(sig, info, ctx);
}

shmreg_err shmreg_guard_install(void)
{
    shmreg_err err = SHMREG_OK;
    pthread_mutex_lock(&install_lock);
    if (!atomic_load_explicit(&installed, memory_order_relaxed)) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_sigbus;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
        sigemptyset(&sa.sa_mask);
        /* Read the previous disposition first, so that it is in place before
         * our handler can run in any thread. */
        int rc = pthread_key_create(&current_key, NULL);
        if (rc != 0)
            err = shmreg__fail_errno(SHMREG_ERR_SYSTEM, rc, "shmreg_guard_install: pthread_key_create");
        else if (sigaction(SIGBUS, NULL, &previous) != 0 || sigaction(SIGBUS, &sa, NULL) != 0) {
            err = shmreg__fail_errno(SHMREG_ERR_SYSTEM, errno, "shmreg_guard_install: sigaction(SIGBUS)");
            pthread_key_delete(current_key);
        } else {
            atomic_store_explicit(&installed, true, memory_order_release);
        }
    }
    pthread_mutex_unlock(&install_lock);
    return err;
}

/* The copy's span inside the view, and a writable view for to_view: what
 * every kind of view checks, once it is known to be ref's. */
static shmreg_err check_span(struct shmreg_region *ref, const shmreg_view *view, size_t offset, size_t n,
                             bool to_view, const char *verb)
{
    if (offset > view->byte_size || n > view->byte_size - offset)
        return shmreg__fail(SHMREG_ERR_OUT_OF_BOUNDS,
                            "%s: offset %zu + %zu bytes is past the end of the %zu-byte view of region '%s'", verb,
                            offset, n, view->byte_size, ref->name);
    if (to_view && (!view->writable || (ref->flags & SHMREG_READONLY)))
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "%s: region '%s' is registered read-only", verb, ref->name);
    return SHMREG_OK;
}

/* The checks both directions share: a SYSTEM view of ref, the window inside
 * it, the guard installed. */
static shmreg_err check_copy(struct shmreg_region *ref, const shmreg_view *view, size_t offset, size_t n,
                             const void *buf, bool to_view)
{
    const char *verb = to_view ? "shmreg_copy_to_view" : "shmreg_copy_from_view";
    if (!ref || !view || (!buf && n > 0))
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "%s: %s is NULL", verb,
                            !ref ? "ref" : !view ? "view" : to_view ? "src" : "dst");
    if (view->kind != SHMREG_KIND_SYSTEM || shmreg__region_kind(ref) != SHMREG_KIND_SYSTEM)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "%s: region '%s' is not host memory (copy CUDA views with "
                            "cudaMemcpy)", verb, ref->name);
    const char *lo = ref->win.addr, *v = view->addr;
    if (v < lo || view->byte_size > ref->win.byte_size || (size_t)(v - lo) > ref->win.byte_size - view->byte_size)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "%s: the view is not one of region '%s'", verb, ref->name);
    shmreg_err err = check_span(ref, view, offset, n, to_view, verb);
    if (err != SHMREG_OK)
        return err;
    if (!atomic_load_explicit(&installed, memory_order_acquire))
        return shmreg__fail(SHMREG_ERR_UNSUPPORTED,
                            "%s: region '%s': call shmreg_guard_install once before guarded copies", verb,
                            ref->name);
    return SHMREG_OK;
}

static shmreg_err guarded_memcpy(struct shmreg_region *ref, void *dst, const void *src, size_t n)
{
    struct guard_frame frame;
    /* The whole mapping the window lies in (its pages fault, not only the
     * window's bytes): fixed when it was opened, and kept by ref's region. */
    frame.lo = ref->mapping->opened.base;
    frame.hi = (const char *)ref->mapping->opened.base + ref->mapping->opened.length;
    frame.fault_at = NULL;
    if (sigsetjmp(frame.jump, 0) != 0) {
        /* Back from the handler: the kernel blocked SIGBUS for it, and we
         * left it by a jump, so unblock it for this thread's next fault. */
        sigset_t bus;
        sigemptyset(&bus);
        sigaddset(&bus, SIGBUS);
        pthread_sigmask(SIG_UNBLOCK, &bus, NULL);
        size_t at = (size_t)(frame.fault_at - (const char *)ref->win.addr);
        return shmreg__fail(SHMREG_ERR_FAULT,
                            "shared memory region '%s': byte %zu of it is gone (its object was truncated under "
                            "the mapping); the copy was stopped",
                            ref->name, frame.fault_at >= (const char *)ref->win.addr ? at : 0);
    }
    /* The handler may run between any two instructions of this thread: the
     * fences keep the compiler from moving the copy out of the guarded span. */
    if (pthread_setspecific(current_key, &frame) != 0)
        return shmreg__fail(SHMREG_ERR_NO_MEMORY, "guarded copy of region '%s': no memory for this thread's "
                            "guard slot", ref->name);
    atomic_signal_fence(memory_order_seq_cst);
    memcpy(dst, src, n);
    atomic_signal_fence(memory_order_seq_cst);
    pthread_setspecific(current_key, NULL);
    return SHMREG_OK;
}

/* 1.2: a view of memory the server cannot dereference (a remote region):
 * the same checks, on region_offset instead of addr, then the backend's
 * copy. */
static shmreg_err backend_copy(struct shmreg_region *ref, const shmreg_view *view, size_t offset, void *buf,
                               size_t n, bool to_view)
{
    const char *verb = to_view ? "shmreg_copy_to_view" : "shmreg_copy_from_view";
    if (view->kind != shmreg__region_kind(ref) || view->addr != NULL)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "%s: the view is not one of region '%s'", verb, ref->name);
    size_t at = view->region_offset, size = ref->win.byte_size;
    if (at > size || view->byte_size > size - at)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "%s: the view is not one of region '%s'", verb, ref->name);
    shmreg_err err = check_span(ref, view, offset, n, to_view, verb);
    if (err != SHMREG_OK || n == 0)
        return err;
    return ref->win.backend->copy(&ref->mapping->opened, ref->name, at + offset, buf, n, to_view);
}

static bool moved_by_backend(struct shmreg_region *ref, const shmreg_view *view, const void *buf, size_t n)
{
    return ref && view && (buf || n == 0) && ref->win.backend->copy != NULL;
}

shmreg_err shmreg_copy_from_view(shmreg_region *ref, const shmreg_view *view, size_t offset, void *dst, size_t n)
{
    if (moved_by_backend(ref, view, dst, n))
        return backend_copy(ref, view, offset, dst, n, false);
    shmreg_err err = check_copy(ref, view, offset, n, dst, false);
    if (err != SHMREG_OK || n == 0)
        return err;
    return guarded_memcpy(ref, dst, (const char *)view->addr + offset, n);
}

shmreg_err shmreg_copy_to_view(shmreg_region *ref, const shmreg_view *view, size_t offset, const void *src,
                               size_t n)
{
    if (moved_by_backend(ref, view, src, n))
        return backend_copy(ref, view, offset, (void *)src, n, true);
    shmreg_err err = check_copy(ref, view, offset, n, src, true);
    if (err != SHMREG_OK || n == 0)
        return err;
    return guarded_memcpy(ref, (char *)view->addr + offset, src, n);
}
