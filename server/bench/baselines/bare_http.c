/* The HTTP floor: libmicrohttpd, started with the server's own daemon flags
 * (src/http/http_server.c), answering every POST to /v2/models/<name>/infer with a
 * fixed JSON body the shape of the `simple` model's answer, on the daemon's
 * thread. No registry, no worker pool, no parsing of the request body: what
 * a request costs here is what the HTTP library costs on this machine,
 * which bench_request_cost.py divides the server's figures by. Anything else
 * is 404.
 *
 *     shmreg-bare-http [PORT]   prints "listening on 127.0.0.1:PORT" (PORT 0
 *                               or absent: a free one); SIGTERM or SIGINT
 *                               stops it. */
#include <microhttpd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ZEROS16 "[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]"
static const char infer_reply[] =
    "{\"model_name\":\"simple\",\"model_version\":\"1\",\"outputs\":["
    "{\"name\":\"OUTPUT0\",\"datatype\":\"INT32\",\"shape\":[1,16],\"data\":" ZEROS16 "},"
    "{\"name\":\"OUTPUT1\",\"datatype\":\"INT32\",\"shape\":[1,16],\"data\":" ZEROS16 "}]}";

static int is_infer(const char *method, const char *url)
{
    static const char prefix[] = "/v2/models/", suffix[] = "/infer";
    size_t n = strlen(url), s = sizeof suffix - 1;
    return strcmp(method, "POST") == 0 && strncmp(url, prefix, sizeof prefix - 1) == 0 &&
           n > sizeof prefix - 1 + s && strcmp(url + n - s, suffix) == 0;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *conn, const char *url,
                               const char *method, const char *version,
                               const char *upload_data, size_t *upload_data_size, void **state)
{
    static int first_call;
    if (!*state) { /* headers only so far: the body follows in later calls */
        *state = &first_call;
        return MHD_YES;
    }
    if (*upload_data_size) { /* the body is read and dropped */
        *upload_data_size = 0;
        return MHD_YES;
    }
    int ok = is_infer(method, url);
    const char *body = ok ? infer_reply : "{\"error\":\"not found\"}";
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), (void *)body,
                                                             MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", "application/json");
    enum MHD_Result rc = MHD_queue_response(conn, ok ? 200 : 404, r);
    MHD_destroy_response(r);
    return rc;
}

int main(int argc, char **argv)
{
    /* Blocked before the daemon starts its thread, which inherits the mask:
     * the signals wait for sigwait below. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    struct sockaddr_in addr = {.sin_family = AF_INET,
                               .sin_port = htons((uint16_t)(argc > 1 ? atoi(argv[1]) : 0))};
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    /* The server's flags, less suspend/resume, which only its worker pool uses. */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ITC |
                     MHD_USE_ERROR_LOG;
    struct MHD_Daemon *d = MHD_start_daemon(flags, 0, NULL, NULL, handler, NULL,
                                            MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                                            MHD_OPTION_END);
    const union MHD_DaemonInfo *info = d ? MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT) : NULL;
    if (!info) {
        fprintf(stderr, "error: cannot listen for HTTP on 127.0.0.1\n");
        return 1;
    }
    printf("listening on 127.0.0.1:%u\n", (unsigned)info->port);
    fflush(stdout);
    int sig;
    sigwait(&stop, &sig);
    MHD_stop_daemon(d);
    return 0;
}
