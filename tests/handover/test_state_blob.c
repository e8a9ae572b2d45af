/* The state blob through the static copy (src/handover/state_blob.h):
 * records of the kinds a state does not carry (CUDA regions fail alone
 * with UNSUPPORTED, remote ones are skipped), blobs whose checksum is right
 * but whose lengths, indexes or strings are not (each refused whole, every
 * descriptor closed), and a save and restore of a registry without CUDA
 * regions that never reach CUDA. */
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

static void test_kinds_not_carried(void **state)
{
    struct ut *t = *state;
    struct shmreg__state_writer w;
    shmreg__state_writer_init(&w);
    struct shmreg__state_record shm = record(SHMREG_SOURCE_SHM, "host");
    shm.key = ut_object(t, 4096, 1);
    shmreg__state_write_record(&w, &shm);
    const shmreg_source gpu[] = {SHMREG_SOURCE_CUDA_IPC, SHMREG_SOURCE_CUDA_FD, SHMREG_SOURCE_CUDA_VMM_RANGE,
                                 SHMREG_SOURCE_CUDA_POOL};
    for (size_t i = 0; i < 4; i++) {
        struct shmreg__state_record r = record(gpu[i], ut_fmt("gpu%zu", i));
        shmreg__state_write_record(&w, &r);
    }
    struct shmreg__state_record far = record(SHMREG_SOURCE_REMOTE, "far");
    shmreg__state_write_record(&w, &far);
    assert_ok(shmreg__state_write_finish(&w, NULL, 0, NULL, 0));
    shmreg_restore_report *rep = NULL;
    assert_ok(shmreg_state_restore(t->reg, sealed_blob(&w), NULL, 0, &rep));
    assert_int_equal(rep->restored, 1);
    assert_int_equal(rep->failed, 4);
    assert_int_equal(rep->skipped, 1);
    assert_int_equal(rep->entry_count, 5);
    for (size_t i = 0; i < 4; i++) {
        assert_string_equal(rep->entries[i].message,
                            ut_fmt("cannot restore CUDA region 'gpu%zu': CUDA regions are not carried by a saved "
                                   "state yet; the client registers it again",
                                   i));
        assert_int_equal(rep->entries[i].err, SHMREG_ERR_UNSUPPORTED);
    }
    assert_true(rep->entries[4].skipped);
    assert_string_equal(rep->entries[4].name, "far");
    shmreg_restore_report_free(rep);
}

/* ------------------------------------------------- checksummed, but wrong */

/* A blob of one descriptor region and one extra, altered by `alter`
 * (offsets into the blob), must be refused naming `part`, closing the two
 * descriptors given. */
static void assert_altered_refused(struct ut *t, void (*alter)(unsigned char *b), const char *part)
{
    struct shmreg__state_writer w;
    shmreg__state_writer_init(&w);
    struct shmreg__state_record r = record(SHMREG_SOURCE_FD, "in");
    r.fd_index = 0;
    shmreg__state_write_record(&w, &r);
    shmreg_handover_fd extra = {.name = "listener"};
    assert_ok(shmreg__state_write_finish(&w, &extra, 1, "app", 3));
    alter(w.buf);
    int fds[2] = {memfd_create("shmreg-state-test", MFD_CLOEXEC), memfd_create("shmreg-state-test", MFD_CLOEXEC)};
    int before = tu_count_fds();
    shmreg_restore_report *rep = NULL;
    assert_fails_containing(shmreg_state_restore(t->reg, sealed_blob(&w), fds, 2, &rep), SHMREG_ERR_INVALID_ARG,
                            part);
    assert_null(rep);
    assert_int_equal(tu_count_fds(), before - 2);
    assert_int_equal(ut_status_count(t->reg, SHMREG_KIND_ANY), 0);
}

/* Offsets: the header's counts at 24 (records), 28 (region
 * descriptors); the first record at 64: its source at 68, its descriptor
 * index at 76, its name at 120. */
static void more_records(unsigned char *b) { b[24] = 200; }
static void more_fds_than_records(unsigned char *b) { b[28] = 2; }
static void unknown_source(unsigned char *b) { b[68] = 99; }
static void wrong_index(unsigned char *b) { b[76] = 1; }
static void name_without_nul(unsigned char *b) { b[120 + 2] = 'x'; }
static void name_with_control(unsigned char *b) { b[120] = '\n'; }

static void test_altered_but_checksummed(void **state)
{
    struct ut *t = *state;
    assert_altered_refused(t, more_records, "counts 200 records and 1 descriptors, more than its");
    assert_altered_refused(t, more_fds_than_records, "counts 1 records and 2 descriptors");
    assert_altered_refused(t, unknown_source, "has record 0 of unknown source 99");
    assert_altered_refused(t, wrong_index, "has record 0 with descriptor index 1 where 0 was due");
    assert_altered_refused(t, name_without_nul, "has record 0 with a string cut short or without its NUL");
    assert_altered_refused(t, name_with_control, "has record 0 with a name or tag registration refuses");
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
        UT_TEST(test_kinds_not_carried),
        UT_TEST(test_altered_but_checksummed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
