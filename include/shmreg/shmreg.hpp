/*
 * libshmreg for C++17: a header-only layer over <shmreg/shmreg.h>.
 *
 * The C API stays the one contract. This header adds no exported symbol and
 * no semantics of its own: every function here is one C call (or one C call
 * and a copy), and each C type stays reachable through handle(). It adds
 * RAII and value types:
 *
 *   shmreg::registry     owns one shmreg_registry (move-only; destroys it)
 *   shmreg::region_ref   owns one counted reference (copy = shmreg_retain,
 *                        destructor = shmreg_release, move = hand-over),
 *                        and the guarded copies in and out of its view
 *   shmreg::view         what a reference lets the caller touch
 *   shmreg::region_status, shmreg::stats   snapshots, plain values
 *   shmreg::config, shmreg::registration, shmreg::filter
 *                        builders over the C structs (the 1.0 idiom)
 *   shmreg::error        a code and the library's message
 *   shmreg::result<T>    a T or an error, never thrown
 *
 * Two forms of every call that can fail:
 *
 *   auto r = reg.try_acquire("input0", 0, 64);    // never throws
 *   if (!r.ok()) return to_status(r.error().code(), r.error().what());
 *   shmreg::region_ref ref = std::move(r).value();
 *
 *   shmreg::region_ref ref = reg.acquire("input0", 0, 64);  // throws shmreg::error
 *
 * The try_ forms return result<T> and work with -fno-exceptions. The plain
 * forms exist only when exceptions are enabled (__cpp_exceptions, and
 * SHMREG_CPP_NO_EXCEPTIONS not defined); they throw shmreg::error, derived
 * from std::runtime_error. Calls that cannot fail (retain, release, destroy,
 * moves) are noexcept. Without exceptions an allocation failure (a status
 * array, a message) ends the program, as everywhere in such a build. Every
 * translation unit of one program must agree on whether the throwing forms
 * exist (they are members of shmreg::registry).
 *
 * String arguments (shmreg::cstr) take a const char * or a std::string
 * without copying; a std::string_view is not accepted, as it need not end
 * in NUL.
 *
 * Lifetime and threads are the C API's (see shmreg.h): every call is
 * thread-safe; a view is valid while its region_ref holds the reference; a
 * region_ref may outlive the registry it came from. The last release of a
 * region makes no system call under the default reclaim mode
 * (reclaim_mode::background): the registry's reclaim thread unmaps it
 * afterwards; under reclaim_mode::inline_ the releasing thread unmaps it, as
 * 1.0 did. A registry must not be destroyed while another thread still
 * calls into it.
 *
 * Memory that an untrusted client registered (a POSIX shm key, an unsealed
 * descriptor) can be truncated under the mapping; reading it through addr()
 * then raises SIGBUS. Read and write such regions with the guarded copies
 * (region_ref::try_read_into, try_write_from, after guard_install()), which
 * turn that fault into SHMREG_ERR_FAULT for the one request.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef SHMREG_SHMREG_HPP
#define SHMREG_SHMREG_HPP

#include <shmreg/shmreg.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#if defined(__cpp_exceptions) && !defined(SHMREG_CPP_NO_EXCEPTIONS)
#define SHMREG_CPP_EXCEPTIONS 1
#else
#define SHMREG_CPP_EXCEPTIONS 0
#endif

namespace shmreg {

/* ------------------------------------------------------------ small types */

/* The memory a region lives in (shmreg_kind). */
enum class kind : int {
    any = SHMREG_KIND_ANY,
    system = SHMREG_KIND_SYSTEM,
    cuda = SHMREG_KIND_CUDA,
};

/* What unregister does to a region still referenced (shmreg_policy). */
enum class busy_policy : int {
    defer = SHMREG_POLICY_DEFER,
    detach = SHMREG_POLICY_DETACH,
    refuse = SHMREG_POLICY_REFUSE,
};

/* Whether system regions are page-locked (shmreg_pin_policy). */
enum class pin_policy : int {
    automatic = SHMREG_PIN_AUTO,
    never = SHMREG_PIN_NEVER,
    always = SHMREG_PIN_ALWAYS,
};

/* Where a registration's memory comes from (shmreg_source). */
enum class source : int {
    shm = SHMREG_SOURCE_SHM,
    cuda_ipc = SHMREG_SOURCE_CUDA_IPC,
    cuda_fd = SHMREG_SOURCE_CUDA_FD,
    fd = SHMREG_SOURCE_FD, /* 1.1: a window of a descriptor (a memfd) */
};

/* 1.1: who unmaps a region whose last reference is released
 * (shmreg_reclaim). inline_ is SHMREG_RECLAIM_INLINE (inline is a keyword). */
enum class reclaim_mode : int {
    /* The release hands the region to the registry's reclaim thread, which
     * unpins, unmaps and closes it: the releasing thread makes no system
     * call and takes no lock that register or unregister hold. The default. */
    background = SHMREG_RECLAIM_BACKGROUND,
    /* The last release unmaps in the releasing thread (1.0's behaviour). */
    inline_ = SHMREG_RECLAIM_INLINE,
};

/* Registration flags, OR-ed (SHMREG_READONLY, SHMREG_PIN, SHMREG_NO_PIN). */
namespace flags {
inline constexpr unsigned readonly = SHMREG_READONLY;
inline constexpr unsigned pin = SHMREG_PIN;
inline constexpr unsigned no_pin = SHMREG_NO_PIN;
} // namespace flags

/* A NUL-terminated string argument, taken without a copy from a C string or
 * a std::string; it must stay alive for the call only (the library copies
 * what it keeps). */
class cstr {
  public:
    cstr(const char *s) noexcept : p_(s) {}
    cstr(const std::string &s) noexcept : p_(s.c_str()) {}
    const char *c_str() const noexcept { return p_; }

  private:
    const char *p_;
};

/* The library loaded at run time, "MAJOR.MINOR.PATCH" (shmreg_version). */
inline const char *version() noexcept { return shmreg_version(); }

/* What this process can do with CUDA: SHMREG_CUDA_* bits. */
inline unsigned cuda_available() noexcept { return shmreg_cuda_available(); }

/* ----------------------------------------------------------------- errors */

/*
 * A failed call: its code and the message the library left for this thread
 * (shmreg_last_error), copied at the failure, so it stays valid whatever the
 * thread calls next. Thrown by the throwing forms; held by a failed result.
 */
class error : public std::runtime_error {
  public:
    error(shmreg_err code, const char *message) : std::runtime_error(message), code_(code) {}

    /* The code of the failure that this thread's last failing call left. */
    static error last(shmreg_err code) { return error(code, shmreg_last_error()); }

    shmreg_err code() const noexcept { return code_; }
    /* "SHMREG_ERR_NOT_FOUND" */
    const char *name() const noexcept { return shmreg_err_name(code_); }
    /* The code in general, not this failure (shmreg_err_description). */
    const char *description() const noexcept { return shmreg_err_description(code_); }
    /* The library's message: what(). */
    const char *message() const noexcept { return what(); }

  private:
    shmreg_err code_;
};

namespace detail {
[[noreturn]] inline void fail(const shmreg::error &e)
{
#if SHMREG_CPP_EXCEPTIONS
    throw e;
#else
    std::fprintf(stderr, "shmreg: value() of a failed result: %s: %s\n", e.name(), e.what());
    std::abort();
#endif
}
} // namespace detail

/*
 * The outcome of a try_ call: a T, or the error. value() on a failed result
 * throws its error (or, without exceptions, prints it and aborts): check
 * ok() first where that must not happen.
 */
template <class T> class [[nodiscard]] result {
  public:
    result(T v) noexcept(std::is_nothrow_move_constructible_v<T>) : v_(std::in_place_index<0>, std::move(v)) {}
    result(shmreg::error e) noexcept : v_(std::in_place_index<1>, std::move(e)) {}

    bool ok() const noexcept { return v_.index() == 0; }
    explicit operator bool() const noexcept { return ok(); }
    /* The error; only on a failed result. */
    const shmreg::error &error() const noexcept { return *std::get_if<1>(&v_); }
    /* The code: SHMREG_OK on success. */
    shmreg_err code() const noexcept { return ok() ? SHMREG_OK : error().code(); }

    T &value() &
    {
        check();
        return *std::get_if<0>(&v_);
    }
    const T &value() const &
    {
        check();
        return *std::get_if<0>(&v_);
    }
    T &&value() &&
    {
        check();
        return std::move(*std::get_if<0>(&v_));
    }
    T &operator*() & { return value(); }
    const T &operator*() const & { return value(); }
    T &&operator*() && { return std::move(*this).value(); }
    T *operator->() { return &value(); }
    const T *operator->() const { return &value(); }

  private:
    void check() const
    {
        if (!ok())
            detail::fail(error());
    }
    std::variant<T, shmreg::error> v_;
};

/* A call that returns nothing but may fail. */
template <> class [[nodiscard]] result<void> {
  public:
    result() noexcept = default;
    result(shmreg::error e) noexcept : v_(std::in_place_index<1>, std::move(e)) {}

    bool ok() const noexcept { return v_.index() == 0; }
    explicit operator bool() const noexcept { return ok(); }
    const shmreg::error &error() const noexcept { return *std::get_if<1>(&v_); }
    shmreg_err code() const noexcept { return ok() ? SHMREG_OK : error().code(); }
    /* Nothing to return: throws (or aborts) on a failed result. */
    void value() const
    {
        if (!ok())
            detail::fail(error());
    }

  private:
    std::variant<std::monostate, shmreg::error> v_;
};

namespace detail {
/* A C call's code as a result<void>, with this thread's message on failure. */
inline result<void> check(shmreg_err e)
{
    if (e != SHMREG_OK)
        return shmreg::error::last(e);
    return {};
}
} // namespace detail

/* ------------------------------------------------------------- builders */

namespace detail {
/* A string a C struct takes as const char *, where unset means NULL. */
class optional_cstr {
  public:
    void assign(std::string v)
    {
        s_ = std::move(v);
        set_ = true;
    }
    const char *get() const noexcept { return set_ ? s_.c_str() : nullptr; }

  private:
    std::string s_;
    bool set_ = false;
};
} // namespace detail

/*
 * Registry settings (shmreg_config), starting from shmreg_config_init's
 * defaults. The strings and uids are copied here and again by the library.
 */
class config {
  public:
    config() noexcept { shmreg_config_init(&c_); }

    config &busy(shmreg::busy_policy p) noexcept
    {
        c_.busy_policy = static_cast<shmreg_policy>(p);
        return *this;
    }
    config &pinning(shmreg::pin_policy p) noexcept
    {
        c_.pin_policy = static_cast<shmreg_pin_policy>(p);
        return *this;
    }
    /* A key prefix that clients may not register (the deny-list). */
    config &reserved_key_prefix(std::string prefix)
    {
        prefixes_.push_back(std::move(prefix));
        return *this;
    }
    /* A uid a system region's shm object may be owned by (the allow-list). */
    config &allowed_owner_uid(uid_t uid)
    {
        uids_.push_back(uid);
        return *this;
    }
    /* Messages no call can return; fn must not call back into the registry. */
    config &log(shmreg_log_fn fn, void *user) noexcept
    {
        c_.log_fn = fn;
        c_.log_user = user;
        return *this;
    }
    config &max_regions(std::size_t n) noexcept
    {
        c_.max_regions = n;
        return *this;
    }
    config &max_mapped_bytes(std::size_t n) noexcept
    {
        c_.max_mapped_bytes = n;
        return *this;
    }
    config &max_pinned_bytes(std::size_t n) noexcept
    {
        c_.max_pinned_bytes = n;
        return *this;
    }
    /* 1.1: who unmaps a released region (default reclaim_mode::background). */
    config &reclaim(shmreg::reclaim_mode m) noexcept
    {
        c_.reclaim = static_cast<shmreg_reclaim>(m);
        return *this;
    }
    /* 1.1: the registration cache's size in bytes; 0 (default) turns it off.
     * See shmreg_config.cache_bytes for what may be reused. */
    config &cache_bytes(std::size_t n) noexcept
    {
        c_.cache_bytes = n;
        return *this;
    }
    /* 1.1: let a descriptor registration take an fd without F_SEAL_SHRINK;
     * its regions must then be read with the guarded copies. */
    config &accept_unsealed_fds(bool yes) noexcept
    {
        c_.accept_unsealed_fds = yes ? 1 : 0;
        return *this;
    }

    /* The C struct, pointing into this object: valid while it lives
     * unchanged. It rebuilds a pointer array inside this object, so one
     * config must not be handed over by two threads at once. */
    shmreg_config handle() const
    {
        shmreg_config c = c_;
        ptrs_.clear();
        for (const std::string &p : prefixes_)
            ptrs_.push_back(p.c_str());
        if (!ptrs_.empty()) {
            ptrs_.push_back(nullptr);
            c.reserved_key_prefixes = ptrs_.data();
        }
        c.allowed_owner_uids = uids_.empty() ? nullptr : uids_.data();
        c.allowed_owner_uid_count = uids_.size();
        return c;
    }

  private:
    shmreg_config c_;
    std::vector<std::string> prefixes_;
    std::vector<uid_t> uids_;
    mutable std::vector<const char *> ptrs_;
};

/*
 * One registration (shmreg_registration), starting from
 * shmreg_registration_init's defaults; the factories fill what each source
 * needs. Strings and the IPC handle's bytes are copied into this object.
 */
class registration {
  public:
    registration() noexcept { shmreg_registration_init(&r_); }

    /* The window [offset, offset + byte_size) of the POSIX shm object key. */
    static registration system(std::string name, std::string key, std::size_t offset,
                               std::size_t byte_size)
    {
        registration r;
        r.name(std::move(name)).key(std::move(key)).offset(offset).byte_size(byte_size);
        return r;
    }
    /* GPU memory exported as a legacy CUDA IPC handle (64 bytes). */
    static registration cuda_ipc(std::string name, const void *raw_handle,
                                 std::size_t raw_handle_size, int device_id,
                                 std::size_t byte_size)
    {
        registration r;
        r.from(shmreg::source::cuda_ipc).name(std::move(name)).raw_handle(raw_handle, raw_handle_size);
        r.device(device_id).byte_size(byte_size);
        return r;
    }
    /* 1.1: the window [offset, offset + byte_size) of a descriptor (a
     * memfd); the caller keeps fd (shmreg_register_system_fd). */
    static registration system_fd(std::string name, int fd, std::size_t offset,
                                  std::size_t byte_size)
    {
        registration r;
        r.from(shmreg::source::fd).name(std::move(name)).fd(fd).offset(offset);
        r.byte_size(byte_size);
        return r;
    }
    /* A CUDA VMM allocation exported as a descriptor; the caller keeps fd. */
    static registration cuda_fd(std::string name, int fd, int device_id, std::size_t byte_size)
    {
        registration r;
        r.from(shmreg::source::cuda_fd).name(std::move(name)).fd(fd).device(device_id);
        r.byte_size(byte_size);
        return r;
    }

    registration &from(shmreg::source s) noexcept
    {
        r_.source = static_cast<shmreg_source>(s);
        return *this;
    }
    registration &name(std::string v)
    {
        name_.assign(std::move(v));
        return *this;
    }
    registration &byte_size(std::size_t v) noexcept
    {
        r_.byte_size = v;
        return *this;
    }
    /* Replaces the flags (shmreg::flags::readonly | ...). */
    registration &flags(unsigned v) noexcept
    {
        r_.flags = v;
        return *this;
    }
    /* The owner tag that filters select on (unset: no tag). */
    registration &tag(std::string v)
    {
        tag_.assign(std::move(v));
        return *this;
    }
    registration &key(std::string v)
    {
        key_.assign(std::move(v));
        return *this;
    }
    registration &offset(std::size_t v) noexcept
    {
        r_.offset = v;
        return *this;
    }
    registration &device(int v) noexcept
    {
        r_.device_id = v;
        return *this;
    }
    registration &raw_handle(const void *bytes, std::size_t size)
    {
        const char *b = static_cast<const char *>(bytes);
        handle_bytes_.assign(b, b == nullptr ? b : b + size);
        has_handle_ = bytes != nullptr;
        return *this;
    }
    registration &fd(int v) noexcept
    {
        r_.fd = v;
        return *this;
    }

    /* The C struct, pointing into this object: valid while it lives
     * unchanged. */
    shmreg_registration handle() const noexcept
    {
        shmreg_registration r = r_;
        r.name = name_.get();
        r.tag = tag_.get();
        r.key = key_.get();
        r.raw_handle = has_handle_ ? handle_bytes_.data() : nullptr;
        r.raw_handle_size = has_handle_ ? handle_bytes_.size() : 0;
        return r;
    }

  private:
    shmreg_registration r_;
    detail::optional_cstr name_, tag_, key_;
    std::string handle_bytes_;
    bool has_handle_ = false;
};

/*
 * Which regions acquire_matching, unregister_matching and status_matching
 * act on (shmreg_filter): every region unless a name, kind or tag narrows
 * it. With a tag, a region of another tag (or none) answers exactly as an
 * absent one: the tenant-scoped form of every call.
 */
class filter {
  public:
    filter() noexcept = default;

    filter &name(std::string v)
    {
        name_.assign(std::move(v));
        return *this;
    }
    filter &of_kind(shmreg::kind k) noexcept
    {
        kind_ = k;
        return *this;
    }
    /* Only regions registered with this tag; others answer as absent. */
    filter &tag(std::string v)
    {
        tag_.assign(std::move(v));
        return *this;
    }

    /* The C struct, pointing into this object: valid while it lives
     * unchanged. */
    shmreg_filter handle() const noexcept
    {
        shmreg_filter f;
        shmreg_filter_init(&f);
        f.name = name_.get();
        f.kind = static_cast<shmreg_kind>(kind_);
        f.tag = tag_.get();
        return f;
    }

  private:
    detail::optional_cstr name_, tag_;
    shmreg::kind kind_ = shmreg::kind::any;
};

/* ---------------------------------------------------- views and references */

/* What an acquired reference lets the caller touch (shmreg_view): size()
 * bytes at addr(), a host pointer for SYSTEM, a device pointer valid on
 * device() for CUDA. Valid while the region_ref it came from holds its
 * reference. */
class view {
  public:
    view() noexcept : v_() { v_.device_id = -1; }
    explicit view(const shmreg_view &v) noexcept : v_(v) {}

    void *addr() const noexcept { return v_.addr; }
    std::size_t size() const noexcept { return v_.byte_size; }
    shmreg::kind kind() const noexcept { return static_cast<shmreg::kind>(v_.kind); }
    /* The CUDA device, -1 for SYSTEM. */
    int device() const noexcept { return v_.device_id; }
    bool pinned() const noexcept { return v_.pinned != 0; }
    /* false: registered read-only; a write through addr() faults. */
    bool writable() const noexcept { return v_.writable != 0; }
    const shmreg_view &handle() const noexcept { return v_; }

  private:
    shmreg_view v_;
};

/* 1.1: install the process-wide SIGBUS handler that guarded copies need
 * (shmreg_guard_install; once per process, later calls do nothing). */
inline result<void> try_guard_install() { return detail::check(shmreg_guard_install()); }

/*
 * One counted reference to a region, with the view it was acquired with.
 * Copying retains (one more reference, the same view), destroying releases,
 * moving hands the reference over and leaves the source empty. Releasing
 * makes no system call under reclaim_mode::background: the last release of
 * a region hands it to the registry's reclaim thread, which unmaps it; under
 * reclaim_mode::inline_ the releasing thread unmaps it.
 *
 * try_read_into and try_write_from are the guarded copies (1.1): the only
 * safe way to touch a system region whose client may truncate its object.
 */
class region_ref {
  public:
    region_ref() noexcept = default;
    /* Adopt one reference the caller holds (from shmreg_acquire). */
    region_ref(shmreg_region *ref, const shmreg_view &v) noexcept : ref_(ref), view_(v) {}

    /* shmreg_retain cannot fail on a reference the caller holds. */
    region_ref(const region_ref &o) noexcept : ref_(shmreg_retain(o.ref_)), view_(o.view_) {}
    region_ref(region_ref &&o) noexcept
        : ref_(std::exchange(o.ref_, nullptr)), view_(std::exchange(o.view_, shmreg::view()))
    {
    }
    region_ref &operator=(const region_ref &o) noexcept
    {
        region_ref copy(o);
        swap(copy);
        return *this;
    }
    region_ref &operator=(region_ref &&o) noexcept
    {
        region_ref moved(std::move(o));
        swap(moved);
        return *this;
    }
    ~region_ref() { shmreg_release(ref_); }

    void swap(region_ref &o) noexcept
    {
        std::swap(ref_, o.ref_);
        std::swap(view_, o.view_);
    }
    /* Release the reference now; the view is invalid from here on. */
    void reset() noexcept
    {
        region_ref gone(std::move(*this));
    }
    /* Give the C reference to the caller, who must shmreg_release it. */
    shmreg_region *disown() noexcept
    {
        view_ = shmreg::view();
        return std::exchange(ref_, nullptr);
    }

    explicit operator bool() const noexcept { return ref_ != nullptr; }
    const shmreg::view &view() const noexcept { return view_; }
    void *addr() const noexcept { return view_.addr(); }
    std::size_t size() const noexcept { return view_.size(); }
    shmreg_region *handle() const noexcept { return ref_; }

    /* Guarded copy of n bytes from the view, starting offset bytes into it,
     * into dst (shmreg_copy_from_view). SYSTEM views only; offset + n within
     * size(). FAULT when the client truncated its object (some of dst may
     * be written), UNSUPPORTED before guard_install(), INVALID_ARG on an
     * empty reference or a CUDA view, OUT_OF_BOUNDS. */
    result<void> try_read_into(void *dst, std::size_t n, std::size_t offset = 0) const
    {
        return detail::check(shmreg_copy_from_view(ref_, &view_.handle(), offset, dst, n));
    }
    /* Guarded copy of n bytes from src into the view at offset
     * (shmreg_copy_to_view); as try_read_into, and INVALID_ARG for a view
     * that is not writable(). */
    result<void> try_write_from(const void *src, std::size_t n, std::size_t offset = 0) const
    {
        return detail::check(shmreg_copy_to_view(ref_, &view_.handle(), offset, src, n));
    }
#if SHMREG_CPP_EXCEPTIONS
    void read_into(void *dst, std::size_t n, std::size_t offset = 0) const
    {
        try_read_into(dst, n, offset).value();
    }
    void write_from(const void *src, std::size_t n, std::size_t offset = 0) const
    {
        try_write_from(src, n, offset).value();
    }
#endif

  private:
    shmreg_region *ref_ = nullptr;
    shmreg::view view_;
};

inline void swap(region_ref &a, region_ref &b) noexcept { a.swap(b); }

/* ------------------------------------------------------- status and stats */

/* One region as status saw it (shmreg_region_status), copied out: it owns
 * its strings and outlives the region. An empty key means a CUDA region or
 * a descriptor region; an empty tag, a region registered without one. */
struct region_status {
    std::string name;
    std::string key;
    shmreg::kind kind = shmreg::kind::any;
    std::size_t offset = 0;
    std::size_t byte_size = 0;
    int device_id = -1;
    unsigned references = 0;
    bool pending_unregister = false;
    std::uint64_t generation = 0;
    bool pinned = false;
    unsigned flags = 0;
    std::string tag;
    /* 1.1: regions on this region's mapping (this one included), and
     * whether the registration reused a cached or live mapping. */
    std::size_t mapping_regions = 0;
    bool mapping_reused = false;

    region_status() = default;
    explicit region_status(const shmreg_region_status &s)
        : name(s.name ? s.name : ""), key(s.key ? s.key : ""),
          kind(static_cast<shmreg::kind>(s.kind)), offset(s.offset), byte_size(s.byte_size),
          device_id(s.device_id), references(s.references),
          pending_unregister(s.pending_unregister != 0), generation(s.generation),
          pinned(s.pinned != 0), flags(s.flags), tag(s.tag ? s.tag : ""),
          mapping_regions(s.mapping_regions), mapping_reused(s.mapping_reused != 0)
    {
    }
};

/* A registry's counters (shmreg_stats), a plain C struct: 1.1 added
 * reclaim_waiting_bytes, cached_bytes, cached_mappings, cache_hits,
 * cache_misses and cache_evictions. shmreg_registry_stats says which
 * fields are exact together. */
using stats = shmreg_stats;

namespace detail {
/* Copy a C status array into values and free it, on every path. */
inline result<std::vector<region_status>> take_status(shmreg_err e, shmreg_region_status *st,
                                                      std::size_t n)
{
    if (e != SHMREG_OK)
        return shmreg::error::last(e);
    struct owner {
        shmreg_region_status *st;
        std::size_t n;
        ~owner() { shmreg_status_free(st, n); }
    } own{st, n};
    std::vector<region_status> out;
    out.reserve(n);
    for (std::size_t i = 0; i < n; i++)
        out.emplace_back(st[i]);
    // Moved explicitly: C++17's implicit move on return does not reach
    // result's converting constructor.
    return result<std::vector<region_status>>(std::move(out));
}
} // namespace detail

/* --------------------------------------------------------------- registry */

/*
 * Owns one registry: destroyed (shmreg_registry_destroy) with this object.
 * Move-only. Create it with registry::create (no exceptions) or the
 * throwing constructor; a default-constructed or moved-from registry holds
 * none, and its calls fail with SHMREG_ERR_INVALID_ARG.
 *
 * Each call is the C call of the same name (try_acquire: shmreg_acquire):
 * its arguments, errors and thread-safety are documented in shmreg.h. The
 * calls may run from any thread at once; moving, reset and destruction may
 * not overlap any other call on the same object.
 */
class registry {
  public:
    registry() noexcept = default;
    /* Adopt a registry the caller created. */
    explicit registry(shmreg_registry *reg) noexcept : reg_(reg) {}
#if SHMREG_CPP_EXCEPTIONS
    /* Create one with these settings, or throw shmreg::error. */
    explicit registry(const shmreg::config &cfg) : registry(create(cfg).value()) {}
#endif
    registry(const registry &) = delete;
    registry &operator=(const registry &) = delete;
    registry(registry &&o) noexcept : reg_(std::exchange(o.reg_, nullptr)) {}
    registry &operator=(registry &&o) noexcept
    {
        registry moved(std::move(o));
        std::swap(reg_, moved.reg_);
        return *this;
    }
    /* Unregisters everything; references still held stay valid (see
     * shmreg_registry_destroy). */
    ~registry() { shmreg_registry_destroy(reg_); }

    static result<registry> create(const shmreg::config &cfg = shmreg::config())
    {
        shmreg_config c = cfg.handle();
        shmreg_registry *reg = nullptr;
        shmreg_err e = shmreg_registry_create(&c, &reg);
        if (e != SHMREG_OK)
            return shmreg::error::last(e);
        return registry(reg);
    }

    /* Destroy the registry now. */
    void reset() noexcept
    {
        registry gone(std::move(*this));
    }
    /* Give the C registry to the caller, who must destroy it. */
    shmreg_registry *disown() noexcept { return std::exchange(reg_, nullptr); }
    shmreg_registry *handle() const noexcept { return reg_; }
    explicit operator bool() const noexcept { return reg_ != nullptr; }

    /* ------------------------------------- the calls that never throw */

    result<void> try_register_region(const shmreg::registration &r)
    {
        shmreg_registration c = r.handle();
        return detail::check(shmreg_register(reg_, &c));
    }
    result<void> try_register_system(cstr name, cstr key, std::size_t offset,
                                     std::size_t byte_size, unsigned fl = 0)
    {
        return detail::check(
            shmreg_register_system(reg_, name.c_str(), key.c_str(), offset, byte_size, fl));
    }
    /* 1.1: a window of a descriptor the caller keeps (a memfd received with
     * try_recv_fd); sealed against shrinking unless the config says
     * accept_unsealed_fds. */
    result<void> try_register_system_fd(cstr name, int fd, std::size_t offset,
                                        std::size_t byte_size, unsigned fl = 0)
    {
        return detail::check(
            shmreg_register_system_fd(reg_, name.c_str(), fd, offset, byte_size, fl));
    }
    result<void> try_register_cuda_ipc(cstr name, const void *raw_handle,
                                       std::size_t raw_handle_size, int device_id,
                                       std::size_t byte_size, unsigned fl = 0)
    {
        return detail::check(shmreg_register_cuda_ipc(reg_, name.c_str(), raw_handle,
                                                      raw_handle_size, device_id, byte_size, fl));
    }
    result<void> try_register_cuda_fd(cstr name, int fd, int device_id, std::size_t byte_size,
                                      unsigned fl = 0)
    {
        return detail::check(
            shmreg_register_cuda_fd(reg_, name.c_str(), fd, device_id, byte_size, fl));
    }

    /* A reference to [offset, offset + byte_size) of the region `name`. */
    result<region_ref> try_acquire(cstr name, std::size_t offset, std::size_t byte_size)
    {
        shmreg_region *ref = nullptr;
        shmreg_view v;
        shmreg_err e = shmreg_acquire(reg_, name.c_str(), offset, byte_size, &ref, &v);
        if (e != SHMREG_OK)
            return shmreg::error::last(e);
        return region_ref(ref, v); // the reference shmreg_acquire took moves into the result
    }
    /* 1.1: the tenant-scoped acquire (shmreg_acquire_matching): f names the
     * region; with f's tag, another tag's region is NOT_FOUND, exactly as an
     * absent one; with f's kind, the other kind is WRONG_KIND. */
    result<region_ref> try_acquire_matching(const shmreg::filter &f, std::size_t offset,
                                            std::size_t byte_size)
    {
        shmreg_filter c = f.handle();
        shmreg_region *ref = nullptr;
        shmreg_view v;
        shmreg_err e = shmreg_acquire_matching(reg_, &c, offset, byte_size, &ref, &v);
        if (e != SHMREG_OK)
            return shmreg::error::last(e);
        return region_ref(ref, v); // the reference taken moves into the result
    }

    result<void> try_unregister(cstr name, shmreg::kind k = shmreg::kind::any)
    {
        return detail::check(shmreg_unregister(reg_, name.c_str(), static_cast<shmreg_kind>(k)));
    }
    result<void> try_unregister_all(shmreg::kind k = shmreg::kind::any)
    {
        return detail::check(shmreg_unregister_all(reg_, static_cast<shmreg_kind>(k)));
    }
    result<void> try_unregister_matching(const shmreg::filter &f)
    {
        shmreg_filter c = f.handle();
        return detail::check(shmreg_unregister_matching(reg_, &c));
    }

    /* Every region of kind k. */
    result<std::vector<region_status>> try_status(shmreg::kind k = shmreg::kind::any)
    {
        shmreg_region_status *st = nullptr;
        std::size_t n = 0;
        shmreg_err e = shmreg_status(reg_, nullptr, static_cast<shmreg_kind>(k), &st, &n);
        return detail::take_status(e, st, n);
    }
    /* The one region `name`, of kind k (NOT_FOUND, WRONG_KIND). */
    result<std::vector<region_status>> try_status(cstr name, shmreg::kind k = shmreg::kind::any)
    {
        shmreg_region_status *st = nullptr;
        std::size_t n = 0;
        shmreg_err e = shmreg_status(reg_, name.c_str(), static_cast<shmreg_kind>(k), &st, &n);
        return detail::take_status(e, st, n);
    }
    result<std::vector<region_status>> try_status_matching(const shmreg::filter &f)
    {
        shmreg_filter c = f.handle();
        shmreg_region_status *st = nullptr;
        std::size_t n = 0;
        shmreg_err e = shmreg_status_matching(reg_, &c, &st, &n);
        return detail::take_status(e, st, n);
    }

    result<shmreg::stats> try_stats()
    {
        shmreg::stats s;
        shmreg_err e = shmreg_registry_stats(reg_, &s);
        if (e != SHMREG_OK)
            return shmreg::error::last(e);
        return s;
    }

    /* shmreg_registry_trim (1.1): wait for the reclaim thread, unmap the cache. */
    result<void> try_trim() { return detail::check(shmreg_registry_trim(reg_)); }

#if SHMREG_CPP_EXCEPTIONS
    /* ----------------------- the same calls, throwing shmreg::error */

    void register_region(const shmreg::registration &r) { try_register_region(r).value(); }
    void register_system(cstr name, cstr key, std::size_t offset, std::size_t byte_size,
                         unsigned fl = 0)
    {
        try_register_system(name, key, offset, byte_size, fl).value();
    }
    void register_system_fd(cstr name, int fd, std::size_t offset, std::size_t byte_size,
                            unsigned fl = 0)
    {
        try_register_system_fd(name, fd, offset, byte_size, fl).value();
    }
    void register_cuda_ipc(cstr name, const void *raw_handle, std::size_t raw_handle_size,
                           int device_id, std::size_t byte_size, unsigned fl = 0)
    {
        try_register_cuda_ipc(name, raw_handle, raw_handle_size, device_id, byte_size, fl).value();
    }
    void register_cuda_fd(cstr name, int fd, int device_id, std::size_t byte_size, unsigned fl = 0)
    {
        try_register_cuda_fd(name, fd, device_id, byte_size, fl).value();
    }
    region_ref acquire(cstr name, std::size_t offset, std::size_t byte_size)
    {
        return try_acquire(name, offset, byte_size).value();
    }
    region_ref acquire_matching(const shmreg::filter &f, std::size_t offset, std::size_t byte_size)
    {
        return try_acquire_matching(f, offset, byte_size).value();
    }
    void unregister(cstr name, shmreg::kind k = shmreg::kind::any) { try_unregister(name, k).value(); }
    void unregister_all(shmreg::kind k = shmreg::kind::any) { try_unregister_all(k).value(); }
    void unregister_matching(const shmreg::filter &f) { try_unregister_matching(f).value(); }
    std::vector<region_status> status(shmreg::kind k = shmreg::kind::any)
    {
        return try_status(k).value();
    }
    std::vector<region_status> status(cstr name, shmreg::kind k = shmreg::kind::any)
    {
        return try_status(name, k).value();
    }
    std::vector<region_status> status_matching(const shmreg::filter &f)
    {
        return try_status_matching(f).value();
    }
    shmreg::stats stats() { return try_stats().value(); }
    void trim() { try_trim().value(); }
#endif

  private:
    shmreg_registry *reg_ = nullptr;
};

/* -------------------------------------------- descriptor passing (VMM fds) */

/* What try_recv_fd received: a descriptor the caller owns, and how many
 * payload bytes arrived. */
struct received_fd {
    int fd = -1;
    std::size_t payload_size = 0;
};

inline result<void> try_send_fd(int sock, int fd, const void *payload, std::size_t payload_size)
{
    return detail::check(shmreg_send_fd(sock, fd, payload, payload_size));
}

inline result<received_fd> try_recv_fd(int sock, void *payload, std::size_t cap)
{
    received_fd r;
    shmreg_err e = shmreg_recv_fd(sock, &r.fd, payload, cap, &r.payload_size);
    if (e != SHMREG_OK)
        return shmreg::error::last(e);
    return r;
}

/* 1.1: a sealed memfd of size bytes (shmreg_memfd_create); the caller owns
 * and closes the descriptor. debug_name may be nullptr. */
inline result<int> try_memfd_create(const char *debug_name, std::size_t size)
{
    int fd = -1;
    shmreg_err e = shmreg_memfd_create(debug_name, size, &fd);
    if (e != SHMREG_OK)
        return shmreg::error::last(e);
    return fd;
}

/* 1.1: ask the server at the other end of sock to register a window of fd
 * (shmreg_send_region); the error is the server's answer. */
inline result<void> try_send_region(int sock, cstr name, int fd, std::size_t offset,
                                    std::size_t byte_size, unsigned fl = 0)
{
    return detail::check(shmreg_send_region(sock, name.c_str(), fd, offset, byte_size, fl));
}

#if SHMREG_CPP_EXCEPTIONS
inline void guard_install() { try_guard_install().value(); }
inline int memfd_create(const char *debug_name, std::size_t size)
{
    return try_memfd_create(debug_name, size).value();
}
inline void send_region(int sock, cstr name, int fd, std::size_t offset, std::size_t byte_size,
                        unsigned fl = 0)
{
    try_send_region(sock, name, fd, offset, byte_size, fl).value();
}
inline void send_fd(int sock, int fd, const void *payload, std::size_t payload_size)
{
    try_send_fd(sock, fd, payload, payload_size).value();
}
inline received_fd recv_fd(int sock, void *payload, std::size_t cap)
{
    return try_recv_fd(sock, payload, cap).value();
}
#endif

} // namespace shmreg

#endif /* SHMREG_SHMREG_HPP */
