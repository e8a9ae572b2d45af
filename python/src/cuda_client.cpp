// The client half of the CUDA-region wire format for shmreg.cuda_client:
// shmreg_send_cuda_region, and the reading of a DLPack capsule that a
// framework's __dlpack__ made (the data pointer, the byte size of a compact
// tensor, the device). shmreg/cuda_client.py decides what to send; this file
// only reaches the C API and DLPack's structs.
#include "dlpack.h"
#include "shmreg_py.h"

#include <Python.h>
#include <climits>
#include <cstring>

namespace shmreg_py {

namespace {

// shmreg_send_cuda_region without the GIL: it waits for the server's
// answer. The library checks every argument itself (a negative socket, an
// empty name), so its message is the one the caller sees.
void send_cuda_region(nb::handle sock, nb::handle name, nb::handle ptr, nb::handle byte_size,
                      nb::handle readonly) {
    int fd = int_arg(sock, "sock", INT_MIN, INT_MAX);
    std::string cname = str_arg(name, "name");
    size_t address = size_arg(ptr, "ptr"), size = size_arg(byte_size, "byte_size");
    unsigned flags = bool_arg(readonly, "readonly") ? SHMREG_READONLY : 0;
    shmreg_err err;
    std::string message;
    {
        nb::gil_scoped_release nogil;
        err = shmreg_send_cuda_region(fd, cname.c_str(), reinterpret_cast<const void *>(address), size, flags);
        if (err != SHMREG_OK)
            message = shmreg_last_error(); // this thread's, read before the GIL moves on
    }
    if (err != SHMREG_OK)
        raise_error(err, message);
}

// The tensor inside a capsule of either DLPack name, or nullptr. The capsule
// is only read, never renamed "used_...": its producer's destructor still
// frees it, and the memory stays the producer's tensor's.
const dlpack::Tensor *capsule_tensor(PyObject *capsule) {
    if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
        auto *m = static_cast<dlpack::ManagedTensorVersioned *>(PyCapsule_GetPointer(capsule, "dltensor_versioned"));
        return m ? &m->dl_tensor : nullptr;
    }
    if (PyCapsule_IsValid(capsule, "dltensor")) {
        auto *m = static_cast<dlpack::ManagedTensor *>(PyCapsule_GetPointer(capsule, "dltensor"));
        return m ? &m->dl_tensor : nullptr;
    }
    return nullptr;
}

// Whether strides (in elements) lay shape out row-major without gaps; a
// dimension of one element may have any stride.
bool compact(const int64_t *shape, const int64_t *strides, int32_t ndim) {
    if (!strides)
        return true; // DLPack: NULL strides mean compact row-major
    int64_t expected = 1;
    for (int32_t i = ndim - 1; i >= 0; i--) {
        if (shape[i] != 1 && strides[i] != expected)
            return false;
        expected *= shape[i];
    }
    return true;
}

// (device_type, device_id, data pointer, byte size, compact) of a DLPack
// capsule; the caller judges them.
nb::tuple dlpack_window(nb::handle capsule) {
    const dlpack::Tensor *t = capsule_tensor(capsule.ptr());
    if (!t) {
        PyErr_Clear();
        raise_type("the DLPack capsule", "a capsule named 'dltensor' or 'dltensor_versioned'", capsule);
    }
    if (t->ndim < 0 || (t->ndim > 0 && !t->shape))
        raise_value("the DLPack tensor's ndim and shape", "a shape for every dimension", capsule);
    size_t elements = 1;
    for (int32_t i = 0; i < t->ndim; i++) {
        if (t->shape[i] < 0)
            raise_value("the DLPack tensor's shape", "non-negative sizes", capsule);
        if (__builtin_mul_overflow(elements, static_cast<size_t>(t->shape[i]), &elements))
            raise_value("the DLPack tensor's shape", "a size that fits 64 bits", capsule);
    }
    size_t item = (static_cast<size_t>(t->dtype.bits) * t->dtype.lanes + 7) / 8, bytes = 0;
    if (__builtin_mul_overflow(elements, item, &bytes))
        raise_value("the DLPack tensor's shape", "a size that fits 64 bits", capsule);
    uintptr_t data = reinterpret_cast<uintptr_t>(t->data) + t->byte_offset;
    return nb::make_tuple(t->device.device_type, t->device.device_id, data, bytes,
                          compact(t->shape, t->strides, t->ndim));
}

} // namespace

void bind_cuda_client(nb::module_ &m) {
    using namespace nb::literals;
    m.def("send_cuda_region", &send_cuda_region, "sock"_a.none(), "name"_a.none(), "ptr"_a.none(),
          "byte_size"_a.none(), "readonly"_a.none() = false,
          nb::sig("def send_cuda_region(sock: int, name: str, ptr: int, byte_size: int, "
                  "readonly: bool = False) -> None"),
          "shmreg_send_cuda_region: register [ptr, ptr + byte_size) of this process's GPU\n"
          "memory as `name` with the server at the other end of the connected AF_UNIX\n"
          "SOCK_SEQPACKET socket `sock` (a descriptor in blocking mode; SO_RCVTIMEO bounds\n"
          "the wait), and wait for its answer. Raises the shmreg.Error subclass of the\n"
          "library's or the server's code, with its message. Runs without the GIL.\n"
          "shmreg.cuda_client.register_tensor is the call for tensors.");
    m.def("dlpack_window", &dlpack_window, "capsule"_a.none(),
          nb::sig("def dlpack_window(capsule: object) -> tuple[int, int, int, int, bool]"),
          "(device_type, device_id, data pointer + byte_offset, byte size, compact) of a\n"
          "DLPack capsule, read without consuming it.");
}

} // namespace shmreg_py
