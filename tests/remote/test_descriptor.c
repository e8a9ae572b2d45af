/* The remote wire formats, both halves of each, in every build (no UCX
 * needed): the version-2 descriptor (src/remote/descriptor.c) and the
 * connection's messages (src/remote/messages.c). Round trips, the byte
 * layouts the headers document, and each refusal with its reason. Also
 * the transports a remote context may open (src/remote/transports.c):
 * refused alike in every build, and UCX's spelling of those allowed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "remote/descriptor.h"
#include "remote/messages.h"
#include "remote/transports.h"
#include "shmreg_assert.h"

/* ------------------------------------------------------------ descriptor */

static struct shmreg__remote_descriptor sample_descriptor(void)
{
    struct shmreg__remote_descriptor d = {.window = 0x0102030405060708ull, .generation = 0x1122334455667788ull};
    for (size_t i = 0; i < sizeof d.connection; i++)
        d.connection[i] = (unsigned char)(0xa0 + i);
    return d;
}

static void test_descriptor_round_trip(void **state)
{
    struct shmreg__remote_descriptor d = sample_descriptor(), back;
    unsigned char out[SHMREG_REMOTE_DESCRIPTOR_SIZE];
    shmreg__remote_descriptor_encode(&d, out);
    assert_ok(shmreg__remote_descriptor_parse(out, sizeof out, "r", &back));
    assert_memory_equal(back.connection, d.connection, sizeof d.connection);
    assert_int_equal(back.window, d.window);
    assert_int_equal(back.generation, d.generation);
    /* The extremes of both integers survive too. */
    d.window = UINT64_MAX;
    d.generation = 0;
    shmreg__remote_descriptor_encode(&d, out);
    assert_ok(shmreg__remote_descriptor_parse(out, sizeof out, "r", &back));
    assert_int_equal(back.window, UINT64_MAX);
    assert_int_equal(back.generation, 0);
}

/* The layout of shmreg.h: version 2, seven zero bytes, the connection id,
 * then window and generation, little-endian. */
static void test_descriptor_layout(void **state)
{
    struct shmreg__remote_descriptor d = sample_descriptor();
    unsigned char out[SHMREG_REMOTE_DESCRIPTOR_SIZE];
    memset(out, 0xee, sizeof out);
    shmreg__remote_descriptor_encode(&d, out);
    assert_int_equal(SHMREG_REMOTE_DESCRIPTOR_SIZE, 40);
    assert_int_equal(out[0], 2);
    assert_int_equal(out[0], SHMREG_REMOTE_DESCRIPTOR_VERSION);
    for (size_t i = 1; i < 8; i++)
        assert_int_equal(out[i], 0);
    assert_memory_equal(out + 8, d.connection, 16);
    static const unsigned char window[8] = {8, 7, 6, 5, 4, 3, 2, 1};
    static const unsigned char generation[8] = {0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11};
    assert_memory_equal(out + 24, window, 8);
    assert_memory_equal(out + 32, generation, 8);
}

static void test_descriptor_refuses_wrong_size(void **state)
{
    struct shmreg__remote_descriptor d = sample_descriptor(), back;
    unsigned char out[2 * SHMREG_REMOTE_DESCRIPTOR_SIZE] = {0};
    shmreg__remote_descriptor_encode(&d, out);
    for (size_t n = 0; n <= sizeof out; n++) {
        if (n == SHMREG_REMOTE_DESCRIPTOR_SIZE)
            continue;
        assert_fails_containing(shmreg__remote_descriptor_parse(out, n, "r", &back), SHMREG_ERR_INVALID_ARG,
                                "not 40 bytes long");
    }
    /* The whole message: the region, the size, the cause. */
    assert_fails(shmreg__remote_descriptor_parse(out, 39, "in0", &back), SHMREG_ERR_INVALID_ARG,
                 "cannot register remote region 'in0': the descriptor (39 bytes) is not one: not 40 bytes long");
}

/* A version-1 descriptor (a 32-byte header, then a worker address and a
 * remote key) is refused as version 1 whatever its length, and the message
 * says what to do instead. */
static void test_descriptor_refuses_version_1(void **state)
{
    struct shmreg__remote_descriptor back;
    unsigned char v1[32 + 37 + 24] = {1};
    v1[4] = 37;
    v1[8] = 24;
    for (size_t i = 32; i < sizeof v1; i++)
        v1[i] = (unsigned char)i;
    assert_fails_containing(shmreg__remote_descriptor_parse(v1, sizeof v1, "old", &back), SHMREG_ERR_INVALID_ARG,
                            "version 1");
    assert_fails_containing(shmreg__remote_descriptor_parse(v1, sizeof v1, "old", &back), SHMREG_ERR_INVALID_ARG,
                            "no longer accepted");
    assert_fails_containing(shmreg__remote_descriptor_parse(v1, sizeof v1, "old", &back), SHMREG_ERR_INVALID_ARG,
                            "shmreg_remote_client_connect");
    /* A version-2 descriptor with its version byte set to 1: the same. */
    struct shmreg__remote_descriptor d = sample_descriptor();
    unsigned char out[SHMREG_REMOTE_DESCRIPTOR_SIZE];
    shmreg__remote_descriptor_encode(&d, out);
    out[0] = 1;
    assert_fails_containing(shmreg__remote_descriptor_parse(out, sizeof out, "old", &back), SHMREG_ERR_INVALID_ARG,
                            "no longer accepted");
}

static void test_descriptor_refuses_unknown_version(void **state)
{
    struct shmreg__remote_descriptor d = sample_descriptor(), back;
    unsigned char out[SHMREG_REMOTE_DESCRIPTOR_SIZE];
    static const unsigned char versions[] = {0, 3, 0x7f, 0xff};
    for (size_t i = 0; i < sizeof versions; i++) {
        shmreg__remote_descriptor_encode(&d, out);
        out[0] = versions[i];
        assert_fails_containing(shmreg__remote_descriptor_parse(out, sizeof out, "r", &back), SHMREG_ERR_INVALID_ARG,
                                "an unknown version");
    }
}

/* Each of bytes 1..7 alone, set, is refused. */
static void test_descriptor_refuses_reserved(void **state)
{
    struct shmreg__remote_descriptor d = sample_descriptor(), back;
    unsigned char out[SHMREG_REMOTE_DESCRIPTOR_SIZE];
    for (size_t i = 1; i < 8; i++) {
        shmreg__remote_descriptor_encode(&d, out);
        out[i] = 0x01;
        assert_fails_containing(shmreg__remote_descriptor_parse(out, sizeof out, "r", &back), SHMREG_ERR_INVALID_ARG,
                                "reserved bytes are not zero");
    }
}

/* No connection has the all-zero id; one non-zero byte anywhere in it is
 * enough. */
static void test_descriptor_refuses_zero_connection(void **state)
{
    struct shmreg__remote_descriptor d = sample_descriptor(), back;
    unsigned char out[SHMREG_REMOTE_DESCRIPTOR_SIZE];
    memset(d.connection, 0, sizeof d.connection);
    shmreg__remote_descriptor_encode(&d, out);
    assert_fails_containing(shmreg__remote_descriptor_parse(out, sizeof out, "r", &back), SHMREG_ERR_INVALID_ARG,
                            "no connection id");
    d.connection[15] = 1;
    shmreg__remote_descriptor_encode(&d, out);
    assert_ok(shmreg__remote_descriptor_parse(out, sizeof out, "r", &back));
    assert_int_equal(back.connection[15], 1);
}

static void test_descriptor_refuses_null(void **state)
{
    struct shmreg__remote_descriptor back;
    assert_fails_containing(shmreg__remote_descriptor_parse(NULL, SHMREG_REMOTE_DESCRIPTOR_SIZE, "r", &back),
                            SHMREG_ERR_INVALID_ARG, "NULL");
}

/* The public call parses the descriptor in every build, before it needs
 * UCX: a malformed one is INVALID_ARG with the same reason everywhere. */
static void test_register_refuses_malformed_descriptor(void **state)
{
    shmreg_config cfg;
    shmreg_config_init(&cfg);
    shmreg_registry *reg = NULL;
    assert_ok(shmreg_registry_create(&cfg, &reg));
    struct shmreg__remote_descriptor d = sample_descriptor();
    unsigned char out[SHMREG_REMOTE_DESCRIPTOR_SIZE];
    shmreg__remote_descriptor_encode(&d, out);
    out[0] = 1;
    assert_fails_containing(shmreg_register_remote(reg, "r", out, sizeof out, 0, 1, 0), SHMREG_ERR_INVALID_ARG,
                            "no longer accepted");
    assert_fails_containing(shmreg_register_remote(reg, "r", out, 12, 0, 1, 0), SHMREG_ERR_INVALID_ARG,
                            "version 1");
    out[0] = 2;
    out[3] = 1;
    assert_fails_containing(shmreg_register_remote(reg, "r", out, sizeof out, 0, 1, 0), SHMREG_ERR_INVALID_ARG,
                            "reserved bytes are not zero");
    shmreg_registry_destroy(reg);
}

/* -------------------------------------------------------------- messages */

static const unsigned char client_kinds[] = {
    SHMREG__RMSG_HELLO, SHMREG__RMSG_ANNOUNCE, SHMREG__RMSG_WITHDRAW, SHMREG__RMSG_DATA,
    SHMREG__RMSG_STORED, SHMREG__RMSG_PONG, SHMREG__RMSG_BYE,
};
static const unsigned char server_kinds[] = {
    SHMREG__RMSG_WELCOME, SHMREG__RMSG_ANSWER, SHMREG__RMSG_FETCH, SHMREG__RMSG_STORE, SHMREG__RMSG_PING,
};

static bool to_server_kind(unsigned kind)
{
    return memchr(client_kinds, (int)kind, sizeof client_kinds) != NULL;
}

static bool answers(unsigned kind)
{
    return kind == SHMREG__RMSG_WELCOME || kind == SHMREG__RMSG_ANSWER || kind == SHMREG__RMSG_DATA ||
           kind == SHMREG__RMSG_STORED || kind == SHMREG__RMSG_PONG;
}

/* A message of `kind` with every field it may carry set, each distinct:
 * a status in the answers, the secret (HELLO) or the connection id
 * (WELCOME) in the token. */
static struct shmreg__rmsg sample_message(unsigned kind)
{
    struct shmreg__rmsg m = {
        .kind = (uint8_t)kind,
        .status = answers(kind) ? SHMREG_ERR_NOT_FOUND : 0,
        .request = 0x0102030405060708ull,
        .window = 0x1112131415161718ull,
        .generation = 0x2122232425262728ull,
        .offset = 0x3132333435363738ull,
        .length = 0x0000000000004000ull,
    };
    size_t token = kind == SHMREG__RMSG_HELLO     ? SHMREG__RMSG_TOKEN
                   : kind == SHMREG__RMSG_WELCOME ? SHMREG__RMSG_CONNECTION_ID
                                                  : 0;
    for (size_t i = 0; i < token; i++)
        m.token[i] = (unsigned char)(0xc0 + i);
    return m;
}

static void assert_message_equal(const struct shmreg__rmsg *a, const struct shmreg__rmsg *b)
{
    assert_int_equal(a->kind, b->kind);
    assert_int_equal(a->status, b->status);
    assert_int_equal(a->request, b->request);
    assert_int_equal(a->window, b->window);
    assert_int_equal(a->generation, b->generation);
    assert_int_equal(a->offset, b->offset);
    assert_int_equal(a->length, b->length);
    assert_memory_equal(a->token, b->token, SHMREG__RMSG_TOKEN);
}

static const char *parse_as(unsigned kind, const unsigned char *bytes, size_t size, struct shmreg__rmsg *out)
{
    return shmreg__rmsg_parse(bytes, size, to_server_kind(kind), out);
}

/* Every kind, encoded by its sender and parsed by its receiver, comes back
 * field for field, and encoding what was parsed gives the same bytes. */
static void test_message_round_trip(void **state)
{
    for (unsigned k = 0; k < 256; k++) {
        if (!to_server_kind(k) && !memchr(server_kinds, (int)k, sizeof server_kinds))
            continue;
        struct shmreg__rmsg m = sample_message(k), back;
        unsigned char out[SHMREG__RMSG_SIZE], again[SHMREG__RMSG_SIZE];
        shmreg__rmsg_encode(&m, out);
        const char *why = parse_as(k, out, sizeof out, &back);
        if (why)
            fail_msg("kind %u: %s", k, why);
        assert_message_equal(&back, &m);
        shmreg__rmsg_encode(&back, again);
        assert_memory_equal(again, out, sizeof out);
    }
}

/* The layout of remote/messages.h, little-endian. */
static void test_message_layout(void **state)
{
    struct shmreg__rmsg m = sample_message(SHMREG__RMSG_WELCOME);
    unsigned char out[SHMREG__RMSG_SIZE];
    memset(out, 0xee, sizeof out);
    shmreg__rmsg_encode(&m, out);
    assert_int_equal(SHMREG__RMSG_SIZE, 80);
    assert_int_equal(out[0], 1);
    assert_int_equal(out[1], SHMREG__RMSG_WELCOME);
    assert_int_equal(out[2], 0);
    assert_int_equal(out[3], 0);
    static const unsigned char status[4] = {SHMREG_ERR_NOT_FOUND, 0, 0, 0};
    assert_memory_equal(out + 4, status, 4);
    for (size_t field = 0; field < 4; field++) /* request, window, generation, offset */
        for (size_t i = 0; i < 8; i++)
            assert_int_equal(out[8 + 8 * field + i], (0x10 * field) + 8 - i);
    static const unsigned char length[8] = {0, 0x40, 0, 0, 0, 0, 0, 0};
    assert_memory_equal(out + 40, length, 8);
    assert_memory_equal(out + 48, m.token, SHMREG__RMSG_CONNECTION_ID);
    for (size_t i = 48 + SHMREG__RMSG_CONNECTION_ID; i < SHMREG__RMSG_SIZE; i++)
        assert_int_equal(out[i], 0);
    /* HELLO's secret fills the token. */
    m = sample_message(SHMREG__RMSG_HELLO);
    shmreg__rmsg_encode(&m, out);
    assert_memory_equal(out + 48, m.token, SHMREG__RMSG_TOKEN);
    assert_int_equal(out[79], 0xc0 + 31);
}

static void test_message_refuses_wrong_size(void **state)
{
    struct shmreg__rmsg m = sample_message(SHMREG__RMSG_PING), back;
    unsigned char out[2 * SHMREG__RMSG_SIZE] = {0};
    shmreg__rmsg_encode(&m, out);
    for (size_t n = 0; n <= sizeof out; n++)
        if (n != SHMREG__RMSG_SIZE)
            assert_string_equal(shmreg__rmsg_parse(out, n, false, &back), "not the size of a message");
    assert_string_equal(shmreg__rmsg_parse(NULL, SHMREG__RMSG_SIZE, true, &back), "not the size of a message");
}

static void test_message_refuses_wrong_version(void **state)
{
    struct shmreg__rmsg m = sample_message(SHMREG__RMSG_ANNOUNCE), back;
    unsigned char out[SHMREG__RMSG_SIZE];
    static const unsigned char versions[] = {0, 2, 0xff};
    for (size_t i = 0; i < sizeof versions; i++) {
        shmreg__rmsg_encode(&m, out);
        out[0] = versions[i];
        assert_string_equal(shmreg__rmsg_parse(out, sizeof out, true, &back), "an unknown version");
    }
}

/* A server takes only what clients send, a client only what servers send:
 * each kind arriving on the wrong side, and every number that is no kind,
 * is refused. */
static void test_message_refuses_wrong_direction(void **state)
{
    struct shmreg__rmsg back;
    unsigned char out[SHMREG__RMSG_SIZE];
    for (unsigned k = 0; k < 256; k++) {
        bool from_client = to_server_kind(k);
        bool from_server = memchr(server_kinds, (int)k, sizeof server_kinds) != NULL;
        struct shmreg__rmsg m = sample_message(k);
        shmreg__rmsg_encode(&m, out);
        if (!from_client)
            assert_string_equal(shmreg__rmsg_parse(out, sizeof out, true, &back), "a kind this side does not take");
        if (!from_server)
            assert_string_equal(shmreg__rmsg_parse(out, sizeof out, false, &back), "a kind this side does not take");
    }
}

/* Bytes 2 and 3, each alone. */
static void test_message_refuses_reserved(void **state)
{
    struct shmreg__rmsg m = sample_message(SHMREG__RMSG_FETCH), back;
    unsigned char out[SHMREG__RMSG_SIZE];
    for (size_t i = 2; i < 4; i++) {
        shmreg__rmsg_encode(&m, out);
        out[i] = 0x80;
        assert_string_equal(shmreg__rmsg_parse(out, sizeof out, false, &back), "reserved bytes are not zero");
    }
}

/* Only HELLO and WELCOME carry a token: one byte of it in any other kind
 * is refused, and so is a byte past the connection id of a WELCOME. */
static void test_message_refuses_misplaced_token(void **state)
{
    struct shmreg__rmsg back;
    unsigned char out[SHMREG__RMSG_SIZE];
    const unsigned char *lists[] = {client_kinds, server_kinds};
    const size_t sizes[] = {sizeof client_kinds, sizeof server_kinds};
    for (size_t l = 0; l < 2; l++) {
        for (size_t i = 0; i < sizes[l]; i++) {
            unsigned k = lists[l][i];
            if (k == SHMREG__RMSG_HELLO || k == SHMREG__RMSG_WELCOME)
                continue;
            struct shmreg__rmsg m = sample_message(k);
            for (size_t at = 0; at < SHMREG__RMSG_TOKEN; at += 31) {
                memset(m.token, 0, sizeof m.token);
                m.token[at] = 1;
                shmreg__rmsg_encode(&m, out);
                assert_string_equal(parse_as(k, out, sizeof out, &back), "a token in a message that carries none");
            }
        }
    }
    struct shmreg__rmsg m = sample_message(SHMREG__RMSG_WELCOME);
    m.token[SHMREG__RMSG_CONNECTION_ID] = 1;
    shmreg__rmsg_encode(&m, out);
    assert_string_equal(shmreg__rmsg_parse(out, sizeof out, false, &back), "bytes past the token are not zero");
}

/* A status belongs to an answer: a request (or BYE) with one is refused. */
static void test_message_refuses_status_outside_answers(void **state)
{
    struct shmreg__rmsg back;
    unsigned char out[SHMREG__RMSG_SIZE];
    static const unsigned char kinds[] = {SHMREG__RMSG_HELLO, SHMREG__RMSG_ANNOUNCE, SHMREG__RMSG_WITHDRAW,
                                          SHMREG__RMSG_BYE,   SHMREG__RMSG_FETCH,    SHMREG__RMSG_STORE,
                                          SHMREG__RMSG_PING};
    for (size_t i = 0; i < sizeof kinds; i++) {
        struct shmreg__rmsg m = sample_message(kinds[i]);
        m.status = SHMREG_ERR_FAULT;
        shmreg__rmsg_encode(&m, out);
        assert_string_equal(parse_as(kinds[i], out, sizeof out, &back), "a status in a message that answers nothing");
    }
}

/* ANNOUNCE, FETCH and STORE name a range: never empty, and its end, offset
 * plus length, is a uint64 (so the byte at 2^64 - 1 is out of reach, as in
 * shmreg_remote_export). The kinds that name none do not check those
 * fields. */
static void test_message_refuses_bad_ranges(void **state)
{
    struct shmreg__rmsg back;
    unsigned char out[SHMREG__RMSG_SIZE];
    static const unsigned char ranged[] = {SHMREG__RMSG_ANNOUNCE, SHMREG__RMSG_FETCH, SHMREG__RMSG_STORE};
    for (size_t i = 0; i < sizeof ranged; i++) {
        struct shmreg__rmsg m = sample_message(ranged[i]);
        m.length = 0;
        shmreg__rmsg_encode(&m, out);
        assert_string_equal(parse_as(ranged[i], out, sizeof out, &back), "an empty range");
        m.offset = UINT64_MAX;
        m.length = 2;
        shmreg__rmsg_encode(&m, out);
        assert_string_equal(parse_as(ranged[i], out, sizeof out, &back), "a range that runs past 2^64");
        m.offset = 1;
        m.length = UINT64_MAX;
        shmreg__rmsg_encode(&m, out);
        assert_string_equal(parse_as(ranged[i], out, sizeof out, &back), "a range that runs past 2^64");
        m.offset = UINT64_MAX;
        m.length = 1;
        shmreg__rmsg_encode(&m, out);
        assert_string_equal(parse_as(ranged[i], out, sizeof out, &back), "a range that runs past 2^64");
        m.offset = UINT64_MAX - 1;
        shmreg__rmsg_encode(&m, out);
        assert_null(parse_as(ranged[i], out, sizeof out, &back));
        m.offset = 0;
        m.length = UINT64_MAX;
        shmreg__rmsg_encode(&m, out);
        assert_null(parse_as(ranged[i], out, sizeof out, &back));
    }
    struct shmreg__rmsg m = sample_message(SHMREG__RMSG_WITHDRAW);
    m.offset = UINT64_MAX;
    m.length = UINT64_MAX;
    shmreg__rmsg_encode(&m, out);
    assert_null(shmreg__rmsg_parse(out, sizeof out, true, &back));
    m = sample_message(SHMREG__RMSG_DATA);
    m.length = 0;
    shmreg__rmsg_encode(&m, out);
    assert_null(shmreg__rmsg_parse(out, sizeof out, true, &back));
}

/* ------------------------------------------------------------ transports */

/* A refused transport is INVALID_ARG before anything else, with UCX or
 * without, on the server's configure and the client's create alike. */
static void test_transports_refused_in_every_build(void **state)
{
    shmreg_remote_config server = {.transports = "posix", .tcp_device = "lo"};
    assert_fails_containing(shmreg_remote_configure(&server), SHMREG_ERR_INVALID_ARG,
                            "transport 'posix' refused");
    shmreg_remote_client_config client = {.transports = "tcp"};
    shmreg_remote_client *c = (void *)1;
    assert_fails_containing(shmreg_remote_client_create_with(&client, &c), SHMREG_ERR_INVALID_ARG,
                            "transport 'tcp' refused without a trusted device");
    assert_null(c);
}

/* UCX's own aliases rc and dc add UD as an auxiliary transport: the
 * library spells them out without it. */
static void test_tls_spelled_without_ud(void **state)
{
    char tls[256];
    struct shmreg__remote_transports t = {.transports = "rc,dc_x,tcp,cuda_copy", .tcp_device = "lo"};
    assert_ok(shmreg__remote_transports_check(&t, "test"));
    shmreg__remote_tls(&t, tls, sizeof tls);
    assert_string_equal(tls, "rc_mlx5,rc_verbs,dc_mlx5,tcp,cuda_copy");
    t.transports = NULL;
    shmreg__remote_tls(&t, tls, sizeof tls);
    assert_null(strstr(tls, "ud"));
    assert_non_null(strstr(tls, "tcp"));
    t.tcp_device = NULL;
    shmreg__remote_tls(&t, tls, sizeof tls);
    assert_null(strstr(tls, "tcp"));
}

/* tcp listens on every network device UCX may use: the environment's list
 * contributes its RDMA devices, never another network interface. */
static void test_net_devices_keep_tcp_on_the_trusted_device(void **state)
{
    const struct shmreg__remote_transports t = {.tcp_device = "lo"};
    char out[512], env[128];
    shmreg__remote_net_devices(&t, "lo,mlx5_0:1", out, sizeof out);
    assert_string_equal(out, "lo,mlx5_0:1");
    struct if_nameindex *ifs = if_nameindex();
    for (struct if_nameindex *i = ifs; i && i->if_name; i++) {
        if (strcmp(i->if_name, "lo") == 0)
            continue;
        snprintf(env, sizeof env, "%s,mlx5_1:1", i->if_name);
        shmreg__remote_net_devices(&t, env, out, sizeof out);
        assert_string_equal(out, "lo,mlx5_1:1"); /* the other interface is left out */
    }
    if_freenameindex(ifs);
}

/* ------------------------------------------------------------- no UCX */

/* Without UCX in the build, or on the machine, the remote calls answer
 * UNSUPPORTED with the reason; with it, this test has nothing to say
 * (tests/remote/test_remote.c). */
static void test_unsupported_says_why(void **state)
{
    if (shmreg_remote_available() == SHMREG_OK)
        skip();
    assert_fails_containing(shmreg_remote_available(), SHMREG_ERR_UNSUPPORTED, "UCX");
    bool built_without = strstr(shmreg_last_error(), "SHMREG_WITH_UCX=OFF") != NULL;
    shmreg_remote_client *c = (void *)1;
    assert_fails_containing(shmreg_remote_client_create(&c), SHMREG_ERR_UNSUPPORTED, "UCX");
    assert_null(c);
    if (!built_without)
        return;
    /* The stub (remote/stub.c) answers every call the same way. */
    unsigned char secret[SHMREG_REMOTE_SECRET_SIZE] = {0};
    const char *address = NULL;
    assert_fails_containing(shmreg_remote_configure(NULL), SHMREG_ERR_UNSUPPORTED, "SHMREG_WITH_UCX=OFF");
    assert_fails_containing(shmreg_remote_server_address(&address), SHMREG_ERR_UNSUPPORTED, "SHMREG_WITH_UCX=OFF");
    assert_fails_containing(shmreg_remote_invite(NULL, NULL, secret), SHMREG_ERR_UNSUPPORTED, "SHMREG_WITH_UCX=OFF");
    assert_fails_containing(shmreg_remote_client_connect(NULL, "127.0.0.1:1", secret), SHMREG_ERR_UNSUPPORTED,
                            "SHMREG_WITH_UCX=OFF");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_transports_refused_in_every_build),
        cmocka_unit_test(test_tls_spelled_without_ud),
        cmocka_unit_test(test_net_devices_keep_tcp_on_the_trusted_device),
        cmocka_unit_test(test_descriptor_round_trip),
        cmocka_unit_test(test_descriptor_layout),
        cmocka_unit_test(test_descriptor_refuses_wrong_size),
        cmocka_unit_test(test_descriptor_refuses_version_1),
        cmocka_unit_test(test_descriptor_refuses_unknown_version),
        cmocka_unit_test(test_descriptor_refuses_reserved),
        cmocka_unit_test(test_descriptor_refuses_zero_connection),
        cmocka_unit_test(test_descriptor_refuses_null),
        cmocka_unit_test(test_register_refuses_malformed_descriptor),
        cmocka_unit_test(test_message_round_trip),
        cmocka_unit_test(test_message_layout),
        cmocka_unit_test(test_message_refuses_wrong_size),
        cmocka_unit_test(test_message_refuses_wrong_version),
        cmocka_unit_test(test_message_refuses_wrong_direction),
        cmocka_unit_test(test_message_refuses_reserved),
        cmocka_unit_test(test_message_refuses_misplaced_token),
        cmocka_unit_test(test_message_refuses_status_outside_answers),
        cmocka_unit_test(test_message_refuses_bad_ranges),
        cmocka_unit_test(test_unsupported_says_why),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
