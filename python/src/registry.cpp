// shmreg.Registry: one shmreg_registry, its config and its verbs.
//
// Calls that may block (register, which may pin; unregister and
// unregister_all, which may unmap or wait for the reclaim; closing) run
// without the GIL. close() must not free the registry under one of them, so
// they hold `in_flight` shared for the C call and close() takes it
// exclusively; both take it only with the GIL released, so no thread ever
// waits for the lock while holding the GIL. acquire, status and stats keep
// the GIL, which already orders them against close().
#include "shmreg_py.h"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <Python.h>
#include <cstring>
#include <mutex>
#include <shared_mutex>
#include <unistd.h>
#include <vector>

namespace shmreg_py {

namespace {

bool finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
    return Py_IsFinalizing();
#else
    return _Py_IsFinalizing();
#endif
}

struct Registry {
    shmreg_registry *reg = nullptr;
    std::shared_mutex in_flight;

    ~Registry() {
        if (!reg)
            return;
        // Destroy may wait for liburcu's grace periods; other threads run meanwhile.
        if (finalizing()) {
            shmreg_registry_destroy(reg);
        } else {
            nb::gil_scoped_release nogil;
            shmreg_registry_destroy(reg);
        }
    }
};

[[noreturn]] void raise_closed() {
    raise_error(SHMREG_ERR_INVALID_ARG, "the registry is closed");
}

// Settings and kinds are strings in Python: the value of `arg` among three,
// or InvalidArgument saying which it takes.
template <typename E>
E one_of(const char *arg, nb::handle value, const char *const (&names)[3], const E (&values)[3]) {
    std::string v = str_arg(value, arg);
    for (int i = 0; i < 3; i++)
        if (v == names[i])
            return values[i];
    raise_error(SHMREG_ERR_INVALID_ARG, std::string(arg) + " must be '" + names[0] + "', '" +
                                            names[1] + "' or '" + names[2] + "', not '" + v + "'");
}

shmreg_kind parse_kind(nb::handle kind) {
    return one_of("kind", kind, {"any", "system", "cuda"},
                  {SHMREG_KIND_ANY, SHMREG_KIND_SYSTEM, SHMREG_KIND_CUDA});
}

const char *kind_name(shmreg_kind kind) {
    return kind == SHMREG_KIND_SYSTEM ? "system" : kind == SHMREG_KIND_CUDA ? "cuda" : "any";
}

unsigned flags_of(nb::handle pin, nb::handle readonly) {
    unsigned flags = bool_arg(readonly, "readonly") ? SHMREG_READONLY : 0;
    if (!pin.is_none())
        flags |= bool_arg(pin, "pin") ? SHMREG_PIN : SHMREG_NO_PIN;
    return flags;
}

// A C string of an optional one: NULL for None.
const char *c_str(const std::optional<std::string> &s) { return s ? s->c_str() : nullptr; }

// Run `call(reg)` without the GIL; raise its failure with the message taken
// on this thread before the GIL comes back.
template <typename F> void blocking(Registry &self, F &&call) {
    shmreg_err err;
    std::string message;
    bool closed = false;
    {
        nb::gil_scoped_release nogil;
        std::shared_lock<std::shared_mutex> lock(self.in_flight);
        if (!self.reg) {
            closed = true;
            err = SHMREG_ERR_INVALID_ARG;
        } else {
            err = call(self.reg);
            if (err != SHMREG_OK)
                message = shmreg_last_error();
        }
    }
    if (closed)
        raise_closed();
    if (err != SHMREG_OK)
        raise_error(err, message);
}

shmreg_registry *open_registry(Registry &self) {
    if (!self.reg)
        raise_closed();
    return self.reg;
}

// Messages the library cannot return to a caller (a failed munmap in a last
// release, a registry destroyed under references) go to logging.getLogger(
// "shmreg"). Called from whichever thread runs that code, with or without
// the GIL.
void log_to_python(void *, shmreg_log_level level, const char *msg) {
    if (!Py_IsInitialized() || finalizing())
        return;
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyObject *logging = PyImport_ImportModule("logging");
    PyObject *logger = logging ? PyObject_CallMethod(logging, "getLogger", "s", "shmreg") : nullptr;
    PyObject *res = logger ? PyObject_CallMethod(logger, level == SHMREG_LOG_ERROR ? "error" : "warning",
                                                 "s", msg)
                           : nullptr;
    if (!res)
        PyErr_Clear();
    Py_XDECREF(res);
    Py_XDECREF(logger);
    Py_XDECREF(logging);
    PyErr_Restore(type, value, traceback);
    PyGILState_Release(gil);
}

// The C server's defaults (server/src/core/access.c), so that a Python
// server is as closed as the C one unless its author widens it.
constexpr size_t default_max_regions = 4096;
constexpr size_t default_max_mapped_bytes = size_t{1} << 40;

// allowed_owner_uids: None is this process's effective uid, "any" is every
// owner, a sequence is those uids. With no allow-list a client can name any
// object the server can open: run as root, another uid's 0600 object, which
// the server then reads back to that client. An empty sequence is refused
// rather than read as "any", the library's meaning of a zero count.
template <typename Sequence>
std::vector<uid_t> owner_uids(nb::handle value, Sequence sequence) {
    std::vector<uid_t> uids;
    if (value.is_none()) {
        uids.push_back(geteuid());
        return uids;
    }
    if (PyUnicode_Check(value.ptr())) {
        if (str_arg(value, "allowed_owner_uids") != "any")
            raise_value("allowed_owner_uids", "a list or tuple of uids, None or 'any'", value);
        return uids; // no allow-list: the library checks no owner
    }
    for (nb::handle u : sequence(value, "allowed_owner_uids"))
        uids.push_back(static_cast<uid_t>(int_arg(u, "an allowed owner uid", 0, 0x7fffffff)));
    if (uids.empty())
        raise_value("allowed_owner_uids", "a list or tuple of at least one uid, None (this "
                    "process's uid) or 'any' (every owner)", value);
    return uids;
}

void init_registry(Registry *self, nb::handle busy_policy, nb::handle reserved_key_prefixes,
                   nb::handle pin_policy, nb::handle allowed_owner_uids, nb::handle max_regions,
                   nb::handle max_mapped_bytes, nb::handle max_pinned_bytes, nb::handle reclaim,
                   nb::handle cache_bytes, nb::handle accept_unsealed_fds) {
    shmreg_config cfg;
    shmreg_config_init(&cfg);
    cfg.busy_policy = one_of("busy_policy", busy_policy, {"defer", "detach", "refuse"},
                             {SHMREG_POLICY_DEFER, SHMREG_POLICY_DETACH, SHMREG_POLICY_REFUSE});
    cfg.pin_policy = one_of("pin_policy", pin_policy, {"auto", "never", "always"},
                            {SHMREG_PIN_AUTO, SHMREG_PIN_NEVER, SHMREG_PIN_ALWAYS});
    {
        // Two names, so the three-name helper does not fit.
        std::string r = str_arg(reclaim, "reclaim");
        if (r == "background")
            cfg.reclaim = SHMREG_RECLAIM_BACKGROUND;
        else if (r == "inline")
            cfg.reclaim = SHMREG_RECLAIM_INLINE;
        else
            raise_error(SHMREG_ERR_INVALID_ARG,
                        "reclaim must be 'background' or 'inline', not '" + r + "'");
    }

    // A str is a sequence too, of one-letter prefixes: never what is meant.
    auto sequence = [](nb::handle h, const char *arg) {
        if (PyUnicode_Check(h.ptr()) || PyBytes_Check(h.ptr()) || !PySequence_Check(h.ptr()))
            raise_type(arg, "a list or tuple", h);
        return nb::borrow<nb::sequence>(h);
    };
    std::vector<std::string> prefix_strings;
    for (nb::handle p : sequence(reserved_key_prefixes, "reserved_key_prefixes"))
        prefix_strings.push_back(str_arg(p, "a reserved key prefix"));
    std::vector<const char *> prefixes; // NULL-terminated; the library copies it
    for (const std::string &p : prefix_strings)
        prefixes.push_back(p.c_str());
    prefixes.push_back(nullptr);
    std::vector<uid_t> uids = owner_uids(allowed_owner_uids, sequence);
    cfg.reserved_key_prefixes = prefix_strings.empty() ? nullptr : prefixes.data();
    cfg.allowed_owner_uids = uids.data();
    cfg.allowed_owner_uid_count = uids.size();
    cfg.max_regions = size_arg(max_regions, "max_regions");
    cfg.max_mapped_bytes = size_arg(max_mapped_bytes, "max_mapped_bytes");
    cfg.max_pinned_bytes = size_arg(max_pinned_bytes, "max_pinned_bytes");
    cfg.cache_bytes = size_arg(cache_bytes, "cache_bytes");
    cfg.accept_unsealed_fds = bool_arg(accept_unsealed_fds, "accept_unsealed_fds");
    cfg.log_fn = log_to_python;

    shmreg_registry *reg = nullptr;
    shmreg_err err = shmreg_registry_create(&cfg, &reg);
    if (err != SHMREG_OK)
        raise_last_error(err);
    new (self) Registry();
    self->reg = reg;
}

// shmreg_acquire, or with a tag shmreg_acquire_matching (another tag's
// region answers as an absent one). The name's UTF-8 is Python's own
// buffer: no copy on this path, which a request takes once per tensor.
Region acquire(Registry &self, nb::handle name, nb::handle offset, nb::handle byte_size,
               nb::handle tag) {
    if (!PyUnicode_Check(name.ptr()))
        raise_type("name", "a str", name);
    Py_ssize_t len;
    const char *cname = PyUnicode_AsUTF8AndSize(name.ptr(), &len);
    if (!cname)
        throw nb::python_error();
    if (std::strlen(cname) != static_cast<size_t>(len))
        raise_value("name", "a str without NUL characters", name);
    size_t off = size_arg(offset, "offset"), size = size_arg(byte_size, "byte_size");
    shmreg_registry *reg = open_registry(self);
    shmreg_region *ref;
    shmreg_view view;
    shmreg_err err;
    if (tag.is_none()) {
        err = shmreg_acquire(reg, cname, off, size, &ref, &view);
    } else {
        std::string t = str_arg(tag, "tag");
        shmreg_filter f;
        shmreg_filter_init(&f);
        f.name = cname;
        f.tag = t.c_str();
        err = shmreg_acquire_matching(reg, &f, off, size, &ref, &view);
    }
    if (err != SHMREG_OK)
        raise_last_error(err);
    // The reference moves into the Region object, which releases it.
    return Region(ref, view, nb::borrow(name));
}

// What every source's registration has; each register_* adds its own
// fields. The strings it points to live in `strings`.
struct Registration {
    shmreg_registration r;
    std::string name;
    std::optional<std::string> tag;

    Registration(shmreg_source source, nb::handle name_, nb::handle byte_size, unsigned flags,
                 nb::handle tag_)
        : name(str_arg(name_, "name")), tag(optional_str_arg(tag_, "tag")) {
        shmreg_registration_init(&r);
        r.source = source;
        r.name = name.c_str();
        r.byte_size = size_arg(byte_size, "byte_size");
        r.flags = flags;
        r.tag = c_str(tag);
    }
    Registration(const Registration &) = delete;
};

void register_with(Registry &self, const Registration &reg) {
    blocking(self, [&](shmreg_registry *r) { return shmreg_register(r, &reg.r); });
}

void register_system(Registry &self, nb::handle name, nb::handle key, nb::handle byte_size,
                     nb::handle offset, nb::handle pin, nb::handle readonly, nb::handle tag) {
    Registration reg(SHMREG_SOURCE_SHM, name, byte_size, flags_of(pin, readonly), tag);
    std::string k = str_arg(key, "key");
    reg.r.key = k.c_str();
    reg.r.offset = size_arg(offset, "offset");
    register_with(self, reg);
}

void register_system_fd(Registry &self, nb::handle name, nb::handle fd, nb::handle byte_size,
                        nb::handle offset, nb::handle readonly, nb::handle tag) {
    Registration reg(SHMREG_SOURCE_FD, name, byte_size, flags_of(nb::none(), readonly), tag);
    reg.r.fd = int_arg(fd, "fd", 0, 0x7fffffff);
    reg.r.offset = size_arg(offset, "offset");
    register_with(self, reg);
}

void register_cuda_ipc(Registry &self, nb::handle name, nb::handle raw_handle, nb::handle device_id,
                       nb::handle byte_size, nb::handle readonly, nb::handle tag) {
    Registration reg(SHMREG_SOURCE_CUDA_IPC, name, byte_size, flags_of(nb::none(), readonly), tag);
    if (!PyBytes_Check(raw_handle.ptr()))
        raise_type("raw_handle", "bytes", raw_handle);
    // A copy, read later without the GIL.
    std::string handle(PyBytes_AS_STRING(raw_handle.ptr()),
                       static_cast<size_t>(PyBytes_GET_SIZE(raw_handle.ptr())));
    reg.r.raw_handle = handle.data();
    reg.r.raw_handle_size = handle.size();
    reg.r.device_id = int_arg(device_id, "device_id", 0, 0x7fffffff);
    register_with(self, reg);
}

void register_cuda_fd(Registry &self, nb::handle name, nb::handle fd, nb::handle device_id,
                      nb::handle byte_size, nb::handle readonly, nb::handle tag) {
    Registration reg(SHMREG_SOURCE_CUDA_FD, name, byte_size, flags_of(nb::none(), readonly), tag);
    reg.r.fd = int_arg(fd, "fd", 0, 0x7fffffff);
    reg.r.device_id = int_arg(device_id, "device_id", 0, 0x7fffffff);
    register_with(self, reg);
}

// One filter and the strings it points to.
struct Filter {
    shmreg_filter f;
    std::optional<std::string> name, tag;

    Filter(nb::handle name_, nb::handle kind, nb::handle tag_)
        : name(optional_str_arg(name_, "name")), tag(optional_str_arg(tag_, "tag")) {
        shmreg_filter_init(&f);
        f.name = c_str(name);
        f.kind = parse_kind(kind);
        f.tag = c_str(tag);
    }
    Filter(const Filter &) = delete;
};

void unregister(Registry &self, nb::handle name, nb::handle kind, nb::handle tag) {
    str_arg(name, "name"); // required here: None would mean every region
    Filter f(name, kind, tag);
    blocking(self, [&](shmreg_registry *reg) { return shmreg_unregister_matching(reg, &f.f); });
}

void unregister_all(Registry &self, nb::handle kind, nb::handle tag) {
    Filter f(nb::none(), kind, tag);
    blocking(self, [&](shmreg_registry *reg) { return shmreg_unregister_matching(reg, &f.f); });
}

nb::list status(Registry &self, nb::handle name, nb::handle kind, nb::handle tag) {
    Filter f(name, kind, tag);
    shmreg_region_status *st = nullptr;
    size_t n = 0;
    shmreg_err err = shmreg_status_matching(open_registry(self), &f.f, &st, &n);
    if (err != SHMREG_OK)
        raise_last_error(err);
    // Freed on every path out, the Python error ones included.
    struct Free {
        shmreg_region_status *st;
        size_t n;
        ~Free() { shmreg_status_free(st, n); }
    } free_on_exit{st, n};

    auto optional_str = [](const char *s) -> nb::object {
        return s ? nb::object(nb::str(s)) : nb::none();
    };
    using namespace nb::literals;
    nb::list out;
    for (size_t i = 0; i < n; i++) {
        const shmreg_region_status &s = st[i];
        out.append(region_status_type()(
            "name"_a = s.name, "key"_a = optional_str(s.key), "kind"_a = kind_name(s.kind),
            "offset"_a = s.offset, "byte_size"_a = s.byte_size, "device_id"_a = s.device_id,
            "in_use"_a = s.references, "pending_unregister"_a = s.pending_unregister != 0,
            "generation"_a = s.generation, "pinned"_a = s.pinned != 0,
            "readonly"_a = (s.flags & SHMREG_READONLY) != 0, "flags"_a = s.flags,
            "tag"_a = optional_str(s.tag)));
    }
    return out;
}

nb::object stats(Registry &self) {
    shmreg_stats s;
    shmreg_err err = shmreg_registry_stats(open_registry(self), &s);
    if (err != SHMREG_OK)
        raise_last_error(err);
    using namespace nb::literals;
    return stats_type()("regions"_a = s.regions, "pending_regions"_a = s.pending_regions,
                        "detached_regions"_a = s.detached_regions, "references"_a = s.references,
                        "mapped_regions"_a = s.mapped_regions, "mapped_bytes"_a = s.mapped_bytes,
                        "pinned_bytes"_a = s.pinned_bytes, "registrations"_a = s.registrations,
                        "refusals"_a = s.refusals,
                        "reclaim_waiting_bytes"_a = s.reclaim_waiting_bytes,
                        "cached_bytes"_a = s.cached_bytes, "cached_mappings"_a = s.cached_mappings,
                        "cache_hits"_a = s.cache_hits, "cache_misses"_a = s.cache_misses,
                        "cache_evictions"_a = s.cache_evictions);
}

void trim(Registry &self) {
    blocking(self, [](shmreg_registry *reg) { return shmreg_registry_trim(reg); });
}

void close(Registry &self) {
    nb::gil_scoped_release nogil;
    shmreg_registry *reg;
    {
        std::unique_lock<std::shared_mutex> lock(self.in_flight);
        // acquire/status/stats read self.reg with the GIL held.
        nb::gil_scoped_acquire gil;
        reg = self.reg;
        self.reg = nullptr;
    }
    shmreg_registry_destroy(reg);
}

} // namespace

void bind_registry(nb::module_ &m) {
    using namespace nb::literals;
    // Arguments are nb::handle, converted by args.cpp so that a bad one is
    // named in the error; the signatures below are what the stub shows.
    nb::class_<Registry>(
        m, "Registry",
        "A registry of named shared-memory regions (one shmreg_registry).\n\n"
        "busy_policy: what unregister does to a region in use: 'defer' (keep it listed,\n"
        "pending, until its last reference goes), 'detach' (free the name now; the mapping\n"
        "lives until its last reference goes) or 'refuse' (raise shmreg.Busy).\n"
        "reserved_key_prefixes: shm keys that may never be registered.\n"
        "pin_policy: 'auto' | 'never' | 'always' (page-lock system regions for DMA).\n"
        "allowed_owner_uids: the uids whose shm objects may be mapped: None (the default) is\n"
        "this process's effective uid only, as the C server; 'any' is every owner.\n"
        "max_regions (default 4096), max_mapped_bytes (default 1 TiB), max_pinned_bytes:\n"
        "limits, as the C server's defaults; 0 = none.\n"
        "reclaim: who unmaps a region at its last release: 'background' (the registry's\n"
        "reclaim thread; release makes no system call) or 'inline' (the releasing thread).\n"
        "cache_bytes: keep up to this many bytes of unused mappings for reuse (0: off).\n"
        "accept_unsealed_fds: let register_system_fd take a descriptor without\n"
        "F_SEAL_SHRINK (read such regions with Region.read_into, never in place).\n\n"
        "Thread-safe. Closing (close(), the end of a with block, or the last reference\n"
        "to the object going) unregisters every region; references callers still hold,\n"
        "and the arrays made from them, stay valid until released.")
        .def("__init__", &init_registry, "busy_policy"_a.none() = "defer",
             "reserved_key_prefixes"_a.none() = nb::tuple(), nb::kw_only(), "pin_policy"_a.none() = "auto",
             "allowed_owner_uids"_a.none() = nb::none(), "max_regions"_a.none() = default_max_regions,
             "max_mapped_bytes"_a.none() = default_max_mapped_bytes,
             "max_pinned_bytes"_a.none() = 0, "reclaim"_a.none() = "background", "cache_bytes"_a.none() = 0,
             "accept_unsealed_fds"_a.none() = false,
             nb::sig("def __init__(self, busy_policy: str = 'defer', "
                     "reserved_key_prefixes: collections.abc.Sequence[str] = (), *, "
                     "pin_policy: str = 'auto', "
                     "allowed_owner_uids: collections.abc.Sequence[int] | str | None = None, "
                     "max_regions: int = 4096, max_mapped_bytes: int = 1099511627776, "
                     "max_pinned_bytes: int = 0, "
                     "reclaim: str = 'background', cache_bytes: int = 0, "
                     "accept_unsealed_fds: bool = False) -> None"))
        .def("register_system", &register_system, "name"_a.none(), "key"_a.none(), "byte_size"_a.none(),
             "offset"_a.none() = 0, nb::kw_only(), "pin"_a.none() = nb::none(), "readonly"_a.none() = false,
             "tag"_a.none() = nb::none(),
             nb::sig("def register_system(self, name: str, key: str, byte_size: int, offset: int = 0, "
                     "*, pin: bool | None = None, readonly: bool = False, tag: str | None = None) "
                     "-> None"),
             "Register the window [offset, offset + byte_size) of the POSIX shm object `key`\n"
             "as `name`. pin: True demands page-locking (raises if impossible), False forbids\n"
             "it, None follows the pin_policy. readonly: map it read-only. tag: an owner tag;\n"
             "calls with the same tag see the region, calls with another tag see nothing.\n"
             "Runs without the GIL.")
        .def("register_system_fd", &register_system_fd, "name"_a.none(), "fd"_a.none(), "byte_size"_a.none(),
             "offset"_a.none() = 0, nb::kw_only(), "readonly"_a.none() = false, "tag"_a.none() = nb::none(),
             nb::sig("def register_system_fd(self, name: str, fd: int, byte_size: int, "
                     "offset: int = 0, *, readonly: bool = False, tag: str | None = None) -> None"),
             "Register the window [offset, offset + byte_size) of the file descriptor fd (a\n"
             "memfd a client sent, or any regular file) as `name`. The caller keeps fd and may\n"
             "close it on return. The descriptor must carry F_SEAL_SHRINK unless the registry\n"
             "was made with accept_unsealed_fds=True. Runs without the GIL.")
        .def("register_cuda_ipc", &register_cuda_ipc, "name"_a.none(), "raw_handle"_a.none(), "device_id"_a.none(),
             "byte_size"_a.none(), nb::kw_only(), "readonly"_a.none() = false, "tag"_a.none() = nb::none(),
             nb::sig("def register_cuda_ipc(self, name: str, raw_handle: bytes, device_id: int, "
                     "byte_size: int, *, readonly: bool = False, tag: str | None = None) -> None"),
             "Register GPU memory exported by another process as a CUDA IPC handle (the 64\n"
             "bytes of a cudaIpcMemHandle_t), opened on device_id. Runs without the GIL.")
        .def("register_cuda_fd", &register_cuda_fd, "name"_a.none(), "fd"_a.none(), "device_id"_a.none(), "byte_size"_a.none(),
             nb::kw_only(), "readonly"_a.none() = false, "tag"_a.none() = nb::none(),
             nb::sig("def register_cuda_fd(self, name: str, fd: int, device_id: int, "
                     "byte_size: int, *, readonly: bool = False, tag: str | None = None) -> None"),
             "Register a CUDA VMM allocation exported as a POSIX file descriptor. The caller\n"
             "keeps fd and may close it when this returns. Runs without the GIL.")
        .def("acquire", &acquire, "name"_a.none(), "offset"_a.none(), "byte_size"_a.none(), nb::kw_only(),
             "tag"_a.none() = nb::none(),
             nb::sig("def acquire(self, name: str, offset: int, byte_size: int, *, "
                     "tag: str | None = None) -> Region"),
             "Take a counted reference to [offset, offset + byte_size) of region `name`\n"
             "(with a tag: only a region of that tag; another's raises NotFound as an absent\n"
             "one). The Region keeps the mapping alive until release() (or the end of a with\n"
             "block, or the object going); arrays made from it hold references of their own.")
        .def("unregister", &unregister, "name"_a.none(), "kind"_a.none() = "any", nb::kw_only(),
             "tag"_a.none() = nb::none(),
             nb::sig("def unregister(self, name: str, kind: str = 'any', *, "
                     "tag: str | None = None) -> None"),
             "Unregister `name` ('any', 'system' or 'cuda'; with a tag, only that tag's). A\n"
             "region in use follows the busy policy. Runs without the GIL.")
        .def("unregister_all", &unregister_all, "kind"_a.none() = "any", nb::kw_only(), "tag"_a.none() = nb::none(),
             nb::sig("def unregister_all(self, kind: str = 'any', *, tag: str | None = None) -> None"),
             "Unregister every region of `kind` (and of `tag`, when given). Runs without the GIL.")
        .def("status", &status, "name"_a.none() = nb::none(), "kind"_a.none() = "any", nb::kw_only(),
             "tag"_a.none() = nb::none(),
             nb::sig("def status(self, name: str | None = None, kind: str = 'any', *, "
                     "tag: str | None = None) -> list[shmreg._types.RegionStatus]"),
             "The regions registered or pending (of `tag`, when given), or the one named\n"
             "(raises NotFound).")
        .def("stats", &stats, nb::sig("def stats(self) -> shmreg._types.Stats"),
             "Counters of the whole registry (shmreg_registry_stats).")
        .def("trim", &trim,
             "Wait until the reclaim thread has unmapped every region released so far, then\n"
             "unmap the registration cache (shmreg_registry_trim). Runs without the GIL.")
        .def("close", &close,
             "Destroy the registry now (idempotent): every region is unregistered; references\n"
             "held elsewhere stay valid until released. Later calls raise InvalidArgument.")
        .def("__enter__", [](nb::handle self) { return self; },
             nb::sig("def __enter__(self) -> Registry"))
        .def("__exit__", [](Registry &self, nb::handle, nb::handle, nb::handle) { close(self); },
             nb::arg("exc_type").none(), nb::arg("exc").none(), nb::arg("tb").none(),
             nb::sig("def __exit__(self, exc_type: object, exc: object, tb: object, /) -> None"))
        .def_prop_ro("closed", [](Registry &self) { return self.reg == nullptr; });
}

} // namespace shmreg_py
