"""DLPack: versioned and legacy capsules, devices, flags, numpy."""

import pytest

import shmreg
from dlpack_layout import DLManagedTensorVersioned, PyCapsule_GetName, PyCapsule_GetPointer

np = pytest.importorskip("numpy")


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


def test_readonly_export_refused_by_default(reg, shm):
    # PyTorch and CuPy ignore DLPack's read-only flag: a read-only region is
    # refused, before any capsule (and so any reference) exists.
    reg.register_system("ro", shm.key, 64, readonly=True)
    with reg.acquire("ro", 0, 64) as region:
        for kwargs in ({}, {"max_version": (1, 0)}, {"max_version": (1, 0), "dl_device": (1, 0)}):
            with pytest.raises(BufferError, match="read-only.*read_into") as info:
                region.__dlpack__(**kwargs)
            del info
            assert reg.status("ro")[0].in_use == 1  # the Region's own, nothing more
        with pytest.raises(BufferError, match="read-only"):
            np.from_dlpack(region)
        assert reg.status("ro")[0].in_use == 1


def test_readonly_dlpack_carries_the_flag(reg, shm):
    reg.register_system("ro", shm.key, 64, readonly=True)
    with reg.acquire("ro", 0, 64) as region:
        with region.readonly_dlpack() as trusted:
            assert reg.status("ro")[0].in_use == 2  # a reference of its own
            cap = trusted.__dlpack__(max_version=(1, 0))
            mt = DLManagedTensorVersioned.from_address(PyCapsule_GetPointer(cap, b"dltensor_versioned"))
            assert mt.flags & 1  # DLPACK_FLAG_BITMASK_READ_ONLY
            del cap, mt
            # A legacy capsule could not say read-only: refused, as numpy refuses its own.
            with pytest.raises(BufferError, match="legacy"):
                trusted.__dlpack__()
        assert reg.status("ro")[0].in_use == 1
        region.release()
        with pytest.raises(BufferError, match="released"):
            region.readonly_dlpack()


class CapsuleTaker:
    """A DLPack consumer that takes the capsule and then refuses it, keeping
    the failure (and its traceback) as a test report would."""

    def __init__(self) -> None:
        self.kept: list[BaseException] = []

    def take(self, producer) -> None:
        try:
            capsule = producer.__dlpack__(max_version=(1, 0))
            raise RuntimeError(f"unsupported device of {capsule!r}")
        except (RuntimeError, BufferError) as e:
            self.kept.append(e)


def test_refused_export_keeps_no_reference(reg, shm):
    # What a consumer that refuses a read-only region sees: the refusal comes
    # from __dlpack__ itself, so a kept traceback holds no capsule.
    reg.register_system("ro", shm.key, 64, readonly=True)
    taker = CapsuleTaker()
    with reg.acquire("ro", 0, 64) as region:
        taker.take(region)
    assert isinstance(taker.kept[0], BufferError)
    assert reg.status("ro")[0].in_use == 0
    # A capsule a consumer took and refused gives its reference back only
    # with the traceback that holds it (documented): here, with the kept error.
    reg.register_system("rw", shm.key, 64)
    with reg.acquire("rw", 0, 64) as region:
        taker.take(region)
    assert reg.status("rw")[0].in_use == 1
    taker.kept.clear()
    assert reg.status("rw")[0].in_use == 0


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
        with region.readonly_dlpack() as trusted:
            arr = np.from_dlpack(trusted)
        assert not arr.flags.writeable
        assert arr.tobytes() == shm.read(0, 64)
        with pytest.raises(ValueError):
            arr[0] = 1
        del arr
        view = np.frombuffer(region, np.uint8)  # the default read-only path
        assert not view.flags.writeable and view.tobytes() == shm.read(0, 64)
        del view
