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

// Python strings may hold NUL; the C API would see a shorter, different name.
const char *c_string(const std::string &s, const char *what) {
    if (std::memchr(s.data(), '\0', s.size()))
        raise_error(SHMREG_ERR_INVALID_ARG, std::string(what) + " contains a NUL character");
    return s.c_str();
}

const char *c_string(const std::optional<std::string> &s, const char *what) {
    return s ? c_string(*s, what) : nullptr;
}

// Settings and kinds are strings in Python: the value named `value` among
// three, or InvalidArgument saying which names `setting` takes.
template <typename E>
E one_of(const char *setting, const std::string &value, const char *const (&names)[3],
         const E (&values)[3]) {
    for (int i = 0; i < 3; i++)
        if (value == names[i])
            return values[i];
    raise_error(SHMREG_ERR_INVALID_ARG, std::string(setting) + " must be '" + names[0] + "', '" +
                                            names[1] + "' or '" + names[2] + "', not '" + value + "'");
}

shmreg_kind parse_kind(const std::string &kind) {
    return one_of("kind", kind, {"any", "system", "cuda"},
                  {SHMREG_KIND_ANY, SHMREG_KIND_SYSTEM, SHMREG_KIND_CUDA});
}

const char *kind_name(shmreg_kind kind) {
    return kind == SHMREG_KIND_SYSTEM ? "system" : kind == SHMREG_KIND_CUDA ? "cuda" : "any";
}

unsigned flags_of(std::optional<bool> pin, bool readonly) {
    unsigned flags = readonly ? SHMREG_READONLY : 0;
    if (pin)
        flags |= *pin ? SHMREG_PIN : SHMREG_NO_PIN;
    return flags;
}

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

void init_registry(Registry *self, const std::string &busy_policy,
                   const std::vector<std::string> &reserved_key_prefixes,
                   const std::string &pin_policy, const std::vector<uid_t> &allowed_owner_uids,
                   size_t max_regions, size_t max_mapped_bytes, size_t max_pinned_bytes) {
    shmreg_config cfg;
    shmreg_config_init(&cfg);
    cfg.busy_policy = one_of("busy_policy", busy_policy, {"defer", "detach", "refuse"},
                             {SHMREG_POLICY_DEFER, SHMREG_POLICY_DETACH, SHMREG_POLICY_REFUSE});
    cfg.pin_policy = one_of("pin_policy", pin_policy, {"auto", "never", "always"},
                            {SHMREG_PIN_AUTO, SHMREG_PIN_NEVER, SHMREG_PIN_ALWAYS});

    std::vector<const char *> prefixes; // NULL-terminated; the library copies it
    for (const std::string &p : reserved_key_prefixes)
        prefixes.push_back(c_string(p, "a reserved key prefix"));
    prefixes.push_back(nullptr);
    cfg.reserved_key_prefixes = reserved_key_prefixes.empty() ? nullptr : prefixes.data();
    cfg.allowed_owner_uids = allowed_owner_uids.data();
    cfg.allowed_owner_uid_count = allowed_owner_uids.size();
    cfg.max_regions = max_regions;
    cfg.max_mapped_bytes = max_mapped_bytes;
    cfg.max_pinned_bytes = max_pinned_bytes;
    cfg.log_fn = log_to_python;

    shmreg_registry *reg = nullptr;
    shmreg_err err = shmreg_registry_create(&cfg, &reg);
    if (err != SHMREG_OK)
        raise_last_error(err);
    new (self) Registry();
    self->reg = reg;
}

Region acquire(Registry &self, nb::str name, size_t offset, size_t byte_size) {
    Py_ssize_t len;
    const char *cname = PyUnicode_AsUTF8AndSize(name.ptr(), &len);
    if (!cname)
        throw nb::python_error();
    if (std::strlen(cname) != static_cast<size_t>(len))
        raise_error(SHMREG_ERR_INVALID_ARG, "the name contains a NUL character");
    shmreg_region *ref;
    shmreg_view view;
    shmreg_err err = shmreg_acquire(open_registry(self), cname, offset, byte_size, &ref, &view);
    if (err != SHMREG_OK)
        raise_last_error(err);
    // The reference moves into the Region object, which releases it.
    return Region(ref, view, std::move(name));
}

// What every source's registration has; each register_* adds its own fields.
shmreg_registration registration(shmreg_source source, const std::string &name, size_t byte_size,
                                 unsigned flags, const std::optional<std::string> &tag) {
    shmreg_registration r;
    shmreg_registration_init(&r);
    r.source = source;
    r.name = c_string(name, "the name");
    r.byte_size = byte_size;
    r.flags = flags;
    r.tag = c_string(tag, "the tag");
    return r;
}

void register_with(Registry &self, const shmreg_registration &r) {
    blocking(self, [&](shmreg_registry *reg) { return shmreg_register(reg, &r); });
}

void register_system(Registry &self, const std::string &name, const std::string &key,
                     size_t byte_size, size_t offset, std::optional<bool> pin, bool readonly,
                     const std::optional<std::string> &tag) {
    shmreg_registration r =
        registration(SHMREG_SOURCE_SHM, name, byte_size, flags_of(pin, readonly), tag);
    r.key = c_string(key, "the key");
    r.offset = offset;
    register_with(self, r);
}

void register_cuda_ipc(Registry &self, const std::string &name, nb::bytes raw_handle,
                       int device_id, size_t byte_size, bool readonly,
                       const std::optional<std::string> &tag) {
    // A copy, read later without the GIL.
    std::string handle(raw_handle.c_str(), raw_handle.size());
    shmreg_registration r = registration(SHMREG_SOURCE_CUDA_IPC, name, byte_size,
                                         readonly ? SHMREG_READONLY : 0, tag);
    r.raw_handle = handle.data();
    r.raw_handle_size = handle.size();
    r.device_id = device_id;
    register_with(self, r);
}

void register_cuda_fd(Registry &self, const std::string &name, int fd, int device_id,
                      size_t byte_size, bool readonly, const std::optional<std::string> &tag) {
    shmreg_registration r = registration(SHMREG_SOURCE_CUDA_FD, name, byte_size,
                                         readonly ? SHMREG_READONLY : 0, tag);
    r.fd = fd;
    r.device_id = device_id;
    register_with(self, r);
}

void unregister(Registry &self, const std::string &name, const std::string &kind) {
    shmreg_filter f;
    shmreg_filter_init(&f);
    f.name = c_string(name, "the name");
    f.kind = parse_kind(kind);
    blocking(self, [&](shmreg_registry *reg) { return shmreg_unregister_matching(reg, &f); });
}

void unregister_all(Registry &self, const std::string &kind, const std::optional<std::string> &tag) {
    shmreg_filter f;
    shmreg_filter_init(&f);
    f.kind = parse_kind(kind);
    f.tag = c_string(tag, "the tag");
    blocking(self, [&](shmreg_registry *reg) { return shmreg_unregister_matching(reg, &f); });
}

nb::list status(Registry &self, const std::optional<std::string> &name, const std::string &kind,
                const std::optional<std::string> &tag) {
    shmreg_filter f;
    shmreg_filter_init(&f);
    f.name = c_string(name, "the name");
    f.kind = parse_kind(kind);
    f.tag = c_string(tag, "the tag");
    shmreg_region_status *st = nullptr;
    size_t n = 0;
    shmreg_err err = shmreg_status_matching(open_registry(self), &f, &st, &n);
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
                        "refusals"_a = s.refusals);
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
    nb::class_<Registry>(
        m, "Registry",
        "A registry of named shared-memory regions (one shmreg_registry).\n\n"
        "busy_policy: what unregister does to a region in use: 'defer' (keep it listed,\n"
        "pending, until its last reference goes), 'detach' (free the name now; the mapping\n"
        "lives until its last reference goes) or 'refuse' (raise shmreg.Busy).\n"
        "reserved_key_prefixes: shm keys that may never be registered.\n"
        "pin_policy: 'auto' | 'never' | 'always' (page-lock system regions for DMA).\n"
        "allowed_owner_uids: when not empty, only shm objects owned by these uids.\n"
        "max_regions, max_mapped_bytes, max_pinned_bytes: limits, 0 = none.\n\n"
        "Thread-safe. Closing (close(), the end of a with block, or the last reference\n"
        "to the object going) unregisters every region; references callers still hold,\n"
        "and the arrays made from them, stay valid until released.")
        .def("__init__", &init_registry, "busy_policy"_a = "defer",
             "reserved_key_prefixes"_a.sig("()") = std::vector<std::string>(), nb::kw_only(),
             "pin_policy"_a = "auto", "allowed_owner_uids"_a.sig("()") = std::vector<uid_t>(),
             "max_regions"_a = 0, "max_mapped_bytes"_a = 0, "max_pinned_bytes"_a = 0)
        .def("register_system", &register_system, "name"_a, "key"_a, "byte_size"_a,
             "offset"_a = 0, nb::kw_only(), "pin"_a = nb::none(), "readonly"_a = false,
             "tag"_a = nb::none(),
             "Register the window [offset, offset + byte_size) of the POSIX shm object `key`\n"
             "as `name`. pin: True demands page-locking (raises if impossible), False forbids\n"
             "it, None follows the pin_policy. readonly: map it read-only. tag: an owner tag\n"
             "that unregister_all(tag=...) and status(tag=...) filter on. Runs without the GIL.")
        .def("register_cuda_ipc", &register_cuda_ipc, "name"_a, "raw_handle"_a, "device_id"_a,
             "byte_size"_a, nb::kw_only(), "readonly"_a = false, "tag"_a = nb::none(),
             "Register GPU memory exported by another process as a CUDA IPC handle (the 64\n"
             "bytes of a cudaIpcMemHandle_t), opened on device_id. Runs without the GIL.")
        .def("register_cuda_fd", &register_cuda_fd, "name"_a, "fd"_a, "device_id"_a, "byte_size"_a,
             nb::kw_only(), "readonly"_a = false, "tag"_a = nb::none(),
             "Register a CUDA VMM allocation exported as a POSIX file descriptor. The caller\n"
             "keeps fd and may close it when this returns. Runs without the GIL.")
        .def("acquire", &acquire, "name"_a, "offset"_a, "byte_size"_a,
             "Take a counted reference to [offset, offset + byte_size) of region `name`.\n"
             "The Region keeps the mapping alive until release() (or the end of a with block,\n"
             "or the object going); arrays made from it hold references of their own.")
        .def("unregister", &unregister, "name"_a, "kind"_a = "any",
             "Unregister `name` ('any', 'system' or 'cuda'). A region in use follows the\n"
             "busy policy. Runs without the GIL.")
        .def("unregister_all", &unregister_all, "kind"_a = "any", nb::kw_only(), "tag"_a = nb::none(),
             "Unregister every region of `kind` (and of `tag`, when given). Runs without the GIL.")
        .def("status", &status, "name"_a = nb::none(), "kind"_a = "any", nb::kw_only(),
             "tag"_a = nb::none(),
             nb::sig("def status(self, name: str | None = None, kind: str = 'any', *, "
                     "tag: str | None = None) -> list[shmreg._types.RegionStatus]"),
             "The regions registered or pending, or the one named (raises NotFound).")
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
