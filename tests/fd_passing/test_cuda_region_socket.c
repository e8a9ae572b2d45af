/* The CUDA-region wire format, both halves: requests of each kind (legacy
 * IPC with no descriptor, a pool with one, a VMM range with several) sent
 * by the client half the CUDA backend uses (wire/cuda_region_socket.h,
 * reached through the static library) and received by
 * shmreg_recv_cuda_region field for field, the registration they make, and
 * hostile requests refused with nothing left open. Needs no GPU: runs in CI. */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "shmreg_assert.h"
#include "testutil.h"
#include "wire/cuda_region_socket.h"

#define UUID "GPU-5b3e1c2a-0f4d-4e6b-9a8c-1d2e3f405162"

struct fixture {
    struct tu_baseline base;
    int sv[2];
    int pipe[3][2];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->base = tu_take_baseline();
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, f->sv), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(pipe(f->pipe[i]), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    close(f->sv[0]);
    close(f->sv[1]);
    for (int i = 0; i < 3; i++) {
        close(f->pipe[i][0]);
        close(f->pipe[i][1]);
    }
    tu_check_baseline(f->base);
    free(f);
    return 0;
}

/* A request of `source` carrying n of the pipes' write ends. */
static shmreg_cuda_region_request request(struct fixture *f, shmreg_source source, size_t n)
{
    shmreg_cuda_region_request q;
    memset(&q, 0, sizeof q);
    q.source = source;
    q.flags = SHMREG_READONLY;
    q.offset = ((size_t)1 << 20) + 3;
    q.byte_size = (size_t)5 << 20;
    strcpy(q.device_uuid, UUID);
    for (int i = 0; i < 64; i++)
        q.handle[i] = (unsigned char)(i * 7);
    for (size_t i = 0; i < n; i++) {
        q.fds[i] = f->pipe[i][1];
        q.chunk_sizes[i] = (size_t)(i + 1) << 21;
    }
    q.fd_count = n;
    strcpy(q.name, "tensor:0");
    return q;
}

/* Send q from the client's end (its answer queued first, so that one
 * thread plays both ends) and receive it at the server's. */
static shmreg_err round_trip(struct fixture *f, const shmreg_cuda_region_request *q, shmreg_cuda_region_request *got)
{
    assert_ok(shmreg_answer_region(f->sv[1], SHMREG_OK, "registered"));
    assert_ok(shmreg__send_cuda_request(f->sv[0], q));
    return shmreg_recv_cuda_region(f->sv[1], got);
}

static void assert_same_request(const shmreg_cuda_region_request *a, const shmreg_cuda_region_request *b)
{
    assert_int_equal(a->source, b->source);
    assert_int_equal(a->flags, b->flags);
    assert_int_equal(a->offset, b->offset);
    assert_int_equal(a->byte_size, b->byte_size);
    assert_string_equal(a->device_uuid, b->device_uuid);
    assert_string_equal(a->name, b->name);
    assert_int_equal(a->fd_count, b->fd_count);
    if (a->source == SHMREG_SOURCE_CUDA_VMM_RANGE)
        assert_memory_equal(a->chunk_sizes, b->chunk_sizes, a->fd_count * sizeof a->chunk_sizes[0]);
    else
        assert_memory_equal(a->handle, b->handle, sizeof a->handle);
}

/* Descriptor i of got is pipe i's write end. */
static void assert_pipes(struct fixture *f, const shmreg_cuda_region_request *got)
{
    for (size_t i = 0; i < got->fd_count; i++) {
        char b = (char)('a' + i), r = 0;
        assert_int_equal(write(got->fds[i], &b, 1), 1);
        assert_int_equal(read(f->pipe[i][0], &r, 1), 1);
        assert_int_equal(r, b);
    }
}

static void test_each_kind_round_trips(void **state)
{
    struct fixture *f = *state;
    const struct {
        shmreg_source source;
        size_t fds;
    } kinds[] = {{SHMREG_SOURCE_CUDA_IPC, 0}, {SHMREG_SOURCE_CUDA_POOL, 1}, {SHMREG_SOURCE_CUDA_VMM_RANGE, 3}};
    for (size_t k = 0; k < 3; k++) {
        shmreg_cuda_region_request q = request(f, kinds[k].source, kinds[k].fds), got;
        assert_ok(round_trip(f, &q, &got));
        assert_same_request(&q, &got);
        assert_pipes(f, &got);

        shmreg_registration r;
        shmreg_registration_init(&r);
        r.tag = "client-7";
        shmreg_cuda_region_registration(&got, &r);
        assert_int_equal(r.source, kinds[k].source);
        assert_ptr_equal(r.name, got.name);
        assert_string_equal(r.tag, "client-7"); /* the server's, left alone */
        assert_int_equal(r.flags, SHMREG_READONLY);
        assert_int_equal(r.offset, q.offset);
        assert_int_equal(r.byte_size, q.byte_size);
        assert_string_equal(r.device_uuid, UUID);
        if (kinds[k].source == SHMREG_SOURCE_CUDA_VMM_RANGE) {
            assert_ptr_equal(r.fds, got.fds);
            assert_ptr_equal(r.chunk_sizes, got.chunk_sizes);
            assert_int_equal(r.chunk_count, 3);
        } else {
            assert_ptr_equal(r.raw_handle, got.handle);
            assert_int_equal(r.raw_handle_size, 64);
            assert_int_equal(r.fd, kinds[k].source == SHMREG_SOURCE_CUDA_POOL ? got.fds[0] : -1);
        }
        shmreg_cuda_region_request_close(&got);
        assert_int_equal(got.fd_count, 0);
    }
    shmreg_cuda_region_request_close(NULL);
    shmreg_cuda_region_registration(NULL, NULL);
}

/* The server's refusal reaches the client as its code and words. */
static void test_answer_reaches_the_client(void **state)
{
    struct fixture *f = *state;
    shmreg_cuda_region_request q = request(f, SHMREG_SOURCE_CUDA_IPC, 0), got;
    assert_ok(shmreg_answer_region(f->sv[1], SHMREG_ERR_ALREADY_EXISTS, "shared memory region 'tensor:0' already in manager"));
    assert_fails(shmreg__send_cuda_request(f->sv[0], &q), SHMREG_ERR_ALREADY_EXISTS,
                 "shared memory region 'tensor:0' already in manager");
    assert_ok(shmreg_recv_cuda_region(f->sv[1], &got));
}

/* Raw payload bytes of a valid range request of n chunks, to spoil. */
static size_t raw_request(unsigned char *p, uint32_t source, uint32_t chunks, const char *name)
{
    uint32_t magic = SHMREG_CUDA_REGION_REQUEST_MAGIC, flags = 0, name_len = (uint32_t)strlen(name), zero = 0;
    uint64_t offset = 0, size = 4096;
    memcpy(p, &magic, 4);
    memcpy(p + 4, &flags, 4);
    memcpy(p + 8, &source, 4);
    memcpy(p + 12, &chunks, 4);
    memcpy(p + 16, &offset, 8);
    memcpy(p + 24, &size, 8);
    memcpy(p + 32, UUID, 40);
    memcpy(p + 72, &name_len, 4);
    memcpy(p + 76, &zero, 4);
    size_t body = source == SHMREG_SOURCE_CUDA_VMM_RANGE ? 8 * (size_t)chunks : 64;
    for (size_t i = 0; i < body; i += 8) {
        uint64_t v = (uint64_t)2 << 20;
        memcpy(p + 80 + i, &v, 8);
    }
    memcpy(p + 80 + body, name, name_len);
    return 80 + body + name_len;
}

/* Every spoiled request: refused, every descriptor closed (the baseline). */
static void test_hostile_requests(void **state)
{
    struct fixture *f = *state;
    int fds[3] = {f->pipe[0][1], f->pipe[1][1], f->pipe[2][1]};
    unsigned char p[1024];
    shmreg_cuda_region_request got;
    uint32_t v;
    size_t n;

    n = raw_request(p, SHMREG_SOURCE_CUDA_VMM_RANGE, 3, "r");
    p[0] ^= 1;
    assert_ok(shmreg_send_fds(f->sv[0], fds, 3, p, n));
    assert_fails_containing(shmreg_recv_cuda_region(f->sv[1], &got), SHMREG_ERR_INVALID_ARG, "magic");
    assert_int_equal(got.fd_count, 0);

    n = raw_request(p, SHMREG_SOURCE_CUDA_VMM_RANGE, 3, "r");
    v = SHMREG_PIN;
    memcpy(p + 4, &v, 4);
    assert_ok(shmreg_send_fds(f->sv[0], fds, 3, p, n));
    assert_fails_containing(shmreg_recv_cuda_region(f->sv[1], &got), SHMREG_ERR_INVALID_ARG, "flags");

    n = raw_request(p, SHMREG_SOURCE_CUDA_FD, 0, "r");
    assert_ok(shmreg_send_fds(f->sv[0], fds, 1, p, n));
    assert_fails_containing(shmreg_recv_cuda_region(f->sv[1], &got), SHMREG_ERR_INVALID_ARG, "a source");

    n = raw_request(p, SHMREG_SOURCE_CUDA_VMM_RANGE, 3, "r"); /* 3 chunks, 2 descriptors */
    assert_ok(shmreg_send_fds(f->sv[0], fds, 2, p, n));
    assert_fails_containing(shmreg_recv_cuda_region(f->sv[1], &got), SHMREG_ERR_NOT_FOUND, "carries 3 descriptors");

    n = raw_request(p, SHMREG_SOURCE_CUDA_POOL, 0, "r"); /* a pool with 2 descriptors */
    assert_ok(shmreg_send_fds(f->sv[0], fds, 2, p, n));
    assert_fails_containing(shmreg_recv_cuda_region(f->sv[1], &got), SHMREG_ERR_OUT_OF_BOUNDS, "this one 2");

    n = raw_request(p, SHMREG_SOURCE_CUDA_IPC, 3, "r"); /* a chunk count on IPC */
    assert_ok(shmreg_send_fds(f->sv[0], fds, 1, p, n));
    assert_fails_containing(shmreg_recv_cuda_region(f->sv[1], &got), SHMREG_ERR_INVALID_ARG, "chunk count");

    n = raw_request(p, SHMREG_SOURCE_CUDA_POOL, 0, "name");
    assert_ok(shmreg_send_fds(f->sv[0], fds, 1, p, n - 1)); /* the name cut short */
    assert_fails_containing(shmreg_recv_cuda_region(f->sv[1], &got), SHMREG_ERR_INVALID_ARG, "name length");

    n = raw_request(p, SHMREG_SOURCE_CUDA_POOL, 0, "r");
    p[40] = 0; /* a NUL inside the UUID */
    assert_ok(shmreg_send_fds(f->sv[0], fds, 1, p, n));
    assert_fails_containing(shmreg_recv_cuda_region(f->sv[1], &got), SHMREG_ERR_INVALID_ARG, "NUL");

    n = raw_request(p, SHMREG_SOURCE_CUDA_POOL, 0, "bell\x07");
    assert_ok(shmreg_send_fds(f->sv[0], fds, 1, p, n));
    assert_fails_code(shmreg_recv_cuda_region(f->sv[1], &got), SHMREG_ERR_INVALID_ARG);

    /* A memfd-region request is not this format's. */
    assert_ok(shmreg_send_fd(f->sv[0], fds[0], "SRG1", 4));
    assert_fails_code(shmreg_recv_cuda_region(f->sv[1], &got), SHMREG_ERR_SYSTEM);

    assert_fails_code(shmreg_recv_cuda_region(-1, &got), SHMREG_ERR_INVALID_ARG);
    assert_fails_code(shmreg_recv_cuda_region(f->sv[1], NULL), SHMREG_ERR_INVALID_ARG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_each_kind_round_trips, setup, teardown),
        cmocka_unit_test_setup_teardown(test_answer_reaches_the_client, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hostile_requests, setup, teardown),
    };
    return cmocka_run_group_tests_name("cuda_region_socket", tests, NULL, NULL);
}
