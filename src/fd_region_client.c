/* The client side of sealed memfd regions: make a memfd that cannot change
 * size, and ask a server listening on a Unix socket to register a window of
 * it (the request and answer formats are in shmreg.h).
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

#include "err.h"
#include "shmreg/shmreg.h"

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

/* Read one answer record and turn it into a code with the server's message. */
static shmreg_err read_answer(int sock, const char *name)
{
    char answer[SHMREG_REGION_ANSWER_MAX + 1];
    ssize_t n;
    do
        n = recv(sock, answer, SHMREG_REGION_ANSWER_MAX, 0);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return shmreg__fail_errno(SHMREG_ERR_SYSTEM, errno,
                                  "shmreg_send_region: waiting for the answer about region '%s'", name);
    if (n == 0)
        return shmreg__fail(SHMREG_ERR_SYSTEM,
                            "shmreg_send_region: the server closed the connection without answering about "
                            "region '%s'",
                            name);
    answer[n] = 0;
    const char *space = memchr(answer, ' ', (size_t)n);
    int code = code_of(answer, space ? (size_t)(space - answer) : (size_t)n);
    if (code < 0)
        return shmreg__fail(SHMREG_ERR_SYSTEM, "shmreg_send_region: the server's answer about region '%s' is "
                                               "not in the format of shmreg.h: '%.80s'",
                            name, answer);
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
    return read_answer(sock, name);
}
