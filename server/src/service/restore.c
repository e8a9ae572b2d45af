/* The registry taken back from the service manager's fd store at start
 * (fd_store.h). */
#include "service/fd_store.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "service/notify.h"

/* A descriptor for the region file named name: a copy of the one passed,
 * or, when the manager has none (it drops what passes its
 * FileDescriptorStoreMax), an empty memfd, which that region's
 * registration refuses, so that it fails alone. -1 when neither can be had. */
static int descriptor_for(const fd_name_list *regions, const char *name)
{
    const fd_name *e = fd_names_find(regions, name);
    if (e)
        return fcntl(SERVICE_LISTEN_FDS_START + (int)e->at, F_DUPFD_CLOEXEC, 0);
    fprintf(stderr, "crash survival: descriptor %s is not in the store (past the manager's "
                    "FileDescriptorStoreMax?): its region will fail\n", name);
    return memfd_create("shmreg-missing", MFD_CLOEXEC);
}

static void report(shmreg_err e, shmreg_restore_report *r)
{
    if (e != SHMREG_OK) {
        fprintf(stderr, "crash survival: the stored state was not restored: %s\n", shmreg_last_error());
        return;
    }
    fprintf(stderr, "crash survival: restored %zu region(s) from the service manager, %zu failed, "
                    "%zu skipped\n", r->restored, r->failed, r->skipped);
    for (size_t i = 0; i < r->entry_count; i++) {
        const shmreg_restore_entry *x = &r->entries[i];
        fprintf(stderr, "crash survival: region '%s' (tag %s) %s: %s: %s\n", x->name,
                x->tag ? x->tag : "none", x->skipped ? "skipped" : "not restored",
                shmreg_err_name(x->err), x->message ? x->message : "");
    }
    shmreg_restore_report_free(r);
}

/* Restore reg from the blob and the order file of one generation, with
 * copies of the passed region descriptors; the caller closes what it passed. */
static void restore_generation(shmreg_registry *reg, int blob, int order, const fd_name_list *regions)
{
    fd_name_list wanted;
    if (fd_order_read(order, &wanted) != 0)
        return;
    int *fds = calloc(wanted.n ? wanted.n : 1, sizeof *fds);
    size_t made = 0;
    while (fds && made < wanted.n && (fds[made] = descriptor_for(regions, wanted.v[made].name)) >= 0)
        made++;
    int own_blob = fds && made == wanted.n ? fcntl(blob, F_DUPFD_CLOEXEC, 0) : -1;
    if (own_blob < 0) {
        fprintf(stderr, "crash survival: out of memory or descriptors: nothing restored\n");
        for (size_t i = 0; i < made; i++)
            close(fds[i]);
    } else {
        shmreg_restore_report *r = NULL;
        /* Takes own_blob and every fds[i], on every path. */
        shmreg_err e = shmreg_state_restore(reg, own_blob, fds, wanted.n, &r);
        report(e, r);
    }
    free(fds);
    fd_names_free(&wanted);
}

/* The newest generation with both its state and its order passed, or 0;
 * *state and *order: their indexes. */
static unsigned long long newest(char **names, int n, int *state, int *order)
{
    unsigned long long best = 0, g, h;
    for (int i = 0; i < n; i++) {
        if (fd_name_parse(names[i], &g) != FD_NAME_STATE || g <= best)
            continue;
        for (int j = 0; j < n; j++) {
            if (fd_name_parse(names[j], &h) == FD_NAME_ORDER && h == g) {
                best = g;
                *state = i;
                *order = j;
            }
        }
    }
    return best;
}

/* Sort the passed names into found: the regions' (at: the index passed),
 * every other name of ours but the restored generation's as stale; a
 * descriptor not ours is said and closed with the rest. */
static int sort_passed(char **names, int n, fd_store_found *found)
{
    unsigned long long g;
    for (int i = 0; i < n; i++) {
        fd_name_kind kind = fd_name_parse(names[i], &g);
        int rc = 0;
        if (kind == FD_NAME_REGION)
            rc = fd_names_add(&found->regions, names[i], (size_t)i);
        else if (kind != FD_NAME_OTHER && g != found->gen)
            rc = fd_names_add(&found->stale, names[i], (size_t)i);
        else if (kind == FD_NAME_OTHER)
            fprintf(stderr, "crash survival: closing the descriptor passed as '%s': not one this "
                            "server stores\n", names[i]);
        if (rc != 0)
            return -1;
    }
    fd_names_sort_unique(&found->regions);
    return 0;
}

int fd_store_restore(shmreg_registry *reg, fd_store_found *found)
{
    *found = (fd_store_found){0};
    char **names = NULL;
    int n = service_listen_fds(&names);
    if (n < 0)
        fprintf(stderr, "crash survival: the descriptors passed at start: %s\n", strerror(-n));
    if (n <= 0)
        return 0;
    int state = -1, order = -1;
    found->gen = newest(names, n, &state, &order);
    int rc = sort_passed(names, n, found);
    if (rc != 0)
        fprintf(stderr, "error: crash survival: out of memory\n");
    else if (found->gen)
        restore_generation(reg, SERVICE_LISTEN_FDS_START + state, SERVICE_LISTEN_FDS_START + order,
                           &found->regions);
    else
        fprintf(stderr, "crash survival: %d descriptor(s) passed but no complete state: nothing "
                        "restored\n", n);
    for (int i = 0; i < n; i++)
        close(SERVICE_LISTEN_FDS_START + i);
    service_names_free(names);
    if (rc != 0)
        fd_store_found_free(found);
    return rc;
}

void fd_store_found_free(fd_store_found *found)
{
    fd_names_free(&found->regions);
    fd_names_free(&found->stale);
}
