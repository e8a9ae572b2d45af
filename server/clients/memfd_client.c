/*
 * shmreg-memfd-client: the C side of the --uds flow, on the library's two
 * client calls (shmreg_memfd_create, shmreg_send_region).
 *
 *   shmreg-memfd-client SOCKET NAME BYTES [FILE]
 *
 * Makes a sealed memfd of BYTES bytes holding FILE's first bytes (zeros
 * without FILE), registers it as region NAME with the server listening on
 * SOCKET, prints "registered NAME", then waits for a line (or the end) on
 * stdin: meanwhile requests over HTTP or gRPC can name NAME. Then it prints
 * the region's bytes in hex (what the server wrote into it) and exits, which
 * closes the connection: the server unregisters NAME.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <shmreg/shmreg.h>

static int connect_to(const char *path)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof addr.sun_path) {
        fprintf(stderr, "error: socket path too long: %s\n", path);
        return -1;
    }
    memcpy(addr.sun_path, path, strlen(path) + 1);
    int sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (sock >= 0 && connect(sock, (struct sockaddr *)&addr, sizeof addr) == 0)
        return sock;
    fprintf(stderr, "error: connect %s: %s\n", path, strerror(errno));
    if (sock >= 0)
        close(sock);
    return -1;
}

/* FILE's first bytes into the region; the rest stays zero. */
static int fill(unsigned char *region, size_t size, const char *file)
{
    FILE *f = fopen(file, "rb");
    if (!f) {
        fprintf(stderr, "error: %s: %s\n", file, strerror(errno));
        return -1;
    }
    size_t got = fread(region, 1, size, f);
    (void)got; /* a shorter file leaves zeros */
    fclose(f);
    return 0;
}

static void print_hex(const unsigned char *region, size_t size)
{
    for (size_t i = 0; i < size; i++)
        printf("%02x", region[i]);
    printf("\n");
}

int main(int argc, char **argv)
{
    if (argc < 4 || argc > 5) {
        fprintf(stderr, "usage: %s SOCKET NAME BYTES [FILE]\n", argv[0]);
        return 2;
    }
    size_t size = strtoull(argv[3], NULL, 10);
    int fd = -1;
    if (shmreg_memfd_create(argv[2], size, &fd) != SHMREG_OK) {
        fprintf(stderr, "error: %s\n", shmreg_last_error());
        return 1;
    }
    unsigned char *region = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int sock = region == MAP_FAILED ? -1 : connect_to(argv[1]);
    int rc = 1;
    if (sock >= 0 && (argc < 5 || fill(region, size, argv[4]) == 0)) {
        shmreg_err e = shmreg_send_region(sock, argv[2], fd, 0, size, 0);
        if (e == SHMREG_OK) {
            printf("registered %s\n", argv[2]);
            fflush(stdout);
            char line[16];
            (void)fgets(line, sizeof line, stdin);
            print_hex(region, size);
            rc = 0;
        } else {
            fprintf(stderr, "refused: %s: %s\n", shmreg_err_name(e), shmreg_last_error());
        }
    }
    if (sock >= 0)
        close(sock); /* the server unregisters NAME */
    if (region != MAP_FAILED)
        munmap(region, size);
    close(fd);
    return rc;
}
