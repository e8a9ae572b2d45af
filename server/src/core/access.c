/* The tenancy flags, and who may use the shared-memory endpoints (access.h). */
#include "core/access.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/triton.h"

/* Triton's gRPC frontend checks a restricted protocol's key under this
 * prefix, so that clients of either server send the same metadata. */
#define GRPC_RESTRICTED_PREFIX "triton-grpc-protocol-"

/* The default limits (README, "Untrusted clients"). Regions: well above
 * honest use, far below vm.max_map_count (65530 mappings), past which every
 * client's register and inference fail. Mapped bytes: 1 TiB of the 128 TiB
 * of address space a process has, so that one sparse object registered
 * again and again cannot use it up (126 registrations of a 1 TiB object
 * exhaust it); the library checks a window against its object before any
 * limit, so a window past the end still gets Triton's "invalid args". */
#define DEFAULT_MAX_REGIONS 4096
#define DEFAULT_MAX_MAPPED_BYTES ((size_t)1 << 40)

void access_options_init(access_options *a)
{
    *a = (access_options){.self_uid = geteuid(), .max_regions = DEFAULT_MAX_REGIONS,
                          .max_mapped_bytes = DEFAULT_MAX_MAPPED_BYTES,
                          .http = {.what = "API"}, .grpc = {.what = "protocol"}};
}

void access_options_free(access_options *a)
{
    free(a->allow_uids);
    free(a->http.header);
    free(a->http.value);
    free(a->grpc.header);
    free(a->grpc.value);
    tenants_free(a->tenants);
    access_options_init(a);
}

size_t access_tenant_count(const access_options *a)
{
    return tenants_count(a->tenants);
}

int access_uid_allowed(const access_options *a, uid_t uid)
{
    if (a->any_uid)
        return 1;
    if (!a->n_allow_uids)
        return uid == a->self_uid;
    for (size_t i = 0; i < a->n_allow_uids; i++)
        if (a->allow_uids[i] == uid)
            return 1;
    return 0;
}

void access_config(const access_options *a, shmreg_config *cfg)
{
    if (!a->any_uid) {
        cfg->allowed_owner_uids = a->n_allow_uids ? a->allow_uids : &a->self_uid;
        cfg->allowed_owner_uid_count = a->n_allow_uids ? a->n_allow_uids : 1;
    }
    cfg->max_regions = a->max_regions;
    cfg->max_mapped_bytes = a->max_mapped_bytes;
    cfg->max_pinned_bytes = a->max_pinned_bytes;
}

/* ----------------------------------------------------------- quotas */

/* One limit's split among the tenants: the sum of the tenants' own, and how
 * many take the default share. */
struct split {
    size_t own_sum, sharing;
    int overflow;
};

struct quota_split {
    struct split field[3]; /* regions, mapped bytes, pinned bytes */
};

static size_t quota_field(const shmreg_quota *q, int k)
{
    return k == 0 ? q->max_regions : k == 1 ? q->max_mapped_bytes : q->max_pinned_bytes;
}

static void add_tenant(void *ctx, const char *tenant, int given, const shmreg_quota *own)
{
    (void)tenant;
    struct quota_split *qs = ctx;
    for (int k = 0; k < 3; k++) {
        struct split *f = &qs->field[k];
        if (!(given & (1 << k))) {
            f->sharing++;
        } else {
            size_t v = quota_field(own, k);
            f->overflow |= v == 0 || v > SIZE_MAX - f->own_sum; /* 0: unlimited */
            f->own_sum += v;
        }
    }
}

static const char *const quota_flag[3] = {"--max-regions", "--max-mapped-bytes", "--max-pinned-bytes"};
static const char *const quota_key[3] = {"max-regions", "max-mapped-bytes", "max-pinned-bytes"};

int access_quota_config(const access_options *a, shmreg_config *cfg)
{
    if (!a->tenants)
        return 0;
    struct quota_split qs = {0};
    tenants_each(a->tenants, add_tenant, &qs);
    const size_t global[3] = {a->max_regions, a->max_mapped_bytes, a->max_pinned_bytes};
    size_t share[3] = {0, 0, 0};
    for (int k = 0; k < 3; k++) {
        const struct split *f = &qs.field[k];
        if (global[k] == 0)
            continue; /* unlimited: so are the shares */
        if (f->overflow || f->own_sum > global[k]) {
            fprintf(stderr, "error: --tenants: the tenants' own %s add up to more than %s %zu (or one is 0, "
                            "unlimited); lower them or raise the limit\n",
                    quota_key[k], quota_flag[k], global[k]);
            return -1;
        }
        if (f->sharing == 0)
            continue;
        share[k] = (global[k] - f->own_sum) / f->sharing;
        if (share[k] == 0) {
            fprintf(stderr, "error: --tenants: %s %zu leaves no share for the %zu tenants without their own "
                            "%s\n",
                    quota_flag[k], global[k], f->sharing, quota_key[k]);
            return -1;
        }
    }
    cfg->max_regions_per_tag = share[0];
    cfg->max_mapped_bytes_per_tag = share[1];
    cfg->max_pinned_bytes_per_tag = share[2];
    return 0;
}

struct set_ctx {
    shmreg_registry *reg;
    shmreg_config share;
    int failed;
};

static void set_tenant(void *ctx, const char *tenant, int given, const shmreg_quota *own)
{
    struct set_ctx *c = ctx;
    if (!given || c->failed)
        return;
    /* The fields its lines do not give keep the default share. */
    shmreg_quota q;
    shmreg_quota_init(&q);
    q.max_regions = given & TENANT_QUOTA_REGIONS ? own->max_regions : c->share.max_regions_per_tag;
    q.max_mapped_bytes = given & TENANT_QUOTA_MAPPED ? own->max_mapped_bytes : c->share.max_mapped_bytes_per_tag;
    q.max_pinned_bytes = given & TENANT_QUOTA_PINNED ? own->max_pinned_bytes : c->share.max_pinned_bytes_per_tag;
    if (shmreg_tag_quota_set(c->reg, tenant, &q) != SHMREG_OK) {
        fprintf(stderr, "error: --tenants: tenant %s's quota: %s\n", tenant, shmreg_last_error());
        c->failed = 1;
    }
}

int access_set_quotas(const access_options *a, shmreg_registry *reg)
{
    if (!a->tenants)
        return 0;
    struct set_ctx c = {.reg = reg};
    shmreg_config_init(&c.share);
    if (access_quota_config(a, &c.share) != 0)
        return -1;
    tenants_each(a->tenants, set_tenant, &c);
    return c.failed ? -1 : 0;
}

/* ---------------------------------------------------------------- parsing */

/* A whole decimal number in [0, max]. */
static int parse_size(const char *opt, const char *s, unsigned long long max, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] < '0' || s[0] > '9' || v > max) {
        fprintf(stderr, "error: %s wants an integer in [0, %llu], got '%s'\n", opt, max, s);
        return -1;
    }
    *out = (size_t)v;
    return 0;
}

/* --allow-uid UID (repeatable) or --allow-uid any, never both. */
static int add_uid(access_options *a, const char *s)
{
    if (strcmp(s, "any") == 0)
        a->any_uid = 1;
    if (a->any_uid && (a->n_allow_uids || strcmp(s, "any") != 0)) {
        fprintf(stderr, "error: --allow-uid any cannot be combined with a list of uids\n");
        return -1;
    }
    if (a->any_uid)
        return 0;
    size_t uid;
    if (parse_size("--allow-uid", s, (uid_t)-2, &uid) != 0)
        return -1;
    uid_t *grown = realloc(a->allow_uids, (a->n_allow_uids + 1) * sizeof *grown);
    if (!grown) {
        fprintf(stderr, "error: out of memory\n");
        return -1;
    }
    grown[a->n_allow_uids++] = (uid_t)uid;
    a->allow_uids = grown;
    return 0;
}

/* Triton's API names (its RESTRICTED_CATEGORY_NAMES): this server can
 * restrict the shared-memory one; the others are named as such. */
static int check_api(const char *opt, const char *kind, const char *api)
{
    static const char *const triton[] = {"health", "metadata", "inference", "model-config",
                                         "model-repository", "statistics", "trace", "logging"};
    if (strcmp(api, "shared-memory") == 0)
        return 0;
    for (size_t i = 0; i < sizeof triton / sizeof triton[0]; i++) {
        if (strcmp(api, triton[i]) == 0) {
            fprintf(stderr, "error: %s: restricted %s '%s' is not one this server can "
                            "restrict (only shared-memory)\n", opt, kind, api);
            return -1;
        }
    }
    fprintf(stderr, "error: %s: unknown restricted %s '%s'\n", opt, kind, api);
    return -1;
}

/* gRPC carries metadata keys in lower case: another key could never match. */
static int check_grpc_key(const char *opt, const char *key)
{
    if (strspn(key, "abcdefghijklmnopqrstuvwxyz0123456789-_.") == strlen(key))
        return 0;
    fprintf(stderr, "error: %s: the key '%s' must be lower case letters, digits, '-', '_' or "
                    "'.' (gRPC metadata keys)\n", opt, key);
    return -1;
}

/* HTTP header names are tokens; a value ends at the line. */
static int check_http_key(const char *opt, const char *key, const char *value)
{
    int bad_key = strspn(key, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                              "0123456789!#$%&'*+-.^_`|~") != strlen(key);
    for (const char *p = value; !bad_key && *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            bad_key = 1;
    if (!bad_key)
        return 0;
    fprintf(stderr, "error: %s: '%s' is not an HTTP header name, or its value has control "
                    "characters\n", opt, key);
    return -1;
}

/* Every API of the comma-separated list is one this server restricts. */
static int check_apis(const char *opt, const char *kind, char *apis)
{
    char *save = NULL;
    int n = 0;
    for (char *api = strtok_r(apis, ",", &save); api; api = strtok_r(NULL, ",", &save), n++)
        if (check_api(opt, kind, api) != 0)
            return -1;
    if (n == 0)
        return check_api(opt, kind, "");
    return 0;
}

/* APIS:KEY=VALUE split in place (copy is arg's copy); the APIs checked. */
static int split_restriction(const char *opt, const char *kind, const char *arg, char *copy,
                             char **key, char **value)
{
    char *colon = strchr(copy, ':');
    char *eq = colon ? strchr(colon + 1, '=') : NULL;
    if (!colon || !eq || colon == copy || eq == colon + 1 || !eq[1]) {
        fprintf(stderr, "error: %s wants <%ss>:<key>=<value>, e.g. "
                        "shared-memory:admin-key=secret; got '%s'\n", opt, kind, arg);
        return -1;
    }
    *colon = 0;
    *eq = 0;
    *key = colon + 1;
    *value = eq + 1;
    return check_apis(opt, kind, copy);
}

static int set_restriction(restriction *out, const char *prefix, const char *key,
                           const char *value)
{
    size_t len = strlen(prefix) + strlen(key) + 1;
    out->header = malloc(len);
    out->value = strdup(value);
    if (!out->header || !out->value) {
        fprintf(stderr, "error: out of memory\n");
        return -1; /* access_options_free frees what was allocated */
    }
    snprintf(out->header, len, "%s%s", prefix, key);
    return 0;
}

/* --http-restricted-api / --grpc-restricted-protocol, Triton's syntax:
 * APIS:KEY=VALUE, APIS a comma-separated list. As in Triton, an API may be
 * in one group only, so a second group naming shared-memory is refused. */
static int parse_restriction(const char *opt, const char *kind, const char *arg,
                             const char *prefix, restriction *out)
{
    char *copy = strdup(arg), *key, *value;
    if (!copy) {
        fprintf(stderr, "error: out of memory\n");
        return -1;
    }
    int rc = split_restriction(opt, kind, arg, copy, &key, &value);
    if (rc == 0 && out->header) {
        fprintf(stderr, "error: %s: restricted %s 'shared-memory' can not be specified in "
                        "multiple config groups\n", opt, kind);
        rc = -1;
    }
    if (rc == 0)
        rc = prefix[0] ? check_grpc_key(opt, key) : check_http_key(opt, key, value);
    if (rc == 0)
        rc = set_restriction(out, prefix, key, value);
    free(copy);
    return rc;
}

static int load_tenants(access_options *a, const char *path)
{
    if (a->tenants) {
        fprintf(stderr, "error: --tenants can be given once\n");
        return -1;
    }
    a->tenants = tenants_load(path);
    return a->tenants ? 0 : -1;
}

int access_option(access_options *a, access_opt opt, const char *arg)
{
    switch (opt) {
    case ACCESS_ALLOW_UID: return add_uid(a, arg);
    case ACCESS_MAX_REGIONS: return parse_size("--max-regions", arg, SIZE_MAX, &a->max_regions);
    case ACCESS_MAX_MAPPED:
        return parse_size("--max-mapped-bytes", arg, SIZE_MAX, &a->max_mapped_bytes);
    case ACCESS_MAX_PINNED:
        return parse_size("--max-pinned-bytes", arg, SIZE_MAX, &a->max_pinned_bytes);
    case ACCESS_HTTP_RESTRICTED:
        return parse_restriction("--http-restricted-api", "api", arg, "", &a->http);
    case ACCESS_GRPC_RESTRICTED:
        return parse_restriction("--grpc-restricted-protocol", "protocol", arg,
                                 GRPC_RESTRICTED_PREFIX, &a->grpc);
    case ACCESS_TENANTS: return load_tenants(a, arg);
    }
    return -1;
}

/* ---------------------------------------------------------------- callers */

/* The token of "Bearer TOKEN" (the scheme in any case, RFC 7235), or NULL. */
static const char *bearer_token(const char *v, size_t len, size_t *token_len)
{
    if (!v || len < 7 || strncasecmp(v, "Bearer ", 7) != 0)
        return NULL;
    size_t start = 7;
    while (start < len && (v[start] == ' ' || v[start] == '\t'))
        start++;
    size_t end = len;
    while (end > start && (v[end - 1] == ' ' || v[end - 1] == '\t'))
        end--;
    *token_len = end - start;
    return v + start;
}

void access_caller(const access_options *a, const restriction *r, const char *r_value,
                   size_t r_len, const char *authorization, size_t auth_len, caller *out)
{
    *out = (caller){.scope = {.per_tenant = a->tenants != NULL}};
    if (r->header && !(r_value && tokens_equal(r->value, strlen(r->value), r_value, r_len)))
        out->unmet = r;
    size_t token_len = 0;
    const char *token = bearer_token(authorization, auth_len, &token_len);
    if (a->tenants && token)
        out->scope.tenant = tenants_find(a->tenants, token, token_len, &out->scope.tenant_no);
}

server_status access_refusal(const caller *who, char *msg, size_t len)
{
    /* Triton's words and status. */
    if (who->unmet) {
        snprintf(msg, len, "This %s is restricted, expecting header '%s'", who->unmet->what,
                 who->unmet->header);
        return STATUS_RESTRICTED;
    }
    if (scope_refused(&who->scope)) {
        snprintf(msg, len, "%s", SCOPE_NO_TOKEN_MESSAGE);
        return STATUS_UNAUTHENTICATED;
    }
    return STATUS_OK;
}
