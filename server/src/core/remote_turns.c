/* Turns of a worker pool's threads for remote copies (remote_turns.h). */
#include "core/remote_turns.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The turns one tenant holds now ("" without --tenants). */
typedef struct holder {
    const char *tenant; /* the tenants table's string, which outlives the server */
    unsigned held;
} holder;

struct remote_turns {
    pthread_mutex_t lock;
    const char *protocol;
    unsigned threads;    /* --threads */
    unsigned all;        /* turns in all: threads - 1, at least 1 */
    unsigned per_tenant; /* under --tenants: all / 2, at least 1 */
    unsigned held;       /* turns held now, every tenant's */
    holder holders[];    /* all of them: a holder holds one turn at the least */
};

remote_turns *remote_turns_new(unsigned threads, const char *protocol)
{
    unsigned all = threads > 1 ? threads - 1 : 1;
    remote_turns *t = calloc(1, sizeof *t + all * sizeof(holder));
    if (!t)
        return NULL;
    pthread_mutex_init(&t->lock, NULL);
    t->protocol = protocol;
    t->threads = threads;
    t->all = all;
    t->per_tenant = all / 2 ? all / 2 : 1;
    return t;
}

void remote_turns_free(remote_turns *t)
{
    if (!t)
        return;
    pthread_mutex_destroy(&t->lock);
    free(t);
}

static const char *tenant_of(const region_scope *scope)
{
    return scope->per_tenant && scope->tenant ? scope->tenant : "";
}

/* Under t->lock, with a turn left: tenant's holder, or a free one when it
 * holds none (there is one: fewer holders than turns held, fewer turns held
 * than all). */
static holder *holder_of(remote_turns *t, const char *tenant)
{
    holder *unused = NULL;
    for (unsigned i = 0; i < t->all; i++) {
        holder *h = &t->holders[i];
        if (h->held && strcmp(h->tenant, tenant) == 0)
            return h;
        if (!h->held && !unused)
            unused = h;
    }
    return unused;
}

/* The refusal when every turn is held, or tenant's share. */
static server_status refuse(const remote_turns *t, const region_scope *scope, unsigned held,
                            int all, char *why, size_t len)
{
    char who[96] = "";
    if (scope->per_tenant)
        snprintf(who, sizeof who, "tenant '%s': ", tenant_of(scope));
    if (all)
        snprintf(why, len, "%sremote copies already hold %u of the %s worker threads, all "
                 "they may (--threads %u less one, kept for requests without a remote copy); "
                 "retry when they end", who, held, t->protocol, t->threads);
    else
        snprintf(why, len, "%sthis tenant's remote copies already hold %u of the %s worker "
                 "threads, its share of them (at most %u of --threads %u, so that a client that "
                 "does not answer holds no other tenant's request); retry when they end", who, held,
                 t->protocol, t->per_tenant, t->threads);
    return STATUS_OVER_LIMIT;
}

server_status remote_turns_take(remote_turns *t, const region_scope *scope, char *why, size_t len)
{
    const char *tenant = tenant_of(scope);
    unsigned share = scope->per_tenant ? t->per_tenant : t->all;
    pthread_mutex_lock(&t->lock);
    holder *h = t->held < t->all ? holder_of(t, tenant) : NULL;
    unsigned held = h ? h->held : t->held;
    int ok = h && h->held < share;
    if (ok) {
        h->tenant = tenant;
        h->held++;
        t->held++;
    }
    pthread_mutex_unlock(&t->lock);
    return ok ? STATUS_OK : refuse(t, scope, held, !h, why, len);
}

void remote_turns_give_back(remote_turns *t, const region_scope *scope)
{
    const char *tenant = tenant_of(scope);
    pthread_mutex_lock(&t->lock);
    for (unsigned i = 0; i < t->all; i++) {
        holder *h = &t->holders[i];
        if (h->held && strcmp(h->tenant, tenant) == 0) {
            h->held--;
            t->held--;
            break;
        }
    }
    pthread_mutex_unlock(&t->lock);
}
