/* What the tests in tests/gpu share that needs no CUDA (cmocka): assertions
 * on a libshmreg call's code and message, and small registry helpers. */
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

/* A registry with these pin and busy policies (other settings default). */
static inline shmreg_registry *gt_registry(shmreg_pin_policy pin, shmreg_policy busy)
{
    shmreg_config cfg;
    shmreg_config_init(&cfg);
    cfg.pin_policy = pin;
    cfg.busy_policy = busy;
    shmreg_registry *reg = NULL;
    gt_assert_ok(shmreg_registry_create(&cfg, &reg));
    return reg;
}

/* How many regions, of every kind, status lists. */
static inline size_t gt_status_count(shmreg_registry *reg)
{
    shmreg_region_status *st = NULL;
    size_t n = 0;
    gt_assert_ok(shmreg_status(reg, NULL, SHMREG_KIND_ANY, &st, &n));
    shmreg_status_free(st, n);
    return n;
}

#endif
