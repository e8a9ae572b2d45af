/* Error codes, their names, and the per-thread message of the last failure. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/err.h"

/* Large enough for the longest message the library builds: unregister_all
 * lists busy names, which it truncates to fit (see registry.c). */
#define SHMREG_MSG_MAX 4096

static _Thread_local char last_msg[SHMREG_MSG_MAX];

const char *shmreg_err_name(shmreg_err err)
{
    switch (err) {
#define SHMREG_ERR_NAME_(name, value, desc) \
    case SHMREG_##name:                     \
        return "SHMREG_" #name;
        SHMREG_ERR_MAP(SHMREG_ERR_NAME_)
#undef SHMREG_ERR_NAME_
    }
    return "SHMREG_ERR_UNKNOWN";
}

const char *shmreg_err_description(shmreg_err err)
{
    switch (err) {
#define SHMREG_ERR_DESC_(name, value, desc) \
    case SHMREG_##name:                     \
        return desc;
        SHMREG_ERR_MAP(SHMREG_ERR_DESC_)
#undef SHMREG_ERR_DESC_
    }
    return "unknown error code";
}

const char *shmreg_last_error(void)
{
    return last_msg;
}

__attribute__((format(printf, 1, 0))) static void set_msg(const char *fmt, va_list ap)
{
    vsnprintf(last_msg, sizeof last_msg, fmt, ap);
}

shmreg_err shmreg__fail(shmreg_err code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_msg(fmt, ap);
    va_end(ap);
    return code;
}

shmreg_err shmreg__fail_errno(shmreg_err code, int errnum, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_msg(fmt, ap);
    va_end(ap);
    size_t len = strlen(last_msg);
    char buf[256];
    /* GNU strerror_r may return a static string instead of filling buf. */
    const char *text = strerror_r(errnum, buf, sizeof buf);
    snprintf(last_msg + len, sizeof last_msg - len, ": %s", text);
    return code;
}

void shmreg__error_prefix(const char *fmt, ...)
{
    char old[SHMREG_MSG_MAX];
    memcpy(old, last_msg, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    set_msg(fmt, ap);
    va_end(ap);
    size_t len = strlen(last_msg);
    snprintf(last_msg + len, sizeof last_msg - len, ": %s", old);
}
