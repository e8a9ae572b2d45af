/* Assertions on a libshmreg call's code and message, for the tests in
 * tests/gpu (cmocka; no CUDA needed). */
#ifndef SHMREG_TESTS_GPU_SHMREG_ASSERT_H
#define SHMREG_TESTS_GPU_SHMREG_ASSERT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "shmreg/shmreg.h"

/* The call must succeed; on failure print its code and message. */
#define gt_assert_ok(expr)                                                                   \
    do {                                                                                     \
        shmreg_err gt_e_ = (expr);                                                           \
        if (gt_e_ != SHMREG_OK)                                                              \
            print_error("%s: %s\n", shmreg_err_name(gt_e_), shmreg_last_error());            \
        assert_string_equal(shmreg_err_name(gt_e_), "SHMREG_OK");                            \
    } while (0)

/* The call must fail with `code` and leave a message containing `part`. */
#define gt_assert_fails(expr, code, part)                                                    \
    do {                                                                                     \
        shmreg_err gt_e_ = (expr);                                                           \
        if (gt_e_ != (code))                                                                 \
            print_error("%s: %s\n", shmreg_err_name(gt_e_), shmreg_last_error());            \
        assert_string_equal(shmreg_err_name(gt_e_), shmreg_err_name(code));                  \
        if (strstr(shmreg_last_error(), (part)) == NULL)                                     \
            fail_msg("message '%s' lacks '%s'", shmreg_last_error(), (part));                \
    } while (0)

#endif
