/* A registry of CUDA regions handed to another process (shmreg/handover.h)
 * on a GPU. Three processes: the exporter (tests/support/exporter.c) owns
 * the memory; this process is the old server, which registers a VMM
 * descriptor, a VMM range of three chunks, a pool allocation and two legacy
 * IPC regions, closes every descriptor it was given, and hands its registry
 * over a socketpair; a forked child is the new server, which restores it
 * and reads every region's bytes back with cudaMemcpy. The second IPC
 * region comes from another exporter that exits between the save and the
 * restore: that region alone fails, saying so.
 *
 * Legacy IPC handles cannot be opened by the process that made them, and a
 * process that forks after initialising CUDA cannot use CUDA in the child:
 * both exporters and the new server are forked before this process makes
 * its first CUDA call. Exit 77 (skipped) without a GPU that imports VMM
 * descriptors. */
#include <stdio.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exporter.h"
#include "gpu_test.h"

#define SEED 0x5a
#define REGIONS 4 /* restored: vmm, range, pool, ipc; "orphan" fails */

static struct gt_exporter exporter, mortal;

/* The new server, forked before CUDA: its socket, the pipe that tells it to
 * start, and the one it answers on. */
static struct {
    pid_t pid;
    int sock, go, answer;
} child;

/* What the old server hands over as its app_state: each region's window
 * and the seed its exporter filled it with, byte i of the window being
 * tu_pattern(seed, offset + i). */
struct expected {
    char name[16];
    size_t offset, byte_size;
    uint8_t seed;
};

/* ------------------------------------------------- the new server (child) */

/* Whether the region's window reads as expected, copied to the host. */
static const char *holds(shmreg_registry *reg, const struct expected *e)
{
    shmreg_region *ref = NULL;
    shmreg_view view;
    if (shmreg_acquire(reg, e->name, 0, e->byte_size, &ref, &view) != SHMREG_OK)
        return "acquire failed";
    unsigned char *host = malloc(e->byte_size);
    const char *why = NULL;
    if (!host || cudaMemcpy(host, view.addr, e->byte_size, cudaMemcpyDeviceToHost) != cudaSuccess)
        why = "cudaMemcpy failed";
    for (size_t i = 0; !why && i < e->byte_size; i++)
        if (host[i] != tu_pattern(e->seed, e->offset + i))
            why = "the bytes differ";
    free(host);
    shmreg_release(ref);
    return why;
}

/* The report and every region's bytes, as one line for the old server:
 * "ok: <orphan's message>" or what went wrong. */
static void check_restored(shmreg_registry *reg, const shmreg_restore_report *rep, char *line, size_t n)
{
    const struct expected *want = rep->app_state;
    if (rep->app_len != REGIONS * sizeof *want || rep->restored != REGIONS || rep->failed != 1 ||
        rep->entry_count != 1) {
        snprintf(line, n, "report: %zu restored, %zu failed (%s)", rep->restored, rep->failed,
                 rep->entry_count ? rep->entries[0].message : "no entry");
        return;
    }
    for (size_t i = 0; i < REGIONS; i++) {
        const char *why = holds(reg, &want[i]);
        if (why) {
            snprintf(line, n, "region '%s': %s (%s)", want[i].name, why, shmreg_last_error());
            return;
        }
    }
    const shmreg_restore_entry *e = &rep->entries[0];
    snprintf(line, n, "ok: %s: %s: %s", e->name, shmreg_err_name(e->err), e->message);
}

static void new_server(void)
{
    char go = 0, line[4096] = "";
    if (read(child.go, &go, 1) != 1) /* the test was skipped */
        _exit(0);
    shmreg_registry *reg = NULL;
    shmreg_restore_report *rep = NULL;
    shmreg_handover_fd *extra = NULL;
    size_t n_extra = 0;
    if (shmreg_registry_create(NULL, &reg) != SHMREG_OK ||
        shmreg_handover_receive(reg, child.sock, &rep, &extra, &n_extra) != SHMREG_OK)
        snprintf(line, sizeof line, "receive: %s", shmreg_last_error());
    else
        check_restored(reg, rep, line, sizeof line);
    shmreg_restore_report_free(rep);
    free(extra);
    /* Before the exporter frees the pool allocation: the importer's free
     * comes first. */
    shmreg_registry_destroy(reg);
    _exit(write(child.answer, line, strlen(line) + 1) > 0 ? 0 : 1);
}

static int start_new_server(void)
{
    int sv[2], go[2], answer[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0 || pipe(go) != 0 || pipe(answer) != 0)
        return -1;
    child.pid = fork();
    if (child.pid < 0)
        return -1;
    if (child.pid == 0) {
        close(exporter.sock);
        close(mortal.sock);
        close(sv[0]);
        close(go[1]);
        close(answer[0]);
        child.sock = sv[1];
        child.go = go[0];
        child.answer = answer[1];
        new_server();
    }
    close(sv[1]);
    close(go[0]);
    close(answer[1]);
    child.sock = sv[0];
    child.go = go[1];
    child.answer = answer[0];
    return 0;
}

/* ------------------------------------------------ the old server (here) */

/* Register each kind, closing what the exporter gave: the registry holds
 * descriptors of its own. *ids: the exporter's allocations. */
static void register_every_kind(shmreg_registry *reg, struct expected *want, int ids[REGIONS])
{
    struct gt_export ex;
    assert_int_equal(gt_exporter_alloc(&exporter, GT_KIND_VMM, (size_t)4 << 20, SEED, &ex), 0);
    want[0] = (struct expected){"vmm", 0, ex.size, SEED};
    assert_ok(shmreg_register_cuda_fd(reg, "vmm", ex.fd, 0, ex.size, 0));
    gt_export_close(&ex);
    ids[0] = ex.id;

    assert_int_equal(gt_exporter_alloc_chunks(&exporter, 3, (size_t)2 << 20, SEED + 1, &ex), 0);
    size_t sizes[3] = {ex.chunk_size, ex.chunk_size, ex.chunk_size};
    want[1] = (struct expected){"range", ex.chunk_size / 2 + 4099, 2 * ex.chunk_size, SEED + 1};
    assert_ok(shmreg_register_cuda_vmm_range(reg, "range", ex.fds, sizes, 3, want[1].offset, want[1].byte_size, 0,
                                             0));
    gt_export_close(&ex);
    ids[1] = ex.id;

    assert_int_equal(gt_exporter_alloc(&exporter, GT_KIND_POOL, ((size_t)3 << 20) + 17, SEED + 2, &ex), 0);
    want[2] = (struct expected){"pool", 4096 + 7, (size_t)1 << 20, SEED + 2};
    assert_ok(shmreg_register_cuda_pool(reg, "pool", ex.fd, ex.ipc, sizeof ex.ipc, want[2].offset,
                                        want[2].byte_size, 0, 0));
    gt_export_close(&ex);
    ids[2] = ex.id;

    assert_int_equal(gt_exporter_alloc(&exporter, GT_KIND_IPC, (size_t)8 << 20, SEED + 3, &ex), 0);
    want[3] = (struct expected){"ipc", ((size_t)3 << 20) + 5, (size_t)1 << 20, SEED + 3};
    shmreg_registration r;
    shmreg_registration_init(&r);
    r.source = SHMREG_SOURCE_CUDA_IPC;
    r.name = "ipc";
    r.raw_handle = ex.ipc;
    r.raw_handle_size = sizeof ex.ipc;
    r.offset = want[3].offset;
    r.byte_size = want[3].byte_size;
    assert_ok(shmreg_register(reg, &r));
    ids[3] = ex.id;
}

static void test_every_kind_handed_over(void **state)
{
    shmreg_registry *reg = ut_new_registry(SHMREG_PIN_NEVER, SHMREG_POLICY_DEFER);
    struct expected want[REGIONS];
    int ids[REGIONS];
    register_every_kind(reg, want, ids);
    struct gt_export gone;
    assert_int_equal(gt_exporter_alloc(&mortal, GT_KIND_IPC, (size_t)2 << 20, SEED, &gone), 0);
    assert_ok(shmreg_register_cuda_ipc(reg, "orphan", gone.ipc, sizeof gone.ipc, 0, gone.size, 0));

    /* Everything fits the socket's buffer: the new server reads it later. */
    assert_ok(shmreg_handover_send(reg, child.sock, want, sizeof want, NULL, 0));
    /* The orphan's exporter exits before the restore, with no open of its
     * handle left anywhere. */
    assert_ok(shmreg_unregister(reg, "orphan", SHMREG_KIND_CUDA));
    gt_exporter_stop(&mortal);
    mortal.pid = 0;
    assert_int_equal(write(child.go, "g", 1), 1);

    char line[4096] = "";
    ssize_t got = read(child.answer, line, sizeof line - 1);
    int status = 0;
    assert_int_equal(waitpid(child.pid, &status, 0), child.pid);
    child.pid = 0;
    print_message("new server: %s\n", got > 0 ? line : "(no answer)");
    assert_true(got > 0 && strncmp(line, "ok: orphan: ", 12) == 0);
    assert_non_null(strstr(line, "cannot restore CUDA region 'orphan', saved on device 0 (GPU-"));
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);

    shmreg_registry_destroy(reg);
    for (size_t i = 0; i < REGIONS; i++)
        assert_int_equal(gt_exporter_free(&exporter, ids[i]), 0);
}

static void stop_all(void)
{
    close(child.go); /* a new server still waiting reads EOF and exits */
    if (child.pid > 0)
        waitpid(child.pid, NULL, 0);
    gt_exporter_stop(&exporter);
    if (mortal.pid > 0)
        gt_exporter_stop(&mortal);
}

int main(void)
{
    /* Before any CUDA call in this process: see the top of this file. */
    if (gt_exporter_start(&exporter) != 0 || gt_exporter_start(&mortal) != 0 || start_new_server() != 0) {
        perror("fork");
        return 1;
    }
    unsigned need = SHMREG_CUDA_BUILT | SHMREG_CUDA_DRIVER | SHMREG_CUDA_DEVICE | SHMREG_CUDA_VMM_FD;
    unsigned caps = shmreg_cuda_available();
    if ((caps & need) != need || gt_load_driver() != 0) {
        printf("skipped: shmreg_cuda_available() = 0x%x, this test needs 0x%x\n", caps, need);
        stop_all();
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_kind_handed_over),
    };
    int failed = cmocka_run_group_tests_name("cuda_handover", tests, NULL, NULL);
    stop_all();
    return failed ? 1 : 0;
}
