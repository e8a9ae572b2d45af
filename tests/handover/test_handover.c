/* A registry handed to another process (shmreg/handover.h): a named shm
 * region and a sealed memfd region, with tags and windows at odd offsets,
 * sent over a socketpair to a forked child that rebuilds a registry from
 * them and reads the bytes written before; the application's descriptors
 * and bytes arriving with them, in more messages than one carries; and what
 * a restore refuses whole (another version, a cut or altered blob,
 * descriptors that do not match it, an unsealed blob, a peer of another
 * uid) or region by region (a key whose object was replaced, a memfd the
 * receiver's rules refuse, a name taken), leaking no descriptor. */
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture.h"

#define OBJ 16384
#define SHM_OFFSET 100
#define SHM_SIZE 5000
#define FD_OFFSET 4097
#define FD_SIZE 3000
#define APP "client 7 owns 'named'; client 9 owns 'sealed'"
#define MANY_EXTRAS 300 /* more than one message carries (SHMREG_FDS_MAX) */

static int make_memfd(uint8_t seed, int seals)
{
    return tu_memfd_create(OBJ, seed, seals);
}

/* Write tu_pattern(seed, i) over the region's bytes through the registry. */
static void write_through(shmreg_registry *reg, const char *name, const char *tag, size_t size, uint8_t seed)
{
    shmreg_filter f = tu_filter(name, SHMREG_KIND_SYSTEM, tag);
    shmreg_region *ref = NULL;
    shmreg_view v;
    assert_ok(shmreg_acquire_matching(reg, &f, 0, size, &ref, &v));
    for (size_t i = 0; i < size; i++)
        ((unsigned char *)v.addr)[i] = tu_pattern(seed, i);
    shmreg_release(ref);
}

/* The two regions every test hands over: 'named' (a shm key, tag
 * tenant-a) and 'sealed' (a memfd, read-only, tag tenant-b), each written
 * with its own bytes through the registry. The memfd is closed: the
 * registry keeps its own descriptor. */
static void register_two(struct ut *t, shmreg_registry *reg, const char **key)
{
    *key = ut_object(t, OBJ, 1);
    assert_ok(tu_register_system_tagged(reg, "named", *key, SHM_OFFSET, SHM_SIZE, 0, "tenant-a"));
    int fd = make_memfd(2, F_SEAL_SHRINK | F_SEAL_GROW);
    assert_ok(tu_register_fd_tagged(reg, "sealed", fd, FD_OFFSET, FD_SIZE, 0, "tenant-b"));
    close(fd);
    write_through(reg, "named", "tenant-a", SHM_SIZE, 11);
    write_through(reg, "sealed", "tenant-b", FD_SIZE, 12);
}

/* In the child: a failed check ends it with a line saying which. */
#define CHILD_CHECK(cond)                                                                                     \
    do {                                                                                                      \
        if (!(cond)) {                                                                                        \
            fprintf(stderr, "child: %s:%d: %s (%s)\n", __FILE__, __LINE__, #cond, shmreg_last_error());        \
            _exit(1);                                                                                         \
        }                                                                                                     \
    } while (0)

static bool region_holds(shmreg_registry *reg, const char *name, const char *tag, size_t size, uint8_t seed)
{
    shmreg_filter f = tu_filter(name, SHMREG_KIND_SYSTEM, tag);
    shmreg_region *ref = NULL;
    shmreg_view v;
    if (shmreg_acquire_matching(reg, &f, 0, size, &ref, &v) != SHMREG_OK)
        return false;
    bool same = true;
    for (size_t i = 0; i < size && same; i++)
        same = ((const unsigned char *)v.addr)[i] == tu_pattern(seed, i);
    shmreg_release(ref);
    return same;
}

/* The new process: a registry rebuilt from what arrives on sock, the
 * regions' bytes, the app's bytes and descriptors (each a pipe's write
 * end: it writes its index there). */
static void child_receive(int sock, int report_pipe, size_t n_extra_want)
{
    shmreg_registry *reg = NULL;
    CHILD_CHECK(shmreg_registry_create(NULL, &reg) == SHMREG_OK);
    shmreg_restore_report *rep = NULL;
    shmreg_handover_fd *extra = NULL;
    size_t n_extra = 0;
    CHILD_CHECK(shmreg_handover_receive(reg, sock, &rep, &extra, &n_extra) == SHMREG_OK);
    CHILD_CHECK(rep->restored == 2 && rep->failed == 0 && rep->skipped == 0 && rep->entry_count == 0);
    CHILD_CHECK(rep->app_len == sizeof APP && memcmp(rep->app_state, APP, sizeof APP) == 0);
    CHILD_CHECK(region_holds(reg, "named", "tenant-a", SHM_SIZE, 11));
    CHILD_CHECK(region_holds(reg, "sealed", "tenant-b", FD_SIZE, 12));
    shmreg_region_status *st = NULL;
    size_t n = 0;
    CHILD_CHECK(shmreg_status(reg, "sealed", SHMREG_KIND_SYSTEM, &st, &n) == SHMREG_OK && n == 1);
    CHILD_CHECK(st->offset == FD_OFFSET && st->byte_size == FD_SIZE && st->references == 0 && st->key == NULL);
    shmreg_status_free(st, n);
    CHILD_CHECK(n_extra == n_extra_want);
    for (size_t i = 0; i < n_extra; i++) {
        char want[64];
        snprintf(want, sizeof want, "app-%zu", i);
        CHILD_CHECK(strcmp(extra[i].name, want) == 0);
        CHILD_CHECK(write(extra[i].fd, &i, sizeof i) == (ssize_t)sizeof i);
        close(extra[i].fd);
    }
    free(extra);
    shmreg_restore_report_free(rep);
    /* Not destroyed: liburcu's hash-table workers of the parent do not
     * exist in a forked child, and the table's destroy would wait for
     * them. A new server is exec'd, and has its own. */
    CHILD_CHECK(write(report_pipe, "ok", 2) == 2);
    _exit(0);
}

static void hand_over_to_child(struct ut *t, size_t n_extra)
{
    const char *key;
    register_two(t, t->reg, &key);
    int sv[2], app[2], done[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    assert_int_equal(pipe(app), 0);
    assert_int_equal(pipe(done), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(sv[0]);
        child_receive(sv[1], done[1], n_extra);
    }
    close(sv[1]);
    close(done[1]);
    shmreg_handover_fd *extra = calloc(n_extra ? n_extra : 1, sizeof *extra);
    for (size_t i = 0; i < n_extra; i++) {
        snprintf(extra[i].name, sizeof extra[i].name, "app-%zu", i);
        extra[i].fd = app[1];
    }
    assert_ok(shmreg_handover_send(t->reg, sv[0], APP, sizeof APP, extra, n_extra));
    close(app[1]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    char ok[3] = "";
    assert_int_equal(read(done[0], ok, 2), 2);
    assert_string_equal(ok, "ok");
    for (size_t i = 0, got; i < n_extra; i++) { /* every app descriptor worked in the child, in order */
        assert_int_equal(read(app[0], &got, sizeof got), sizeof got);
        assert_int_equal(got, i);
    }
    free(extra);
    close(app[0]);
    close(done[0]);
    close(sv[0]);
}

static void test_handover_to_a_child(void **state)
{
    hand_over_to_child(*state, 1);
}

static void test_handover_in_several_messages(void **state)
{
    hand_over_to_child(*state, MANY_EXTRAS);
}

/* ------------------------------------------- save and restore, no socket */

struct saved {
    int blob;
    int *fds;
    size_t nfds;
};

static struct saved save(shmreg_registry *reg)
{
    struct saved s;
    assert_ok(shmreg_state_save(reg, APP, sizeof APP, &s.blob, &s.fds, &s.nfds));
    return s;
}

/* The blob's bytes, and a new sealed memfd holding `len` of them (as the
 * save seals its own, or with `seals` 0 not at all). */
static unsigned char *blob_bytes(int blob, size_t *len)
{
    struct stat st;
    assert_int_equal(fstat(blob, &st), 0);
    *len = (size_t)st.st_size;
    unsigned char *b = malloc(*len);
    assert_int_equal(pread(blob, b, *len, 0), (ssize_t)*len);
    return b;
}

static int blob_of(const unsigned char *b, size_t len, int seals)
{
    int fd = memfd_create("shmreg-handover-test-blob", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, b, len), (ssize_t)len);
    if (seals)
        assert_int_equal(fcntl(fd, F_ADD_SEALS, seals), 0);
    return fd;
}

#define ALL_SEALS (F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

/* A restore refused whole: code and message, no report, nothing
 * registered, and every descriptor given closed (the count drops by
 * exactly what was given). */
static void assert_refused(int blob, const int *fds, size_t nfds, shmreg_err code, const char *part)
{
    shmreg_registry *to = ut_new_registry(SHMREG_PIN_AUTO, SHMREG_POLICY_DEFER);
    int before = tu_count_fds();
    shmreg_restore_report *rep = (shmreg_restore_report *)1;
    assert_fails_containing(shmreg_state_restore(to, blob, fds, nfds, &rep), code, part);
    assert_null(rep);
    assert_int_equal(tu_count_fds(), before - 1 - (int)nfds);
    assert_int_equal(ut_status_count(to, SHMREG_KIND_ANY), 0);
    shmreg_registry_destroy(to);
}

static void test_restore_in_process(void **state)
{
    struct ut *t = *state;
    const char *key;
    register_two(t, t->reg, &key);
    int before = tu_count_fds();
    struct saved s = save(t->reg);
    assert_int_equal(s.nfds, 1); /* the memfd region's; a shm key goes by name */
    assert_int_equal(tu_count_fds(), before + 2);
    shmreg_registry *to = ut_new_registry(SHMREG_PIN_AUTO, SHMREG_POLICY_DEFER);
    shmreg_restore_report *rep = NULL;
    assert_ok(shmreg_state_restore(to, s.blob, s.fds, s.nfds, &rep));
    free(s.fds);
    /* Blob and descriptor closed; the new registry keeps one of its own. */
    assert_int_equal(tu_count_fds(), before + 1);
    assert_int_equal(rep->restored, 2);
    assert_memory_equal(rep->app_state, APP, sizeof APP);
    assert_true(region_holds(to, "named", "tenant-a", SHM_SIZE, 11));
    assert_true(region_holds(to, "sealed", "tenant-b", FD_SIZE, 12));
    shmreg_restore_report_free(rep);
    shmreg_registry_destroy(to);
    assert_int_equal(tu_count_fds(), before);
}

/* Save t->reg's two regions, take the blob's bytes, and close the blob. */
static unsigned char *saved_bytes(struct ut *t, struct saved *s, size_t *len)
{
    const char *key;
    register_two(t, t->reg, &key);
    *s = save(t->reg);
    unsigned char *b = blob_bytes(s->blob, len);
    close(s->blob);
    return b;
}

static void test_unknown_version_is_refused(void **state)
{
    struct saved s;
    size_t len;
    unsigned char *b = saved_bytes(*state, &s, &len);
    uint32_t version = SHMREG_STATE_VERSION + 1;
    memcpy(b + 8, &version, sizeof version);
    assert_refused(blob_of(b, len, ALL_SEALS), s.fds, s.nfds, SHMREG_ERR_UNSUPPORTED,
                   ut_fmt("the state blob is version %d, and this library (libshmreg %s) reads version %d only",
                          SHMREG_STATE_VERSION + 1, SHMREG_VERSION_STRING, SHMREG_STATE_VERSION));
    free(s.fds);
    free(b);
}

static void test_truncated_blob_is_refused(void **state)
{
    struct saved s;
    size_t len;
    unsigned char *b = saved_bytes(*state, &s, &len);
    assert_refused(blob_of(b, len - 10, ALL_SEALS), s.fds, s.nfds, SHMREG_ERR_INVALID_ARG,
                   "the state blob is truncated or extended");
    free(s.fds);
    free(b);
}

static void test_altered_blob_is_refused(void **state)
{
    struct saved s;
    size_t len;
    unsigned char *b = saved_bytes(*state, &s, &len);
    b[len - 1] ^= 0x20; /* a byte of the app_state */
    assert_refused(blob_of(b, len, ALL_SEALS), s.fds, s.nfds, SHMREG_ERR_INVALID_ARG,
                   "the state blob fails its checksum");
    free(s.fds);
    free(b);
}

static void test_unsealed_blob_is_refused(void **state)
{
    struct saved s;
    size_t len;
    unsigned char *b = saved_bytes(*state, &s, &len);
    assert_refused(blob_of(b, len, F_SEAL_SHRINK), s.fds, s.nfds, SHMREG_ERR_INVALID_ARG,
                   "is not sealed against writing and shrinking");
    free(s.fds);
    free(b);
}

/* One descriptor short, and one too many: refused whole, every one given
 * closed. */
static void test_descriptor_count_must_match(void **state)
{
    struct ut *t = *state;
    const char *key;
    register_two(t, t->reg, &key);
    struct saved s = save(t->reg);
    assert_refused(s.blob, s.fds, 0, SHMREG_ERR_INVALID_ARG, "0 descriptors given, the state blob refers to 1");
    close(s.fds[0]);
    free(s.fds);
    s = save(t->reg);
    int two[2] = {s.fds[0], dup(s.fds[0])};
    assert_refused(s.blob, two, 2, SHMREG_ERR_INVALID_ARG, "2 descriptors given, the state blob refers to 1");
    free(s.fds);
}

static void test_descriptor_of_the_wrong_type_is_refused(void **state)
{
    struct ut *t = *state;
    const char *key;
    register_two(t, t->reg, &key);
    struct saved s = save(t->reg);
    int p[2];
    assert_int_equal(pipe(p), 0);
    close(s.fds[0]);
    assert_refused(s.blob, &p[0], 1, SHMREG_ERR_INVALID_ARG,
                   "descriptor 0 (of region 'sealed') is not a memfd or regular file; nothing was restored");
    close(p[1]);
    free(s.fds);
}

/* ---------------------------------------------- failures of one region */

static shmreg_restore_report *restore_into(shmreg_registry *to, struct saved s)
{
    shmreg_restore_report *rep = NULL;
    assert_ok(shmreg_state_restore(to, s.blob, s.fds, s.nfds, &rep));
    free(s.fds);
    return rep;
}

static void assert_one_failed(const shmreg_restore_report *rep, const char *name, shmreg_err code,
                              const char *part)
{
    assert_int_equal(rep->restored, 1);
    assert_int_equal(rep->failed, 1);
    assert_int_equal(rep->entry_count, 1);
    assert_string_equal(rep->entries[0].name, name);
    assert_string_equal(shmreg_err_name(rep->entries[0].err), shmreg_err_name(code));
    assert_false(rep->entries[0].skipped);
    if (!strstr(rep->entries[0].message, part))
        fail_msg("'%s' does not contain '%s'", rep->entries[0].message, part);
}

/* The key unlinked and created again between save and restore: another
 * object, refused for that region alone. */
static void test_replaced_object_fails_alone(void **state)
{
    struct ut *t = *state;
    const char *key;
    register_two(t, t->reg, &key);
    struct saved s = save(t->reg);
    tu_shm_unlink(key);
    int fd = shm_open(key, O_CREAT | O_EXCL | O_RDWR, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, OBJ), 0);
    close(fd);
    shmreg_registry *to = ut_new_registry(SHMREG_PIN_AUTO, SHMREG_POLICY_DEFER);
    shmreg_restore_report *rep = restore_into(to, s);
    assert_one_failed(rep, "named", SHMREG_ERR_NOT_FOUND,
                      ut_fmt("cannot restore shared memory region 'named': shm key '%s' is no longer the object "
                             "that was saved",
                             key));
    assert_string_equal(rep->entries[0].tag, "tenant-a");
    assert_true(region_holds(to, "sealed", "tenant-b", FD_SIZE, 12));
    shmreg_restore_report_free(rep);
    shmreg_registry_destroy(to);
}

/* The receiver's rules apply: a memfd the sender accepted unsealed is
 * refused by a receiver that wants the seal. */
static void test_receiver_refuses_an_unsealed_memfd(void **state)
{
    struct ut *t = *state;
    shmreg_config cfg;
    shmreg_config_init(&cfg);
    cfg.accept_unsealed_fds = 1;
    shmreg_registry *from = ut_registry_config(t, &cfg);
    const char *key = ut_object(t, OBJ, 1);
    assert_ok(shmreg_register_system(from, "named", key, 0, OBJ, 0));
    int fd = make_memfd(3, 0);
    assert_ok(shmreg_register_system_fd(from, "loose", fd, 0, OBJ, 0));
    close(fd);
    shmreg_registry *to = ut_new_registry(SHMREG_PIN_AUTO, SHMREG_POLICY_DEFER);
    shmreg_restore_report *rep = restore_into(to, save(from));
    assert_one_failed(rep, "loose", SHMREG_ERR_INVALID_ARG, "is not sealed against shrinking (F_SEAL_SHRINK)");
    shmreg_restore_report_free(rep);
    shmreg_registry_destroy(to);
}

/* Restoring into a registry that holds one of the names already. */
static void test_taken_name_fails_alone(void **state)
{
    struct ut *t = *state;
    const char *key;
    register_two(t, t->reg, &key);
    shmreg_registry *to = ut_new_registry(SHMREG_PIN_AUTO, SHMREG_POLICY_DEFER);
    int fd = make_memfd(4, F_SEAL_SHRINK);
    assert_ok(tu_register_fd_tagged(to, "sealed", fd, 0, 10, 0, "tenant-b"));
    close(fd);
    shmreg_restore_report *rep = restore_into(to, save(t->reg));
    assert_one_failed(rep, "sealed", SHMREG_ERR_ALREADY_EXISTS, "already in manager");
    assert_true(region_holds(to, "named", "tenant-a", SHM_SIZE, 11));
    shmreg_restore_report_free(rep);
    shmreg_registry_destroy(to);
}

/* ------------------------------------------------------- who may send */

/* A listening socket at an abstract address of this process's. */
static int listen_here(struct sockaddr_un *addr, socklen_t *len)
{
    memset(addr, 0, sizeof *addr);
    addr->sun_family = AF_UNIX;
    int n = snprintf(addr->sun_path + 1, sizeof addr->sun_path - 1, "shmreg-handover-test-%d", (int)getpid());
    *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
    int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(l >= 0);
    assert_int_equal(bind(l, (struct sockaddr *)addr, *len), 0);
    assert_int_equal(listen(l, 1), 0);
    return l;
}

/* A sender of another uid is refused before anything is read. The
 * peer's credentials are those of its connect, so the child connects
 * after it has become another uid. */
static void test_peer_of_another_uid_is_refused(void **state)
{
    struct ut *t = *state;
    if (geteuid() != 0)
        skip(); /* only root can be another uid in a child */
    struct sockaddr_un addr;
    socklen_t len;
    int l = listen_here(&addr, &len);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        shmreg_registry *reg = NULL;
        int c = socket(AF_UNIX, SOCK_STREAM, 0);
        _exit(setresuid(65534, 65534, 65534) != 0 || connect(c, (struct sockaddr *)&addr, len) != 0 ||
              shmreg_registry_create(NULL, &reg) != SHMREG_OK ||
              shmreg_handover_send(reg, c, NULL, 0, NULL, 0) != SHMREG_OK);
    }
    int sock = accept4(l, NULL, NULL, SOCK_CLOEXEC);
    assert_true(sock >= 0);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    shmreg_restore_report *rep = NULL;
    shmreg_handover_fd *extra = NULL;
    size_t n = 0;
    assert_fails_containing(shmreg_handover_receive(t->reg, sock, &rep, &extra, &n), SHMREG_ERR_INVALID_ARG,
                            ut_fmt("runs as uid 65534 and this process as uid 0: only a process of the same uid "
                                   "may hand its registry over; nothing was read"));
    assert_null(rep);
    assert_null(extra);
    close(sock);
    close(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        UT_TEST(test_handover_to_a_child),
        UT_TEST(test_handover_in_several_messages),
        UT_TEST(test_restore_in_process),
        UT_TEST(test_unknown_version_is_refused),
        UT_TEST(test_truncated_blob_is_refused),
        UT_TEST(test_altered_blob_is_refused),
        UT_TEST(test_unsealed_blob_is_refused),
        UT_TEST(test_descriptor_count_must_match),
        UT_TEST(test_descriptor_of_the_wrong_type_is_refused),
        UT_TEST(test_replaced_object_fails_alone),
        UT_TEST(test_receiver_refuses_an_unsealed_memfd),
        UT_TEST(test_taken_name_fails_alone),
        UT_TEST(test_peer_of_another_uid_is_refused),
    };
    return cmocka_run_group_tests(tests, ut_group_setup, NULL);
}
