/* The memfd-region wire format, both halves (the format is in shmreg.h):
 * the client's (make a memfd that cannot change size, ask a server
 * listening on a Unix socket to register a window of it, read the answer)
 * and the server's (receive and check a request, send an answer). The
 * round trip is tested in tests/fd_passing/test_region_socket.c.
 *
 * A memfd is what a client in another IPC or mount namespace (a container)
 * can share with the server: it needs no /dev/shm of its own, has no
 * guessable name, and goes away with the last descriptor and mapping. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/err.h"
#include "base/names.h"
#include "shmreg/shmreg.h"
#include "wire/region_socket.h"

/* memfd_create refuses names past 249 bytes (NAME_MAX minus "memfd:"). */
#define MEMFD_NAME_MAX 249

SHMREG_API shmreg_err shmreg_memfd_create(const char *debug_name, size_t size, int *fd_out)
{
    if (fd_out == NULL || size == 0 || size > (size_t)INT64_MAX)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG,
                            "shmreg_memfd_create: needs fd_out and a size in 1..2^63-1, got %zu", size);
    char name[MEMFD_NAME_MAX + 1];
    snprintf(name, sizeof name, "%s", debug_name ? debug_name : "shmreg");
    int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return shmreg__fail_errno(SHMREG_ERR_SYSTEM, errno, "shmreg_memfd_create: memfd_create '%s'", name);
    /* The size first, then the seals: once F_SEAL_GROW is on, the size is
     * fixed for good, which is the point. */
    const char *step = "ftruncate";
    int ok = ftruncate(fd, (off_t)size) == 0;
    if (ok) {
        step = "fcntl(F_ADD_SEALS)";
        ok = fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) == 0;
    }
    if (!ok) {
        int e = errno;
        close(fd);
        return shmreg__fail_errno(SHMREG_ERR_SYSTEM, e, "shmreg_memfd_create: %s of '%s' (%zu bytes)", step,
                                  name, size);
    }
    *fd_out = fd;
    return SHMREG_OK;
}

/* ---------------------------------------------------------- both halves */

/* Flags a request may carry. SHMREG_PIN is not one: pinning beyond the
 * registry's automatic budget is the server's to decide, not a client's. */
#define REQUEST_FLAGS (SHMREG_READONLY | SHMREG_NO_PIN)

/* The request payload: the fixed header, then the name. */
static size_t build_request(unsigned char *out, const char *name, size_t name_len, size_t offset,
                            size_t byte_size, unsigned flags)
{
    uint32_t magic = SHMREG_REGION_REQUEST_MAGIC, flags32 = flags;
    uint64_t off64 = offset, size64 = byte_size;
    memcpy(out, &magic, 4);
    memcpy(out + 4, &flags32, 4);
    memcpy(out + 8, &off64, 8);
    memcpy(out + 16, &size64, 8);
    memcpy(out + SHMREG_REGION_REQUEST_HEADER, name, name_len);
    return SHMREG_REGION_REQUEST_HEADER + name_len;
}

/* --------------------------------------------------------- client half */

/* The code whose name starts the answer, or -1 when none does. */
static int code_of(const char *answer, size_t name_len)
{
    /* Codes are small and dense (the X-macro list); 64 leaves room for
     * codes added later without a second list to keep in step. */
    for (int code = 0; code < 64; code++) {
        const char *n = shmreg_err_name((shmreg_err)code);
        if (strlen(n) == name_len && memcmp(n, answer, name_len) == 0)
            return code;
    }
    return -1;
}

shmreg_err shmreg__read_answer(int sock, const char *name, const char *who)
{
    char answer[SHMREG_REGION_ANSWER_MAX + 1];
    ssize_t n;
    do
        n = recv(sock, answer, SHMREG_REGION_ANSWER_MAX, 0);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return shmreg__fail_errno(SHMREG_ERR_SYSTEM, errno,
                                  "%s: waiting for the answer about region '%s'", who, name);
    if (n == 0)
        return shmreg__fail(SHMREG_ERR_SYSTEM,
                            "%s: the server closed the connection without answering about region '%s'", who,
                            name);
    answer[n] = 0;
    const char *space = memchr(answer, ' ', (size_t)n);
    int code = code_of(answer, space ? (size_t)(space - answer) : (size_t)n);
    if (code < 0)
        return shmreg__fail(SHMREG_ERR_SYSTEM, "%s: the server's answer about region '%s' is not in the format "
                                               "of shmreg.h: '%.80s'",
                            who, name, answer);
    if (code == SHMREG_OK)
        return SHMREG_OK;
    /* The server's own words name the region and the cause. */
    return shmreg__fail((shmreg_err)code, "%s", space ? space + 1 : "");
}

SHMREG_API shmreg_err shmreg_send_region(int sock, const char *name, int fd, size_t offset,
                                         size_t byte_size, unsigned flags)
{
    size_t name_len = name ? strnlen(name, 256) : 0;
    if (sock < 0 || fd < 0 || name_len == 0 || name_len > 255)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG,
                            "shmreg_send_region: needs a socket (%d), a descriptor (%d) and a name of "
                            "1..255 bytes",
                            sock, fd);
    unsigned char request[SHMREG_REGION_REQUEST_HEADER + 255];
    size_t len = build_request(request, name, name_len, offset, byte_size, flags);
    shmreg_err err = shmreg_send_fd(sock, fd, request, len);
    if (err != SHMREG_OK) {
        shmreg__error_prefix("shmreg_send_region '%s'", name);
        return err;
    }
    return shmreg__read_answer(sock, name, "shmreg_send_region");
}

/* --------------------------------------------------------- server half */

/* The payload p[0, len) as a request: INVALID_ARG with the client's
 * message when it is not one. The messages are the ones the server (server/)
 * answered before this half moved into the library. */
static shmreg_err parse_request(const unsigned char *p, size_t len, shmreg_region_request *out)
{
    size_t name_len = len > SHMREG_REGION_REQUEST_HEADER ? len - SHMREG_REGION_REQUEST_HEADER : 0;
    if (name_len == 0)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG,
                            "a register request is a %d-byte header and a region name; got %zu bytes",
                            SHMREG_REGION_REQUEST_HEADER, len);
    uint32_t magic, flags;
    uint64_t offset, byte_size;
    memcpy(&magic, p, 4);
    memcpy(&flags, p + 4, 4);
    memcpy(&offset, p + 8, 8);
    memcpy(&byte_size, p + 16, 8);
    if (magic != SHMREG_REGION_REQUEST_MAGIC)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG,
                            "not a register request (its first 4 bytes are not \"SRG1\"; see shmreg.h)");
    const unsigned char *name = p + SHMREG_REGION_REQUEST_HEADER;
    if (name_len > SHMREG_NAME_MAX || memchr(name, 0, name_len))
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "a region name is 1..%d bytes without NUL", SHMREG_NAME_MAX);
    if (flags & ~(uint32_t)REQUEST_FLAGS)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG,
                            "flags 0x%x: only SHMREG_READONLY (0x%x) and SHMREG_NO_PIN (0x%x) are accepted "
                            "over the socket",
                            (unsigned)flags, SHMREG_READONLY, SHMREG_NO_PIN);
    memcpy(out->name, name, name_len);
    out->name[name_len] = 0;
    /* Control characters: the registry would refuse the name anyway; here
     * the client hears it before anything else is looked at. */
    shmreg_err err = shmreg__check_name(out->name);
    if (err != SHMREG_OK)
        return err;
    out->flags = flags;
    /* size_t is 64 bits on every ABI built (LP64). */
    out->offset = (size_t)offset;
    out->byte_size = (size_t)byte_size;
    return SHMREG_OK;
}

SHMREG_API shmreg_err shmreg_recv_region(int sock, shmreg_region_request *out)
{
    if (out)
        *out = (shmreg_region_request){.fd = -1};
    if (sock < 0 || out == NULL)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "shmreg_recv_region: needs a socket (%d) and out%s", sock,
                            out ? "" : " (NULL)");
    /* Room for the longest request: a longer payload is refused by
     * shmreg_recv_fd as truncated, its descriptor closed. */
    unsigned char payload[SHMREG_REGION_REQUEST_HEADER + SHMREG_NAME_MAX];
    size_t len = 0;
    int fd = -1;
    shmreg_err err = shmreg_recv_fd(sock, &fd, payload, sizeof payload, &len);
    if (err != SHMREG_OK) /* shmreg_recv_fd closed whatever descriptor came */
        return err;
    if ((err = parse_request(payload, len, out)) != SHMREG_OK) {
        close(fd);
        return err;
    }
    /* Hand-off: the received descriptor is the caller's from here on. */
    out->fd = fd;
    return SHMREG_OK;
}

SHMREG_API shmreg_err shmreg_answer_region(int sock, shmreg_err code, const char *msg)
{
    const char *code_name = shmreg_err_name(code);
    if (sock < 0 || strcmp(code_name, "SHMREG_ERR_UNKNOWN") == 0)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "shmreg_answer_region: needs a socket (%d) and a code of "
                                                    "shmreg_err (%d)",
                            sock, (int)code);
    char buf[SHMREG_REGION_ANSWER_MAX + 1];
    int n = snprintf(buf, sizeof buf, "%s %s", code_name, msg ? msg : "");
    size_t len = n < 0 ? 0 : (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1;
    for (size_t i = 0; i < len; i++) /* one line of text, whatever the message held */
        if ((unsigned char)buf[i] < 0x20 || buf[i] == 0x7f)
            buf[i] = ' ';
    ssize_t sent = send(sock, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (sent < 0)
        return shmreg__fail_errno(SHMREG_ERR_SYSTEM, errno, "shmreg_answer_region: send of %s", code_name);
    if ((size_t)sent != len)
        return shmreg__fail(SHMREG_ERR_SYSTEM, "shmreg_answer_region: only %zd of %zu bytes of %s were sent",
                            sent, len, code_name);
    return SHMREG_OK;
}
