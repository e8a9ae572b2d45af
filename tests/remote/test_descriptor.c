/* The remote descriptor's two halves (src/remote/descriptor.c), round-trip
 * and refusals, in every build (no UCX needed). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "remote/descriptor.h"
#include "shmreg_assert.h"

static void test_round_trip(void **state)
{
    unsigned char worker[37], rkey[24], out[128];
    for (size_t i = 0; i < sizeof worker; i++)
        worker[i] = (unsigned char)(i * 7 + 1);
    for (size_t i = 0; i < sizeof rkey; i++)
        rkey[i] = (unsigned char)(255 - i);
    struct shmreg__remote_descriptor d = {
        .address = 0x7f0012345678ull, .length = 1474560,
        .worker_address = worker, .worker_address_size = sizeof worker,
        .rkey = rkey, .rkey_size = sizeof rkey,
    }, back;
    size_t n = shmreg__remote_descriptor_size(&d);
    assert_int_equal(n, SHMREG_REMOTE_DESCRIPTOR_HEADER + sizeof worker + sizeof rkey);
    assert_fails_containing(shmreg__remote_descriptor_encode(&d, out, n - 1), SHMREG_ERR_INVALID_ARG, "needed");
    assert_ok(shmreg__remote_descriptor_encode(&d, out, sizeof out));
    /* The layout the header documents: version, sizes, little-endian. */
    assert_int_equal(out[0], 1);
    assert_int_equal(out[4], sizeof worker);
    assert_int_equal(out[8], sizeof rkey);
    assert_int_equal(out[16], 0x78);
    assert_int_equal(out[21], 0x7f);
    assert_ok(shmreg__remote_descriptor_parse(out, n, "r", &back));
    assert_int_equal(back.address, d.address);
    assert_int_equal(back.length, d.length);
    assert_int_equal(back.worker_address_size, sizeof worker);
    assert_int_equal(back.rkey_size, sizeof rkey);
    assert_memory_equal(back.worker_address, worker, sizeof worker);
    assert_memory_equal(back.rkey, rkey, sizeof rkey);
    /* Every shorter or longer size is refused. */
    for (size_t k = 0; k < n + 4; k++)
        if (k != n)
            assert_fails_code(shmreg__remote_descriptor_parse(out, k, "r", &back), SHMREG_ERR_INVALID_ARG);
}

static void test_encode_refuses(void **state)
{
    unsigned char b[8] = {1}, out[64];
    struct shmreg__remote_descriptor d = {.address = 1, .length = 0, .worker_address = b, .worker_address_size = 8,
                                          .rkey = b, .rkey_size = 8};
    assert_fails_code(shmreg__remote_descriptor_encode(&d, out, sizeof out), SHMREG_ERR_INVALID_ARG);
    d.length = UINT64_MAX;
    assert_fails_code(shmreg__remote_descriptor_encode(&d, out, sizeof out), SHMREG_ERR_INVALID_ARG);
    d.length = 8;
    d.rkey_size = 0;
    assert_fails_code(shmreg__remote_descriptor_encode(&d, out, sizeof out), SHMREG_ERR_INVALID_ARG);
}

/* Without UCX in the build, or on the machine, a well-formed descriptor
 * registers as UNSUPPORTED with the reason; with it, this test has nothing
 * to say (tests/remote/test_remote.c). */
static void test_unsupported_says_why(void **state)
{
    if (shmreg_remote_available() == SHMREG_OK)
        skip();
    assert_fails_containing(shmreg_remote_available(), SHMREG_ERR_UNSUPPORTED, "UCX");
    shmreg_remote_client *c = (void *)1;
    assert_fails_containing(shmreg_remote_client_create(&c), SHMREG_ERR_UNSUPPORTED, "UCX");
    assert_null(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_encode_refuses),
        cmocka_unit_test(test_unsupported_says_why),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
