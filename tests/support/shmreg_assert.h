/* The one assertion header of the tests (cmocka): a libshmreg call's code and
 * the message it left, compared by name so that a failure reads well, and the
 * small helpers those assertions need. Needs no CUDA and no fixture. */
#ifndef SHMREG_TESTS_SHMREG_ASSERT_H
#define SHMREG_TESTS_SHMREG_ASSERT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "shmreg/shmreg.h"

/* printf into one of a few rotating static buffers: expected messages. */
const char *ut_fmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Whether s starts with prefix (ends with suffix); prints both when not. */
bool ut_starts_with(const char *s, const char *prefix);
bool ut_ends_with(const char *s, const char *suffix);

/* Leave a known message as this thread's last error (a lookup of a name no
 * test registers), so a later check can tell that a call set its own. */
void ut_mark_error(void);
bool ut_error_is_new(void);

/* The call must succeed; on failure print its code and message. */
#define assert_ok(expr)                                                                      \
    do {                                                                                     \
        shmreg_err ut_e_ = (expr);                                                           \
        if (ut_e_ != SHMREG_OK)                                                              \
            print_error("%s: %s\n", shmreg_err_name(ut_e_), shmreg_last_error());            \
        assert_string_equal(shmreg_err_name(ut_e_), "SHMREG_OK");                            \
    } while (0)

/* The call must fail with `code` and leave exactly `msg` as this thread's
 * message. */
#define assert_fails(expr, code, msg)                                                        \
    do {                                                                                     \
        shmreg_err ut_e_ = (expr);                                                           \
        assert_string_equal(shmreg_err_name(ut_e_), shmreg_err_name(code));                  \
        assert_string_equal(shmreg_last_error(), (msg));                                     \
    } while (0)

/* As assert_fails, for messages whose tail is not fixed (errno text...). */
#define assert_fails_prefix(expr, code, prefix)                                              \
    do {                                                                                     \
        shmreg_err ut_e_ = (expr);                                                           \
        assert_string_equal(shmreg_err_name(ut_e_), shmreg_err_name(code));                  \
        assert_true(ut_starts_with(shmreg_last_error(), (prefix)));                          \
    } while (0)

/* The call must fail with `code` and leave a message containing `part` (the
 * rest names a CUDA error or an errno text that varies by machine). */
#define assert_fails_containing(expr, code, part)                                            \
    do {                                                                                     \
        shmreg_err ut_e_ = (expr);                                                           \
        if (ut_e_ != (code))                                                                 \
            print_error("%s: %s\n", shmreg_err_name(ut_e_), shmreg_last_error());            \
        assert_string_equal(shmreg_err_name(ut_e_), shmreg_err_name(code));                  \
        if (strstr(shmreg_last_error(), (part)) == NULL)                                     \
            fail_msg("message '%s' lacks '%s'", shmreg_last_error(), (part));                \
    } while (0)

/* The call must fail with `code`; its message is not fixed by the spec, but
 * the call must have set one of its own. */
#define assert_fails_code(expr, code)                                                        \
    do {                                                                                     \
        ut_mark_error();                                                                     \
        shmreg_err ut_e_ = (expr);                                                           \
        assert_string_equal(shmreg_err_name(ut_e_), shmreg_err_name(code));                  \
        assert_true(ut_error_is_new());                                                      \
    } while (0)

#endif
