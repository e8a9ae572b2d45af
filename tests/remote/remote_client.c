/* The client half of the remote-region tests: a separate program (exec'd,
 * never only forked: UCX must not be initialised in a fork of a process
 * that already runs it), which exports a buffer and obeys commands.
 *
 *   remote_client SIZE SEED [alloc|export|hardware]
 * Reads "connect <hex server address> <hex secret>" from stdin, creates a
 * client whose transports are tcp on the loopback device ("hardware": the
 * defaults, rc and dc only) and connects (or prints "ERR <message>" and
 * exits 4), maps SIZE bytes (mmap;
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
 * that dies or stops answering.
 *
 * Two more modes read nothing: "remote_client 0 0 engine-default" starts
 * a server engine with the default settings and prints the error's name
 * and message (a process of its own: the engine is the process's);
 * "remote_client N 0 log-flood" makes and destroys N clients asking for
 * transports this host may lack (each a warning of UCX's), waits a second
 * and makes one more, then prints "MADE N+1"; "remote_client LOW-HIGH 0 listeners" starts a server engine
 * listening on 0.0.0.0 with tcp on the loopback device and those ports,
 * and prints "ENGINE <address>" and "LISTEN <hex ip>:<port>" for each
 * listening TCP socket of this process (from /proc); "remote_client
 * IP:PORT 0 engine-at" starts a server engine listening there and prints
 * "ENGINE <address> <pid>" (or "ERR <message>"), then waits 30 s to be
 * killed. */
#include <ctype.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

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

static int engine_default(void)
{
    const char *address;
    shmreg_err err = shmreg_remote_configure(NULL);
    if (err == SHMREG_OK)
        err = shmreg_remote_server_address(&address);
    printf("%s %s\n", shmreg_err_name(err), err == SHMREG_OK ? address : shmreg_last_error());
    return 0;
}

/* Whether the socket of inode is one of this process's descriptors. */
static bool own_socket(unsigned long inode)
{
    char path[64], link[64], want[48];
    snprintf(want, sizeof want, "socket:[%lu]", inode);
    for (int fd = 0; fd < 1024; fd++) {
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(path, link, sizeof link - 1);
        if (n > 0 && (link[n] = '\0', strcmp(link, want) == 0))
            return true;
    }
    return false;
}

static int listeners(const char *ports)
{
    /* Descriptors inherited from the test (UCX's sockets are not
     * close-on-exec) are not this engine's. */
    for (int fd = 3; fd < 1024; fd++)
        close(fd);
    const shmreg_remote_config k = {.listen = "0.0.0.0:0", .tcp_device = "lo", .tcp_ports = ports};
    const char *address;
    if (shmreg_remote_configure(&k) != SHMREG_OK || shmreg_remote_server_address(&address) != SHMREG_OK) {
        printf("ERR %s\n", shmreg_last_error());
        return 4;
    }
    printf("ENGINE %s\n", address);
    const char *tables[] = {"/proc/net/tcp", "/proc/net/tcp6"};
    for (size_t t = 0; t < 2; t++) {
        FILE *f = fopen(tables[t], "r");
        char line[512], local[64];
        unsigned state;
        unsigned long inode;
        while (f && fgets(line, sizeof line, f))
            if (sscanf(line, " %*d: %63s %*s %x %*s %*s %*s %*s %*s %lu", local, &state, &inode) == 3 &&
                state == 0x0a && own_socket(inode))
                printf("LISTEN %s\n", local); /* hex address:hex port, as /proc writes it */
        if (f)
            fclose(f);
    }
    return 0;
}

static int engine_at(const char *listen)
{
    const shmreg_remote_config k = {.listen = listen, .tcp_device = "lo"};
    const char *address;
    if (shmreg_remote_configure(&k) != SHMREG_OK || shmreg_remote_server_address(&address) != SHMREG_OK) {
        printf("ERR %s\n", shmreg_last_error());
        return 4;
    }
    printf("ENGINE %s %ld\n", address, (long)getpid());
    fflush(stdout);
    sleep(30);
    return 0;
}

static int log_flood(size_t n)
{
    const shmreg_remote_client_config k = {.transports = "rc,tcp", .tcp_device = "lo"};
    size_t made = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i == n)
            usleep(1100000); /* past the log's second: the last one's warning passes, with the count */
        shmreg_remote_client *c;
        if (shmreg_remote_client_create_with(&k, &c) == SHMREG_OK)
            made++;
        shmreg_remote_client_destroy(c);
    }
    printf("MADE %zu\n", made);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[3], "engine-default") == 0)
        return engine_default();
    if (argc == 4 && strcmp(argv[3], "engine-at") == 0)
        return engine_at(argv[1]);
    if (argc == 4 && strcmp(argv[3], "listeners") == 0)
        return listeners(argv[1]);
    if (argc == 4 && strcmp(argv[3], "log-flood") == 0)
        return log_flood(strtoull(argv[1], NULL, 0));
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: %s SIZE SEED [alloc|export|hardware]\n", argv[0]);
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
    /* The server's tests listen on the loopback device, and trust it. */
    const shmreg_remote_client_config loopback = {.tcp_device = "lo"};
    bool hardware = argc == 4 && strcmp(argv[3], "hardware") == 0;
    c = NULL;
    if (shmreg_remote_client_create_with(hardware ? NULL : &loopback, &c) != SHMREG_OK ||
        shmreg_remote_client_connect(c, hello + 8, secret) != SHMREG_OK) {
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
