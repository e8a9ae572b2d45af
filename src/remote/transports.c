/* Which UCX transports a remote context may open (remote/transports.h). */
#include <dirent.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "remote/transports.h"

#define SHMREG__TLS_MAX 256

/* A name the caller may give, and UCX's names for it. rc and dc are
 * spelled out: UCX's own aliases add UD as an auxiliary transport, whose
 * receiver emulates puts in software. */
static const struct {
    const char *name, *ucx;
} allowed[] = {
    {"rc", "rc_mlx5,rc_verbs"}, {"rc_verbs", "rc_verbs"}, {"rc_mlx5", "rc_mlx5"}, {"rc_x", "rc_mlx5"},
    {"dc", "dc_mlx5"},          {"dc_mlx5", "dc_mlx5"},   {"dc_x", "dc_mlx5"},    {"tcp", "tcp"},
    {"cuda_copy", "cuda_copy"}, {"rocm_copy", "rocm_copy"}, {"gdr_copy", "gdr_copy"},
};

/* Why a known name is refused; NULL for a name not listed (unknown). */
static const char *refusal(const char *name)
{
    static const struct {
        const char *names, *why;
    } refused[] = {
        {",ud,ud_verbs,ud_mlx5,ud_v,ud_x,ib,", "UD emulates one-sided writes in software at the receiver, so any "
         "peer that reaches the device could write into this process"},
        {",posix,sysv,cma,knem,xpmem,sm,shm,mm,", "a shared-memory transport serves gets and puts (cma: reads and "
         "writes of this process's memory) to any process of this host that connects, with no key checked"},
        {",self,", "the loop-back transport serves one-sided operations in software and is never needed "
         "between processes"},
        {",cuda_ipc,rocm_ipc,cuda,rocm,", "an IPC transport maps GPU memory between processes of this host on a "
         "peer's word"},
        {",all,", "'all' opens every transport, tcp and shared memory included"},
    };
    char key[SHMREG__TLS_MAX + 2];
    snprintf(key, sizeof key, ",%s,", name);
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        if (strstr(refused[i].names, key))
            return refused[i].why;
    return NULL;
}

static const char *ucx_names(const char *name)
{
    for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++)
        if (strcmp(allowed[i].name, name) == 0)
            return allowed[i].ucx;
    return NULL;
}

static const char *field(const struct shmreg__remote_transports *t)
{
    return t->server ? "shmreg_remote_config.transports, the server's --remote-transports"
                     : "shmreg_remote_client_config.transports";
}

static const char *device_field(const struct shmreg__remote_transports *t)
{
    return t->server ? "shmreg_remote_config.tcp_device, the server's --remote-tcp-device"
                     : "shmreg_remote_client_config.tcp_device";
}

static shmreg_err check_name(const struct shmreg__remote_transports *t, const char *name, const char *what)
{
    if (strcmp(name, "tcp") == 0 && !t->tcp_device)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "%s: transport 'tcp' refused without a trusted device: tcp "
                            "serves a put or get at any address of this process to any host that reaches its "
                            "port, checking no key; name the network device whose network you trust (%s), or "
                            "leave tcp out (%s)", what, device_field(t), field(t));
    if (ucx_names(name))
        return SHMREG_OK;
    const char *why = refusal(name);
    if (why)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "%s: transport '%s' refused: %s (%s)", what, name, why,
                            field(t));
    return shmreg__fail(SHMREG_ERR_INVALID_ARG, "%s: transport '%s' refused: not a transport the library opens "
                        "(allowed: rc, rc_verbs, rc_mlx5, rc_x, dc, dc_mlx5, dc_x, cuda_copy, rocm_copy, "
                        "gdr_copy, and tcp with a tcp_device) (%s)", what, name, field(t));
}

static shmreg_err check_list(const struct shmreg__remote_transports *t, const char *what)
{
    const char *list = t->transports;
    if (list[0] == '^' || strlen(list) >= SHMREG__TLS_MAX)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "%s: transports '%.40s' refused: %s (%s)", what, list,
                            list[0] == '^' ? "an exclusion list would open every transport it does not name"
                                           : "longer than 255 bytes", field(t));
    char copy[SHMREG__TLS_MAX];
    snprintf(copy, sizeof copy, "%s", list);
    char *save = NULL;
    size_t n = 0;
    for (char *name = strtok_r(copy, ",", &save); name; name = strtok_r(NULL, ",", &save), n++) {
        shmreg_err err = check_name(t, name, what);
        if (err != SHMREG_OK)
            return err;
    }
    if (n == 0 || strstr(list, ",,") || list[strlen(list) - 1] == ',')
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "%s: transports '%s' refused: an empty name (%s)", what, list,
                            field(t));
    return SHMREG_OK;
}

static shmreg_err check_device(const struct shmreg__remote_transports *t, const char *what)
{
    const char *d = t->tcp_device;
    size_t n = strlen(d);
    bool plain = n > 0 && n < IF_NAMESIZE && strspn(d, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                        "0123456789_-.") == n;
    if (!plain)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "%s: tcp_device '%.40s' is not a network interface's name "
                            "(1 to %d letters, digits, '_', '-', '.') (%s)", what, d, IF_NAMESIZE - 1,
                            device_field(t));
    if (if_nametoindex(d) == 0)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "%s: tcp_device '%s': no network interface of that name on "
                            "this host (%s)", what, d, device_field(t));
    return SHMREG_OK;
}

static shmreg_err check_ports(const struct shmreg__remote_transports *t, const char *what)
{
    unsigned low, high;
    int used = 0;
    const char *flag = t->server ? "shmreg_remote_config.tcp_ports, the server's --remote-tcp-ports"
                                 : "shmreg_remote_client_config.tcp_ports";
    if (!t->tcp_device)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "%s: tcp_ports '%.40s' given without a tcp_device: tcp is "
                            "not opened (%s)", what, t->tcp_ports, flag);
    if (sscanf(t->tcp_ports, "%5u-%5u%n", &low, &high, &used) != 2 || (size_t)used != strlen(t->tcp_ports) ||
        t->tcp_ports[0] < '0' || t->tcp_ports[0] > '9' || low == 0 || low > high || high > 65535)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "%s: tcp_ports '%.40s' is not LOW-HIGH, two ports with "
                            "1 <= LOW <= HIGH <= 65535 (%s)", what, t->tcp_ports, flag);
    return SHMREG_OK;
}

shmreg_err shmreg__remote_transports_check(const struct shmreg__remote_transports *t, const char *what)
{
    shmreg_err err = SHMREG_OK;
    if (t->tcp_device)
        err = check_device(t, what);
    if (err == SHMREG_OK && t->tcp_ports)
        err = check_ports(t, what);
    if (err == SHMREG_OK && t->transports)
        err = check_list(t, what);
    return err;
}

shmreg_err shmreg__remote_server_transports(const shmreg_remote_config *config, struct shmreg__remote_transports *t)
{
    *t = (struct shmreg__remote_transports){.server = true};
    if (config) {
        t->transports = config->transports;
        t->tcp_device = config->tcp_device;
        t->tcp_ports = config->tcp_ports;
    }
    return shmreg__remote_transports_check(t, "remote_configure");
}

shmreg_err shmreg__remote_client_transports(const shmreg_remote_client_config *config,
                                            struct shmreg__remote_transports *t)
{
    *t = (struct shmreg__remote_transports){0};
    if (config) {
        t->transports = config->transports;
        t->tcp_device = config->tcp_device;
        t->tcp_ports = config->tcp_ports;
    }
    return shmreg__remote_transports_check(t, "remote_client_create");
}

/* Append this host's RDMA ports ("mlx5_0:1") to out, comma separated;
 * whether there was any. */
static bool rdma_ports(char *out, size_t cap)
{
    DIR *d = opendir("/sys/class/infiniband");
    if (!d)
        return false;
    bool any = false;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char path[300];
        snprintf(path, sizeof path, "/sys/class/infiniband/%s/ports", e->d_name);
        DIR *p = opendir(path);
        for (struct dirent *q; p && (q = readdir(p));) {
            if (q->d_name[0] == '.')
                continue;
            size_t n = strlen(out);
            snprintf(out + n, cap - n, "%s%s:%s", n ? "," : "", e->d_name, q->d_name);
            any = true;
        }
        if (p)
            closedir(p);
    }
    closedir(d);
    return any;
}

static void append(char *out, size_t cap, const char *names)
{
    size_t n = strlen(out);
    snprintf(out + n, cap - n, "%s%s", n ? "," : "", names);
}

void shmreg__remote_tls(const struct shmreg__remote_transports *t, char *tls, size_t cap)
{
    tls[0] = '\0';
    if (!t->transports) {
        char ports[512] = "";
        if (rdma_ports(ports, sizeof ports))
            append(tls, cap, "rc_mlx5,rc_verbs,dc_mlx5");
        if (t->tcp_device)
            append(tls, cap, "tcp");
        return;
    }
    char copy[SHMREG__TLS_MAX];
    snprintf(copy, sizeof copy, "%s", t->transports);
    char *save = NULL;
    for (char *name = strtok_r(copy, ",", &save); name; name = strtok_r(NULL, ",", &save))
        append(tls, cap, ucx_names(name));
}

void shmreg__remote_net_devices(const struct shmreg__remote_transports *t, const char *env_devices, char *out,
                                size_t cap)
{
    snprintf(out, cap, "%s", t->tcp_device);
    if (!env_devices || strcmp(env_devices, "all") == 0 || env_devices[0] == '\0') {
        rdma_ports(out, cap);
        return;
    }
    char copy[512];
    snprintf(copy, sizeof copy, "%s", env_devices);
    char *save = NULL;
    for (char *name = strtok_r(copy, ",", &save); name; name = strtok_r(NULL, ",", &save))
        if (if_nametoindex(name) == 0 && strcmp(name, t->tcp_device) != 0)
            append(out, cap, name); /* not a network interface: an RDMA device */
}

shmreg_err shmreg__remote_no_device(const struct shmreg__remote_transports *t, const char *what,
                                    const char *ucx_reason)
{
    const char *asked = t->transports ? t->transports : t->tcp_device ? "rc,dc,tcp (the default)"
                                                                      : "rc,dc (the default)";
    return shmreg__fail(SHMREG_ERR_UNSUPPORTED, "%s: no device of this host offers the transports asked (%s)%s%s; "
                        "tcp is opened only on a device named trusted: set %s to a network device on a network "
                        "you trust (\"lo\": clients on this host only), knowing that any host that reaches it "
                        "can write into this process", what, asked, ucx_reason ? ": " : "",
                        ucx_reason ? ucx_reason : "", device_field(t));
}
