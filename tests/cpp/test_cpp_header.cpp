/* include/shmreg/shmreg.hpp through the shared library: ownership (copy
 * retains, destructor releases, move hands over, checked against status's
 * reference counts), views, errors with the library's code and message,
 * status values, filters with tags, stats, the CUDA calls where CUDA is
 * unusable, and the 1.1 calls: the reclaim mode and the cache in the
 * config, descriptor regions, the tag-scoped acquire, guarded copies (a
 * truncated object is FAULT, the process lives) and the 1.1 counters. Built twice: with exceptions and with -fno-exceptions; the
 * throwing forms are tested where they exist. Plain checks, one summary
 * line; no cmocka (its macros are C's). */
#include <shmreg/shmreg.hpp>

extern "C" {
#include "testutil.h"
}

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#if SHMREG_CPP_EXCEPTIONS
#define MODE "exceptions"
#else
#define MODE "no exceptions"
#endif

/* What the header promises at compile time. */
static_assert(!std::is_copy_constructible_v<shmreg::registry>, "registry is move-only");
static_assert(!std::is_copy_assignable_v<shmreg::registry>, "registry is move-only");
static_assert(std::is_nothrow_move_constructible_v<shmreg::registry>, "");
static_assert(std::is_nothrow_move_assignable_v<shmreg::registry>, "");
static_assert(std::is_nothrow_destructible_v<shmreg::registry>, "");
static_assert(std::is_nothrow_copy_constructible_v<shmreg::region_ref>, "copy = retain");
static_assert(std::is_nothrow_copy_assignable_v<shmreg::region_ref>, "");
static_assert(std::is_nothrow_move_constructible_v<shmreg::region_ref>, "");
static_assert(std::is_nothrow_move_assignable_v<shmreg::region_ref>, "");
static_assert(std::is_nothrow_destructible_v<shmreg::region_ref>, "destructor = release");
static_assert(noexcept(std::declval<shmreg::region_ref &>().reset()), "");
static_assert(noexcept(std::declval<shmreg::registry &>().reset()), "");
static_assert(std::is_base_of_v<std::runtime_error, shmreg::error>, "");
static_assert(std::is_same_v<decltype(std::declval<shmreg::registry &>().handle()), shmreg_registry *>,
              "");
static_assert(std::is_same_v<decltype(std::declval<shmreg::region_ref &>().handle()), shmreg_region *>,
              "");

static int checks_failed;
static int tests_failed;

#define CHECK(cond)                                                                          \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);    \
            checks_failed++;                                                                 \
        }                                                                                    \
    } while (0)

/* r must have succeeded; prints the code and message when not. */
#define CHECK_OK(r)                                                                          \
    do {                                                                                     \
        const auto &r_ = (r);                                                                \
        if (!r_.ok()) {                                                                      \
            std::fprintf(stderr, "%s:%d: %s failed: %s: %s\n", __FILE__, __LINE__, #r,       \
                         r_.error().name(), r_.error().what());                              \
            checks_failed++;                                                                 \
        }                                                                                    \
    } while (0)

/* r must have failed with `code` and exactly the message `msg` (or any
 * non-empty message when msg is NULL). */
#define CHECK_FAILS(r, code, msg) check_fails((r), (code), (msg), __LINE__)

template <class R>
static void check_fails(const R &r, shmreg_err code, const char *msg, int line)
{
    if (r.ok()) {
        std::fprintf(stderr, "%s:%d: succeeded, expected %s\n", __FILE__, line, shmreg_err_name(code));
        checks_failed++;
        return;
    }
    const shmreg::error &e = r.error();
    if (e.code() != code || r.code() != code || std::strcmp(e.name(), shmreg_err_name(code)) != 0 ||
        (msg != nullptr && std::strcmp(e.what(), msg) != 0) || e.what()[0] == '\0' ||
        std::strcmp(e.message(), e.what()) != 0) {
        std::fprintf(stderr, "%s:%d: got %s '%s', expected %s '%s'\n", __FILE__, line, e.name(),
                     e.what(), shmreg_err_name(code), msg ? msg : "(any)");
        checks_failed++;
    }
}

/* The shm objects a test creates; unlinked at the end. */
struct objects {
    std::vector<std::string> keys;
    const char *make(size_t size, uint8_t seed)
    {
        char key[64];
        tu_shm_create(size, seed, key);
        keys.push_back(key);
        return keys.back().c_str();
    }
    ~objects()
    {
        for (const std::string &k : keys)
            tu_shm_unlink(k.c_str());
    }
};

static shmreg::registry new_registry(shmreg::busy_policy busy = shmreg::busy_policy::defer)
{
    auto r = shmreg::registry::create(shmreg::config().busy(busy).pinning(shmreg::pin_policy::never));
    CHECK_OK(r);
    return std::move(r).value();
}

/* The references status reports for `name` (-1 when status fails). */
static long references_of(shmreg::registry &reg, const char *name)
{
    auto st = reg.try_status(name);
    if (!st.ok() || st->size() != 1)
        return -1;
    return static_cast<long>(st->front().references);
}

static size_t count_listed(shmreg::registry &reg, shmreg::kind k = shmreg::kind::any)
{
    auto st = reg.try_status(k);
    CHECK_OK(st);
    return st.ok() ? st->size() : 0;
}

/* ------------------------------------------------------------------ tests */

static void test_registry_lifecycle()
{
    shmreg::registry empty;
    CHECK(!empty);
    CHECK(empty.handle() == nullptr);
    /* An empty registry's calls fail as the C calls do with NULL. */
    CHECK_FAILS(empty.try_acquire("x", 0, 1), SHMREG_ERR_INVALID_ARG, nullptr);
    CHECK_FAILS(empty.try_stats(), SHMREG_ERR_INVALID_ARG, nullptr);

    auto created = shmreg::registry::create();
    CHECK_OK(created);
    shmreg::registry reg = std::move(created).value();
    CHECK(reg);
    shmreg_registry *c = reg.handle();
    CHECK(c != nullptr);

    shmreg::registry moved(std::move(reg));
    CHECK(!reg); /* a moved-from registry is empty */
    CHECK(moved.handle() == c);
    reg = std::move(moved);
    CHECK(reg.handle() == c);
    CHECK(!moved);

    /* The C handle works with the C API. */
    shmreg_stats s;
    CHECK(shmreg_registry_stats(reg.handle(), &s) == SHMREG_OK);

    /* A config the library refuses: an empty reserved prefix. */
    auto bad = shmreg::registry::create(shmreg::config().reserved_key_prefix(""));
    CHECK_FAILS(bad, SHMREG_ERR_INVALID_ARG, nullptr);

    /* disown hands the C registry over. */
    shmreg_registry *raw = reg.disown();
    CHECK(!reg);
    shmreg_registry_destroy(raw);

    reg = new_registry();
    CHECK(reg);
    reg.reset();
    CHECK(!reg);
}

static void test_references_follow_copies_moves_and_destructors()
{
    objects o;
    const char *key = o.make(4096, 3);
    shmreg::registry reg = new_registry();
    CHECK_OK(reg.try_register_system("in", key, 0, 4096));

    {
        auto r = reg.try_acquire("in", 16, 64);
        CHECK_OK(r);
        shmreg::region_ref a = std::move(r).value();
        CHECK(a);
        CHECK(references_of(reg, "in") == 1);
        CHECK(a.size() == 64);
        CHECK(a.view().size() == 64);
        CHECK(a.addr() == a.view().addr());
        const uint8_t *p = static_cast<const uint8_t *>(a.addr());
        bool pattern = true;
        for (size_t i = 0; i < 64; i++)
            pattern = pattern && p[i] == tu_pattern(3, 16 + i);
        CHECK(pattern);

        shmreg::region_ref b = a; /* copy: retain */
        CHECK(references_of(reg, "in") == 2);
        CHECK(b.handle() == a.handle());
        CHECK(b.addr() == a.addr());

        shmreg::region_ref c = std::move(b); /* move: hand-over */
        CHECK(!b);
        CHECK(b.handle() == nullptr);
        CHECK(references_of(reg, "in") == 2);

        shmreg::region_ref d;
        d = c; /* copy-assign: retain */
        CHECK(references_of(reg, "in") == 3);
        d = std::move(c); /* move-assign over a held reference: releases the old one */
        CHECK(!c);
        CHECK(references_of(reg, "in") == 2);
        shmreg::region_ref &same = d;
        d = same; /* self-assignment changes nothing */
        CHECK(references_of(reg, "in") == 2);

        std::vector<shmreg::region_ref> many(3, a); /* three copies */
        CHECK(references_of(reg, "in") == 5);
        many.clear();
        CHECK(references_of(reg, "in") == 2);

        d.reset();
        CHECK(!d);
        CHECK(references_of(reg, "in") == 1);

        /* disown: the C reference goes to the caller. */
        shmreg_region *raw = a.disown();
        CHECK(!a);
        CHECK(references_of(reg, "in") == 1);
        shmreg_release(raw);
        CHECK(references_of(reg, "in") == 0);

        shmreg::region_ref e = reg.try_acquire("in", 0, 1).value();
        CHECK(references_of(reg, "in") == 1);
    } /* e's destructor releases */
    CHECK(references_of(reg, "in") == 0);

    /* DEFER: unregister while held keeps it pending; the last release
     * removes it. */
    {
        shmreg::region_ref held = reg.try_acquire("in", 0, 8).value();
        CHECK_OK(reg.try_unregister("in", shmreg::kind::system));
        auto st = reg.try_status("in");
        CHECK_OK(st);
        CHECK(st.ok() && st->size() == 1 && st->front().pending_unregister);
    }
    CHECK_FAILS(reg.try_status("in", shmreg::kind::system), SHMREG_ERR_NOT_FOUND,
                "Unable to find system shared memory region: 'in'");
}

static void test_a_reference_outlives_its_registry()
{
    objects o;
    const char *key = o.make(4096, 5);
    int maps_before = tu_count_shm_maps(key);
    shmreg::region_ref ref;
    {
        shmreg::registry reg = new_registry();
        CHECK_OK(reg.try_register_system("r", key, 0, 4096));
        ref = reg.try_acquire("r", 100, 10).value();
    } /* the registry is destroyed; the mapping stays for ref */
    CHECK(tu_count_shm_maps(key) == maps_before + 1);
    CHECK(static_cast<const uint8_t *>(ref.addr())[0] == tu_pattern(5, 100));
    ref.reset(); /* the last release: the orphaned reclaim thread unmaps */
    CHECK(tu_wait_shm_maps(key, maps_before, 5000) == maps_before);
}

static void test_views()
{
    objects o;
    const char *key = o.make(8192, 7);
    shmreg::registry reg = new_registry();
    CHECK_OK(reg.try_register_system("rw", key, 0, 4096));
    CHECK_OK(reg.try_register_region(
        shmreg::registration::system("ro", key, 4096, 4096).flags(shmreg::flags::readonly)));

    shmreg::region_ref rw = reg.try_acquire("rw", 0, 4096).value();
    const shmreg::view &v = rw.view();
    CHECK(v.kind() == shmreg::kind::system);
    CHECK(v.device() == -1);
    CHECK(!v.pinned());
    CHECK(v.writable());
    CHECK(v.size() == 4096);
    CHECK(v.handle().addr == v.addr());
    static_cast<uint8_t *>(v.addr())[0] = 0xab; /* writable indeed */

    shmreg::region_ref ro = reg.try_acquire("ro", 1, 2).value();
    CHECK(!ro.view().writable());
    CHECK(ro.view().kind() == shmreg::kind::system);
    CHECK(static_cast<const uint8_t *>(ro.addr())[0] == tu_pattern(7, 4097));

    /* A default view and an empty reference. */
    shmreg::view none;
    CHECK(none.addr() == nullptr && none.size() == 0 && none.device() == -1);
    shmreg::region_ref empty;
    CHECK(!empty && empty.addr() == nullptr && empty.size() == 0);
}

static void test_errors_carry_code_and_message()
{
    objects o;
    const char *key = o.make(4096, 9);
    shmreg::registry reg = new_registry();
    CHECK_OK(reg.try_register_system("in", key, 0, 4096));

    CHECK_FAILS(reg.try_acquire("absent", 0, 1), SHMREG_ERR_NOT_FOUND,
                "Unable to find shared memory region: 'absent'");
    CHECK_FAILS(reg.try_status(std::string("absent"), shmreg::kind::system), SHMREG_ERR_NOT_FOUND,
                "Unable to find system shared memory region: 'absent'");
    CHECK_FAILS(reg.try_status("in", shmreg::kind::cuda), SHMREG_ERR_WRONG_KIND,
                "The region named 'in' is registered as system shared memory, not CUDA shared "
                "memory");
    CHECK_FAILS(reg.try_unregister("in", shmreg::kind::cuda), SHMREG_ERR_WRONG_KIND, nullptr);
    CHECK_FAILS(reg.try_acquire("in", 4096, 0), SHMREG_ERR_OUT_OF_BOUNDS,
                "Invalid offset for shared memory region: 'in'");
    CHECK_FAILS(reg.try_acquire("in", 10, 4096), SHMREG_ERR_OUT_OF_BOUNDS,
                "Invalid offset + byte size for shared memory region: 'in'");
    CHECK_FAILS(reg.try_register_system("in", key, 0, 16), SHMREG_ERR_ALREADY_EXISTS,
                "shared memory region 'in' already in manager");
    CHECK_FAILS(reg.try_register_system("", key, 0, 16), SHMREG_ERR_INVALID_ARG, nullptr);
    CHECK_FAILS(reg.try_register_system(nullptr, key, 0, 16), SHMREG_ERR_INVALID_ARG, nullptr);
    /* A registration without a name or key reaches the library as NULLs. */
    CHECK_FAILS(reg.try_register_region(shmreg::registration().byte_size(16)), SHMREG_ERR_INVALID_ARG,
                nullptr);
    CHECK_FAILS(reg.try_register_region(shmreg::registration().name("k").byte_size(16)),
                SHMREG_ERR_INVALID_ARG, nullptr);

    /* The message is copied at the failure: a later failure does not change
     * an error already taken. */
    auto first = reg.try_acquire("absent", 0, 1);
    auto second = reg.try_acquire("other", 0, 1);
    CHECK_FAILS(first, SHMREG_ERR_NOT_FOUND, "Unable to find shared memory region: 'absent'");
    CHECK_FAILS(second, SHMREG_ERR_NOT_FOUND, "Unable to find shared memory region: 'other'");
    shmreg::error copy = first.error();
    CHECK(copy.code() == SHMREG_ERR_NOT_FOUND);
    CHECK(std::strcmp(copy.description(), shmreg_err_description(SHMREG_ERR_NOT_FOUND)) == 0);

    /* A successful result's code is OK. */
    auto fine = reg.try_stats();
    CHECK(fine.ok() && fine.code() == SHMREG_OK);
    CHECK(references_of(reg, "in") == 0);
}

static void test_status_entries_are_values()
{
    objects o;
    const char *key = o.make(4096, 11);
    std::vector<shmreg::region_status> snapshot;
    {
        shmreg::registry reg = new_registry();
        CHECK_OK(reg.try_register_region(shmreg::registration::system("a", key, 8, 1000)
                                             .tag("tenant-1")
                                             .flags(shmreg::flags::readonly)));
        CHECK_OK(reg.try_register_system("b", std::string(key), 0, 24));
        shmreg::region_ref held = reg.try_acquire("a", 0, 1).value();
        auto st = reg.try_status(shmreg::kind::system);
        CHECK_OK(st);
        snapshot = std::move(st).value();
        /* Copies of the same region in one call agree with the C call. */
        shmreg_region_status *cst = nullptr;
        size_t n = 0;
        CHECK(shmreg_status(reg.handle(), "a", SHMREG_KIND_SYSTEM, &cst, &n) == SHMREG_OK);
        CHECK(n == 1);
        shmreg::region_status one(cst[0]);
        shmreg_status_free(cst, n);
        CHECK(one.name == "a" && one.references == 1);
    } /* registry and regions gone: the values stay */
    CHECK(snapshot.size() == 2);
    const shmreg::region_status *a = nullptr, *b = nullptr;
    for (const shmreg::region_status &s : snapshot) {
        if (s.name == "a")
            a = &s;
        if (s.name == "b")
            b = &s;
    }
    CHECK(a != nullptr && b != nullptr);
    if (a == nullptr || b == nullptr)
        return;
    CHECK(a->key == key && b->key == key);
    CHECK(a->kind == shmreg::kind::system);
    CHECK(a->offset == 8 && a->byte_size == 1000);
    CHECK(a->device_id == -1);
    CHECK(a->references == 1 && b->references == 0);
    CHECK(!a->pending_unregister);
    CHECK(a->generation != b->generation);
    CHECK(!a->pinned);
    CHECK(a->flags == shmreg::flags::readonly && b->flags == 0);
    CHECK(a->tag == "tenant-1" && b->tag.empty());
    shmreg::region_status copy = *a;
    CHECK(copy.name == "a" && copy.tag == "tenant-1");
}

static void test_filters_with_tags()
{
    objects o;
    const char *key = o.make(4096, 13);
    shmreg::registry reg = new_registry();
    for (const char *name : {"a1", "a2"})
        CHECK_OK(reg.try_register_region(shmreg::registration::system(name, key, 0, 64).tag("a")));
    CHECK_OK(reg.try_register_region(shmreg::registration().name("b1").key(key).byte_size(64).tag("b")));
    CHECK_OK(reg.try_register_system("untagged", key, 0, 64));

    auto of_a = reg.try_status_matching(shmreg::filter().tag("a"));
    CHECK_OK(of_a);
    CHECK(of_a.ok() && of_a->size() == 2);
    if (of_a.ok())
        for (const shmreg::region_status &s : *of_a)
            CHECK(s.tag == "a");

    /* A region of another tag answers as an absent one. */
    CHECK_FAILS(reg.try_status_matching(shmreg::filter().name("b1").tag("a")),
                SHMREG_ERR_NOT_FOUND, nullptr);
    CHECK_FAILS(reg.try_unregister_matching(shmreg::filter().name("b1").tag("a")),
                SHMREG_ERR_NOT_FOUND, nullptr);
    auto b1 = reg.try_status_matching(shmreg::filter().name("b1").tag("b").of_kind(shmreg::kind::system));
    CHECK(b1.ok() && b1->size() == 1 && b1->front().name == "b1");
    CHECK_FAILS(reg.try_status_matching(shmreg::filter().name("b1").of_kind(shmreg::kind::cuda)),
                SHMREG_ERR_WRONG_KIND, nullptr);

    /* One tenant's cleanup removes only its own regions. */
    CHECK_OK(reg.try_unregister_matching(shmreg::filter().tag("a")));
    CHECK(count_listed(reg) == 2);
    CHECK(references_of(reg, "b1") == 0 && references_of(reg, "untagged") == 0);
    CHECK(count_listed(reg, shmreg::kind::cuda) == 0);

    /* The empty filter: everything. */
    auto all = reg.try_status_matching(shmreg::filter());
    CHECK(all.ok() && all->size() == 2);
    CHECK_OK(reg.try_unregister_all(shmreg::kind::system));
    CHECK(count_listed(reg) == 0);

    /* The C struct a filter hands over. */
    shmreg::filter f;
    f.name("x").tag("t").of_kind(shmreg::kind::cuda);
    shmreg_filter c = f.handle();
    CHECK(std::strcmp(c.name, "x") == 0 && std::strcmp(c.tag, "t") == 0 && c.kind == SHMREG_KIND_CUDA);
    shmreg_filter none = shmreg::filter().handle();
    CHECK(none.name == nullptr && none.tag == nullptr && none.kind == SHMREG_KIND_ANY);
}

static void test_stats()
{
    objects o;
    const char *key = o.make(4096, 15);
    shmreg::registry reg = new_registry(shmreg::busy_policy::detach);
    CHECK_OK(reg.try_register_system("a", key, 0, 1000));
    CHECK_FAILS(reg.try_register_system("a", key, 0, 1), SHMREG_ERR_ALREADY_EXISTS, nullptr);
    shmreg::region_ref r1 = reg.try_acquire("a", 0, 1).value();
    shmreg::region_ref r2 = r1;
    auto s = reg.try_stats();
    CHECK_OK(s);
    if (!s.ok())
        return;
    CHECK(s->regions == 1 && s->mapped_regions == 1 && s->mapped_bytes == 1000);
    CHECK(s->references == 2 && s->registrations == 1 && s->refusals == 1);

    /* DETACH: the name goes at once; the mapping stays for the references. */
    CHECK_OK(reg.try_unregister("a"));
    shmreg::stats d = reg.try_stats().value();
    CHECK(d.regions == 0 && d.detached_regions == 1 && d.mapped_regions == 1);
    r1.reset();
    r2.reset();
    CHECK_OK(reg.try_trim()); /* the reclaim thread has unmapped it */
    d = reg.try_stats().value();
    CHECK(d.detached_regions == 0 && d.mapped_regions == 0 && d.mapped_bytes == 0);
}

static void test_cuda_calls_without_cuda()
{
    const unsigned usable = SHMREG_CUDA_BUILT | SHMREG_CUDA_DRIVER | SHMREG_CUDA_DEVICE;
    if ((shmreg::cuda_available() & usable) == usable) {
        std::printf("cpp-header: CUDA is usable here; the UNSUPPORTED checks are skipped\n");
        return;
    }
    shmreg::registry reg = new_registry();
    unsigned char handle[64];
    std::memset(handle, 0x11, sizeof handle);
    CHECK_FAILS(reg.try_register_cuda_ipc("gpu", handle, sizeof handle, 0, 4096),
                SHMREG_ERR_UNSUPPORTED, nullptr);
    CHECK_FAILS(reg.try_register_region(shmreg::registration::cuda_ipc("gpu", handle, sizeof handle, 0, 4096)),
                SHMREG_ERR_UNSUPPORTED, nullptr);
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    CHECK(fd >= 0);
    CHECK_FAILS(reg.try_register_cuda_fd("gpu", fd, 0, 4096), SHMREG_ERR_UNSUPPORTED, nullptr);
    CHECK_FAILS(reg.try_register_region(shmreg::registration::cuda_fd("gpu", fd, 0, 4096).tag("t")),
                SHMREG_ERR_UNSUPPORTED, nullptr);
    CHECK(fcntl(fd, F_GETFD) >= 0); /* the caller's descriptor stays open */
    close(fd);
    CHECK(count_listed(reg) == 0);

    /* The registration builder's C struct. */
    shmreg::registration r = shmreg::registration::cuda_ipc("gpu", handle, sizeof handle, 1, 4096);
    shmreg_registration c = r.handle();
    CHECK(c.source == SHMREG_SOURCE_CUDA_IPC && c.device_id == 1 && c.raw_handle_size == 64);
    CHECK(std::memcmp(c.raw_handle, handle, 64) == 0 && c.raw_handle != handle);
    CHECK(c.tag == nullptr && c.key == nullptr && c.fd == -1);
}


/* ------------------------------------------------------------ 1.1 calls */

static void test_config_carries_the_1_1_settings()
{
    shmreg_config c = shmreg::config()
                          .reclaim(shmreg::reclaim_mode::inline_)
                          .cache_bytes(1 << 20)
                          .accept_unsealed_fds(true)
                          .handle();
    CHECK(c.reclaim == SHMREG_RECLAIM_INLINE && c.cache_bytes == (1u << 20) && c.accept_unsealed_fds == 1);
    shmreg_config d = shmreg::config().handle();
    CHECK(d.reclaim == SHMREG_RECLAIM_BACKGROUND && d.cache_bytes == 0 && d.accept_unsealed_fds == 0);
    /* A mode out of range reaches the library, which refuses it. */
    auto bad = shmreg::registry::create(shmreg::config().reclaim(static_cast<shmreg::reclaim_mode>(7)));
    CHECK_FAILS(bad, SHMREG_ERR_INVALID_ARG, nullptr);
}

/* reclaim_mode::inline_: the last release unmaps before it returns. */
static void test_inline_reclaim_unmaps_in_the_releasing_thread()
{
    objects o;
    const char *key = o.make(4096, 19);
    int maps_before = tu_count_shm_maps(key);
    auto created = shmreg::registry::create(
        shmreg::config().reclaim(shmreg::reclaim_mode::inline_).pinning(shmreg::pin_policy::never));
    CHECK_OK(created);
    if (!created)
        return;
    shmreg::registry reg = std::move(created).value();
    CHECK_OK(reg.try_register_system("r", key, 0, 4096));
    shmreg::region_ref ref = reg.try_acquire("r", 0, 16).value();
    CHECK_OK(reg.try_unregister("r")); /* DEFER: pending while ref holds it */
    CHECK(tu_count_shm_maps(key) == maps_before + 1);
    ref.reset();
    CHECK(tu_count_shm_maps(key) == maps_before); /* no wait: unmapped by reset() */
    shmreg::stats s = reg.try_stats().value();
    CHECK(s.mapped_regions == 0 && s.mapped_bytes == 0 && s.reclaim_waiting_bytes == 0);
}

/* The cache and its counters: a second registration of the same object
 * reuses the cached mapping. */
static void test_cache_and_the_1_1_counters()
{
    objects o;
    const char *key = o.make(8192, 21);
    auto created = shmreg::registry::create(
        shmreg::config().cache_bytes(1 << 20).pinning(shmreg::pin_policy::never));
    CHECK_OK(created);
    if (!created)
        return;
    shmreg::registry reg = std::move(created).value();
    CHECK_OK(reg.try_register_system("a", key, 0, 8192));
    CHECK_OK(reg.try_unregister("a")); /* idle: its mapping goes to the cache */
    shmreg::stats s = reg.try_stats().value();
    CHECK(s.regions == 0 && s.cached_mappings == 1 && s.cached_bytes == 8192);
    CHECK(s.mapped_bytes == 8192 && s.cache_misses == 1 && s.cache_hits == 0);
    CHECK_OK(reg.try_register_system("b", key, 4096, 4096));
    s = reg.try_stats().value();
    CHECK(s.cache_hits == 1 && s.cached_mappings == 0 && s.cached_bytes == 0);
    auto st = reg.try_status("b");
    CHECK(st.ok() && st->size() == 1 && st->front().mapping_reused && st->front().mapping_regions == 1);
    CHECK_OK(reg.try_unregister("b"));
    CHECK_OK(reg.try_trim()); /* the cache is emptied */
    s = reg.try_stats().value();
    CHECK(s.cached_mappings == 0 && s.mapped_bytes == 0 && s.cache_evictions == 1);
    CHECK(s.reclaim_waiting_bytes == 0);
}

static void test_descriptor_regions()
{
    shmreg::registry reg = new_registry();
    auto made = shmreg::try_memfd_create("cpp-header", 8192);
    CHECK_OK(made);
    if (!made)
        return;
    int fd = *made;
    CHECK((fcntl(fd, F_GET_SEALS) & F_SEAL_SHRINK) != 0);
    CHECK_OK(reg.try_register_system_fd("fd-a", fd, 4096, 4096));
    CHECK_OK(reg.try_register_region(shmreg::registration::system_fd("fd-b", fd, 0, 64).tag("t")));
    CHECK(fcntl(fd, F_GETFD) >= 0); /* the caller keeps its descriptor */
    close(fd);                      /* and may close it: the mapping lives */
    shmreg::region_ref ref = reg.try_acquire("fd-a", 0, 4096).value();
    static_cast<uint8_t *>(ref.addr())[0] = 7;
    auto st = reg.try_status("fd-a");
    CHECK(st.ok() && st->size() == 1 && st->front().key.empty() && st->front().kind == shmreg::kind::system);
    auto b = reg.try_status_matching(shmreg::filter().tag("t"));
    CHECK(b.ok() && b->size() == 1 && b->front().name == "fd-b");

    /* An unsealed descriptor is refused unless the config accepts it. */
    int unsealed = memfd_create("cpp-header-unsealed", MFD_CLOEXEC);
    CHECK(unsealed >= 0 && ftruncate(unsealed, 4096) == 0);
    CHECK_FAILS(reg.try_register_system_fd("loose", unsealed, 0, 4096), SHMREG_ERR_INVALID_ARG, nullptr);
    CHECK_FAILS(reg.try_register_system_fd("neg", -1, 0, 4096), SHMREG_ERR_INVALID_ARG, nullptr);
    {
        auto lax = shmreg::registry::create(
            shmreg::config().accept_unsealed_fds(true).pinning(shmreg::pin_policy::never));
        CHECK_OK(lax);
        if (lax.ok())
            CHECK_OK(lax->try_register_system_fd("loose", unsealed, 0, 4096));
    }
    close(unsealed);
    CHECK_FAILS(shmreg::try_memfd_create(nullptr, 0), SHMREG_ERR_INVALID_ARG, nullptr);
}

static void test_tag_scoped_acquire()
{
    objects o;
    const char *key = o.make(4096, 23);
    shmreg::registry reg = new_registry();
    CHECK_OK(reg.try_register_region(shmreg::registration::system("mine", key, 0, 4096).tag("a")));
    CHECK_OK(reg.try_register_region(shmreg::registration::system("theirs", key, 0, 4096).tag("b")));

    auto mine = reg.try_acquire_matching(shmreg::filter().name("mine").tag("a"), 8, 8);
    CHECK_OK(mine);
    CHECK(mine.ok() && mine->size() == 8 && references_of(reg, "mine") == 1);
    /* Another tenant's region answers exactly as an absent one, before any
     * bounds check. */
    auto theirs = reg.try_acquire_matching(shmreg::filter().name("theirs").tag("a"), 1 << 20, 1);
    auto absent = reg.try_acquire_matching(shmreg::filter().name("nothing").tag("a"), 1 << 20, 1);
    CHECK_FAILS(theirs, SHMREG_ERR_NOT_FOUND, "Unable to find shared memory region: 'theirs'");
    CHECK_FAILS(absent, SHMREG_ERR_NOT_FOUND, "Unable to find shared memory region: 'nothing'");
    CHECK(references_of(reg, "theirs") == 0);
    CHECK_FAILS(reg.try_acquire_matching(shmreg::filter().name("mine").tag("a").of_kind(shmreg::kind::cuda), 0, 1),
                SHMREG_ERR_WRONG_KIND, nullptr);
    CHECK_FAILS(reg.try_acquire_matching(shmreg::filter().tag("a"), 0, 1), SHMREG_ERR_INVALID_ARG, nullptr);
    /* Status and unregister, scoped the same way. */
    CHECK_FAILS(reg.try_status_matching(shmreg::filter().name("theirs").tag("a")), SHMREG_ERR_NOT_FOUND, nullptr);
    CHECK_FAILS(reg.try_unregister_matching(shmreg::filter().name("theirs").tag("a")), SHMREG_ERR_NOT_FOUND,
                nullptr);
    CHECK_OK(reg.try_unregister_matching(shmreg::filter().tag("b")));
    CHECK(count_listed(reg) == 1);
}

static void shrink(const char *key, off_t size)
{
    int fd = shm_open(key, O_RDWR, 0);
    CHECK(fd >= 0 && ftruncate(fd, size) == 0);
    if (fd >= 0)
        close(fd);
}

/* Guarded copies: refused before guard_install, a round trip after it, and
 * a client's truncation is FAULT for the copy while the process lives. */
static void test_guarded_copies()
{
    objects o;
    const char *key = o.make(4 * 4096, 25);
    shmreg::registry reg = new_registry();
    CHECK_OK(reg.try_register_system("g", key, 0, 4 * 4096));
    CHECK_OK(reg.try_register_region(shmreg::registration::system("ro", key, 0, 4096).flags(shmreg::flags::readonly)));
    shmreg::region_ref ref = reg.try_acquire("g", 4096, 2 * 4096).value();
    char buf[64];
    CHECK_FAILS(ref.try_read_into(buf, sizeof buf), SHMREG_ERR_UNSUPPORTED, nullptr);
    CHECK_OK(shmreg::try_guard_install());
    CHECK_OK(shmreg::try_guard_install()); /* once; a second call changes nothing */

    CHECK_OK(ref.try_read_into(buf, sizeof buf, 100));
    bool same = true;
    for (size_t i = 0; i < sizeof buf; i++)
        same = same && static_cast<uint8_t>(buf[i]) == tu_pattern(25, 4096 + 100 + i);
    CHECK(same);
    const char msg[] = "written through a guarded copy";
    CHECK_OK(ref.try_write_from(msg, sizeof msg, 8));
    CHECK(std::memcmp(static_cast<const char *>(ref.addr()) + 8, msg, sizeof msg) == 0);
    CHECK_FAILS(ref.try_read_into(buf, 2, 2 * 4096 - 1), SHMREG_ERR_OUT_OF_BOUNDS, nullptr);
    CHECK_OK(ref.try_read_into(buf, 0, 2 * 4096)); /* nothing, at the end */
    shmreg::region_ref ro = reg.try_acquire("ro", 0, 16).value();
    CHECK_OK(ro.try_read_into(buf, 16));
    CHECK_FAILS(ro.try_write_from(buf, 16), SHMREG_ERR_INVALID_ARG, nullptr);
    shmreg::region_ref empty;
    CHECK_FAILS(empty.try_read_into(buf, 1), SHMREG_ERR_INVALID_ARG, nullptr);

    /* The client truncates its object under the mapping. */
    shrink(key, 4096);
    CHECK_FAILS(ref.try_read_into(buf, sizeof buf, 4096), SHMREG_ERR_FAULT, nullptr);
    CHECK_FAILS(ref.try_write_from(msg, sizeof msg, 4096), SHMREG_ERR_FAULT, nullptr);
    CHECK_OK(ro.try_read_into(buf, 16)); /* the first page is still there */
#if SHMREG_CPP_EXCEPTIONS
    bool thrown = false;
    try {
        ref.read_into(buf, sizeof buf, 4096);
    } catch (const shmreg::error &e) {
        thrown = e.code() == SHMREG_ERR_FAULT && std::strstr(e.what(), "'g'") != nullptr;
    }
    CHECK(thrown);
#endif
}

static void test_send_region_arguments()
{
    /* The wire is tested in tests/fd_passing; here, that the wrapper hands
     * its arguments over and returns the library's answer. */
    CHECK_FAILS(shmreg::try_send_region(-1, "r", 0, 0, 16), SHMREG_ERR_INVALID_ARG, nullptr);
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
    close(sv[1]); /* the server is gone: no answer */
    int fd = shmreg::try_memfd_create("cpp-send", 4096).value();
    CHECK_FAILS(shmreg::try_send_region(sv[0], std::string("r"), fd, 0, 16), SHMREG_ERR_SYSTEM, nullptr);
    close(fd);
    close(sv[0]);
}

#if SHMREG_CPP_EXCEPTIONS
static void test_throwing_forms()
{
    objects o;
    const char *key = o.make(4096, 17);
    shmreg::registry reg(shmreg::config().pinning(shmreg::pin_policy::never));
    CHECK(reg);
    reg.register_system("in", key, 0, 4096);
    reg.register_region(shmreg::registration::system("t", key, 0, 8).tag("x"));
    {
        shmreg::region_ref ref = reg.acquire("in", 0, 16);
        CHECK(ref.size() == 16);
        CHECK(reg.status("in").front().references == 1);
        CHECK(reg.status_matching(shmreg::filter().tag("x")).size() == 1);
        CHECK(reg.stats().references == 1);
    }

    bool thrown = false;
    try {
        (void)reg.acquire("absent", 0, 1);
    } catch (const shmreg::error &e) {
        thrown = e.code() == SHMREG_ERR_NOT_FOUND &&
                 std::strcmp(e.what(), "Unable to find shared memory region: 'absent'") == 0;
    }
    CHECK(thrown);

    thrown = false;
    try {
        reg.register_system("in", key, 0, 1);
    } catch (const std::runtime_error &e) { /* catchable as the standard base */
        thrown = std::strcmp(e.what(), "shared memory region 'in' already in manager") == 0;
    }
    CHECK(thrown);

    thrown = false;
    try {
        (void)reg.status("in", shmreg::kind::cuda);
    } catch (const shmreg::error &e) {
        thrown = e.code() == SHMREG_ERR_WRONG_KIND;
    }
    CHECK(thrown);

    thrown = false;
    try {
        (void)reg.acquire("in", 4000, 200);
    } catch (const shmreg::error &e) {
        thrown = e.code() == SHMREG_ERR_OUT_OF_BOUNDS;
    }
    CHECK(thrown);

    /* value() of a failed result throws its error. */
    thrown = false;
    auto failed = reg.try_acquire("absent", 0, 1);
    try {
        (void)failed.value();
    } catch (const shmreg::error &e) {
        thrown = e.code() == SHMREG_ERR_NOT_FOUND;
    }
    CHECK(thrown);

    thrown = false;
    try {
        shmreg::registry bad(shmreg::config().reserved_key_prefix(""));
    } catch (const shmreg::error &e) {
        thrown = e.code() == SHMREG_ERR_INVALID_ARG;
    }
    CHECK(thrown);

    if ((shmreg::cuda_available() & SHMREG_CUDA_DEVICE) == 0) {
        unsigned char handle[64] = {0};
        thrown = false;
        try {
            reg.register_cuda_ipc("gpu", handle, sizeof handle, 0, 4096);
        } catch (const shmreg::error &e) {
            thrown = e.code() == SHMREG_ERR_UNSUPPORTED;
        }
        CHECK(thrown);
    }

    /* The 1.1 calls' throwing forms. */
    {
        shmreg::region_ref scoped = reg.acquire_matching(shmreg::filter().name("t").tag("x"), 0, 8);
        CHECK(scoped.size() == 8);
        char b[8];
        shmreg::guard_install();
        scoped.read_into(b, sizeof b);
        scoped.write_from(b, sizeof b);
        int fd = shmreg::memfd_create("cpp-throwing", 4096);
        reg.register_system_fd("fd", fd, 0, 4096);
        close(fd);
        thrown = false;
        try {
            (void)reg.acquire_matching(shmreg::filter().name("t").tag("y"), 0, 8);
        } catch (const shmreg::error &e) {
            thrown = e.code() == SHMREG_ERR_NOT_FOUND;
        }
        CHECK(thrown);
        thrown = false;
        try {
            shmreg::send_region(-1, "r", 0, 0, 1);
        } catch (const shmreg::error &e) {
            thrown = e.code() == SHMREG_ERR_INVALID_ARG;
        }
        CHECK(thrown);
    }

    reg.unregister("t");
    reg.unregister_matching(shmreg::filter().name("in"));
    reg.unregister_all();
    CHECK(reg.status().empty());
}
#endif

/* ----------------------------------------------------------------- runner */

static int tests_run;

static void run(const char *name, void (*fn)())
{
    int before = checks_failed;
    int fds = tu_count_fds(), maps = tu_count_shm_maps(nullptr);
    fn();
    /* Nothing left open or mapped. */
    CHECK(tu_count_fds() == fds);
    CHECK(tu_wait_shm_maps(nullptr, maps, 5000) == maps); /* reclaim threads */
    tests_run++;
    bool ok = checks_failed == before;
    if (!ok)
        tests_failed++;
    std::printf("[%s] %s\n", ok ? "  OK  " : " FAIL ", name);
}

#define RUN(fn) run(#fn, fn)

int main()
{
    /* What the library and liburcu set up once per process, out of the
     * per-test counts. */
    {
        shmreg::registry warm = new_registry();
        (void)shmreg::cuda_available();
    }
    RUN(test_registry_lifecycle);
    RUN(test_references_follow_copies_moves_and_destructors);
    RUN(test_a_reference_outlives_its_registry);
    RUN(test_views);
    RUN(test_errors_carry_code_and_message);
    RUN(test_status_entries_are_values);
    RUN(test_filters_with_tags);
    RUN(test_stats);
    RUN(test_cuda_calls_without_cuda);
    RUN(test_config_carries_the_1_1_settings);
    RUN(test_inline_reclaim_unmaps_in_the_releasing_thread);
    RUN(test_cache_and_the_1_1_counters);
    RUN(test_descriptor_regions);
    RUN(test_tag_scoped_acquire);
    RUN(test_guarded_copies); /* installs the guard: the throwing forms' test comes after */
    RUN(test_send_region_arguments);
#if SHMREG_CPP_EXCEPTIONS
    RUN(test_throwing_forms);
#endif
    std::printf("cpp-header (%s, libshmreg %s): %d passed, %d failed\n", MODE, shmreg::version(),
                tests_run - tests_failed, tests_failed);
    return tests_failed == 0 ? 0 : 1;
}
