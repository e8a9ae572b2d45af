/* The client half of the remote-region tests: a separate program (exec'd,
 * never only forked: UCX must not be initialised in a fork of a process
 * that already runs it), which exports a buffer and obeys commands.
 *
 *   remote_client SIZE SEED [alloc]
 * Reads "connect <hex server address> <hex secret>" from stdin and
 * connects (or prints "ERR <message>" and exits 4), maps SIZE bytes (mmap;
 * with "alloc", the library allocates them: shmreg_remote_alloc), fills
 * byte i with tu_pattern(SEED, i), exports them and prints
 * "DESC <hex of the descriptor>". Then, one per line on stdin:
 *   sum OFF LEN   prints "SUM <FNV-1a 64 of those bytes>" (what a put wrote)
 *   unmap         unexports and munmaps the buffer, prints "OK"
 *   announce N    exports N more one-byte windows of the buffer, stopping at
 *                 the first refusal: prints "ANNOUNCED k" (how many the
 *                 server took) and the refusal's message after it, if any
 *   quit          destroys the client and exits 0
 * A server test kills it (SIGKILL) or stops it (SIGSTOP) to play a client
 * that dies or stops answering. */
#include <ctype.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "testutil.h"

static uint64_t fnv1a(const unsigned char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* Hex digits into bytes, up to cap; stops at the first non-digit pair. */
static size_t unhex(const char *s, unsigned char *out, size_t cap)
{
    size_t n = 0;
    unsigned v;
    while (n < cap && isxdigit((unsigned char)s[0]) && isxdigit((unsigned char)s[1]) && sscanf(s, "%2x", &v) == 1) {
        out[n++] = (unsigned char)v;
        s += 2;
    }
    return n;
}

int main(int argc, char **argv)
{
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: %s SIZE SEED [alloc]\n", argv[0]);
        return 2;
    }
    size_t size = strtoull(argv[1], NULL, 0);
    uint8_t seed = (uint8_t)strtoul(argv[2], NULL, 0);
    bool alloc = argc == 4 && strcmp(argv[3], "alloc") == 0;
    shmreg_remote_client *c;
    shmreg_remote_window *w;
    unsigned char *buf = NULL;
    static char hello[512];
    unsigned char secret[SHMREG_REMOTE_SECRET_SIZE];
    char *space;
    if (!fgets(hello, sizeof hello, stdin) || strncmp(hello, "connect ", 8) != 0 || !(space = strchr(hello + 8, ' ')))
        return 2;
    *space = '\0';
    if (unhex(space + 1, secret, sizeof secret) != sizeof secret)
        return 2;
    if (shmreg_remote_client_create(&c) != SHMREG_OK || shmreg_remote_client_connect(c, hello + 8, secret) != SHMREG_OK) {
        printf("ERR %s\n", shmreg_last_error());
        fflush(stdout);
        shmreg_remote_client_destroy(c);
        return 4;
    }
    if (alloc) {
        if (shmreg_remote_alloc(c, size, (void **)&buf, &w) != SHMREG_OK) {
            printf("ERR %s\n", shmreg_last_error());
            return 4;
        }
    } else {
        buf = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (buf == MAP_FAILED)
            return 3;
        if (shmreg_remote_export(c, buf, size, &w) != SHMREG_OK) {
            printf("ERR %s\n", shmreg_last_error());
            return 4;
        }
    }
    for (size_t i = 0; i < size; i++)
        buf[i] = tu_pattern(seed, i);
    const unsigned char *d;
    size_t dn;
    shmreg_remote_descriptor(w, (const void **)&d, &dn);
    printf("DESC ");
    for (size_t i = 0; i < dn; i++)
        printf("%02x", d[i]);
    printf("\n");
    fflush(stdout);
    char line[256];
    while (fgets(line, sizeof line, stdin)) {
        size_t off, len;
        if (sscanf(line, "sum %zu %zu", &off, &len) == 2 && w && off <= size && len <= size - off) {
            printf("SUM %" PRIu64 "\n", fnv1a(buf + off, len));
        } else if (strncmp(line, "unmap", 5) == 0 && w) {
            shmreg_remote_unexport(w); /* frees alloc's memory */
            w = NULL;
            if (!alloc)
                munmap(buf, size);
            printf("OK\n");
        } else if (sscanf(line, "announce %zu", &len) == 1) {
            size_t k = 0;
            shmreg_remote_window *extra;
            while (k < len && shmreg_remote_export(c, buf + k % size, 1, &extra) == SHMREG_OK)
                k++; /* kept exported until the process ends */
            printf("ANNOUNCED %zu%s%s\n", k, k < len ? " " : "", k < len ? shmreg_last_error() : "");
        } else if (strncmp(line, "quit", 4) == 0) {
            break;
        } else {
            printf("ERR bad command\n");
        }
        fflush(stdout);
    }
    shmreg_remote_unexport(w);
    shmreg_remote_client_destroy(c);
    return 0;
}
