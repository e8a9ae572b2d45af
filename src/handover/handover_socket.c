/* The handover over a Unix socket, both halves: the state blob, the
 * regions' descriptors and the application's own, in frames of the
 * several-descriptor format (wire/fd_passing.h), since one message carries
 * at most SHMREG_FDS_MAX descriptors.
 *
 *   hello: the blob's descriptor; payload u32 HELLO_MAGIC, u32 version
 *          (PROTOCOL_VERSION), u32 descriptors to follow, u32 zero
 *   batch: 1..SHMREG_FDS_MAX of them, in order; payload u32 BATCH_MAGIC,
 *          u32 its number from 0, u32 its descriptor count, u32 zero
 *
 * The receiver reads the peer as untrusted: counts are checked against the
 * hello and the limit, and every descriptor received is closed on a
 * refusal. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/err.h"
#include "base/sys.h"
#include "handover/state.h"
#include "wire/fd_passing.h"

#define HELLO_MAGIC 0x4f484853u /* "SHHO" in little-endian memory */
#define BATCH_MAGIC 0x42484853u /* "SHHB" */
#define PROTOCOL_VERSION 1u

struct frame_words {
    uint32_t magic, value, count, zero;
};

/* ---------------------------------------------------------------- send */

static shmreg_err check_extras(const shmreg_handover_fd *extra, size_t n_extra)
{
    if (!extra && n_extra > 0)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "handover_send: extra is NULL with n_extra %zu", n_extra);
    for (size_t i = 0; i < n_extra; i++) {
        if (extra[i].fd < 0)
            return shmreg__fail(SHMREG_ERR_INVALID_ARG, "handover_send: extra descriptor %zu is %d", i, extra[i].fd);
        if (extra[i].name[0] == '\0' || !memchr(extra[i].name, '\0', sizeof extra[i].name))
            return shmreg__fail(SHMREG_ERR_INVALID_ARG,
                                "handover_send: extra descriptor %zu has an empty name or one without its NUL in "
                                "its %zu bytes",
                                i, sizeof extra[i].name);
    }
    return SHMREG_OK;
}

/* The descriptors after the hello: the regions', then the application's,
 * SHMREG_FDS_MAX at a time. */
static shmreg_err send_batches(int sock, const int *fds, size_t nfds, const shmreg_handover_fd *extra,
                               size_t n_extra)
{
    size_t total = nfds + n_extra;
    int batch[SHMREG_FDS_MAX];
    shmreg_err err = SHMREG_OK;
    for (size_t at = 0, n = 0; at < total && err == SHMREG_OK; at += n, n = 0) {
        for (; n < SHMREG_FDS_MAX && at + n < total; n++)
            batch[n] = at + n < nfds ? fds[at + n] : extra[at + n - nfds].fd;
        struct frame_words w = {BATCH_MAGIC, (uint32_t)(at / SHMREG_FDS_MAX), (uint32_t)n, 0};
        err = shmreg__send_fds_frame(sock, batch, n, &w, sizeof w, "handover_send");
    }
    return err;
}

shmreg_err shmreg_handover_send(shmreg_registry *reg, int sock, const void *app_state, size_t app_len,
                                const shmreg_handover_fd *extra, size_t n_extra)
{
    if (!reg || sock < 0 || (!app_state && app_len > 0))
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "handover_send: %s",
                            !reg ? "registry is NULL" : sock < 0 ? "socket is negative" : "app_state is NULL");
    shmreg_err err = check_extras(extra, n_extra);
    int blob = -1, *fds = NULL;
    size_t nfds = 0;
    if (err == SHMREG_OK)
        err = shmreg__state_save(reg, app_state, app_len, extra, n_extra, &blob, &fds, &nfds);
    if (err != SHMREG_OK)
        return err;
    struct frame_words hello = {HELLO_MAGIC, PROTOCOL_VERSION, (uint32_t)(nfds + n_extra), 0};
    err = shmreg__send_fds_frame(sock, &blob, 1, &hello, sizeof hello, "handover_send");
    if (err == SHMREG_OK)
        err = send_batches(sock, fds, nfds, extra, n_extra);
    /* What the save made is this call's: the peer has its own copies now. */
    shmreg__close_all(fds, nfds);
    shmreg__free(fds);
    (void)shmreg__sys.close(blob);
    return err;
}

/* ------------------------------------------------------------- receive */

/* A state hands over every region's memory: only a process of this one's
 * effective uid may send one. */
static shmreg_err check_peer(int sock)
{
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
        return shmreg__fail_errno(SHMREG_ERR_SYSTEM, errno, "handover_receive: the peer of socket %d (SO_PEERCRED)",
                                  sock);
    if (cred.uid != geteuid())
        return shmreg__fail(SHMREG_ERR_INVALID_ARG,
                            "handover_receive: the peer (pid %d) runs as uid %u and this process as uid %u: only a "
                            "process of the same uid may hand its registry over; nothing was read",
                            (int)cred.pid, (unsigned)cred.uid, (unsigned)geteuid());
    return SHMREG_OK;
}

/* The hello's fault, or NULL; *code the error it is. */
static const char *hello_fault(const struct frame_words *w, size_t got, shmreg_err *code)
{
    *code = SHMREG_ERR_INVALID_ARG;
    if (got != sizeof *w || w->magic != HELLO_MAGIC || w->zero != 0)
        return "not a handover's first message";
    if (w->count > SHMREG_HANDOVER_FDS_MAX)
        return "the peer announces more descriptors than SHMREG_HANDOVER_FDS_MAX";
    *code = SHMREG_ERR_UNSUPPORTED;
    return w->value != PROTOCOL_VERSION ? "the peer speaks another version of the handover protocol" : NULL;
}

static shmreg_err receive_hello(int sock, int *blob, size_t *total)
{
    struct frame_words w = {0};
    size_t got = 0, count = 0;
    shmreg_err err = shmreg__recv_fds_frame(sock, blob, 1, &count, &w, sizeof w, &got, false);
    if (err != SHMREG_OK)
        return err;
    const char *why = hello_fault(&w, got, &err);
    if (why) {
        (void)shmreg__sys.close(*blob);
        *blob = -1;
        return shmreg__fail(err,
                            "handover_receive: %s (version %u, %u descriptors; this library speaks version %u, at "
                            "most %d); the descriptor received was closed",
                            why, (unsigned)w.value, (unsigned)w.count, PROTOCOL_VERSION, SHMREG_HANDOVER_FDS_MAX);
    }
    *total = w.count;
    return SHMREG_OK;
}

/* total descriptors into fds, batch by batch; on a refusal every one
 * received so far is closed (recv_fds_frame closes a refused frame's). */
static shmreg_err receive_batches(int sock, int *fds, size_t total)
{
    size_t have = 0;
    shmreg_err err = SHMREG_OK;
    for (uint32_t number = 0; have < total && err == SHMREG_OK; number++) {
        struct frame_words w = {0};
        size_t got = 0, count = 0;
        size_t room = total - have < SHMREG_FDS_MAX ? total - have : SHMREG_FDS_MAX;
        err = shmreg__recv_fds_frame(sock, fds + have, room, &count, &w, sizeof w, &got, false);
        if (err != SHMREG_OK)
            break;
        have += count;
        if (got != sizeof w || w.magic != BATCH_MAGIC || w.value != number || w.count != count || w.zero != 0)
            err = shmreg__fail(SHMREG_ERR_INVALID_ARG,
                               "handover_receive: message %u of descriptors is not what the handover sends; the "
                               "descriptors received were closed",
                               (unsigned)number + 1);
    }
    if (err != SHMREG_OK)
        shmreg__close_all(fds, have);
    return err;
}

shmreg_err shmreg_handover_receive(shmreg_registry *reg, int sock, shmreg_restore_report **out,
                                   shmreg_handover_fd **extra, size_t *n_extra)
{
    if (out)
        *out = NULL;
    if (extra)
        *extra = NULL;
    if (n_extra)
        *n_extra = 0;
    if (!reg || sock < 0 || !out || !extra || !n_extra)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "handover_receive: %s",
                            sock < 0 ? "socket is negative" : "registry, out, extra or n_extra is NULL");
    int blob = -1;
    size_t total = 0;
    shmreg_err err = check_peer(sock);
    if (err == SHMREG_OK)
        err = receive_hello(sock, &blob, &total);
    if (err != SHMREG_OK)
        return err;
    int *fds = shmreg__malloc((total ? total : 1) * sizeof *fds);
    if (!fds) {
        (void)shmreg__sys.close(blob);
        return shmreg__fail(SHMREG_ERR_NO_MEMORY, "handover_receive: out of memory for %zu descriptors", total);
    }
    if ((err = receive_batches(sock, fds, total)) != SHMREG_OK)
        (void)shmreg__sys.close(blob);
    else
        err = shmreg__state_restore(reg, blob, fds, total, out, extra, n_extra);
    shmreg__free(fds);
    return err;
}
