#define _GNU_SOURCE
/* A peer that holds connections to the server's listener without ever
 * proving itself (no hello), from one source address: UCX used directly.
 *
 *   unproven_holder HOST:PORT|[HOST6]:PORT COUNT LOCAL_IP [DEVICE]
 * Opens COUNT client-server endpoints to HOST:PORT, each bound to LOCAL_IP
 * (UCP_EP_PARAM_FIELD_LOCAL_SOCK_ADDR: UCX 1.13 takes only an address
 * of one of the host's interfaces), over tcp (on DEVICE alone where given:
 * LOCAL_IP's, so that no lane goes out on another), waits up to 5 s for each to be
 * accepted (its flush completes) or refused (it fails), and prints
 *   HELD <accepted> REFUSED <refused>
 * then keeps them open, progressing, until stdin closes. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <ucp/api/ucp.h>

#define MAX_EPS 256

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void on_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    *(ucs_status_t *)arg = status;
}

/* IP (v4, or v6 without brackets) and port into ss; its length. */
static socklen_t address(const char *ip, unsigned port, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, ip, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)port);
        return sizeof *v4;
    }
    if (inet_pton(AF_INET6, ip, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)port);
        return sizeof *v6;
    }
    return 0;
}

int main(int argc, char **argv)
{
    char host[64];
    unsigned port;
    if (argc < 4 || argc > 5 || (sscanf(argv[1], "[%63[^]]]:%u", host, &port) != 2 &&
                      sscanf(argv[1], "%63[^:]:%u", host, &port) != 2))
        return 2;
    unsigned count = (unsigned)atoi(argv[2]);
    if (count == 0 || count > MAX_EPS)
        return 2;
    ucp_params_t params = {.field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_AM};
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SINGLE};
    ucp_context_h ctx;
    ucp_worker_h w;
    ucp_config_t *config;
    if (ucp_config_read(NULL, NULL, &config) != UCS_OK || ucp_config_modify(config, "TLS", "tcp") != UCS_OK ||
        (argc == 5 && ucp_config_modify(config, "NET_DEVICES", argv[4]) != UCS_OK))
        return 3;
    if (ucp_init(&params, config, &ctx) != UCS_OK || ucp_worker_create(ctx, &wp, &w) != UCS_OK)
        return 3;
    ucp_config_release(config);
    struct sockaddr_storage to, from;
    socklen_t to_len = address(host, port, &to), from_len = address(argv[3], 0, &from);
    if (!to_len || !from_len)
        return 2;
    static ucs_status_t failed[MAX_EPS];
    static ucs_status_ptr_t flush[MAX_EPS];
    static ucp_ep_h eps[MAX_EPS];
    ucp_request_param_t rp = {.op_attr_mask = 0};
    for (unsigned i = 0; i < count; i++) {
        ucp_ep_params_t ep = {
            .field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                          UCP_EP_PARAM_FIELD_LOCAL_SOCK_ADDR | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                          UCP_EP_PARAM_FIELD_ERR_HANDLER,
            .flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER,
            .sockaddr = {.addr = (struct sockaddr *)&to, .addrlen = to_len},
            .local_sockaddr = {.addr = (struct sockaddr *)&from, .addrlen = from_len},
            .err_mode = UCP_ERR_HANDLING_MODE_PEER,
            .err_handler = {.cb = on_error, .arg = &failed[i]},
        };
        if ((failed[i] = ucp_ep_create(w, &ep, &eps[i])) == UCS_OK)
            flush[i] = ucp_ep_flush_nbx(eps[i], &rp);
    }
    unsigned held = 0, refused = 0;
    for (double end = now() + 5; now() < end && held + refused < count;) {
        ucp_worker_progress(w);
        held = refused = 0;
        for (unsigned i = 0; i < count; i++) {
            ucs_status_t st = failed[i] != UCS_OK ? failed[i]
                              : UCS_PTR_IS_PTR(flush[i]) ? ucp_request_check_status(flush[i])
                                                         : UCS_PTR_STATUS(flush[i]);
            held += st == UCS_OK;
            refused += st != UCS_OK && st != UCS_INPROGRESS;
        }
    }
    printf("HELD %u REFUSED %u\n", held, refused);
    fflush(stdout);
    /* Hold them, never saying hello, until told to stop. */
    fcntl(0, F_SETFL, fcntl(0, F_GETFL) | O_NONBLOCK);
    char buf[64];
    while (read(0, buf, sizeof buf) != 0) {
        ucp_worker_progress(w);
        usleep(1000);
    }
    return 0;
}
