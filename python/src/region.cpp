// shmreg.Region: one counted reference and its view; the buffer protocol and
// DLPack.
//
// Every memoryview and every DLPack tensor made from a Region holds a
// reference of its own (shmreg_retain), dropped by the buffer's release or the
// tensor's deleter. So the mapping outlives Region.release(), an unregister
// and the registry itself for as long as any array still points into it.
#include "shmreg_py.h"
#include "dlpack.h"

#include <nanobind/stl/optional.h>

#include <Python.h>
#include <new>

namespace shmreg_py {

namespace {

[[noreturn]] void buffer_error(const Region &r, const char *what) {
    PyErr_Format(PyExc_BufferError, "region '%U': %s", r.name.ptr(), what);
    throw nb::python_error();
}

void check_live(const Region &r) {
    if (!r.ref)
        buffer_error(r, "released");
}

// ---------------------------------------------------------------- buffer protocol

int region_getbuffer(PyObject *self, Py_buffer *buf, int flags) {
    Region *r = nb::inst_ptr<Region>(self);
    const char *refusal = !r->ref                              ? "released"
                          : r->view.kind != SHMREG_KIND_SYSTEM ? "GPU memory has no buffer protocol: use DLPack"
                                                               : nullptr;
    if (refusal) {
        PyErr_Format(PyExc_BufferError, "region '%U': %s", r->name.ptr(), refusal);
        buf->obj = nullptr;
        return -1;
    }
    // PyBuffer_FillInfo refuses PyBUF_WRITABLE on a read-only region.
    if (PyBuffer_FillInfo(buf, self, r->view.addr, static_cast<Py_ssize_t>(r->view.byte_size),
                          !r->view.writable, flags) < 0)
        return -1;
    // The buffer's own reference, dropped in region_releasebuffer.
    buf->internal = shmreg_retain(r->ref);
    return 0;
}

void region_releasebuffer(PyObject *, Py_buffer *buf) {
    shmreg_release(static_cast<shmreg_region *>(buf->internal));
}

PyType_Slot region_slots[] = {
    {Py_bf_getbuffer, reinterpret_cast<void *>(region_getbuffer)},
    {Py_bf_releasebuffer, reinterpret_cast<void *>(region_releasebuffer)},
    {0, nullptr},
};

// ------------------------------------------------------------------------ DLPack

// One exported tensor: DLPack's struct, its shape and strides, and the
// reference it holds, in one allocation that its deleter frees.
template <typename Managed> struct Export {
    Managed managed;
    int64_t shape[1];
    int64_t strides[1];
    shmreg_region *ref;
};

template <typename Managed> constexpr const char *capsule_name();
template <> constexpr const char *capsule_name<dlpack::ManagedTensor>() { return "dltensor"; }
template <> constexpr const char *capsule_name<dlpack::ManagedTensorVersioned>() {
    return "dltensor_versioned";
}

// Called by the consumer when its array goes, from any thread and without the
// GIL (PyTorch and CuPy do that): it touches no Python object.
template <typename Managed> void export_deleter(Managed *m) {
    auto *e = static_cast<Export<Managed> *>(m->manager_ctx);
    shmreg_release(e->ref); // may be the last reference: then this unmaps
    delete e;
}

// A capsule that no consumer took (still named "dltensor[_versioned]", not
// "used_...") owns its tensor.
template <typename Managed> void capsule_destructor(PyObject *capsule) {
    if (!PyCapsule_IsValid(capsule, capsule_name<Managed>()))
        return;
    auto *m = static_cast<Managed *>(PyCapsule_GetPointer(capsule, capsule_name<Managed>()));
    m->deleter(m);
}

template <typename Managed> nb::object make_capsule(Region &r, dlpack::Device device) {
    auto *e = new (std::nothrow) Export<Managed>();
    if (!e)
        throw std::bad_alloc();
    e->shape[0] = static_cast<int64_t>(r.view.byte_size);
    e->strides[0] = 1;
    dlpack::Tensor &t = e->managed.dl_tensor;
    t.data = r.view.addr;
    t.device = device;
    t.ndim = 1;
    t.dtype = {dlpack::kDLUInt, 8, 1};
    t.shape = e->shape;
    t.strides = e->strides;
    t.byte_offset = 0;
    e->managed.manager_ctx = e;
    e->managed.deleter = export_deleter<Managed>;
    if constexpr (std::is_same_v<Managed, dlpack::ManagedTensorVersioned>) {
        e->managed.version = {1, 0};
        e->managed.flags = r.view.writable ? 0 : dlpack::kFlagReadOnly;
    }
    // The tensor's own reference, dropped by export_deleter.
    e->ref = shmreg_retain(r.ref);
    PyObject *capsule = PyCapsule_New(&e->managed, capsule_name<Managed>(), capsule_destructor<Managed>);
    if (!capsule) {
        export_deleter(&e->managed);
        throw nb::python_error();
    }
    return nb::steal(capsule);
}

// A pinned system region is exported as kDLCPU unless the consumer asks for
// kDLCUDAHost (dl_device=(3, 0)): every consumer takes CPU memory (PyTorch
// refuses kDLCUDAHost), and pinned memory stays pinned whatever the capsule
// says, so device copies from it still run at the pinned rate. A capsule the
// consumer refuses after taking it would hold its reference for as long as
// the consumer's traceback lives.
dlpack::Device natural_device(const shmreg_view &v) {
    if (v.kind == SHMREG_KIND_CUDA)
        return {dlpack::kDLCUDA, v.device_id};
    return {dlpack::kDLCPU, 0};
}

nb::object region_dlpack(Region &r, nb::handle stream, nb::handle max_version, nb::handle dl_device,
                         std::optional<bool> copy) {
    check_live(r);
    // `stream` is accepted and ignored: no work of this process writes the
    // region on any stream, so there is nothing for the consumer to wait on.
    dlpack::Device device = natural_device(r.view);
    if (!dl_device.is_none()) {
        nb::tuple want = nb::cast<nb::tuple>(dl_device);
        int type = nb::cast<int>(want[0]), id = nb::cast<int>(want[1]);
        if (type == device.device_type && id == device.device_id) {
            // as it is
        } else if (type == dlpack::kDLCUDAHost && id == 0 && r.view.pinned) {
            device = {dlpack::kDLCUDAHost, 0}; // a pinned region is CUDA host memory too
        } else {
            buffer_error(r, "cannot be exported to that device without a copy");
        }
    }
    if (copy && *copy)
        buffer_error(r, "copy=True: a region is exported as a view, never copied");
    // Before any capsule exists, so a refusal holds no reference.
    if (!r.view.writable && !r.readonly_export_ok)
        buffer_error(r, r.view.kind == SHMREG_KIND_SYSTEM
                            ? "read-only, and a DLPack consumer may ignore the read-only flag "
                              "(PyTorch and CuPy do: writing would then kill the process). For "
                              "a copy use region.read_into(buffer) (e.g. the .numpy() of a "
                              "torch.empty tensor); np.frombuffer(region, np.uint8) gives a "
                              "read-only numpy view; np.from_dlpack(region.readonly_dlpack()) "
                              "exports to a consumer that honours the flag"
                            : "read-only, and a DLPack consumer may ignore the read-only flag "
                              "(PyTorch and CuPy do: writing would then fault). For a copy "
                              "take region.readonly_dlpack() and copy at once, e.g. "
                              "torch.from_dlpack(region.readonly_dlpack()).clone()");
    bool versioned = false;
    if (!max_version.is_none())
        versioned = nb::cast<int>(nb::cast<nb::tuple>(max_version)[0]) >= 1;
    if (versioned)
        return make_capsule<dlpack::ManagedTensorVersioned>(r, device);
    // A legacy capsule cannot say read-only, and a consumer would then write
    // to a read-only mapping (numpy refuses the same way for its own arrays).
    if (!r.view.writable)
        buffer_error(r, "read-only: a legacy DLPack capsule cannot carry the read-only flag; "
                        "the consumer must ask for max_version >= (1, 0)");
    return make_capsule<dlpack::ManagedTensor>(r, device);
}

// ------------------------------------------------------------ guarded copies

// Without shmreg_guard_install the library refuses guarded copies; the
// binding installs the SIGBUS handler on the first one (once per process,
// idempotent), so that a program that never copies keeps its own handlers.
void install_guard() {
    static bool installed = false; // under the GIL
    if (installed)
        return;
    shmreg_err err = shmreg_guard_install();
    if (err != SHMREG_OK)
        raise_last_error(err);
    installed = true;
}

// A copy this large gives the GIL to other threads while it runs (about
// 5 us of copying; below it the release would cost more than it frees).
constexpr size_t nogil_copy_bytes = 64 << 10;

// A guarded copy between the window (from `offset`) and a buffer of the
// caller's, as many bytes as the buffer holds: FAULT (shmreg.Fault) when the
// client truncated its object, and the process lives.
void guarded_copy(Region &r, nb::handle buffer, nb::handle offset_arg, bool into_buffer) {
    size_t offset = size_arg(offset_arg, "offset");
    check_live(r);
    install_guard();
    Py_buffer buf;
    int flags = PyBUF_C_CONTIGUOUS | (into_buffer ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(buffer.ptr(), &buf, flags) < 0) {
        PyErr_Clear();
        raise_type("buffer", into_buffer ? "a writable C-contiguous buffer" : "a C-contiguous buffer",
                   buffer);
    }
    size_t n = static_cast<size_t>(buf.len);
    shmreg_err err;
    std::string message;
    {
        // The region's own reference for the copy: another thread may
        // release `r` while this one runs without the GIL.
        shmreg_region *ref = shmreg_retain(r.ref);
        auto copy = [&] {
            err = into_buffer ? shmreg_copy_from_view(ref, &r.view, offset, buf.buf, n)
                              : shmreg_copy_to_view(ref, &r.view, offset, buf.buf, n);
            if (err != SHMREG_OK)
                message = shmreg_last_error();
        };
        if (n >= nogil_copy_bytes) {
            nb::gil_scoped_release nogil;
            copy();
        } else {
            copy();
        }
        shmreg_release(ref);
    }
    PyBuffer_Release(&buf);
    if (err != SHMREG_OK)
        raise_error(err, message);
}

nb::tuple region_dlpack_device(const Region &r) {
    dlpack::Device d = natural_device(r.view);
    return nb::make_tuple(d.device_type, d.device_id);
}

nb::str region_repr(const Region &r) {
    if (!r.ref)
        return nb::str("<shmreg.Region {!r} released>").format(r.name);
    return nb::str("<shmreg.Region {!r} {} {} bytes at 0x{:x}{}>")
        .format(r.name, r.view.kind == SHMREG_KIND_CUDA ? "cuda" : "system", r.view.byte_size,
                reinterpret_cast<uintptr_t>(r.view.addr), r.view.writable ? "" : " read-only");
}

// A second Region (a reference of its own) whose DLPack export carries the
// read-only flag instead of being refused: for a consumer the caller knows
// honours the flag (numpy 2.1 and later).
Region region_readonly_dlpack(const Region &r) {
    check_live(r);
    Region out(shmreg_retain(r.ref), r.view, r.name);
    out.readonly_export_ok = true;
    return out;
}

void region_release(Region &r) {
    shmreg_region *ref = r.ref;
    r.ref = nullptr;
    shmreg_release(ref);
}

void guarded_copy_into(Region &r, nb::handle buffer, nb::handle offset) {
    guarded_copy(r, buffer, offset, true);
}

void guarded_copy_from(Region &r, nb::handle buffer, nb::handle offset) {
    guarded_copy(r, buffer, offset, false);
}

} // namespace

void bind_region(nb::module_ &m) {
    using namespace nb::literals;
    nb::class_<Region>(
        m, "Region", nb::type_slots(region_slots),
        "One counted reference to a window of a region, from Registry.acquire.\n\n"
        "release() (idempotent), the end of a with block or the object going drops it.\n"
        "memoryview(region) (system regions) and the DLPack protocol (np.from_dlpack,\n"
        "torch.from_dlpack, cupy.from_dlpack) give zero-copy views: a 1-D uint8 array of\n"
        "byte_size elements (reinterpret it with .view(dtype)), read-only when the region\n"
        "was registered read-only. Each such view holds a reference of its own, so the\n"
        "memory stays mapped until the last view is gone, even after release() and\n"
        "Registry.unregister().")
        .def("release", &region_release, "Drop this reference (idempotent).")
        .def("__enter__", [](nb::handle self) { return self; },
             nb::sig("def __enter__(self) -> Region"))
        .def("__exit__", [](Region &r, nb::handle, nb::handle, nb::handle) { region_release(r); },
             nb::arg("exc_type").none(), nb::arg("exc").none(), nb::arg("tb").none(),
             nb::sig("def __exit__(self, exc_type: object, exc: object, tb: object, /) -> None"))
        .def("__dlpack__", &region_dlpack, nb::kw_only(), "stream"_a.none() = nb::none(),
             "max_version"_a.none() = nb::none(), "dl_device"_a.none() = nb::none(), "copy"_a.none() = nb::none(),
             nb::sig("def __dlpack__(self, *, stream: object = None, "
                     "max_version: tuple[int, int] | None = None, "
                     "dl_device: tuple[int, int] | None = None, "
                     "copy: bool | None = None) -> typing_extensions.CapsuleType"),
             "A DLPack capsule of the window: 'dltensor_versioned' (DLPack 1.0) when\n"
             "max_version >= (1, 0), else a legacy 'dltensor'. A read-only region is refused\n"
             "(BufferError: PyTorch and CuPy ignore DLPack's read-only flag) unless it comes\n"
             "from readonly_dlpack(). The tensor holds its own reference.")
        .def("__dlpack_device__", &region_dlpack_device,
             nb::sig("def __dlpack_device__(self) -> tuple[int, int]"),
             "(1, 0) kDLCPU for a system region (a pinned one also exports as kDLCUDAHost when\n"
             "asked with dl_device=(3, 0)), (2, device) kDLCUDA for a CUDA region.")
        .def("read_into", &guarded_copy_into, "buffer"_a.none(), "offset"_a.none() = 0,
             nb::sig("def read_into(self, buffer: typing_extensions.Buffer, offset: int = 0) -> None"),
             "Copy len(buffer) bytes of the window, from `offset`, into `buffer` (any writable\n"
             "C-contiguous buffer: bytearray, numpy array, ...). A guarded copy: when the client\n"
             "truncated its object it raises shmreg.Fault, and the process lives. System\n"
             "regions only. Large copies run without the GIL.")
        .def("write_from", &guarded_copy_from, "buffer"_a.none(), "offset"_a.none() = 0,
             nb::sig("def write_from(self, buffer: typing_extensions.Buffer, offset: int = 0) -> None"),
             "Copy all of `buffer` into the window from `offset`, guarded as read_into.")
        .def("readonly_dlpack", &region_readonly_dlpack,
             "A Region of its own (release it too) whose DLPack export of a read-only region\n"
             "carries DLPack's read-only flag instead of being refused: only for a consumer\n"
             "that honours the flag, e.g. np.from_dlpack(region.readonly_dlpack()).")
        .def("__repr__", &region_repr)
        .def_prop_ro("name", [](const Region &r) { return r.name; },
                     nb::sig("def name(self) -> str"))
        .def_prop_ro("addr", [](const Region &r) { return reinterpret_cast<uintptr_t>(r.view.addr); },
                     "The window's address (a device pointer for CUDA regions).")
        .def_prop_ro("byte_size", [](const Region &r) { return r.view.byte_size; })
        .def_prop_ro("kind", [](const Region &r) {
            return r.view.kind == SHMREG_KIND_CUDA ? "cuda" : "system";
        }, "'system' or 'cuda'.")
        .def_prop_ro("device_id", [](const Region &r) { return r.view.device_id; },
                     "The CUDA device; -1 for system regions.")
        .def_prop_ro("pinned", [](const Region &r) { return r.view.pinned != 0; })
        .def_prop_ro("writable", [](const Region &r) { return r.view.writable != 0; })
        .def_prop_ro("released", [](const Region &r) { return r.ref == nullptr; });
}

} // namespace shmreg_py
