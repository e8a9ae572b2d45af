#include "shmreg_assert.h"

#include <stdio.h>

#define UT_MARK_NAME "ut-no-such-region-marker"
#define UT_MARK_MESSAGE "Unable to find shared memory region: '" UT_MARK_NAME "'"

const char *ut_fmt(const char *fmt, ...)
{
    static char bufs[4][1024];
    static int next;
    char *buf = bufs[next++ % 4];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof bufs[0], fmt, ap);
    va_end(ap);
    return buf;
}

bool ut_starts_with(const char *s, const char *prefix)
{
    if (strncmp(s, prefix, strlen(prefix)) == 0)
        return true;
    print_error("message \"%s\"\n   does not start with \"%s\"\n", s, prefix);
    return false;
}

bool ut_ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    if (n >= m && strcmp(s + n - m, suffix) == 0)
        return true;
    print_error("message \"%s\"\n   does not end with \"%s\"\n", s, suffix);
    return false;
}

void ut_mark_error(void)
{
    shmreg_registry *reg = NULL;
    shmreg_region *ref = NULL;
    shmreg_view view;
    assert_ok(shmreg_registry_create(NULL, &reg));
    shmreg_err e = shmreg_acquire(reg, UT_MARK_NAME, 0, 0, &ref, &view);
    shmreg_registry_destroy(reg);
    assert_int_equal(e, SHMREG_ERR_NOT_FOUND);
    assert_string_equal(shmreg_last_error(), UT_MARK_MESSAGE);
}

bool ut_error_is_new(void)
{
    const char *msg = shmreg_last_error();
    if (msg[0] != '\0' && strcmp(msg, UT_MARK_MESSAGE) != 0)
        return true;
    print_error("the call left no message of its own (last error \"%s\")\n", msg);
    return false;
}
