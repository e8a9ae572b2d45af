/* The server's engine for remote regions: tenants, and the one-time secrets
 * issued to them (remote/server_engine.h). */
#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "base/err.h"
#include "base/names.h"
#include "base/sys.h"
#include "remote/server_engine.h"

struct secret {
    struct secret *next;
    unsigned char bytes[SHMREG_REMOTE_SECRET_SIZE];
    struct tenant *tenant;
    uint64_t expires_ns;
};

static bool same_tag(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static struct tenant *tenant_get_locked(const void *registry, const char *tag)
{
    for (struct tenant *t = shmreg__engine.tenants; t; t = t->next)
        if (t->registry == registry && same_tag(t->tag, tag))
            return t;
    struct tenant *t = shmreg__calloc(1, sizeof *t);
    if (!t || (tag && !(t->tag = shmreg__strdup(tag)))) {
        shmreg__free(t);
        return NULL;
    }
    t->registry = registry;
    t->next = shmreg__engine.tenants;
    shmreg__engine.tenants = t;
    return t;
}

const char *shmreg__tenant_name(const struct tenant *t)
{
    return t->tag ? t->tag : "(untagged)";
}

/* Secrets past their time are dropped, and their tenants' places freed. */
static void secrets_expire_locked(uint64_t now)
{
    for (struct secret **pp = &shmreg__engine.secrets; *pp;) {
        struct secret *s = *pp;
        if (s->expires_ns > now) {
            pp = &s->next;
            continue;
        }
        *pp = s->next;
        s->tenant->connections--;
        shmreg__free(s);
    }
}

shmreg_err shmreg_remote_invite(shmreg_registry *reg, const char *tag, unsigned char secret[SHMREG_REMOTE_SECRET_SIZE])
{
    if (!reg || !secret)
        return shmreg__fail(SHMREG_ERR_INVALID_ARG, "remote_invite: %s is NULL", !reg ? "registry" : "secret");
    shmreg_err err = shmreg__check_tag(tag);
    if (err != SHMREG_OK)
        return err;
    struct secret *s = shmreg__calloc(1, sizeof *s);
    if (!s)
        return shmreg__fail(SHMREG_ERR_NO_MEMORY, "out of memory issuing a remote connection secret");
    if (getrandom(s->bytes, sizeof s->bytes, 0) != (ssize_t)sizeof s->bytes) {
        shmreg__free(s);
        return shmreg__fail_errno(SHMREG_ERR_SYSTEM, errno, "remote_invite: getrandom");
    }
    uint64_t now = shmreg__ucx_now_ns();
    shmreg__conns_reap();
    pthread_mutex_lock(&shmreg__engine.lock);
    err = shmreg__engine_start_locked();
    struct tenant *t = err == SHMREG_OK ? tenant_get_locked(reg, tag) : NULL;
    if (err == SHMREG_OK && !t)
        err = shmreg__fail(SHMREG_ERR_NO_MEMORY, "out of memory issuing a remote connection secret");
    if (t) {
        secrets_expire_locked(now);
        if (t->connections >= shmreg__engine_max_connections()) {
            err = shmreg__fail(SHMREG_ERR_NO_MEMORY, "tenant '%s' holds %u remote connections and unused "
                               "secrets: the limit of %u", shmreg__tenant_name(t), t->connections,
                               shmreg__engine_max_connections());
        } else {
            t->connections++;
            s->tenant = t;
            s->expires_ns = now + (uint64_t)SHMREG_REMOTE_INVITE_MS * 1000000u;
            s->next = shmreg__engine.secrets;
            shmreg__engine.secrets = s;
            memcpy(secret, s->bytes, sizeof s->bytes);
        }
    }
    pthread_mutex_unlock(&shmreg__engine.lock);
    if (err != SHMREG_OK)
        shmreg__free(s);
    return err;
}

/* The tenant of a valid secret, which is used up; NULL for any other.
 * Compared in full, in constant time: a near miss tells nothing. */
struct tenant *shmreg__secret_take_locked(const unsigned char *bytes, uint64_t now)
{
    secrets_expire_locked(now);
    for (struct secret **pp = &shmreg__engine.secrets; *pp; pp = &(*pp)->next) {
        unsigned char diff = 0;
        for (size_t i = 0; i < SHMREG_REMOTE_SECRET_SIZE; i++)
            diff |= (unsigned char)((*pp)->bytes[i] ^ bytes[i]);
        if (diff == 0) {
            struct secret *s = *pp;
            struct tenant *t = s->tenant;
            *pp = s->next;
            shmreg__free(s); /* its place in t->connections passes to the connection */
            return t;
        }
    }
    return NULL;
}

bool shmreg__tenant_is(const struct tenant *t, const void *registry, const char *tag)
{
    return t->registry == registry && same_tag(t->tag, tag);
}
