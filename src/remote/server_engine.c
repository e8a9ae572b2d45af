/* The server's engine for remote regions: its configuration and its start
 * (the UCX worker and the listener). remote/server_engine.h has what the
 * parts of the engine share; remote/server.h is what the backend calls. */
#include <string.h>

#include "base/err.h"
#include "base/sys.h"
#include "remote/hostport.h"
#include "remote/server_engine.h"

#define SHMREG__DEFAULT_MAX_CONNECTIONS 16
#define SHMREG__DEFAULT_MAX_COPIES 8

struct shmreg__remote_engine shmreg__engine = {.lock = PTHREAD_MUTEX_INITIALIZER};

unsigned shmreg__engine_max_connections(void)
{
    return shmreg__engine.config.max_connections ? shmreg__engine.config.max_connections
                                                 : SHMREG__DEFAULT_MAX_CONNECTIONS;
}

unsigned shmreg__engine_max_copies(void)
{
    return shmreg__engine.config.max_copies ? shmreg__engine.config.max_copies : SHMREG__DEFAULT_MAX_COPIES;
}

static void config_strings_free(struct config_strings *k)
{
    shmreg__free(k->listen);
    shmreg__free(k->transports);
    shmreg__free(k->tcp_device);
    shmreg__free(k->tcp_ports);
}

static shmreg_err config_strings_copy(const shmreg_remote_config *c, struct config_strings *k)
{
    const char *from[] = {c->listen, c->transports, c->tcp_device, c->tcp_ports};
    char **to[] = {&k->listen, &k->transports, &k->tcp_device, &k->tcp_ports};
    for (size_t i = 0; i < 4; i++) {
        if (from[i] && !(*to[i] = shmreg__strdup(from[i]))) {
            config_strings_free(k);
            return shmreg__fail(SHMREG_ERR_NO_MEMORY, "out of memory configuring remote regions");
        }
    }
    return SHMREG_OK;
}

shmreg_err shmreg_remote_configure(const shmreg_remote_config *config)
{
    shmreg_remote_config c = config ? *config : (shmreg_remote_config){0};
    struct sockaddr_storage ss;
    socklen_t len;
    if (c.listen && shmreg__hostport_parse(c.listen, true, &ss, &len, "remote_configure: listen") != SHMREG_OK)
        return SHMREG_ERR_INVALID_ARG;
    struct shmreg__remote_transports t;
    if (shmreg__remote_server_transports(&c, &t) != SHMREG_OK)
        return SHMREG_ERR_INVALID_ARG;
    struct config_strings k = {0};
    if (config_strings_copy(&c, &k) != SHMREG_OK)
        return SHMREG_ERR_NO_MEMORY;
    pthread_mutex_lock(&shmreg__engine.lock);
    bool started = shmreg__engine.started;
    if (!started) {
        config_strings_free(&shmreg__engine.strings);
        shmreg__engine.strings = k;
        shmreg__engine.config = c;
        shmreg__engine.config.listen = k.listen;
        shmreg__engine.config.transports = k.transports;
        shmreg__engine.config.tcp_device = k.tcp_device;
        shmreg__engine.config.tcp_ports = k.tcp_ports;
    }
    pthread_mutex_unlock(&shmreg__engine.lock);
    if (started) {
        config_strings_free(&k);
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "remote_configure: the remote engine has already started");
    }
    return SHMREG_OK;
}
static shmreg_err listen_start_locked(void)
{
    const char *at = shmreg__engine.config.listen ? shmreg__engine.config.listen : "0.0.0.0:0";
    struct sockaddr_storage ss;
    socklen_t len;
    shmreg_err err = shmreg__hostport_parse(at, true, &ss, &len, "cannot start the remote engine: listen");
    if (err != SHMREG_OK)
        return err;
    ucp_listener_params_t p = {
        .field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER,
        .sockaddr = {.addr = (const struct sockaddr *)&ss, .addrlen = len},
        .conn_handler = {.cb = shmreg__on_conn_request},
    };
    ucs_status_t st = shmreg__engine.w.ucx->listener_create(shmreg__engine.w.worker, &p, &shmreg__engine.listener);
    if (st != UCS_OK)
        return shmreg__ucx_fail(SHMREG_ERR_SYSTEM, st, "cannot start the remote engine: ucp_listener_create on %s",
                                at);
    ucp_listener_attr_t attr = {.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR};
    if ((st = shmreg__engine.w.ucx->listener_query(shmreg__engine.listener, &attr)) != UCS_OK) {
        shmreg__engine.w.ucx->listener_destroy(shmreg__engine.listener);
        return shmreg__ucx_fail(SHMREG_ERR_SYSTEM, st, "cannot start the remote engine: ucp_listener_query");
    }
    shmreg__hostport_format((const struct sockaddr *)&attr.sockaddr, shmreg__engine.address,
                            sizeof shmreg__engine.address);
    return SHMREG_OK;
}

shmreg_err shmreg__engine_start_locked(void)
{
    if (shmreg__engine.started)
        return SHMREG_OK;
    struct shmreg__remote_transports t;
    shmreg_err err = shmreg__remote_server_transports(&shmreg__engine.config, &t); /* again: a device may have gone */
    if (err != SHMREG_OK)
        return err;
    const struct shmreg__ucx_worker_params p = {
        .thread_name = "shmreg-ucx",
        .what = "cannot start the remote engine",
        .transports = &t,
        .reuse_address = true,
        .am_id = SHMREG__AM_TO_SERVER,
        .am_cb = shmreg__on_message,
    };
    err = shmreg__ucx_worker_start(&shmreg__engine.w, &p);
    if (err != SHMREG_OK)
        return err;
    if ((err = listen_start_locked()) != SHMREG_OK) {
        shmreg__ucx_worker_stop(&shmreg__engine.w);
        return err;
    }
    shmreg__engine.started = true;
    return SHMREG_OK;
}

/* Start the engine if it has not; callers hold no lock. */
shmreg_err shmreg__engine_start(void)
{
    pthread_mutex_lock(&shmreg__engine.lock);
    shmreg_err err = shmreg__engine_start_locked();
    pthread_mutex_unlock(&shmreg__engine.lock);
    return err;
}

shmreg_err shmreg_remote_server_address(const char **address)
{
    if (!address)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "remote_server_address: address is NULL");
    shmreg_err err = shmreg__engine_start();
    if (err != SHMREG_OK)
        return err;
    *address = shmreg__engine.address;
    return SHMREG_OK;
}
