/* The state blob through the static copy (src/handover/state_blob.h):
 * CUDA records written and read back field by field; restored where CUDA
 * cannot be used (each CUDA region fails alone with UNSUPPORTED, remote
 * ones are skipped); blobs whose checksum is right but whose lengths,
 * indexes, strings, chunk counts or chunk sizes are not (each refused
 * whole, every descriptor closed); and a save and restore of a registry
 * without CUDA regions that never reach CUDA. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "backends/backend.h"
#include "fixture.h"
#include "handover/state_blob.h"
#ifdef SHMREG_TEST_CUDA_CALLS
#include "backends/cuda_calls.h"
#endif

#define CHECKSUM_AT 48

/* The writer's blob, its checksum made again after a test altered it, in
 * a sealed memfd. */
static int sealed_blob(struct shmreg__state_writer *w)
{
    memset(w->buf + CHECKSUM_AT, 0, 8);
    uint64_t sum = XXH3_64bits(w->buf, w->len);
    memcpy(w->buf + CHECKSUM_AT, &sum, sizeof sum);
    int fd = memfd_create("shmreg-state-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, w->buf, w->len), (ssize_t)w->len);
    assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW), 0);
    shmreg__state_writer_free(w);
    return fd;
}

static struct shmreg__state_record record(shmreg_source source, const char *name)
{
    return (struct shmreg__state_record){.source = source, .name = name, .fd_index = -1, .byte_size = 64};
}

#define UUID_TEXT "GPU-0123abcd-4567-89ef-0123-456789abcdef"
#define CHUNK ((uint64_t)2 << 20)

static const uint64_t three_chunks[3] = {CHUNK, CHUNK, 2 * CHUNK};

/* A CUDA record of `source` on device 1 of UUID_TEXT, with a handle of
 * bytes 0..63 (IPC, pool) or three chunks (a VMM range). */
static struct shmreg__state_record cuda_record(shmreg_source source, const char *name)
{
    struct shmreg__state_record r = record(source, name);
    r.offset = 4099;
    r.cuda.device_id = 1;
    bool mig;
    assert_int_equal(shmreg__cuda_parse_uuid(UUID_TEXT, r.cuda.uuid, &mig), 0);
    r.cuda.uuid_known = true;
    for (size_t i = 0; i < sizeof r.cuda.handle; i++)
        r.cuda.handle[i] = (unsigned char)i;
    r.cuda.chunks = source == SHMREG_SOURCE_CUDA_IPC ? 0 : 1;
    if (source == SHMREG_SOURCE_CUDA_VMM_RANGE) {
        r.cuda.chunks = 3;
        r.cuda.chunk_sizes = (const unsigned char *)three_chunks;
    }
    return r;
}

static const shmreg_source gpu[] = {SHMREG_SOURCE_CUDA_IPC, SHMREG_SOURCE_CUDA_FD, SHMREG_SOURCE_CUDA_VMM_RANGE,
                                    SHMREG_SOURCE_CUDA_POOL};
#define GPU_KINDS 4
#define GPU_FDS 5 /* 0 + 1 + 3 + 1 */

/* Every kind through the writer and the reader: the CUDA part of each
 * (device, UUID, handle, chunk sizes) as written, descriptors numbered in
 * record order after a descriptor region's. */
static void test_cuda_records_round_trip(void **state)
{
    struct shmreg__state_writer w;
    shmreg__state_writer_init(&w);
    struct shmreg__state_record fd = record(SHMREG_SOURCE_FD, "memfd");
    shmreg__state_write_record(&w, &fd);
    for (size_t i = 0; i < GPU_KINDS; i++) {
        struct shmreg__state_record r = cuda_record(gpu[i], ut_fmt("gpu%zu", i));
        shmreg__state_write_record(&w, &r);
    }
    assert_ok(shmreg__state_write_finish(&w, NULL, 0, NULL, 0));
    int blob = sealed_blob(&w);
    struct shmreg__state s;
    assert_ok(shmreg__state_read(blob, &s));
    close(blob);
    assert_int_equal(s.record_count, 1 + GPU_KINDS);
    assert_int_equal(s.region_fds, 1 + GPU_FDS);
    const long first_fd[GPU_KINDS] = {-1, 1, 2, 5};
    for (size_t i = 0; i < GPU_KINDS; i++) {
        const struct shmreg__state_record *r = &s.records[1 + i];
        assert_int_equal(r->source, gpu[i]);
        assert_int_equal(r->fd_index, first_fd[i]);
        assert_int_equal(r->offset, 4099);
        assert_int_equal(r->cuda.device_id, 1);
        assert_true(r->cuda.uuid_known);
        assert_false(r->cuda.mig);
        char text[SHMREG__CUDA_UUID_TEXT];
        shmreg__cuda_format_uuid(r->cuda.uuid, r->cuda.mig, text);
        assert_string_equal(text, UUID_TEXT);
        assert_int_equal(r->cuda.handle[63], 63);
        assert_int_equal(shmreg__state_record_fds(r), (size_t)(i == 0 ? 0 : i == 2 ? 3 : 1));
    }
    const struct shmreg__state_record *range = &s.records[3];
    for (size_t k = 0; k < 3; k++)
        assert_int_equal(shmreg__state_chunk_size(range, k), three_chunks[k]);
    assert_null(s.records[2].cuda.chunk_sizes);
    shmreg__state_free(&s);
}

/* Restored on a machine where CUDA cannot be used (no GPU, or a build
 * without CUDA): each CUDA region fails alone with UNSUPPORTED, naming the
 * GPU it was saved on; the shm region is restored, the remote one skipped,
 * every descriptor closed. */
static void test_cuda_regions_fail_alone_without_a_gpu(void **state)
{
    struct ut *t = *state;
    struct shmreg__state_writer w;
    shmreg__state_writer_init(&w);
    struct shmreg__state_record shm = record(SHMREG_SOURCE_SHM, "host");
    shm.key = ut_object(t, 4096, 1);
    shmreg__state_write_record(&w, &shm);
    for (size_t i = 0; i < GPU_KINDS; i++) {
        struct shmreg__state_record r = cuda_record(gpu[i], ut_fmt("gpu%zu", i));
        shmreg__state_write_record(&w, &r);
    }
    struct shmreg__state_record far = record(SHMREG_SOURCE_REMOTE, "far");
    shmreg__state_write_record(&w, &far);
    assert_ok(shmreg__state_write_finish(&w, NULL, 0, NULL, 0));
    int fds[GPU_FDS];
    for (size_t i = 0; i < GPU_FDS; i++)
        fds[i] = memfd_create("shmreg-state-test", MFD_CLOEXEC); /* stand-ins: never imported here */
    int before = tu_count_fds();
    shmreg_restore_report *rep = NULL;
    assert_ok(shmreg_state_restore(t->reg, sealed_blob(&w), fds, GPU_FDS, &rep));
    assert_int_equal(tu_count_fds(), before - GPU_FDS);
    assert_int_equal(rep->restored, 1);
    assert_int_equal(rep->failed, GPU_KINDS);
    assert_int_equal(rep->skipped, 1);
    assert_int_equal(rep->entry_count, GPU_KINDS + 1);
    for (size_t i = 0; i < GPU_KINDS; i++) {
        const shmreg_restore_entry *e = &rep->entries[i];
        assert_int_equal(e->err, SHMREG_ERR_UNSUPPORTED);
        assert_false(e->skipped);
        const char *head = ut_fmt("cannot restore CUDA region 'gpu%zu', saved on device 1 (" UUID_TEXT "): failed to "
                                  "register CUDA ", i);
        if (strncmp(e->message, head, strlen(head)) != 0)
            fail_msg("'%s' does not start with '%s'", e->message, head);
    }
    assert_true(rep->entries[GPU_KINDS].skipped);
    assert_string_equal(rep->entries[GPU_KINDS].name, "far");
    assert_int_equal(ut_status_count(t->reg, SHMREG_KIND_CUDA), 0);
    shmreg_restore_report_free(rep);
}

/* ------------------------------------------------- checksummed, but wrong */

/* The finished writer's blob, altered by `alter`, must be refused naming
 * `part`, closing the nfds descriptors given (memfds) and the blob. */
static void assert_blob_refused(struct ut *t, struct shmreg__state_writer *w, size_t nfds,
                                void (*alter)(unsigned char *b), const char *part)
{
    alter(w->buf);
    int fds[8];
    for (size_t i = 0; i < nfds; i++)
        fds[i] = memfd_create("shmreg-state-test", MFD_CLOEXEC);
    int blob = sealed_blob(w);
    int before = tu_count_fds();
    shmreg_restore_report *rep = NULL;
    assert_fails_containing(shmreg_state_restore(t->reg, blob, fds, nfds, &rep), SHMREG_ERR_INVALID_ARG, part);
    assert_null(rep);
    assert_int_equal(tu_count_fds(), before - 1 - (int)nfds);
    assert_int_equal(ut_status_count(t->reg, SHMREG_KIND_ANY), 0);
}

/* A blob of one descriptor region and one extra, altered by `alter`
 * (offsets into the blob), must be refused naming `part`. */
static void assert_altered_refused(struct ut *t, void (*alter)(unsigned char *b), const char *part)
{
    struct shmreg__state_writer w;
    shmreg__state_writer_init(&w);
    struct shmreg__state_record r = record(SHMREG_SOURCE_FD, "in");
    shmreg__state_write_record(&w, &r);
    shmreg_handover_fd extra = {.name = "listener"};
    assert_ok(shmreg__state_write_finish(&w, &extra, 1, "app", 3));
    assert_blob_refused(t, &w, 2, alter, part);
}

/* Offsets: the header's counts at 24 (records), 28 (region
 * descriptors); the first record at 64: its size at 64, its source at 68,
 * its descriptor index at 76, its name at 120. */
static void more_records(unsigned char *b) { b[24] = 200; }
static void more_fds_than_records(unsigned char *b) { b[28] = 2; }
static void past_the_fd_limit(unsigned char *b) { b[30] = 0x10; } /* 1 + 0x100000 */
static void unknown_source(unsigned char *b) { b[68] = 99; }
static void wrong_index(unsigned char *b) { b[76] = 1; }
static void name_without_nul(unsigned char *b) { b[120 + 2] = 'x'; }
static void name_with_control(unsigned char *b) { b[120] = '\n'; }

/* An alteration, and what the refusal names. */
struct altered {
    void (*alter)(unsigned char *b);
    const char *part;
};

static void test_altered_but_checksummed(void **state)
{
    const struct altered cases[] = {
        {more_records, "counts 200 records and 1 descriptors"},
        {more_fds_than_records, "refers to 1 region descriptors where its header says 2"},
        {past_the_fd_limit, "more than its"},
        {unknown_source, "has record 0 of unknown source 99"},
        {wrong_index, "has record 0 with descriptor index 1 where 0 was due"},
        {name_without_nul, "has record 0 with a string cut short or without its NUL"},
        {name_with_control, "has record 0 with a name or tag registration refuses"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_altered_refused(*state, cases[i].alter, cases[i].part);
}

/* A VMM range record named "r" alone, altered: its CUDA part starts after
 * the name and its NUL, at 122: the device at 122, the chunk count at 126,
 * the bits at 130, the zero at 134, the UUID at 138, the handle at 154,
 * the three chunk sizes at 218, 226 and 234 (the blob's end). */
#define PART 122
static void put32(unsigned char *b, size_t at, uint32_t v) { memcpy(b + at, &v, sizeof v); }
static void put64(unsigned char *b, size_t at, uint64_t v) { memcpy(b + at, &v, sizeof v); }
static void no_chunks(unsigned char *b) { put32(b, PART + 4, 0); }
static void too_many_chunks(unsigned char *b) { put32(b, PART + 4, SHMREG_CUDA_CHUNKS_MAX + 1); }
static void fewer_chunks(unsigned char *b) { put32(b, PART + 4, 2); } /* its size then says more */
static void more_chunks(unsigned char *b) { put32(b, PART + 4, 4); }  /* past the blob's end */
static void negative_device(unsigned char *b) { put32(b, PART, 0xffffffffu); }
static void unknown_bits(unsigned char *b) { put32(b, PART + 8, 4); }
static void mig_without_uuid(unsigned char *b) { put32(b, PART + 8, 2); }
static void zero_not_zero(unsigned char *b) { put32(b, PART + 12, 1); }
static void chunk_of_size_zero(unsigned char *b) { put64(b, PART + 96 + 8, 0); }
static void sizes_overflow(unsigned char *b) { put64(b, PART + 96 + 16, UINT64_MAX - CHUNK); }
static void range_index_late(unsigned char *b) { put32(b, 76, 1); }
static void range_without_index(unsigned char *b) { put32(b, 76, 0xffffffffu); }
static void range_size_short(unsigned char *b) { put32(b, 64, 56 + 2 + 96 + 16); }

static void assert_range_refused(struct ut *t, void (*alter)(unsigned char *b), const char *part)
{
    struct shmreg__state_writer w;
    shmreg__state_writer_init(&w);
    struct shmreg__state_record r = cuda_record(SHMREG_SOURCE_CUDA_VMM_RANGE, "r");
    shmreg__state_write_record(&w, &r);
    assert_ok(shmreg__state_write_finish(&w, NULL, 0, NULL, 0));
    assert_int_equal(w.len, PART + 96 + 3 * 8);
    assert_blob_refused(t, &w, 3, alter, part);
}

static void unchanged(unsigned char *b) { (void)b; }

/* One record of `source` with `chunks` descriptors (the writer numbers
 * them, whether or not the reader takes that many), its last `cut` bytes
 * dropped. */
static void assert_record_refused(struct ut *t, shmreg_source source, size_t chunks, size_t cut, const char *part)
{
    struct shmreg__state_writer w;
    shmreg__state_writer_init(&w);
    struct shmreg__state_record r = cuda_record(source, "r");
    r.cuda.chunks = chunks;
    shmreg__state_write_record(&w, &r);
    w.len -= cut;
    assert_ok(shmreg__state_write_finish(&w, NULL, 0, NULL, 0));
    assert_blob_refused(t, &w, chunks, unchanged, part);
}

static void test_cuda_fields_checked(void **state)
{
    struct ut *t = *state;
    const struct altered cases[] = {
        {no_chunks, "has CUDA record 0 of source 5 with 0 descriptors"},
        {too_many_chunks, "has CUDA record 0 of source 5 with 254 descriptors"},
        {fewer_chunks, "has record 0 of size 178, not the 170 its parts take"},
        {more_chunks, "is cut short in the chunk sizes of record 0"},
        {negative_device, "has CUDA record 0 with device -1"},
        {unknown_bits, "bits 0x4"},
        {mig_without_uuid, "bits 0x2"},
        {zero_not_zero, "or a field not zero"},
        {chunk_of_size_zero, "whose chunk 1 is of size 0"},
        {sizes_overflow, "whose chunk 2 is of size"},
        {range_index_late, "has record 0 with descriptor index 1 where 0 was due"},
        {range_without_index, "has record 0 with descriptor index -1 where 0 was due"},
        {range_size_short, "has record 0 of size 170, not the 178 its parts take"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_range_refused(t, cases[i].alter, cases[i].part);
    /* The other sources' counts: legacy IPC has none, a pool one. */
    assert_record_refused(t, SHMREG_SOURCE_CUDA_IPC, 1, 0, "has CUDA record 0 of source 1 with 1 descriptors");
    assert_record_refused(t, SHMREG_SOURCE_CUDA_POOL, 2, 0, "has CUDA record 0 of source 6 with 2 descriptors");
    /* A CUDA record cut short in its part: the blob ends inside it. */
    assert_record_refused(t, SHMREG_SOURCE_CUDA_IPC, 0, 10, "is cut short in the CUDA part of record 0");
}

/* ---------------------------------------------------------- never CUDA */

static int pinning_calls;
static bool counting_usable(void)
{
    pinning_calls++;
    return false;
}

/* A registry without CUDA regions, saved and restored, under a pin policy
 * that asks for no pin: no call reaches the CUDA layer. The host pinning
 * table counts; with the CUDA backends built, every entry of the CUDA call
 * table is emptied meanwhile, so any call would crash the test. */
static void test_save_and_restore_never_reach_cuda(void **state)
{
    struct ut *t = *state;
    shmreg_registry *from = ut_new_registry(SHMREG_PIN_NEVER, SHMREG_POLICY_DEFER);
    shmreg_registry *to = ut_new_registry(SHMREG_PIN_NEVER, SHMREG_POLICY_DEFER);
    assert_ok(shmreg_register_system(from, "host", ut_object(t, 4096, 1), 0, 4096, 0));
    int fd = tu_memfd_create(4096, 2, F_SEAL_SHRINK);
    assert_ok(shmreg_register_system_fd(from, "sealed", fd, 0, 4096, 0));
    close(fd);
    struct shmreg__host_pinning pinning = shmreg__host_pinning;
    shmreg__host_pinning.usable = counting_usable;
#ifdef SHMREG_TEST_CUDA_CALLS
    struct shmreg__cuda calls = shmreg__cuda;
    memset(&shmreg__cuda, 0, sizeof shmreg__cuda);
#endif
    int blob = -1, *fds = NULL;
    size_t nfds = 0;
    shmreg_restore_report *rep = NULL;
    assert_ok(shmreg_state_save(from, NULL, 0, &blob, &fds, &nfds));
    assert_ok(shmreg_state_restore(to, blob, fds, nfds, &rep));
#ifdef SHMREG_TEST_CUDA_CALLS
    shmreg__cuda = calls;
#endif
    shmreg__host_pinning = pinning;
    assert_int_equal(pinning_calls, 0);
    assert_int_equal(rep->restored, 2);
    shmreg_restore_report_free(rep);
    free(fds);
    shmreg_registry_destroy(from);
    shmreg_registry_destroy(to);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        UT_TEST(test_save_and_restore_never_reach_cuda),
        UT_TEST(test_cuda_records_round_trip),
        UT_TEST(test_cuda_regions_fail_alone_without_a_gpu),
        UT_TEST(test_altered_but_checksummed),
        UT_TEST(test_cuda_fields_checked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
