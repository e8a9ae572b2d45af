/* The source an unproven connection counts under (src/remote/source.c):
 * the server lets at most 8 wait per source, so what counts as one source
 * decides whether one host can keep the others out. An IPv4 address is
 * its own source; IPv6 addresses of one /64 share one (a host commonly
 * holds a /64 whole) and of two /64s do not; an IPv4 client of a
 * dual-stack listener counts as its IPv4 address; an unknown address
 * counts as the zero source. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "remote/source.h"

/* The source of the numeric address ip (v4 or v6) into out. */
static void source_of(const char *ip, unsigned char out[SHMREG__SOURCE_SIZE])
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, ip, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
    } else {
        assert_int_equal(inet_pton(AF_INET6, ip, &v6->sin6_addr), 1);
        v6->sin6_family = AF_INET6;
    }
    shmreg__remote_source(&ss, out);
}

static bool same_source(const char *a, const char *b)
{
    unsigned char sa[SHMREG__SOURCE_SIZE], sb[SHMREG__SOURCE_SIZE];
    source_of(a, sa);
    source_of(b, sb);
    return memcmp(sa, sb, sizeof sa) == 0;
}

static void test_ipv4_address_is_its_source(void **state)
{
    unsigned char s[SHMREG__SOURCE_SIZE];
    source_of("192.0.2.7", s);
    static const unsigned char want[SHMREG__SOURCE_SIZE] = {4, 192, 0, 2, 7};
    assert_memory_equal(s, want, sizeof want);
    assert_false(same_source("127.0.0.1", "127.0.0.2"));
}

static void test_ipv6_counts_by_its_64(void **state)
{
    unsigned char s[SHMREG__SOURCE_SIZE];
    source_of("2001:db8:1:2:aaaa:bbbb:cccc:dddd", s);
    static const unsigned char want[SHMREG__SOURCE_SIZE] = {6, 0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 2};
    assert_memory_equal(s, want, sizeof want);
    assert_true(same_source("2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:ffff"));
    assert_false(same_source("2001:db8:1:2::1", "2001:db8:1:3::1"));
    assert_false(same_source("2001:db8:1:2::1", "2001:db9:1:2::1"));
}

static void test_ipv4_mapped_counts_as_ipv4(void **state)
{
    assert_true(same_source("::ffff:192.0.2.7", "192.0.2.7"));
    assert_false(same_source("::ffff:192.0.2.7", "::ffff:192.0.2.8"));
    /* Not the zero-prefixed /64 that every mapped address would share. */
    assert_false(same_source("::ffff:192.0.2.7", "::1"));
}

static void test_unknown_address_is_the_zero_source(void **state)
{
    unsigned char s[SHMREG__SOURCE_SIZE], zero[SHMREG__SOURCE_SIZE] = {0};
    memset(s, 0xee, sizeof s);
    shmreg__remote_source(NULL, s);
    assert_memory_equal(s, zero, sizeof zero);
    struct sockaddr_storage unix_addr = {.ss_family = AF_UNIX};
    memset(s, 0xee, sizeof s);
    shmreg__remote_source(&unix_addr, s);
    assert_memory_equal(s, zero, sizeof zero);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ipv4_address_is_its_source),
        cmocka_unit_test(test_ipv6_counts_by_its_64),
        cmocka_unit_test(test_ipv4_mapped_counts_as_ipv4),
        cmocka_unit_test(test_unknown_address_is_the_zero_source),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
