/*
 * Who may do what: the flags of the library's protections (owner
 * allow-list, limits), Triton's restriction of the shared-memory endpoints
 * to requests carrying a header (--http-restricted-api,
 * --grpc-restricted-protocol), and the tenants of --tenants.
 *
 * Each protocol reads a request's headers (HTTP) or metadata (gRPC) once,
 * into a caller; the shared-memory endpoints refuse a caller that
 * access_refusal refuses, and every region call goes through the caller's
 * scope (region_scope.h).
 */
#ifndef SERVER_ACCESS_H
#define SERVER_ACCESS_H

#include <stddef.h>
#include <sys/types.h>

#include <shmreg/shmreg.h>

#include "core/region_scope.h"
#include "common/status.h"
#include "core/tenants.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A header (gRPC: metadata key) that requests must carry with this value. */
typedef struct restriction {
    char *header; /* NULL: no restriction */
    char *value;
    const char *what; /* "API" (HTTP) or "protocol" (gRPC), for the refusal */
} restriction;

typedef struct access_options {
    uid_t *allow_uids;  /* --allow-uid, in the order given */
    size_t n_allow_uids;
    int any_uid;        /* --allow-uid any: no owner allow-list */
    uid_t self_uid;     /* the default allow-list: the server's own uid */
    size_t max_regions, max_mapped_bytes, max_pinned_bytes; /* 0: unlimited */
    restriction http;   /* --http-restricted-api shared-memory:KEY=VALUE */
    restriction grpc;   /* --grpc-restricted-protocol (header triton-grpc-protocol-KEY) */
    tenants *tenants;   /* --tenants FILE; NULL: none */
} access_options;

/* The options this file parses, in the order of options.c's table. */
typedef enum access_opt {
    ACCESS_ALLOW_UID,
    ACCESS_MAX_REGIONS,
    ACCESS_MAX_MAPPED,
    ACCESS_MAX_PINNED,
    ACCESS_HTTP_RESTRICTED,
    ACCESS_GRPC_RESTRICTED,
    ACCESS_TENANTS
} access_opt;

/* Defaults (README): the server's own uid, 4096 regions, no byte limit,
 * pinning within the library's AUTO budget. */
void access_options_init(access_options *a);
/* One option's argument; 0, or -1 after printing an error. */
int access_option(access_options *a, access_opt opt, const char *arg);
void access_options_free(access_options *a);
/* How many tenants --tenants names (0 without it): each has its own book
 * of the models' statistics (models_config.tenants). */
size_t access_tenant_count(const access_options *a);
/* Whether the allow-list lets uid in (also the peers of --uds, whose
 * credentials the kernel gives). */
int access_uid_allowed(const access_options *a, uid_t uid);
/* The allow-list and limits into cfg; cfg must not outlive a. */
void access_config(const access_options *a, shmreg_config *cfg);

/* Under --tenants: each tenant's quota of regions, mapped and
 * pinned bytes, the library's quota of its owner tag. A tenant's own
 * (max-*=N in the tenants file) or else the default share: what the
 * global limit (--max-*) leaves after the tenants' own, divided among the
 * others, so that together they never pass it and no tenant can make
 * another's registration fail. access_quota_config sets the default share
 * in cfg (0, or -1 after printing why the quotas cannot fit the limits);
 * access_set_quotas gives the tenants with their own quota theirs. */
int access_quota_config(const access_options *a, shmreg_config *cfg);
int access_set_quotas(const access_options *a, shmreg_registry *reg);

/* What one request may do, from its headers. */
typedef struct caller {
    const restriction *unmet; /* a restriction it does not satisfy, or NULL */
    region_scope scope;
} caller;

/* The caller of a request. r: the protocol's restriction; r_value: the
 * value the request carries under r->header (NULL: none); authorization:
 * its Authorization header (gRPC: "authorization" metadata), or NULL. */
void access_caller(const access_options *a, const restriction *r, const char *r_value,
                   size_t r_len, const char *authorization, size_t auth_len, caller *out);

/* Whether who may use the shared-memory endpoints: STATUS_OK, or the
 * refusal (STATUS_RESTRICTED: a restriction, Triton's; STATUS_UNAUTHENTICATED:
 * no known token) with its message in msg. */
server_status access_refusal(const caller *who, char *msg, size_t len);

#ifdef __cplusplus
}
#endif

#endif
