/* The target of the transport-level attack tests: a process holding one
 * of the library's UCX contexts, and a canary the attacker aims at.
 *
 *   transport_target server|client [TCP_DEVICE [LISTEN]]
 * server: the remote engine, started as a server starts it (listening on
 * LISTEN, default 127.0.0.1:0); client: a client context (shmreg_remote_client_create), not
 * connected. With TCP_DEVICE, tcp is opened on that device (the operator's
 * opt-in); without, the library's default (NULL config: hardware
 * transports only). Prints
 *   PID <pid> CANARY <hex address> LENGTH <n>
 *   ENGINE <listening address> | CLIENT ready | ENGINE off <message> | CLIENT off <message>
 * then obeys, one per line on stdin:
 *   check     "CANARY unchanged", or "CANARY changed <offset> <byte in hex>" (the first)
 *   invite    (server) "INVITE <address> <hex secret>": a secret for a real client
 *   quit      exits 0
 * Every line it says goes to stdout; UCX's own log goes to stderr, which
 * the test counts. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shmreg/shmreg.h"

#define CANARY_SIZE 4096
#define CANARY_BYTE 0x5a

static unsigned char canary[CANARY_SIZE];

static void check(void)
{
    for (size_t i = 0; i < sizeof canary; i++) {
        if (canary[i] != CANARY_BYTE) {
            printf("CANARY changed %zu %02x\n", i, canary[i]);
            return;
        }
    }
    printf("CANARY unchanged\n");
}

static void invite(shmreg_registry *reg)
{
    unsigned char secret[SHMREG_REMOTE_SECRET_SIZE];
    const char *address;
    if (!reg || shmreg_remote_invite(reg, NULL, secret) != SHMREG_OK ||
        shmreg_remote_server_address(&address) != SHMREG_OK) {
        printf("ERR %s\n", reg ? shmreg_last_error() : "not a server");
        return;
    }
    printf("INVITE %s ", address);
    for (size_t i = 0; i < sizeof secret; i++)
        printf("%02x", secret[i]);
    printf("\n");
}

static shmreg_registry *start_server(const char *tcp_device, const char *listen)
{
    shmreg_remote_config config = {.listen = listen, .tcp_device = tcp_device};
    const char *address;
    shmreg_registry *reg = NULL;
    if (shmreg_remote_configure(&config) != SHMREG_OK || shmreg_remote_server_address(&address) != SHMREG_OK) {
        printf("ENGINE off %s\n", shmreg_last_error());
        return NULL;
    }
    printf("ENGINE %s\n", address);
    shmreg_config cfg;
    shmreg_config_init(&cfg);
    if (shmreg_registry_create(&cfg, &reg) != SHMREG_OK)
        printf("ERR %s\n", shmreg_last_error());
    return reg;
}

static shmreg_remote_client *start_client(const char *tcp_device)
{
    shmreg_remote_client *c = NULL;
    shmreg_remote_client_config config = {.tcp_device = tcp_device};
    if (shmreg_remote_client_create_with(tcp_device ? &config : NULL, &c) != SHMREG_OK) {
        printf("CLIENT off %s\n", shmreg_last_error());
        return NULL;
    }
    printf("CLIENT ready\n");
    return c;
}

int main(int argc, char **argv)
{
    if (argc < 2 || (strcmp(argv[1], "server") != 0 && strcmp(argv[1], "client") != 0)) {
        fprintf(stderr, "usage: %s server|client [TCP_DEVICE [LISTEN]]\n", argv[0]);
        return 2;
    }
    const char *tcp_device = argc > 2 && argv[2][0] ? argv[2] : NULL;
    const char *listen = argc > 3 ? argv[3] : "127.0.0.1:0";
    memset(canary, CANARY_BYTE, sizeof canary);
    printf("PID %ld CANARY %" PRIxPTR " LENGTH %d\n", (long)getpid(), (uintptr_t)canary, CANARY_SIZE);
    fflush(stdout);
    shmreg_registry *reg = NULL;
    shmreg_remote_client *client = NULL;
    if (strcmp(argv[1], "server") == 0)
        reg = start_server(tcp_device, listen);
    else
        client = start_client(tcp_device);
    fflush(stdout);
    char line[128];
    while (fgets(line, sizeof line, stdin)) {
        if (strncmp(line, "check", 5) == 0)
            check();
        else if (strncmp(line, "invite", 6) == 0)
            invite(reg);
        else if (strncmp(line, "quit", 4) == 0)
            break;
        else
            printf("ERR bad command\n");
        fflush(stdout);
    }
    shmreg_remote_client_destroy(client);
    shmreg_registry_destroy(reg);
    return 0;
}
