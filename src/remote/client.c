/* Remote regions through UCX: the client side (shmreg_remote_client). A
 * client owns a context, a worker and its progress thread (remote/worker.h),
 * which serve the server's gets and puts where the transport needs the
 * target's help (tcp); an exported window is a ucp_mem_map of the caller's
 * pages and its descriptor (remote/descriptor.h). */
#include <string.h>

#include "base/err.h"
#include "remote/descriptor.h"
#include "remote/worker.h"
#include "base/sys.h"

struct shmreg_remote_client {
    struct shmreg__ucx_worker w;
    ucp_address_t *address;
    size_t address_size;
};

struct shmreg_remote_window {
    shmreg_remote_client *client;
    ucp_mem_h memh;
    size_t size;
    unsigned char bytes[]; /* the descriptor */
};

shmreg_err shmreg_remote_client_create(shmreg_remote_client **out)
{
    if (!out)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "remote_client_create: out is NULL");
    *out = NULL;
    shmreg_remote_client *c = shmreg__calloc(1, sizeof *c);
    if (!c)
        return shmreg__fail(SHMREG_ERR_NO_MEMORY, "out of memory creating a remote client");
    shmreg_err err = shmreg__ucx_worker_start(&c->w, "shmreg-ucx-cli", "cannot create a remote client", true);
    if (err != SHMREG_OK) {
        shmreg__free(c);
        return err;
    }
    ucs_status_t st = c->w.ucx->worker_get_address(c->w.worker, &c->address, &c->address_size);
    if (st != UCS_OK) {
        shmreg__ucx_worker_stop(&c->w);
        shmreg__free(c);
        return shmreg__ucx_fail(SHMREG_ERR_SYSTEM, st, "cannot create a remote client: ucp_worker_get_address");
    }
    *out = c;
    return SHMREG_OK;
}

void shmreg_remote_client_destroy(shmreg_remote_client *c)
{
    if (!c)
        return;
    c->w.ucx->worker_release_address(c->w.worker, c->address);
    shmreg__ucx_worker_stop(&c->w);
    shmreg__free(c);
}

/* The descriptor of a mapped range: the worker's address and the packed key. */
static shmreg_err describe(shmreg_remote_client *c, ucp_mem_h memh, void *addr, size_t length,
                           shmreg_remote_window **out)
{
    void *rkey;
    size_t rkey_size;
    ucs_status_t st = c->w.ucx->rkey_pack(c->w.context, memh, &rkey, &rkey_size);
    if (st != UCS_OK)
        return shmreg__ucx_fail(SHMREG_ERR_SYSTEM, st, "cannot export %zu bytes at %p: ucp_rkey_pack", length, addr);
    struct shmreg__remote_descriptor d = {
        .address = (uint64_t)(uintptr_t)addr,
        .length = length,
        .worker_address = c->address,
        .worker_address_size = c->address_size,
        .rkey = rkey,
        .rkey_size = rkey_size,
    };
    size_t size = shmreg__remote_descriptor_size(&d);
    shmreg_remote_window *w = shmreg__calloc(1, sizeof *w + size);
    shmreg_err err = w ? shmreg__remote_descriptor_encode(&d, w->bytes, size)
                       : shmreg__fail(SHMREG_ERR_NO_MEMORY, "out of memory exporting %zu bytes", length);
    c->w.ucx->rkey_buffer_release(rkey);
    if (err != SHMREG_OK) {
        shmreg__free(w);
        return err;
    }
    w->client = c;
    w->memh = memh;
    w->size = size;
    *out = w;
    return SHMREG_OK;
}

shmreg_err shmreg_remote_export(shmreg_remote_client *c, void *addr, size_t length, shmreg_remote_window **out)
{
    if (out)
        *out = NULL;
    if (!c || !addr || !out || length == 0)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "remote_export: %s", !c ? "client is NULL" : !addr ?
                            "addr is NULL" : !out ? "out is NULL" : "length is 0");
    ucp_mem_map_params_t p = {
        .field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH,
        .address = addr,
        .length = length,
    };
    ucp_mem_h memh;
    ucs_status_t st = c->w.ucx->mem_map(c->w.context, &p, &memh);
    if (st != UCS_OK)
        return shmreg__ucx_fail(SHMREG_ERR_SYSTEM, st, "cannot export %zu bytes at %p: ucp_mem_map", length, addr);
    shmreg_err err = describe(c, memh, addr, length, out);
    if (err != SHMREG_OK)
        c->w.ucx->mem_unmap(c->w.context, memh);
    return err;
}

shmreg_err shmreg_remote_alloc(shmreg_remote_client *c, size_t length, void **addr, shmreg_remote_window **out)
{
    if (out)
        *out = NULL;
    if (!c || !addr || !out || length == 0)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "remote_alloc: %s", !c ? "client is NULL" : !addr ?
                            "addr is NULL" : !out ? "out is NULL" : "length is 0");
    /* UCX picks where: with the shared-memory transports, a segment the
     * server maps and reads directly (no help from this process). */
    ucp_mem_map_params_t p = {
        .field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                      UCP_MEM_MAP_PARAM_FIELD_FLAGS,
        .address = NULL,
        .length = length,
        .flags = UCP_MEM_MAP_ALLOCATE,
    };
    ucp_mem_h memh;
    ucs_status_t st = c->w.ucx->mem_map(c->w.context, &p, &memh);
    if (st != UCS_OK)
        return shmreg__ucx_fail(SHMREG_ERR_SYSTEM, st, "cannot allocate %zu bytes to export: ucp_mem_map", length);
    ucp_mem_attr_t attr = {.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS};
    if ((st = c->w.ucx->mem_query(memh, &attr)) != UCS_OK) {
        c->w.ucx->mem_unmap(c->w.context, memh);
        return shmreg__ucx_fail(SHMREG_ERR_SYSTEM, st, "cannot allocate %zu bytes to export: ucp_mem_query", length);
    }
    shmreg_err err = describe(c, memh, attr.address, length, out);
    if (err != SHMREG_OK) {
        c->w.ucx->mem_unmap(c->w.context, memh);
        return err;
    }
    *addr = attr.address;
    return SHMREG_OK;
}

shmreg_err shmreg_remote_descriptor(const shmreg_remote_window *w, const void **bytes, size_t *size)
{
    if (!w || !bytes || !size)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "remote_descriptor: %s is NULL",
                            !w ? "window" : !bytes ? "bytes" : "size");
    *bytes = w->bytes;
    *size = w->size;
    return SHMREG_OK;
}

void shmreg_remote_unexport(shmreg_remote_window *w)
{
    if (!w)
        return;
    w->client->w.ucx->mem_unmap(w->client->w.context, w->memh);
    shmreg__free(w);
}
