// Shared by the extension's three files: module.cpp (errors, module
// functions), registry.cpp (shmreg.Registry), region.cpp (shmreg.Region: the
// buffer protocol and DLPack). The C API is reached through the public header
// alone.
#pragma once

#include <nanobind/nanobind.h>
#include <shmreg/shmreg.h>

#include <string>

namespace nb = nanobind;

namespace shmreg_py {

// Raise the shmreg.Error subclass of `err` with `message` (the library's
// message, copied on the thread that made the failing call). Needs the GIL.
[[noreturn]] void raise_error(shmreg_err err, const std::string &message);
// Raise the subclass of `err` with the calling thread's shmreg_last_error().
[[noreturn]] void raise_last_error(shmreg_err err);

// The record classes of shmreg._types, looked up once at import.
nb::handle region_status_type();
nb::handle stats_type();

// One counted reference, as Registry.acquire returns it.
struct Region {
    shmreg_region *ref = nullptr; // released by release() or the destructor
    shmreg_view view{};
    nb::object name;              // for messages and repr

    Region() = default;
    Region(shmreg_region *r, const shmreg_view &v, nb::object n)
        : ref(r), view(v), name(std::move(n)) {}
    Region(Region &&o) noexcept : ref(o.ref), view(o.view), name(std::move(o.name)) {
        o.ref = nullptr;
    }
    Region(const Region &) = delete;
    Region &operator=(const Region &) = delete;
    ~Region() { shmreg_release(ref); }
};

void bind_registry(nb::module_ &m);
void bind_region(nb::module_ &m);

} // namespace shmreg_py
