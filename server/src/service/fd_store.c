/* The saver (fd_store.h): the registry's state kept in the service
 * manager's fd store as the registry changes. */
#include "service/fd_store.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "service/notify.h"

struct fd_store {
    shmreg_registry *reg;
    unsigned interval_ms;
    int verbose;          /* a line for each state stored */
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake; /* on CLOCK_MONOTONIC */
    int stopping;        /* under lock */
    /* The thread's alone while it runs, fd_store_stop's after: */
    int due;              /* a save is due whatever the counters say */
    int failing;          /* the last save failed: said once, not every interval */
    uint64_t seen[3];     /* the counters at the last save */
    size_t listed;        /* regions not pending at that read: the save holds at least these */
    unsigned long long gen; /* the state stored, 0: none */
    fd_name_list stored;  /* regions' descriptors stored, sorted */
    fd_name_list stale;   /* names of ours found at start, to remove */
};

/* ------------------------------------------------- the manager's store */

static int store(const char *name, const int *fds, size_t n)
{
    char state[FD_NAME_MAX + 32];
    snprintf(state, sizeof state, "FDSTORE=1\nFDNAME=%s", name);
    int rc = 1;
    for (size_t at = 0; at < n && rc > 0; at += SERVICE_FDS_PER_MESSAGE) {
        size_t batch = n - at < SERVICE_FDS_PER_MESSAGE ? n - at : SERVICE_FDS_PER_MESSAGE;
        rc = service_notify(state, fds + at, batch);
    }
    return rc > 0 ? 0 : -1;
}

static void unstore(const char *name)
{
    char state[FD_NAME_MAX + 32];
    snprintf(state, sizeof state, "FDSTOREREMOVE=1\nFDNAME=%s", name);
    service_notify(state, NULL, 0);
}

static void unstore_all(const fd_name_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        unstore(l->v[i].name);
}

static void unstore_generation(unsigned long long gen)
{
    char name[FD_NAME_MAX];
    fd_name_of_generation(FD_NAME_STATE, gen, name);
    unstore(name);
    fd_name_of_generation(FD_NAME_ORDER, gen, name);
    unstore(name);
}

/* ------------------------------------------------------------- a save */

/* Store the descriptors of now (sorted, at: into fds) that are not stored
 * yet; stored becomes the union, whatever failed (a copy the manager got
 * is a copy to remove later). 0, or -1 when one could not be sent. */
static int store_regions(fd_store *s, const fd_name_list *now, const int *fds)
{
    int rc = 0;
    fd_name_list added = {0}; /* apart: stored stays sorted for the lookups */
    for (size_t i = 0; i < now->n && rc == 0; i++) {
        const fd_name *e = &now->v[i];
        if (fd_names_find(&s->stored, e->name))
            continue;
        rc = store(e->name, &fds[e->at], 1);
        if (rc == 0 && fd_names_add(&added, e->name, 0) != 0)
            rc = -1;
    }
    for (size_t i = 0; i < added.n; i++)
        if (fd_names_add(&s->stored, added.v[i].name, 0) != 0)
            rc = -1; /* not recorded: the next save sends it again, the manager keeps one */
    fd_names_sort_unique(&s->stored);
    fd_names_free(&added);
    return rc;
}

/* Store the order of ids and the blob as generation gen + 1, then remove
 * generation gen: until the new state is stored, the old one stays. */
static int store_state(fd_store *s, int blob, const fd_name_list *ids)
{
    int order = fd_order_write(ids);
    if (order < 0)
        return -1;
    char name[FD_NAME_MAX];
    unsigned long long gen = s->gen + 1;
    fd_name_of_generation(FD_NAME_ORDER, gen, name);
    int rc = store(name, &order, 1);
    close(order);
    fd_name_of_generation(FD_NAME_STATE, gen, name);
    if (rc != 0 || store(name, &blob, 1) != 0)
        return -1;
    if (s->gen)
        unstore_generation(s->gen);
    s->gen = gen;
    return 0;
}

/* Once a state is stored: remove the descriptors it no longer uses, and
 * the names found at start. */
static void drop_unused(fd_store *s, const fd_name_list *now)
{
    size_t kept = 0;
    for (size_t i = 0; i < s->stored.n; i++) {
        if (fd_names_find(now, s->stored.v[i].name))
            s->stored.v[kept++] = s->stored.v[i];
        else
            unstore(s->stored.v[i].name);
    }
    s->stored.n = kept;
    unstore_all(&s->stale);
    fd_names_free(&s->stale);
}

/* The names of fds[0, n), in their order (ids) and sorted (now): 0, -1,
 * or -2 for a descriptor that is no file (a CUDA region's): the store
 * keeps one copy of a file description whatever its name, so a name must
 * stay the description's, and nothing here can tell two of those apart. */
static int name_fds(const int *fds, size_t n, fd_name_list *ids, fd_name_list *now)
{
    char name[FD_NAME_MAX];
    for (size_t i = 0; i < n; i++) {
        int named = fd_name_of_file(fds[i], name);
        if (named != 0)
            return named;
        if (fd_names_add(ids, name, i) != 0 || fd_names_add(now, name, i) != 0)
            return -1;
    }
    fd_names_sort_unique(now);
    return 0;
}

static int publish(fd_store *s, int blob, const int *fds, size_t n)
{
    fd_name_list ids = {0}, now = {0};
    int rc = name_fds(fds, n, &ids, &now);
    if (rc == 0)
        rc = store_regions(s, &now, fds);
    if (rc == 0)
        rc = store_state(s, blob, &ids);
    if (rc == 0)
        drop_unused(s, &now);
    fd_names_free(&ids);
    fd_names_free(&now);
    return rc;
}

/* One save: 0; -1 when it failed and is due again at the next interval;
 * -2 while a CUDA region is registered, which no save can store, so the
 * next is tried only once the registry changes. */
static int save_once(fd_store *s)
{
    int blob = -1, *fds = NULL;
    size_t n = 0;
    if (shmreg_state_save(s->reg, NULL, 0, &blob, &fds, &n) != SHMREG_OK) {
        if (!s->failing)
            fprintf(stderr, "crash survival: saving the registry: %s\n", shmreg_last_error());
        return -1;
    }
    int rc = publish(s, blob, fds, n);
    if (rc == 0 && s->verbose)
        fprintf(stderr, "crash survival: state %llu stored: %zu descriptor(s); %zu region(s) "
                        "listed when it began\n", s->gen, n, s->listed);
    if (rc == -2 && !s->failing)
        fprintf(stderr, "crash survival: a CUDA region is registered, whose descriptor the service "
                        "manager's store cannot keep apart from another's: no state is stored "
                        "while one is (docs/crash-survival.md)\n");
    else if (rc == -1 && !s->failing)
        fprintf(stderr, "crash survival: storing the registry in the service manager failed; "
                        "the previous state stays stored, retried every interval\n");
    close(blob);
    for (size_t i = 0; i < n; i++)
        close(fds[i]);
    free(fds);
    return rc;
}

/* ----------------------------------------------------------- the thread */

/* Whether the registry changed since the last save: a registration, a
 * region gone or pending (a pending region is not carried). Read before
 * the save, so that a change during it is seen at the next interval. */
static int changed(fd_store *s)
{
    shmreg_stats st;
    if (shmreg_registry_stats(s->reg, &st) != SHMREG_OK)
        return 1;
    uint64_t now[3] = {st.registrations, st.regions, st.pending_regions};
    int moved = memcmp(now, s->seen, sizeof now) != 0;
    s->listed = st.regions - st.pending_regions;
    memcpy(s->seen, now, sizeof now);
    return moved;
}

static void *saver(void *arg)
{
    fd_store *s = arg;
    pthread_mutex_lock(&s->lock);
    while (!s->stopping) {
        pthread_mutex_unlock(&s->lock);
        if (changed(s) || s->due) {
            int rc = save_once(s);
            s->due = rc == -1;
            s->failing = rc != 0;
        }
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += s->interval_ms / 1000;
        until.tv_nsec += (long)(s->interval_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_mutex_lock(&s->lock);
        while (!s->stopping && pthread_cond_timedwait(&s->wake, &s->lock, &until) != ETIMEDOUT) {
        }
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

static int init_sync(fd_store *s)
{
    pthread_condattr_t attr;
    if (pthread_condattr_init(&attr) != 0)
        return -1;
    int rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) ||
             pthread_cond_init(&s->wake, &attr) ? -1 : 0;
    pthread_condattr_destroy(&attr);
    if (rc == 0 && pthread_mutex_init(&s->lock, NULL) != 0) {
        pthread_cond_destroy(&s->wake);
        rc = -1;
    }
    return rc;
}

fd_store *fd_store_start(shmreg_registry *reg, unsigned interval_ms, int verbose, fd_store_found *found)
{
    fd_store *s = calloc(1, sizeof *s);
    if (!s || init_sync(s) != 0) {
        fprintf(stderr, "error: crash survival: out of memory\n");
        free(s);
        return NULL;
    }
    s->reg = reg;
    s->interval_ms = interval_ms;
    s->verbose = verbose;
    s->gen = found->gen;
    s->stored = found->regions;
    s->stale = found->stale;
    found->regions = found->stale = (fd_name_list){0};
    /* What was found is replaced by this process's first state at once. */
    s->due = s->gen || s->stored.n || s->stale.n;
    if (pthread_create(&s->thread, NULL, saver, s) != 0) {
        fprintf(stderr, "error: crash survival: cannot start its thread\n");
        s->stopping = 1;
        fd_store_stop(s, 0);
        return NULL;
    }
    return s;
}

void fd_store_stop(fd_store *s, int clear)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    int running = !s->stopping;
    s->stopping = 1;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
    if (running)
        pthread_join(s->thread, NULL);
    if (clear) {
        if (s->gen)
            unstore_generation(s->gen);
        unstore_all(&s->stored);
        unstore_all(&s->stale);
    }
    fd_names_free(&s->stored);
    fd_names_free(&s->stale);
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->lock);
    free(s);
}
