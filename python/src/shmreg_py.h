// Shared by the extension's files: module.cpp (errors, module functions),
// registry.cpp (shmreg.Registry), region.cpp (shmreg.Region: the buffer
// protocol and DLPack), cuda_client.cpp (sending GPU memory to a server).
// The C API is reached through the public header alone.
#pragma once

#include <nanobind/nanobind.h>
#include <shmreg/shmreg.h>

#include <optional>
#include <string>

namespace nb = nanobind;

namespace shmreg_py {

// Raise the shmreg.Error subclass of `err` with `message` (the library's
// message, copied on the thread that made the failing call). Needs the GIL.
[[noreturn]] void raise_error(shmreg_err err, const std::string &message);
// Raise the subclass of `err` with the calling thread's shmreg_last_error().
[[noreturn]] void raise_last_error(shmreg_err err);

// Arguments converted by the binding (args.cpp): a wrong type raises
// TypeError, a value out of range shmreg.InvalidArgument; both messages name
// the argument and the value.
[[noreturn]] void raise_type(const char *arg, const char *want, nb::handle value);
[[noreturn]] void raise_value(const char *arg, const char *want, nb::handle value);
size_t size_arg(nb::handle value, const char *arg);
int int_arg(nb::handle value, const char *arg, long lo, long hi);
bool bool_arg(nb::handle value, const char *arg);
std::string str_arg(nb::handle value, const char *arg);
std::optional<std::string> optional_str_arg(nb::handle value, const char *arg);

// The record classes of shmreg._types, looked up once at import.
nb::handle region_status_type();
nb::handle stats_type();

// One counted reference, as Registry.acquire returns it.
struct Region {
    shmreg_region *ref = nullptr; // released by release() or the destructor
    shmreg_view view{};
    nb::object name;              // for messages and repr
    // Set by Region.readonly_dlpack(): the caller vouches that the DLPack
    // consumer honours the read-only flag (see region.cpp).
    bool readonly_export_ok = false;

    Region() = default;
    Region(shmreg_region *r, const shmreg_view &v, nb::object n)
        : ref(r), view(v), name(std::move(n)) {}
    Region(Region &&o) noexcept
        : ref(o.ref), view(o.view), name(std::move(o.name)), readonly_export_ok(o.readonly_export_ok) {
        o.ref = nullptr;
    }
    Region(const Region &) = delete;
    Region &operator=(const Region &) = delete;
    ~Region() { shmreg_release(ref); }
};

void bind_registry(nb::module_ &m);
void bind_region(nb::module_ &m);
void bind_cuda_client(nb::module_ &m);

} // namespace shmreg_py
