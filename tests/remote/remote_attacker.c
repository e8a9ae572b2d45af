#define _GNU_SOURCE
/* A hostile peer for the remote-region tests: UCX used directly, with
 * one-sided operations, against the server's listener.
 *
 *   remote_attacker HOST:PORT ADDRESS LENGTH
 * Connects to the listener without a secret, then tries to read LENGTH
 * bytes at ADDRESS (hex) of the server's memory with ucp_get_nbx, and to
 * write there with ucp_put_nbx, using a key of its own memory (UCX's
 * software one-sided operations take any key and any address where the
 * target serves them). Prints one line per attempt:
 *   GET <status>[ <hex of the first 16 bytes>]   PUT <status>
 * where status is "ok", a UCX status, or "no-answer" after 2 s. The test
 * asserts the server's memory neither leaked nor changed. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ucp/api/ucp.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static const char *wait_for(ucp_worker_h w, ucs_status_ptr_t req)
{
    if (req == NULL)
        return "ok";
    if (UCS_PTR_IS_ERR(req))
        return ucs_status_string(UCS_PTR_STATUS(req));
    double end = now() + 2;
    while (ucp_request_check_status(req) == UCS_INPROGRESS && now() < end)
        ucp_worker_progress(w);
    ucs_status_t st = ucp_request_check_status(req);
    if (st == UCS_INPROGRESS)
        return "no-answer"; /* left in flight: the process exits */
    ucp_request_free(req);
    return st == UCS_OK ? "ok" : ucs_status_string(st);
}

int main(int argc, char **argv)
{
    if (argc != 4)
        return 2;
    char host[64];
    unsigned port;
    if (sscanf(argv[1], "%63[^:]:%u", host, &port) != 2)
        return 2;
    uint64_t target = strtoull(argv[2], NULL, 16);
    size_t length = strtoull(argv[3], NULL, 0);
    ucp_params_t params = {.field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_RMA | UCP_FEATURE_AM};
    ucp_context_h ctx;
    ucp_worker_h w;
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SINGLE};
    if (ucp_init(&params, NULL, &ctx) != UCS_OK || ucp_worker_create(ctx, &wp, &w) != UCS_OK)
        return 3;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, host, &sa.sin_addr);
    ucp_ep_params_t ep_params = {
        .field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
        .flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER,
        .sockaddr = {.addr = (struct sockaddr *)&sa, .addrlen = sizeof sa},
        .err_mode = UCP_ERR_HANDLING_MODE_PEER,
    };
    ucp_ep_h ep;
    if (ucp_ep_create(w, &ep_params, &ep) != UCS_OK) {
        printf("CONNECT refused\n");
        return 0;
    }
    /* A key of this process's own memory, used against the server's. */
    unsigned char *mine = calloc(1, length);
    ucp_mem_map_params_t mp = {.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH,
                               .address = mine, .length = length};
    ucp_mem_h memh;
    void *packed;
    size_t packed_size;
    ucp_rkey_h rkey;
    if (ucp_mem_map(ctx, &mp, &memh) != UCS_OK || ucp_rkey_pack(ctx, memh, &packed, &packed_size) != UCS_OK)
        return 3;
    ucs_status_t st = ucp_ep_rkey_unpack(ep, packed, &rkey);
    if (st != UCS_OK) {
        printf("GET %s\nPUT %s\n", ucs_status_string(st), ucs_status_string(st));
        fflush(stdout);
        return 0;
    }
    ucp_request_param_t rp = {.op_attr_mask = 0};
    unsigned char *got = calloc(1, length);
    const char *get = wait_for(w, ucp_get_nbx(ep, got, length, target, rkey, &rp));
    printf("GET %s", get);
    if (strcmp(get, "ok") == 0)
        for (size_t i = 0; i < length && i < 16; i++)
            printf("%s%02x", i ? "" : " ", got[i]);
    printf("\n");
    memset(mine, 0x66, length);
    const char *put = wait_for(w, ucp_put_nbx(ep, mine, length, target, rkey, &rp));
    if (strcmp(put, "ok") == 0)
        put = wait_for(w, ucp_ep_flush_nbx(ep, &rp));
    printf("PUT %s\n", put);
    fflush(stdout);
    return 0;
}
