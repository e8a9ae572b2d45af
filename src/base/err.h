/* Error reporting inside the library: every failing path sets the calling
 * thread's message and returns its code through shmreg__fail. */
#ifndef SHMREG_ERR_H
#define SHMREG_ERR_H

#include "shmreg/shmreg.h"

/* Record a message for this thread and return code, so failing paths read
 * `return shmreg__fail(SHMREG_ERR_X, "...", ...);`. */
shmreg_err shmreg__fail(shmreg_err code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* As shmreg__fail, appending ": <strerror(errnum)>" to the message. */
shmreg_err shmreg__fail_errno(shmreg_err code, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefix the thread's current message with "<text>: " (keeps the code the
 * caller already has): used where an inner failure needs outer context. */
void shmreg__error_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
