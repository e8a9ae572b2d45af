/* Regions of Unix-socket connections that did not come along (orphans.h). */
#include "uds/orphans.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"

struct uds_orphans {
    char **tags;     /* those still registered; NULL once swept */
    size_t n;
    uint64_t due_ms; /* CLOCK_MONOTONIC */
};

static uint64_t now_ms(void)
{
    return monotonic_ns() / 1000000;
}

static bool listed(const uds_orphans *o, const char *tag)
{
    for (size_t i = 0; i < o->n; i++)
        if (strcmp(o->tags[i], tag) == 0)
            return true;
    return false;
}

/* Add tag unless listed: 0, or -1 out of memory. */
static int add(uds_orphans *o, const char *tag)
{
    if (listed(o, tag))
        return 0;
    char **grown = realloc(o->tags, (o->n + 1) * sizeof *grown);
    if (!grown)
        return -1;
    o->tags = grown;
    char *copy = strdup(tag);
    if (!copy)
        return -1;
    o->tags[o->n++] = copy;
    return 0;
}

/* The number a tag ends with ("uds:uid=U:pid=P:N"), 0 when none. */
static unsigned long long tag_number(const char *tag)
{
    const char *colon = strrchr(tag, ':');
    return colon ? strtoull(colon + 1, NULL, 10) : 0;
}

uds_orphans *uds_orphans_find(shmreg_registry *reg, bool (*is_held)(const void *ctx, const char *tag),
                              const void *ctx, unsigned grace_s, unsigned long long *highest)
{
    shmreg_region_status *st = NULL;
    size_t n = 0;
    uds_orphans *o = calloc(1, sizeof *o);
    if (!o || shmreg_status(reg, NULL, SHMREG_KIND_ANY, &st, &n) != SHMREG_OK) {
        fprintf(stderr, "uds: cannot list the regions carried over: %s\n",
                o ? shmreg_last_error() : "out of memory");
        free(o);
        return NULL;
    }
    int failed = 0;
    for (size_t i = 0; i < n && !failed; i++) {
        const char *tag = st[i].tag;
        if (!tag || strncmp(tag, UDS_TAG_PREFIX, strlen(UDS_TAG_PREFIX)) != 0)
            continue;
        if (tag_number(tag) > *highest)
            *highest = tag_number(tag);
        if (!is_held(ctx, tag))
            failed = add(o, tag);
    }
    shmreg_status_free(st, n);
    if (failed || o->n == 0) {
        if (failed)
            fprintf(stderr, "uds: out of memory listing the regions carried over\n");
        uds_orphans_free(o);
        return NULL;
    }
    o->due_ms = now_ms() + (uint64_t)grace_s * 1000;
    fprintf(stderr, "uds: %zu connection(s) whose regions came without their socket; their regions "
                    "go in %u s (--orphan-grace-s)\n", o->n, grace_s);
    return o;
}

int uds_orphans_wait_ms(const uds_orphans *o)
{
    size_t left = 0;
    for (size_t i = 0; o && i < o->n; i++)
        left += o->tags[i] != NULL;
    if (!left)
        return -1;
    uint64_t now = now_ms();
    return now >= o->due_ms ? 0 : (int)(o->due_ms - now);
}

void uds_orphans_sweep(uds_orphans *o, shmreg_registry *reg)
{
    if (!o || now_ms() < o->due_ms)
        return;
    for (size_t i = 0; i < o->n; i++) {
        if (!o->tags[i])
            continue;
        shmreg_filter f;
        shmreg_filter_init(&f);
        f.tag = o->tags[i];
        shmreg_err e = shmreg_unregister_matching(reg, &f);
        if (e == SHMREG_ERR_BUSY)
            continue; /* the refuse policy: a later sweep */
        if (e != SHMREG_OK && e != SHMREG_ERR_NOT_FOUND)
            fprintf(stderr, "uds %s: unregistering its regions: %s\n", o->tags[i], shmreg_last_error());
        else
            fprintf(stderr, "uds %s: its regions are unregistered: no connection came for them\n",
                    o->tags[i]);
        free(o->tags[i]);
        o->tags[i] = NULL;
    }
}

void uds_orphans_free(uds_orphans *o)
{
    if (!o)
        return;
    for (size_t i = 0; i < o->n; i++)
        free(o->tags[i]);
    free(o->tags);
    free(o);
}
