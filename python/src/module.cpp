// The module shmreg._shmreg: error mapping, logging, version and CUDA probes.
// shmreg/__init__.py re-exports what users call.
#include "shmreg_py.h"

#include <Python.h>

namespace shmreg_py {

namespace {

// Strong references taken at import and never dropped: the classes live as
// long as the process (a static nb::object would be destroyed after the
// interpreter is gone).
#define SHMREG_PY_COUNT_(name, value, desc) +1
constexpr int error_count = 0 SHMREG_ERR_MAP(SHMREG_PY_COUNT_); /* codes 0..count-1 */
#undef SHMREG_PY_COUNT_
PyObject *error_types[error_count];
PyObject *region_status_cls;
PyObject *stats_cls;

} // namespace

nb::handle region_status_type() { return region_status_cls; }
nb::handle stats_type() { return stats_cls; }

void raise_error(shmreg_err err, const std::string &message) {
    int code = static_cast<int>(err);
    PyObject *cls = (code > 0 && code < error_count) ? error_types[code] : error_types[0];
    nb::object exc = nb::borrow(cls)(nb::str(message.c_str(), message.size()), code);
    PyErr_SetObject(cls, exc.ptr());
    throw nb::python_error();
}

void raise_last_error(shmreg_err err) { raise_error(err, shmreg_last_error()); }

} // namespace shmreg_py

using namespace shmreg_py;

NB_MODULE(_shmreg, m) {
    m.doc() = "The compiled half of shmreg (import shmreg, not this).";
    // Regions kept in globals at exit are the user's business, not a leak
    // worth a warning from nanobind.
    nb::set_leak_warnings(false);

    // The header's error table, row by row: (name, value, description).
    // shmreg._types checks its classes against it, name by name and value
    // by value, and fails the import on any difference; shmreg.kserve.status takes its
    // statuses by these names.
    nb::list rows;
#define SHMREG_PY_ROW_(name, value, desc) rows.append(nb::make_tuple("SHMREG_" #name, value, desc));
    SHMREG_ERR_MAP(SHMREG_PY_ROW_)
#undef SHMREG_PY_ROW_
    m.attr("ERROR_TABLE") = nb::tuple(rows);
    nb::module_ types = nb::module_::import_("shmreg._types");
    types.attr("check_error_table")(m.attr("ERROR_TABLE"));
    nb::object errors = types.attr("ERRORS");
    for (int i = 0; i < error_count; i++)
        error_types[i] = nb::object(errors[i]).release().ptr();
    region_status_cls = nb::object(types.attr("RegionStatus")).release().ptr();
    stats_cls = nb::object(types.attr("Stats")).release().ptr();

    m.attr("__version__") = SHMREG_VERSION_STRING;
    m.def("library_version", &shmreg_version,
          "The version of the libshmreg loaded at run time (shmreg_version()).");
    m.def(
        "cuda_available",
        [] {
            constexpr unsigned need = SHMREG_CUDA_BUILT | SHMREG_CUDA_DRIVER | SHMREG_CUDA_DEVICE;
            return (shmreg_cuda_available() & need) == need;
        },
        "True when CUDA regions and pinning can work in this process: the library was built\n"
        "with CUDA, a driver loaded and a device is visible. The first call may initialise\n"
        "the CUDA runtime.");
    m.def("_cuda_bits", &shmreg_cuda_available,
          "shmreg_cuda_available()'s bits: 1 built, 2 driver, 4 device, 8 VMM descriptors.");

    bind_region(m);
    bind_registry(m);
    bind_cuda_client(m);
}
