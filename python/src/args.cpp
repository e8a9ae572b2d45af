// Arguments checked by the binding itself, so that a bad one is reported by
// its name and value ("byte_size must be an int >= 0, not -1") instead of
// nanobind's generic "incompatible function arguments". The functions take
// nb::handle and convert here; their stubs come from nb::sig.
#include "shmreg_py.h"

#include <Python.h>
#include <algorithm>
#include <cstring>

namespace shmreg_py {

namespace {

std::string repr_of(nb::handle value) {
    PyObject *r = PyObject_Repr(value.ptr());
    if (!r) {
        PyErr_Clear();
        return "<unprintable>";
    }
    Py_ssize_t len;
    const char *s = PyUnicode_AsUTF8AndSize(r, &len);
    std::string out = s ? std::string(s, std::min<Py_ssize_t>(len, 80)) : "<unprintable>";
    if (!s)
        PyErr_Clear();
    Py_DECREF(r);
    return out;
}

std::string type_of(nb::handle value) { return Py_TYPE(value.ptr())->tp_name; }

} // namespace

[[noreturn]] void raise_type(const char *arg, const char *want, nb::handle value) {
    std::string msg = std::string(arg) + " must be " + want + ", not " + repr_of(value) + " (" +
                      type_of(value) + ")";
    PyErr_SetString(PyExc_TypeError, msg.c_str());
    throw nb::python_error();
}

[[noreturn]] void raise_value(const char *arg, const char *want, nb::handle value) {
    raise_error(SHMREG_ERR_INVALID_ARG,
                std::string(arg) + " must be " + want + ", not " + repr_of(value));
}

size_t size_arg(nb::handle value, const char *arg) {
    // bool is an int in Python, never a size here.
    if (!PyLong_Check(value.ptr()) || PyBool_Check(value.ptr()))
        raise_type(arg, "an int", value);
    size_t v = PyLong_AsSize_t(value.ptr());
    if (v == static_cast<size_t>(-1) && PyErr_Occurred()) {
        PyErr_Clear();
        raise_value(arg, "an int in [0, 2**64)", value);
    }
    return v;
}

int int_arg(nb::handle value, const char *arg, long lo, long hi) {
    if (!PyLong_Check(value.ptr()) || PyBool_Check(value.ptr()))
        raise_type(arg, "an int", value);
    int overflow = 0;
    long v = PyLong_AsLongAndOverflow(value.ptr(), &overflow);
    if (overflow || v < lo || v > hi || (v == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        raise_value(arg, ("an int in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]").c_str(),
                    value);
    }
    return static_cast<int>(v);
}

bool bool_arg(nb::handle value, const char *arg) {
    if (!PyBool_Check(value.ptr()))
        raise_type(arg, "True or False", value);
    return value.ptr() == Py_True;
}

std::string str_arg(nb::handle value, const char *arg) {
    if (!PyUnicode_Check(value.ptr()))
        raise_type(arg, "a str", value);
    Py_ssize_t len;
    const char *s = PyUnicode_AsUTF8AndSize(value.ptr(), &len);
    if (!s)
        throw nb::python_error(); // a lone surrogate: Python's own UnicodeEncodeError
    // The C API would see a shorter, different string.
    if (std::memchr(s, '\0', static_cast<size_t>(len)))
        raise_value(arg, "a str without NUL characters", value);
    return std::string(s, static_cast<size_t>(len));
}

std::optional<std::string> optional_str_arg(nb::handle value, const char *arg) {
    if (value.is_none())
        return std::nullopt;
    if (!PyUnicode_Check(value.ptr()))
        raise_type(arg, "a str or None", value);
    return str_arg(value, arg);
}

} // namespace shmreg_py
