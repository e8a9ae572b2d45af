/* Failure injection over the library's operating-system seam (src/base/sys.h).
 *
 * A test built against the static copy of the library installs counting
 * wrappers in `shmreg__sys`, arms "fail the N-th call with errno E", runs one
 * public operation and reads back which call, if any, was failed. Only calls
 * made by the arming thread are counted, so liburcu's worker thread (which
 * frees regions after a grace period) never consumes the injected failure.
 *
 * How each injected failure behaves, as the real call would:
 *  - shm_open, fstat, mmap, fcntl, lseek, malloc, calloc: nothing is done; the
 *    call returns its failure value with errno set.
 *  - pin: counted only while fake_pinning.h's pinning is installed (which
 *    asks fi_fails_now); nothing is pinned, and it fails as a CUDA pin does.
 *  - munmap: nothing is unmapped (the mapping stays, as after a real EINVAL);
 *    the shot records addr and length so that the test can unmap it itself.
 *  - close: the descriptor IS closed, then -1 is returned: on Linux a close
 *    that reports EINTR or EIO has still released the descriptor.
 *  - free never fails and is never counted. */
#ifndef SHMREG_TESTS_FAULTINJECT_H
#define SHMREG_TESTS_FAULTINJECT_H

#include <stdbool.h>
#include <stddef.h>

enum fi_call {
    FI_SHM_OPEN,
    FI_FSTAT,
    FI_MMAP,
    FI_MUNMAP,
    FI_CLOSE,
    FI_MALLOC,
    FI_CALLOC,
    FI_FCNTL,
    FI_LSEEK,
    FI_PIN,
    FI_NCALLS
};

/* "shm_open", "mmap", ... */
const char *fi_call_name(enum fi_call call);

/* Put the counting wrappers into the seam (idempotent); fi_remove restores
 * libc. Unarmed wrappers only delegate and keep the allocation balance. */
void fi_install(void);
void fi_remove(void);

/* Fail the n-th (1-based) failable call this thread makes from now on, with
 * errno set to errnum. */
void fi_arm(unsigned n, int errnum);

/* For a seam outside src/base/sys.h (fake_pinning.c): count one failable call
 * of `call`; true when it is the one to fail (errno set to the armed one). */
bool fi_fails_now(enum fi_call call);

/* What the armed injection did; fi_disarm returns it and stops counting. */
struct fi_shot {
    bool fired;
    enum fi_call call;  /* valid when fired */
    int errnum;
    void *addr;         /* munmap: the range left mapped */
    size_t len;
    unsigned calls;     /* failable calls counted while armed */
};
struct fi_shot fi_disarm(void);

/* The same for the calls of the threads named `thread_name` (e.g. the
 * library's "shmreg-reclaim"), armed and disarmed from any thread. */
void fi_arm_thread(const char *thread_name, unsigned n, int errnum);
struct fi_shot fi_disarm_thread(void);

/* Allocations made through the seam and not yet freed, by any thread. */
long fi_live_allocations(void);

/* While held, munmap calls of the threads named thread_name wait (a
 * reclaim thread held up mid-teardown); release with held false. */
void fi_hold_munmap(const char *thread_name, bool held);

#endif
