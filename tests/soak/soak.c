/* Concurrency soak: N threads run random operations (register, acquire,
 * retain, release, unregister, unregister_all, status) on one shared set of
 * names for T seconds, under each busy policy in turn.
 *
 * Every name always stands for the same window of the same shm object, so
 * whatever a thread acquires can be checked: the view's bytes must equal the
 * bytes the soak wrote through its own mapping of that object, and a write
 * through the view must show in that mapping (and back). Each object starts
 * with an area nobody writes after start-up (read by everyone) followed by
 * one slot per thread (written only by its thread), so the checks never race
 * with each other. A call may only return the codes the contract allows for
 * a name that other threads are changing; anything else is an error.
 * Afterwards every region's in_use is 0, and descriptors and shm mappings
 * are back to what they were.
 *
 * Usage: shmreg-soak [-t THREADS] [-s SECONDS_PER_POLICY] [-p defer|detach|refuse|all]
 * Prints operations done and errors; exit status 0 only with zero errors. */
#include <getopt.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <urcu/urcu-bp.h>

#include "shmreg/shmreg.h"
#include "testutil.h"

#define NOBJECTS 3
#define NNAMES 8
#define MAX_THREADS 64
#define SLOT 64
#define SHARED_BYTES (2 * 4096 + 77) /* written once, before the threads */
#define OBJ_SIZE (SHARED_BYTES + MAX_THREADS * SLOT)
#define MAX_HELD 4
#define MAX_REPORTED 20

/* ------------------------------------------------------------ the world */

struct window {
    char name[16];
    int object;
    size_t offset, size;
};

struct soak {
    shmreg_registry *reg;
    shmreg_policy policy;
    char keys[NOBJECTS][64];
    uint8_t *own[NOBJECTS]; /* the soak's own mapping of each object */
    struct window windows[NNAMES];
    struct timespec deadline;
    atomic_ulong operations;
    atomic_ulong errors;
};

struct held {
    shmreg_region *ref;
    const struct window *w;
    shmreg_view view;
    size_t offset; /* of the view in the window */
};

struct worker {
    struct soak *s;
    pthread_t thread;
    int id;
    uint64_t rng;
    uint64_t token;
    struct held held[MAX_HELD];
    int nheld;
};

static void report(struct soak *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void report(struct soak *s, const char *fmt, ...)
{
    if (atomic_fetch_add(&s->errors, 1) >= MAX_REPORTED)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "soak: ERROR: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

/* The call returned one of the codes allowed here (a bit set of codes). */
static void expect(struct soak *s, const char *call, const char *name, shmreg_err err, unsigned allowed)
{
    if (allowed & (1u << err))
        return;
    report(s, "%s('%s') returned %s: %s", call, name ? name : "(all)", shmreg_err_name(err),
           shmreg_last_error());
}

#define CODE(e) (1u << (e))

static uint64_t next_random(struct worker *wk)
{
    /* xorshift64*: fast, and each thread has its own stream */
    wk->rng ^= wk->rng >> 12;
    wk->rng ^= wk->rng << 25;
    wk->rng ^= wk->rng >> 27;
    return wk->rng * 0x2545F4914F6CDD1Dull;
}

static size_t random_below(struct worker *wk, size_t n)
{
    return n ? (size_t)(next_random(wk) % n) : 0;
}

static bool past_deadline(const struct soak *s)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec > s->deadline.tv_sec ||
           (now.tv_sec == s->deadline.tv_sec && now.tv_nsec >= s->deadline.tv_nsec);
}

/* ------------------------------------------------------------ the checks */

/* Shared bytes read through the view equal the soak's own; this thread's
 * slot, if the view covers it, carries writes both ways. */
static void check_view(struct worker *wk, const struct held *h)
{
    struct soak *s = wk->s;
    uint8_t *own = s->own[h->w->object];
    size_t first = h->w->offset + h->offset; /* object offset of view byte 0 */
    size_t len = h->view.byte_size;
    const uint8_t *view = h->view.addr;

    size_t shared = first < SHARED_BYTES ? SHARED_BYTES - first : 0;
    if (shared > len)
        shared = len;
    if (memcmp(view, own + first, shared) != 0)
        report(s, "view of '%s' at +%zu does not hold the object's bytes", h->w->name, h->offset);

    size_t slot = SHARED_BYTES + (size_t)wk->id * SLOT;
    if (first > slot || slot + SLOT > first + len)
        return;
    uint8_t *through_view = (uint8_t *)h->view.addr + (slot - first);
    uint64_t token = ++wk->token ^ ((uint64_t)wk->id << 56);
    memcpy(through_view, &token, sizeof token);
    if (memcmp(own + slot, &token, sizeof token) != 0)
        report(s, "a write through the view of '%s' did not reach the object", h->w->name);
    token = ~token;
    memcpy(own + slot + 8, &token, sizeof token);
    if (memcmp(through_view + 8, &token, sizeof token) != 0)
        report(s, "the view of '%s' does not see the object's bytes", h->w->name);
}

static bool status_entry_ok(const struct soak *s, const shmreg_region_status *st)
{
    for (int i = 0; i < NNAMES; i++) {
        const struct window *w = &s->windows[i];
        if (strcmp(st->name, w->name) == 0)
            return strcmp(st->key, s->keys[w->object]) == 0 && st->offset == w->offset &&
                   st->byte_size == w->size && st->kind == SHMREG_KIND_SYSTEM;
    }
    return false;
}

/* ------------------------------------------------------------ operations */

static void release_held(struct worker *wk, int i)
{
    check_view(wk, &wk->held[i]);
    shmreg_release(wk->held[i].ref);
    wk->held[i] = wk->held[--wk->nheld];
}

static void op_acquire(struct worker *wk, const struct window *w)
{
    struct held h = {.w = w, .offset = random_below(wk, w->size)};
    size_t size = random_below(wk, w->size - h.offset + 1);
    shmreg_err err = shmreg_acquire(wk->s->reg, w->name, h.offset, size, &h.ref, &h.view);
    expect(wk->s, "acquire", w->name, err, CODE(SHMREG_OK) | CODE(SHMREG_ERR_NOT_FOUND));
    if (err != SHMREG_OK)
        return;
    if (h.view.byte_size != size)
        report(wk->s, "acquire('%s') gave a view of %zu bytes, not %zu", w->name, h.view.byte_size, size);
    check_view(wk, &h);
    if (wk->nheld == MAX_HELD)
        release_held(wk, (int)random_below(wk, MAX_HELD));
    wk->held[wk->nheld++] = h;
}

static void op_retain(struct worker *wk)
{
    if (wk->nheld == 0 || wk->nheld == MAX_HELD)
        return;
    struct held h = wk->held[random_below(wk, (size_t)wk->nheld)];
    if (shmreg_retain(h.ref) != h.ref)
        report(wk->s, "retain returned another reference");
    wk->held[wk->nheld++] = h;
}

static void op_register(struct worker *wk, const struct window *w)
{
    struct soak *s = wk->s;
    shmreg_err err = shmreg_register_system(s->reg, w->name, s->keys[w->object], w->offset, w->size, 0);
    expect(s, "register", w->name, err, CODE(SHMREG_OK) | CODE(SHMREG_ERR_ALREADY_EXISTS));
}

static unsigned busy_allowed(const struct soak *s)
{
    return s->policy == SHMREG_POLICY_REFUSE ? CODE(SHMREG_ERR_BUSY) : 0;
}

static void op_unregister(struct worker *wk, const struct window *w)
{
    shmreg_err err = shmreg_unregister(wk->s->reg, w->name, SHMREG_KIND_ANY);
    expect(wk->s, "unregister", w->name, err,
           CODE(SHMREG_OK) | CODE(SHMREG_ERR_NOT_FOUND) | busy_allowed(wk->s));
}

static void op_unregister_all(struct worker *wk)
{
    shmreg_err err = shmreg_unregister_all(wk->s->reg, SHMREG_KIND_SYSTEM);
    expect(wk->s, "unregister_all", NULL, err, CODE(SHMREG_OK) | busy_allowed(wk->s));
}

static void op_status(struct worker *wk, const struct window *w)
{
    shmreg_region_status *st = NULL;
    size_t n = 0;
    const char *name = w ? w->name : NULL;
    shmreg_err err = shmreg_status(wk->s->reg, name, SHMREG_KIND_ANY, &st, &n);
    expect(wk->s, "status", name, err, CODE(SHMREG_OK) | (w ? CODE(SHMREG_ERR_NOT_FOUND) : 0));
    if (n > NNAMES)
        report(wk->s, "status lists %zu regions; there are %d names", n, NNAMES);
    for (size_t i = 0; i < n; i++)
        if (!status_entry_ok(wk->s, &st[i]))
            report(wk->s, "status entry '%s' does not describe its registration", st[i].name);
    shmreg_status_free(st, n);
}

/* One random operation; acquire and release dominate, as in a server. */
static void step(struct worker *wk)
{
    const struct window *w = &wk->s->windows[random_below(wk, NNAMES)];
    unsigned dice = (unsigned)random_below(wk, 100);
    if (dice < 30)
        op_acquire(wk, w);
    else if (dice < 45) {
        if (wk->nheld > 0)
            release_held(wk, (int)random_below(wk, (size_t)wk->nheld));
    } else if (dice < 50)
        op_retain(wk);
    else if (dice < 65)
        op_register(wk, w);
    else if (dice < 80)
        op_unregister(wk, w);
    else if (dice < 82)
        op_unregister_all(wk);
    else
        op_status(wk, dice < 91 ? w : NULL);
}

static void *run_worker(void *arg)
{
    struct worker *wk = arg;
    unsigned long done = 0;
    while (!past_deadline(wk->s)) {
        for (int i = 0; i < 64; i++)
            step(wk);
        done += 64;
    }
    while (wk->nheld > 0)
        release_held(wk, wk->nheld - 1);
    atomic_fetch_add(&wk->s->operations, done);
    return NULL;
}

/* ------------------------------------------------------------ one run */

static void create_objects(struct soak *s)
{
    for (int i = 0; i < NOBJECTS; i++) {
        tu_shm_create(OBJ_SIZE, (uint8_t)(7 * i + 1), s->keys[i]);
        s->own[i] = tu_shm_map(s->keys[i], OBJ_SIZE);
    }
    /* Unaligned offsets, windows that end at the object's end. */
    for (int i = 0; i < NNAMES; i++) {
        struct window *w = &s->windows[i];
        snprintf(w->name, sizeof w->name, "soak-%d", i);
        w->object = i % NOBJECTS;
        w->offset = (size_t)i * 13;
        w->size = OBJ_SIZE - w->offset;
    }
}

static void destroy_objects(struct soak *s)
{
    for (int i = 0; i < NOBJECTS; i++) {
        munmap(s->own[i], OBJ_SIZE);
        tu_shm_unlink(s->keys[i]);
    }
}

/* After the threads: nothing in use, everything unregisters, and the process
 * holds exactly what it held before the registry existed. */
static void check_quiescent(struct soak *s, int fds_before, int maps_before)
{
    shmreg_region_status *st = NULL;
    size_t n = 0;
    expect(s, "status", NULL, shmreg_status(s->reg, NULL, SHMREG_KIND_ANY, &st, &n), CODE(SHMREG_OK));
    for (size_t i = 0; i < n; i++)
        if (st[i].references != 0 || st[i].pending_unregister)
            report(s, "after the run '%s' has in_use %u, pending %d", st[i].name, st[i].references,
                   st[i].pending_unregister);
    shmreg_status_free(st, n);
    expect(s, "unregister_all", NULL, shmreg_unregister_all(s->reg, SHMREG_KIND_ANY), CODE(SHMREG_OK));
    shmreg_registry_destroy(s->reg);
    s->reg = NULL;
    urcu_bp_barrier();
    if (tu_count_fds() != fds_before || tu_count_shm_maps(NULL) != maps_before)
        report(s, "descriptors %d (were %d), shm mappings %d (were %d)", tu_count_fds(), fds_before,
               tu_count_shm_maps(NULL), maps_before);
}

static void run_policy(struct soak *s, shmreg_policy policy, int threads, double seconds)
{
    static const char *const names[] = {"defer", "detach", "refuse"};
    int fds_before = tu_count_fds(), maps_before = tu_count_shm_maps(NULL);
    shmreg_config cfg;
    shmreg_config_init(&cfg);
    cfg.busy_policy = policy;
    cfg.pin_policy = SHMREG_PIN_NEVER;
    s->policy = policy;
    expect(s, "registry_create", NULL, shmreg_registry_create(&cfg, &s->reg), CODE(SHMREG_OK));
    if (!s->reg)
        return;

    unsigned long ops_before = atomic_load(&s->operations);
    unsigned long errors_before = atomic_load(&s->errors);
    clock_gettime(CLOCK_MONOTONIC, &s->deadline);
    s->deadline.tv_sec += (time_t)seconds;
    s->deadline.tv_nsec += (long)((seconds - (double)(time_t)seconds) * 1e9);
    if (s->deadline.tv_nsec >= 1000000000L) {
        s->deadline.tv_sec++;
        s->deadline.tv_nsec -= 1000000000L;
    }
    struct worker *workers = calloc((size_t)threads, sizeof *workers);
    for (int i = 0; workers && i < threads; i++) {
        workers[i] = (struct worker){.s = s, .id = i, .rng = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1) ^ (uint64_t)getpid()};
        if (pthread_create(&workers[i].thread, NULL, run_worker, &workers[i]) != 0)
            report(s, "pthread_create failed");
    }
    for (int i = 0; workers && i < threads; i++)
        pthread_join(workers[i].thread, NULL);
    free(workers);
    check_quiescent(s, fds_before, maps_before);
    printf("soak: policy %s, %d threads, %.1f s: %lu operations, %lu errors\n", names[policy], threads,
           seconds, atomic_load(&s->operations) - ops_before, atomic_load(&s->errors) - errors_before);
}

static int parse_policy(const char *arg)
{
    if (strcmp(arg, "defer") == 0)
        return SHMREG_POLICY_DEFER;
    if (strcmp(arg, "detach") == 0)
        return SHMREG_POLICY_DETACH;
    if (strcmp(arg, "refuse") == 0)
        return SHMREG_POLICY_REFUSE;
    return strcmp(arg, "all") == 0 ? -1 : -2;
}

int main(int argc, char **argv)
{
    int threads = 4, policy = -1;
    double seconds = 1.0;
    int opt;
    while ((opt = getopt(argc, argv, "t:s:p:")) != -1) {
        switch (opt) {
        case 't':
            threads = atoi(optarg);
            break;
        case 's':
            seconds = atof(optarg);
            break;
        case 'p':
            policy = parse_policy(optarg);
            break;
        default:
            policy = -2;
        }
    }
    if (threads < 1 || threads > MAX_THREADS || seconds <= 0 || policy == -2) {
        fprintf(stderr, "usage: %s [-t 1..%d] [-s seconds per policy] [-p defer|detach|refuse|all]\n",
                argv[0], MAX_THREADS);
        return 2;
    }
    static struct soak s;
    create_objects(&s);
    for (int p = SHMREG_POLICY_DEFER; p <= SHMREG_POLICY_REFUSE; p++)
        if (policy < 0 || policy == p)
            run_policy(&s, (shmreg_policy)p, threads, seconds);
    destroy_objects(&s);
    unsigned long errors = atomic_load(&s.errors);
    printf("soak: total %lu operations, %lu errors\n", atomic_load(&s.operations), errors);
    return errors == 0 ? 0 : 1;
}
