"""DLPack: versioned and legacy capsules, devices, flags, numpy."""

import ctypes

import pytest

import shmreg

np = pytest.importorskip("numpy")

PyCapsule_GetName = ctypes.pythonapi.PyCapsule_GetName
PyCapsule_GetName.restype = ctypes.c_char_p
PyCapsule_GetName.argtypes = [ctypes.py_object]
PyCapsule_GetPointer = ctypes.pythonapi.PyCapsule_GetPointer
PyCapsule_GetPointer.restype = ctypes.c_void_p
PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p), ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


def capsule_name(capsule) -> str:
    return PyCapsule_GetName(capsule).decode()


def test_versioned_capsule(reg, shm):
    reg.register_system("a", shm.key, 4096)
    with reg.acquire("a", 100, 200) as region:
        cap = region.__dlpack__(max_version=(1, 0))
        assert capsule_name(cap) == "dltensor_versioned"
        mt = DLManagedTensorVersioned.from_address(PyCapsule_GetPointer(cap, b"dltensor_versioned"))
        t = mt.dl_tensor
        assert (mt.major, mt.minor, mt.flags) == (1, 0, 0)
        assert (t.device.device_type, t.device.device_id, t.ndim) == (1, 0, 1)
        assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (1, 8, 1)  # kDLUInt 8
        assert (t.shape[0], t.strides[0], t.byte_offset) == (200, 1, 0)
        assert t.data == region.addr
        assert reg.status("a")[0].in_use == 2
        del cap  # an unconsumed capsule gives its reference back
        assert reg.status("a")[0].in_use == 1
        assert capsule_name(region.__dlpack__(max_version=(2, 3))) == "dltensor_versioned"


def test_legacy_capsule(reg, shm):
    reg.register_system("a", shm.key, 4096)
    with reg.acquire("a", 0, 64) as region:
        for kwargs in ({}, {"stream": None}, {"max_version": (0, 8)}):
            cap = region.__dlpack__(**kwargs)
            assert capsule_name(cap) == "dltensor"
            del cap
        assert reg.status("a")[0].in_use == 1


def test_readonly_flag(reg, shm):
    reg.register_system("ro", shm.key, 64, readonly=True)
    with reg.acquire("ro", 0, 64) as region:
        cap = region.__dlpack__(max_version=(1, 0))
        mt = DLManagedTensorVersioned.from_address(PyCapsule_GetPointer(cap, b"dltensor_versioned"))
        assert mt.flags & 1  # DLPACK_FLAG_BITMASK_READ_ONLY
        del cap, mt
        # A legacy capsule could not say read-only: refused, as numpy refuses its own.
        with pytest.raises(BufferError, match="read-only"):
            region.__dlpack__()


def test_devices_and_copy(reg, shm):
    reg.register_system("a", shm.key, 64)
    with reg.acquire("a", 0, 64) as region:
        assert region.__dlpack_device__() == (1, 0)
        del_ = region.__dlpack__(max_version=(1, 0), dl_device=(1, 0))
        del del_
        with pytest.raises(BufferError):
            region.__dlpack__(max_version=(1, 0), dl_device=(2, 0))
        with pytest.raises(BufferError, match="copy"):
            region.__dlpack__(max_version=(1, 0), copy=True)
        region.__dlpack__(max_version=(1, 0), copy=False)
    assert reg.status("a")[0].in_use == 0


def test_numpy_zero_copy(reg, shm):
    reg.register_system("a", shm.key, 4096)
    with reg.acquire("a", 256, 1024) as region:
        arr = np.from_dlpack(region)
        assert arr.dtype == np.uint8 and arr.shape == (1024,)
        assert arr.ctypes.data == region.addr
        assert arr.flags.writeable
        assert arr.tobytes() == shm.read(256, 1024)
        floats = arr.view(np.float32)
        floats[:] = 1.5
        assert np.frombuffer(shm.read(256, 1024), np.float32).tolist() == [1.5] * 256
        del arr, floats


def test_numpy_readonly(reg, shm):
    reg.register_system("ro", shm.key, 64, readonly=True)
    with reg.acquire("ro", 0, 64) as region:
        if tuple(int(x) for x in np.__version__.split(".")[:2]) < (2, 1):
            pytest.skip("numpy < 2.1 asks for legacy DLPack only")
        arr = np.from_dlpack(region)
        assert not arr.flags.writeable
        assert arr.tobytes() == shm.read(0, 64)
        with pytest.raises(ValueError):
            arr[0] = 1
        del arr
