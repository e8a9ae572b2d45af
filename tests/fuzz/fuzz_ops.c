/* libFuzzer harness: the input is a program of API operations (register,
 * acquire, retain, release, unregister, unregister_all, status,
 * destroy/recreate, NULL arguments, CUDA registrations that cannot open),
 * with and without owner tags, run against
 * a real registry (with or without limits and an owner allow-list) and
 * checked, call by call, against a simple model of the expected state
 * (ops_model.c).
 *
 * Three real shm objects are created at start-up (a page, one byte, three
 * pages and five bytes); the harness keeps its own mapping of each, so every
 * view the library hands out is checked byte for byte against the object, and
 * written through where it is writable. Names, keys, offsets and sizes are
 * drawn from extreme values: empty, 255- and 256-byte and control-character
 * names, keys with slashes, dots and reserved prefixes, SIZE_MAX and
 * wrap-around offset/size pairs. At the end of each input every reference is
 * released and the registry destroyed, and the process must hold no mapping
 * of the objects but the harness's own.
 *
 * The input also picks the reclaim mode and the registration cache's size.
 * The model is synchronous: under background reclaim the harness makes a
 * last release's unmapping observable before it checks anything, with
 * shmreg_registry_trim on a live registry, or by waiting for the reclaim
 * thread of a destroyed one. The cache is invisible to the model (a reuse
 * passes the same checks with the same errors, cached mappings give way
 * before a limit refuses), except in how many mappings a registry holds:
 * views are still compared byte for byte with the object, so a reuse of the
 * wrong window shows. */
#include <dirent.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "ops_model.h"
#include "core/region.h"
#include "core/registry.h"
#include "shm_rules.h"
#include "shmreg/shmreg.h"
#include "base/sys.h"
#include "testutil.h"

#define NOBJECTS 3
#define MAX_OPS 96
#define MAX_HELD 32
#define CHECK_BYTES 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ------------------------------------------------------------ failures */

#define CHECK(cond, ...)                                                               \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "fuzz_ops: %s:%d: ", __FILE__, __LINE__);                  \
            fprintf(stderr, __VA_ARGS__);                                              \
            fprintf(stderr, "\n");                                                     \
            abort();                                                                   \
        }                                                                              \
    } while (0)

/* FUZZ_OPS_TRACE=1 in the environment prints every call and its result:
 * what a crashing input did, step by step. */
static void check_code(const char *call, shmreg_err got, shmreg_err want)
{
    static int trace = -1;
    if (trace < 0)
        trace = getenv("FUZZ_OPS_TRACE") != NULL;
    if (trace)
        fprintf(stderr, "%s -> %s%s%s\n", call, shmreg_err_name(got), got ? ": " : "",
                got ? shmreg_last_error() : "");
    CHECK(got == want, "%s returned %s (%s); the model expects %s", call, shmreg_err_name(got),
          shmreg_last_error(), shmreg_err_name(want));
    CHECK(got == SHMREG_OK || shmreg_last_error()[0] != '\0', "%s failed without a message", call);
    CHECK(got == SHMREG_OK || rule_text_loggable(shmreg_last_error()),
          "%s: the message carries a control character from the input: \"%s\"", call,
          shmreg_last_error());
}

/* ------------------------------------------------------------ the objects */

static const size_t object_sizes[NOBJECTS] = {4096, 1, 3 * 4096 + 5};
static char object_keys[NOBJECTS][80];
static uint8_t *object_maps[NOBJECTS];

static void unlink_objects(void)
{
    for (int i = 0; i < NOBJECTS; i++)
        shm_unlink(object_keys[i]);
}

/* "/shmreg-fuzz-<pid>-<random>": every object of this process starts so. */
static char object_prefix[64];

static void create_objects(void)
{
    tu_unique_key("shmreg-fuzz", object_prefix);
    for (int i = 0; i < NOBJECTS; i++) {
        snprintf(object_keys[i], sizeof object_keys[i], "%s-%d", object_prefix, i);
        int fd = shm_open(object_keys[i], O_CREAT | O_EXCL | O_RDWR, 0600);
        CHECK(fd >= 0, "cannot create %s", object_keys[i]);
        CHECK(ftruncate(fd, (off_t)object_sizes[i]) == 0, "ftruncate");
        object_maps[i] = mmap(NULL, object_sizes[i], PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        CHECK(object_maps[i] != MAP_FAILED, "mmap");
        close(fd);
        for (size_t b = 0; b < object_sizes[i]; b++)
            object_maps[i][b] = (uint8_t)(b * 31 + (size_t)i * 101 + (b >> 9));
    }
    atexit(unlink_objects);
}

/* Mappings of the objects in /proc/self/maps, the harness's own included:
 * those that cover addr, or every one when addr is NULL. */
static size_t object_maps_covering(const void *addr)
{
    char prefix[96];
    snprintf(prefix, sizeof prefix, "/dev/shm%s-", object_prefix);
    FILE *f = fopen("/proc/self/maps", "r");
    CHECK(f, "cannot read /proc/self/maps");
    char line[4096];
    size_t n = 0;
    uintptr_t a = (uintptr_t)addr;
    while (fgets(line, sizeof line, f)) {
        unsigned long start, end;
        n += strstr(line, prefix) != NULL &&
             (!addr || (sscanf(line, "%lx-%lx", &start, &end) == 2 && a >= start && a < end));
    }
    fclose(f);
    return n;
}

static size_t count_object_maps(void)
{
    return object_maps_covering(NULL);
}

/* Poll done(arg) every millisecond, for five seconds at most (far past
 * what a reclaim thread takes, and well inside libFuzzer's -timeout): by the
 * clock, not by a count of yields, which a loaded machine ran through before
 * the thread was scheduled (tier 70 saw that once in a fresh clone). */
static void wait_up_to_5_s(bool (*done)(const void *), const void *arg)
{
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    do {
        if (done(arg))
            return;
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while (now.tv_sec - start.tv_sec < 5);
}

/* ------------------------------------------------------------ the input */

struct input {
    const uint8_t *p;
    size_t n;
};

static uint8_t take_u8(struct input *in)
{
    if (in->n == 0)
        return 0;
    in->n--;
    return *in->p++;
}

static uint64_t take_u64(struct input *in, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)take_u8(in) << (8 * i);
    return v;
}

/* Names: a small pool so that operations meet, plus the extremes. */
static const char *take_name(struct input *in, char *buf)
{
    static const char *const pool[] = {"r0", "r1", "r2", "r3", "in:0", "out/0"};
    uint8_t sel = take_u8(in) % 16;
    if (sel < 6)
        return pool[sel];
    switch (sel) {
    case 6:
        return "";
    case 7: /* the longest valid name */
    case 8: /* one byte too long */
        memset(buf, 'n', 256);
        buf[sel == 7 ? 255 : 256] = '\0';
        return buf;
    case 9:
        return "bell\a";
    case 10:
        return "del\x7f";
    case 11:
        return NULL;
    case 12:
        return "line\nforged: 'x'";
    case 13: { /* raw bytes from the input, up to a NUL */
        size_t len = take_u8(in) % 40;
        for (size_t i = 0; i < len; i++)
            buf[i] = (char)take_u8(in);
        buf[len] = '\0';
        return buf;
    }
    case 14:
        return "\xc3\xa9t\xc3\xa9";
    default:
        return "r0";
    }
}

/* A key and which object it names (-1: none). */
static const char *take_key(struct input *in, char *buf, int *object)
{
    uint8_t sel = take_u8(in) % 20;
    *object = -1;
    if (sel < 9) {
        int i = sel % NOBJECTS;
        const char *body = object_keys[i] + 1;
        *object = i;
        switch (sel / NOBJECTS) {
        case 0:
            return object_keys[i];
        case 1:
            snprintf(buf, 300, "///%s", body);
            return buf;
        default:
            return body;
        }
    }
    static const char *const odd[] = {"", "/", "//", ".", "/..", "a/b", "triton_x", "//triton_y",
                                      "/internal_z", "ctl\x05"};
    if (sel < 19)
        return odd[sel - 9];
    /* valid to glibc and to the library, but naming nothing */
    memset(buf, 'k', 253);
    buf[253] = '\0';
    buf[take_u8(in) % 2 ? 253 : 200] = '\0';
    return buf;
}

/* Offsets and sizes: the edges of `limit` and of size_t. */
static size_t take_extent(struct input *in, size_t limit)
{
    switch (take_u8(in) % 12) {
    case 0:
        return 0;
    case 1:
        return 1;
    case 2:
        return limit;
    case 3:
        return limit - 1;
    case 4:
        return limit + 1;
    case 5:
        return SIZE_MAX;
    case 6:
        return SIZE_MAX - 4095; /* with an offset of 4096: wraps to 0 */
    case 7:
        return 4096;
    case 8:
        return 4095;
    case 9:
        return (size_t)take_u64(in, 2);
    case 10:
        return (size_t)take_u64(in, 8);
    default:
        return take_u8(in);
    }
}

/* Owner tags: two tenants, none, and invalid ones. */
static const char *take_tag(struct input *in)
{
    static const char *const tags[] = {NULL, NULL, "tenant-a", "tenant-b", "", "t\x1b[31m"};
    return tags[take_u8(in) % 6];
}

static shmreg_kind take_kind(struct input *in)
{
    static const shmreg_kind kinds[] = {SHMREG_KIND_ANY, SHMREG_KIND_SYSTEM, SHMREG_KIND_CUDA,
                                        (shmreg_kind)7};
    return kinds[take_u8(in) % 4];
}

/* ------------------------------------------------------------ the world */

struct held {
    shmreg_region *ref;
    struct model_region *region;
    shmreg_view view;
    size_t offset; /* of the view, inside the region */
};

static const char *const reserved_prefixes[] = {"triton_", "/internal_", NULL};

struct world {
    shmreg_registry *reg;
    struct model model;
    struct held held[MAX_HELD];
    size_t nheld;
    unsigned logged;
    bool pin_usable;
    bool background; /* the current registry reclaims in its thread */
    bool cache_seen; /* a registry of this input had the cache on */
    size_t cache_bytes; /* the current registry's */
};

static void count_log(void *user, shmreg_log_level level, const char *msg)
{
    struct world *w = user;
    /* A WARNING is the harness's own doing (destroying a registry whose
     * regions it still holds); an ERROR is a failure the library could
     * not undo. */
    if (level == SHMREG_LOG_ERROR)
        w->logged++;
    CHECK(rule_text_loggable(msg), "a log line carries a control character");
    fprintf(stderr, "fuzz_ops: library logged: %s\n", msg);
}

/* A registry whose policy, limits and owner allow-list the input chooses. */
static void create_registry(struct world *w, struct input *in)
{
    static const size_t max_mapped[] = {0, 0, 0, 1, 4096, 5000, 3 * 4096 + 5, 20000};
    uid_t me = geteuid();
    const uid_t owners[] = {me + 1, me};
    uint8_t choice = take_u8(in);
    struct model_config mc = {
        .policy = (shmreg_policy)((choice & 3) % 3),
        .reserved_prefixes = reserved_prefixes,
        .max_regions = (choice >> 2) % 8 < 4 ? 0 : (choice >> 2) % 8 - 3,
        .max_mapped_bytes = max_mapped[(choice >> 5) % 8],
    };
    shmreg_config cfg;
    shmreg_config_init(&cfg);
    cfg.busy_policy = mc.policy;
    cfg.pin_policy = SHMREG_PIN_NEVER;
    cfg.reserved_key_prefixes = reserved_prefixes;
    cfg.log_fn = count_log;
    cfg.log_user = w;
    cfg.max_regions = mc.max_regions;
    cfg.max_mapped_bytes = mc.max_mapped_bytes;
    /* none; only another uid (every object refused); another and ours. Bit 2:
     * accept unsealed descriptors (the harness's shm objects cannot be
     * sealed, so without it every descriptor registration is refused). */
    uint8_t owners_choice = take_u8(in);
    mc.accept_unsealed_fds = owners_choice & 4;
    cfg.accept_unsealed_fds = mc.accept_unsealed_fds;
    switch (owners_choice % 4) {
    case 1:
        cfg.allowed_owner_uids = owners;
        cfg.allowed_owner_uid_count = 1;
        break;
    case 2:
        cfg.allowed_owner_uids = owners;
        cfg.allowed_owner_uid_count = 2;
        break;
    default:
        break;
    }
    /* reclaim mode and cache: off, smaller than an object, a few objects */
    static const size_t cache_sizes[] = {0, 0, 100, 3 * 4096, 1 << 20};
    uint8_t reclaim = take_u8(in);
    cfg.reclaim = reclaim & 1 ? SHMREG_RECLAIM_INLINE : SHMREG_RECLAIM_BACKGROUND;
    cfg.cache_bytes = cache_sizes[(reclaim >> 1) % 5];
    w->background = cfg.reclaim == SHMREG_RECLAIM_BACKGROUND;
    w->cache_seen |= cfg.cache_bytes > 0;
    w->cache_bytes = cfg.cache_bytes;
    mc.owner_accepted = cfg.allowed_owner_uid_count != 1;
    check_code("registry_create", shmreg_registry_create(&cfg, &w->reg), SHMREG_OK);
    model_create(&w->model, &mc);
}

/* The view shows the object's bytes at its place, and writes go through. */
static void check_view(const struct held *h)
{
    const struct model_region *r = h->region;
    const uint8_t *object = object_maps[r->object] + r->offset + h->offset;
    const uint8_t *view = h->view.addr;
    size_t n = h->view.byte_size;
    size_t head = n < CHECK_BYTES ? n : CHECK_BYTES;
    CHECK(memcmp(view, object, head) == 0, "view of '%s' +%zu differs from the object", r->name,
          h->offset);
    CHECK(memcmp(view + n - head, object + n - head, head) == 0, "tail of the view of '%s' differs",
          r->name);
    if (n == 0 || (r->flags & SHMREG_READONLY))
        return;
    uint8_t *last = (uint8_t *)h->view.addr + n - 1;
    uint8_t saved = *last, flipped = (uint8_t)(saved ^ 0xff);
    *last = flipped;
    CHECK(object[n - 1] == flipped, "a write through the view of '%s' did not reach the object",
          r->name);
    *last = saved;
}

static void hold(struct world *w, shmreg_region *ref, struct model_region *r, const shmreg_view *view,
                 size_t offset)
{
    struct held h = {ref, r, *view, offset};
    check_view(&h);
    if (w->nheld == MAX_HELD) { /* no room: give it back at once */
        shmreg_release(ref);
        model_release(r);
        return;
    }
    w->held[w->nheld++] = h;
}

/* What a reclaim thread that outlived its registry is doing: its state,
 * where it sleeps and the system call it is in (a failure's diagnosis). */
static void describe_thread(const char *tid)
{
    static const char *files[] = {"stat", "wchan", "syscall"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        char path[300], text[512] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/%s", tid, files[i]);
        FILE *f = fopen(path, "r");
        if (f) {
            size_t n = fread(text, 1, sizeof text - 1, f);
            text[n] = '\0';
            fclose(f);
        }
        fprintf(stderr, "fuzz_ops: reclaim thread %s %s: %s\n", tid, files[i], text);
    }
}

/* Reclaim threads still running: those of destroyed registries end after
 * their last region; an input must not leave one behind (leak checkers
 * would count its stack, and its registry's remains). describe: say what
 * each is doing. */
static int reclaim_threads(bool describe)
{
    DIR *d = opendir("/proc/self/task");
    CHECK(d, "cannot read /proc/self/task");
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char path[300], comm[32] = "";
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        bool reclaim = fgets(comm, sizeof comm, f) && strncmp(comm, "shmreg-reclaim", 14) == 0;
        fclose(f);
        n += reclaim;
        if (reclaim && describe)
            describe_thread(e->d_name);
    }
    closedir(d);
    return n;
}

static bool unmapped_at(const void *addr)
{
    return object_maps_covering(addr) == 0;
}

static bool no_reclaim_threads(const void *unused)
{
    (void)unused;
    return reclaim_threads(false) == 0;
}

/* Take held reference i out of the harness's list, its view checked. */
static struct held take_held(struct world *w, size_t i)
{
    struct held h = w->held[i];
    check_view(&h);
    w->held[i] = w->held[--w->nheld];
    return h;
}

/* The last release of a destroyed registry's region, whose unmapping a
 * reclaim thread may do. Counting the objects' mappings cannot tell when
 * it is done: regions registered while the cache was on share a mapping, so
 * the model's count of regions is then above the count of mappings, and
 * the count was already low enough before the unmapping (a fuzz run found
 * that, and a later check failed when the late unmapping came). So:
 *  - while other regions of that registry live, the harness keeps its table
 *    alive across the release and waits for its reclaim thread to be idle;
 *  - for its last region, the table goes with it (its reclaim thread ends
 *    itself, the path this must keep exercising), and nothing else can be
 *    on its mapping: the harness waits for the view's mapping to go. */
static void release_destroyed(struct world *w, size_t i)
{
    struct held h = take_held(w, i);
    struct shmreg__table *t = h.ref->table;
    model_release(h.region);
    bool gone = h.region->state == MODEL_GONE;
    if (gone && model_mapped_in(&w->model, h.region->registry) == 0) {
        shmreg_release(h.ref);
        wait_up_to_5_s(unmapped_at, h.view.addr);
        CHECK(unmapped_at(h.view.addr), "a destroyed registry's last region was not unmapped");
        return;
    }
    shmreg__table_get(t);
    shmreg_release(h.ref);
    shmreg__reclaim_wait_idle(&t->reclaim);
    CHECK(!shmreg__table_put(t), "a destroyed registry's table outlived its regions");
}

static void release_held(struct world *w, size_t i)
{
    if (w->held[i].region->registry != w->model.registry) {
        release_destroyed(w, i);
        return;
    }
    struct held h = take_held(w, i);
    shmreg_release(h.ref);
    model_release(h.region);
    /* A last release may have handed the region to the reclaim thread. */
    if (h.region->state == MODEL_GONE && w->background)
        check_code("registry_trim", shmreg_registry_trim(w->reg), SHMREG_OK);
}

/* ------------------------------------------------------------ operations */

/* The object as a descriptor (SHMREG_SOURCE_FD). A descriptor is never
 * looked up in the registration cache: its registration counts no hit and
 * no miss, whatever is cached. */
static void register_fd(struct world *w, struct input *in, const struct model_register_args *a, shmreg_err want)
{
    int fd = a->object >= 0 ? shm_open(object_keys[a->object], O_RDWR, 0) : -1;
    CHECK(a->object < 0 || fd >= 0, "cannot open the harness's object %d", a->object);
    shmreg_registration reg;
    shmreg_registration_init(&reg);
    reg.source = SHMREG_SOURCE_FD;
    reg.name = a->name;
    reg.fd = fd;
    reg.offset = a->offset;
    reg.byte_size = a->size;
    reg.flags = a->flags;
    reg.tag = a->tag;
    shmreg_stats before, after;
    check_code("registry_stats", shmreg_registry_stats(w->reg, &before), SHMREG_OK);
    shmreg_err got = a->tag || take_u8(in) % 2
                         ? shmreg_register(w->reg, &reg)
                         : shmreg_register_system_fd(w->reg, a->name, fd, a->offset, a->size, a->flags);
    if (fd >= 0)
        close(fd); /* the registry keeps its own mapping */
    check_code("register_system_fd", got, want);
    check_code("registry_stats", shmreg_registry_stats(w->reg, &after), SHMREG_OK);
    CHECK(after.cache_hits == before.cache_hits && after.cache_misses == before.cache_misses,
          "a descriptor registration was looked up in the cache (hits %llu -> %llu, misses %llu -> %llu)",
          (unsigned long long)before.cache_hits, (unsigned long long)after.cache_hits,
          (unsigned long long)before.cache_misses, (unsigned long long)after.cache_misses);
}

static void op_register(struct world *w, struct input *in)
{
    char name_buf[300], key_buf[300];
    struct model_register_args a = {.name = take_name(in, name_buf)};
    a.key = take_key(in, key_buf, &a.object);
    a.object_size = a.object >= 0 ? object_sizes[a.object] : 4096;
    a.offset = take_extent(in, a.object_size);
    a.size = take_extent(in, a.object_size);
    uint8_t flags = take_u8(in);
    a.flags = flags & 0xf;
    a.via_fd = flags & 0x10; /* the object as a descriptor (SHMREG_SOURCE_FD) */
    a.tag = take_tag(in);
    a.pin_usable = w->pin_usable;
    if (w->model.nregions == MODEL_MAX_REGIONS)
        return;
    struct model_region *r = NULL;
    shmreg_err want = model_register(&w->model, &a, &r);
    if (a.via_fd) {
        register_fd(w, in, &a, want);
        return;
    }
    /* Untagged registrations go through both doors: the plain verb and the
     * registration struct. */
    shmreg_err got = a.tag || take_u8(in) % 2
                         ? tu_register_system_tagged(w->reg, a.name, a.key, a.offset, a.size, a.flags, a.tag)
                         : shmreg_register_system(w->reg, a.name, a.key, a.offset, a.size, a.flags);
    check_code("register_system", got, want);
}

/* The ways a CUDA open may fail: no CUDA in this build or process, the
 * driver's refusal, a device or size it refuses. */
static bool cuda_open_failure(shmreg_err err)
{
    return err == SHMREG_ERR_UNSUPPORTED || err == SHMREG_ERR_CUDA || err == SHMREG_ERR_INVALID_ARG ||
           err == SHMREG_ERR_OUT_OF_BOUNDS;
}

/* CUDA registrations with handles no driver accepts: arguments, name and
 * limits are checked as for system regions, then the open must fail and give
 * back the reservation it took (a later registration would show it). */
static void op_register_cuda(struct world *w, struct input *in)
{
    char name_buf[300];
    const char *name = take_name(in, name_buf);
    size_t size = take_extent(in, 4096);
    unsigned flags = take_u8(in) & 0xf;
    const char *tag = take_tag(in);
    uint8_t how = take_u8(in);
    int device = (int)(take_u8(in) % 3) - 1;
    uint8_t handle[64];
    for (size_t i = 0; i < sizeof handle; i++)
        handle[i] = take_u8(in);
    bool ipc = how % 4 != 3, null_handle = how % 4 == 0;
    size_t handle_size = how % 4 == 1 ? sizeof handle : how;
    int fd = how & 4 ? -1 : 0;
    bool bad_source = ipc ? null_handle || handle_size != sizeof handle : fd < 0;
    shmreg_err want = model_register_cuda(&w->model, name, size, flags, tag, bad_source);
    shmreg_registration r;
    shmreg_registration_init(&r);
    r.source = ipc ? SHMREG_SOURCE_CUDA_IPC : SHMREG_SOURCE_CUDA_FD;
    r.name = name;
    r.tag = tag;
    r.byte_size = size;
    r.flags = flags;
    r.device_id = device;
    r.raw_handle = null_handle ? NULL : handle;
    r.raw_handle_size = handle_size;
    r.fd = fd;
    shmreg_err got = shmreg_register(w->reg, &r);
    if (want == SHMREG_ERR_UNSUPPORTED && cuda_open_failure(got))
        want = got;
    check_code(ipc ? "register_cuda_ipc" : "register_cuda_fd", got, want);
}

static void op_acquire(struct world *w, struct input *in)
{
    char name_buf[300];
    const char *name = take_name(in, name_buf);
    struct model_region *known = name ? model_lookup(&w->model, name, NULL) : NULL;
    size_t limit = known ? known->size : 4096;
    size_t offset = take_extent(in, limit);
    size_t size = take_extent(in, limit);
    struct model_region *r = NULL;
    shmreg_err want = model_acquire(&w->model, name, offset, size, &r);
    shmreg_region *ref = (shmreg_region *)&ref; /* must be reset to NULL on failure */
    shmreg_view view;
    shmreg_err got = shmreg_acquire(w->reg, name, offset, size, &ref, &view);
    /* A name with a control character was never registered: the lookup may
     * miss (NOT_FOUND) or refuse the name outright (INVALID_ARG). */
    if (want == SHMREG_ERR_NOT_FOUND && got == SHMREG_ERR_INVALID_ARG && !rule_name_valid(name))
        want = got;
    check_code("acquire", got, want);
    if (got != SHMREG_OK) {
        CHECK(ref == NULL, "a failed acquire left *out set");
        return;
    }
    CHECK(view.byte_size == size && view.kind == SHMREG_KIND_SYSTEM && view.device_id == -1 &&
              view.pinned == 0,
          "acquire of '%s': view fields wrong", name);
    hold(w, ref, r, &view, offset);
}

static void op_retain(struct world *w, struct input *in)
{
    uint8_t pick = take_u8(in);
    if (w->nheld == 0)
        return;
    struct held *h = &w->held[pick % w->nheld];
    shmreg_region *again = shmreg_retain(h->ref);
    CHECK(again == h->ref, "retain returned another reference");
    model_retain(h->region);
    hold(w, again, h->region, &h->view, h->offset);
}

static void op_release(struct world *w, struct input *in)
{
    uint8_t pick = take_u8(in);
    if (w->nheld > 0)
        release_held(w, pick % w->nheld);
}

static void op_unregister(struct world *w, struct input *in)
{
    char name_buf[300];
    const char *name = take_name(in, name_buf);
    shmreg_kind kind = take_kind(in);
    const char *tag = take_tag(in);
    shmreg_err want = model_unregister(&w->model, name, kind, tag);
    /* A filter without a name means every region: a NULL name goes through
     * the plain verb, which refuses it. */
    shmreg_err got = name && tag ? tu_unregister_tagged(w->reg, name, kind, tag)
                                 : shmreg_unregister(w->reg, name, kind);
    check_code("unregister", got, want);
}

static void op_unregister_all(struct world *w, struct input *in)
{
    shmreg_kind kind = take_kind(in);
    const char *tag = take_tag(in);
    shmreg_err want = model_unregister_all(&w->model, kind, tag);
    check_code("unregister_all", tu_unregister_tagged(w->reg, NULL, kind, tag), want);
}

/* One status entry against its model region. */
static void check_entry(struct world *w, const shmreg_region_status *st)
{
    struct model_region *r = model_find_exact(&w->model, st->name, st->tag);
    CHECK(r, "status lists '%s', which the model does not", st->name);
    CHECK((r->from_fd ? st->key == NULL : st->key && strcmp(st->key, r->key) == 0) && st->offset == r->offset && st->byte_size == r->size &&
              st->flags == r->flags && st->kind == SHMREG_KIND_SYSTEM && st->device_id == -1,
          "status of '%s' does not describe its registration", st->name);
    CHECK(st->references == r->refs, "status of '%s': references %u, the harness holds %u", st->name,
          st->references, r->refs);
    CHECK(st->pending_unregister == (r->state == MODEL_PENDING), "status of '%s': pending %d",
          st->name, st->pending_unregister);
    CHECK(r->tagged ? st->tag && strcmp(st->tag, r->tag) == 0 : st->tag == NULL,
          "status of '%s': tag '%s', registered with '%s'", st->name, st->tag ? st->tag : "(none)",
          r->tagged ? r->tag : "(none)");
}

static void op_status(struct world *w, struct input *in)
{
    char name_buf[300];
    const char *name = take_u8(in) % 2 ? take_name(in, name_buf) : NULL;
    shmreg_kind kind = take_kind(in);
    const char *tag = take_tag(in);
    size_t want_count;
    shmreg_err want = model_status(&w->model, name, kind, tag, &want_count);
    shmreg_region_status *st = NULL;
    size_t count = 0;
    check_code("status", tu_status_tagged(w->reg, name, kind, tag, &st, &count), want);
    CHECK(count == want_count, "status lists %zu regions, the model %zu", count, want_count);
    CHECK((st == NULL) == (count == 0), "status array and count disagree");
    for (size_t i = 0; i < count; i++) {
        check_entry(w, &st[i]);
        CHECK(model_tag_matches(model_find_exact(&w->model, st[i].name, st[i].tag), tag), "status for tag '%s' lists '%s'",
              tag, st[i].name);
        for (size_t j = 0; j < i; j++)
            CHECK(st[i].generation != st[j].generation, "two regions share generation %llu",
                  (unsigned long long)st[i].generation);
    }
    shmreg_status_free(st, count);
}

/* Destroy with references held (they stay valid), then a fresh registry. */
static void op_recreate(struct world *w, struct input *in)
{
    shmreg_registry_destroy(w->reg);
    model_destroy(&w->model);
    for (size_t i = 0; i < w->nheld; i++)
        check_view(&w->held[i]);
    /* Regions that share a mapping (the cache on) are mapped fewer times. */
    CHECK(w->cache_seen ? count_object_maps() <= NOBJECTS + model_mapped(&w->model)
                        : count_object_maps() == NOBJECTS + model_mapped(&w->model),
          "after destroy: %zu mappings of the objects, the model has %zu", count_object_maps(),
          NOBJECTS + model_mapped(&w->model));
    create_registry(w, in);
}

/* Give back what no caller holds: afterwards nothing waits for reclaim and
 * nothing is cached; before, the cache kept within its bound. */
static void op_trim(struct world *w, struct input *in)
{
    shmreg_stats s;
    check_code("registry_stats", shmreg_registry_stats(w->reg, &s), SHMREG_OK);
    CHECK(s.cached_bytes <= w->cache_bytes, "%llu bytes cached, over cache_bytes %zu",
          (unsigned long long)s.cached_bytes, w->cache_bytes);
    CHECK(s.cached_bytes <= s.mapped_bytes, "cached bytes not counted in mapped_bytes");
    CHECK(w->cache_bytes > 0 || (s.cache_hits == 0 && s.cached_mappings == 0), "a hit with the cache off");
    check_code("registry_trim", shmreg_registry_trim(w->reg), SHMREG_OK);
    check_code("registry_stats", shmreg_registry_stats(w->reg, &s), SHMREG_OK);
    CHECK(s.cached_mappings == 0 && s.cached_bytes == 0, "trim left %llu mappings cached",
          (unsigned long long)s.cached_mappings);
    CHECK(s.reclaim_waiting_bytes == 0, "trim left %llu bytes waiting for reclaim",
          (unsigned long long)s.reclaim_waiting_bytes);
    CHECK(s.mapped_regions == model_mapped_in(&w->model, w->model.registry),
          "after trim: %zu regions mapped, the model has %zu", s.mapped_regions,
          model_mapped_in(&w->model, w->model.registry));
}

/* NULL where the header says a pointer is required, and NULL no-ops. */
static void op_null_arguments(struct world *w, struct input *in)
{
    shmreg_region *ref;
    shmreg_view view;
    size_t count;
    shmreg_region_status *st;
    switch (take_u8(in) % 6) {
    case 0:
        check_code("register(NULL reg)", shmreg_register_system(NULL, "r0", object_keys[0], 0, 1, 0),
                   SHMREG_ERR_INVALID_ARG);
        break;
    case 1:
        check_code("acquire(NULL out)", shmreg_acquire(w->reg, "r0", 0, 0, NULL, &view),
                   SHMREG_ERR_INVALID_ARG);
        break;
    case 2:
        check_code("acquire(NULL view)", shmreg_acquire(w->reg, "r0", 0, 0, &ref, NULL),
                   SHMREG_ERR_INVALID_ARG);
        break;
    case 3:
        check_code("status(NULL count)", shmreg_status(w->reg, NULL, SHMREG_KIND_ANY, &st, NULL),
                   SHMREG_ERR_INVALID_ARG);
        break;
    case 4:
        check_code("unregister_all(NULL reg)", shmreg_unregister_all(NULL, SHMREG_KIND_ANY),
                   SHMREG_ERR_INVALID_ARG);
        break;
    default:
        shmreg_release(NULL);
        CHECK(shmreg_retain(NULL) == NULL, "retain(NULL) is not NULL");
        shmreg_status_free(NULL, 3);
        shmreg_registry_destroy(NULL);
        check_code("status(NULL reg)", shmreg_status(NULL, NULL, SHMREG_KIND_ANY, &st, &count),
                   SHMREG_ERR_INVALID_ARG);
    }
}

typedef void (*operation)(struct world *w, struct input *in);

static const operation operations[] = {
    op_register, op_register, op_acquire, op_acquire, op_retain, op_release,
    op_unregister, op_unregister_all, op_status, op_recreate, op_null_arguments, op_register_cuda,
    op_trim,
};

/* The library's seam for destroy's wait (sys.h): a no-op here. */
static void skip_rcu_barrier(void)
{
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool started;
    static struct world w;
    if (!started) {
        /* A registry per input: waiting a grace period in every destroy
         * would cut the executions 30-fold. The frees still happen; the
         * replay program waits for them once at exit. */
        shmreg__sys.rcu_barrier = skip_rcu_barrier;
        create_objects();
        const unsigned usable = SHMREG_CUDA_BUILT | SHMREG_CUDA_DRIVER | SHMREG_CUDA_DEVICE;
        w.pin_usable = (shmreg_cuda_available() & usable) == usable;
        started = true;
    }
    struct input in = {data, size};
    model_reset(&w.model);
    w.nheld = 0;
    w.logged = 0;
    w.cache_seen = false;
    create_registry(&w, &in);

    for (int ops = 0; ops < MAX_OPS && in.n > 0; ops++)
        operations[take_u8(&in) % (sizeof operations / sizeof *operations)](&w, &in);

    while (w.nheld > 0)
        release_held(&w, w.nheld - 1);
    shmreg_registry_destroy(w.reg);
    model_destroy(&w.model);
    CHECK(model_mapped(&w.model) == 0, "the model still maps regions");
    /* A destroyed registry's reclaim thread ends itself once it has torn
     * down its last region (release_destroyed saw that unmapping), after
     * freeing the registry's table. */
    wait_up_to_5_s(no_reclaim_threads, NULL);
    CHECK(reclaim_threads(true) == 0, "a reclaim thread outlived every registry and region");
    CHECK(count_object_maps() == NOBJECTS, "%zu mappings of the objects left, expected only the "
          "harness's %d", count_object_maps() - NOBJECTS, NOBJECTS);
    CHECK(w.logged == 0, "the library logged %u failures", w.logged);
    return 0;
}
