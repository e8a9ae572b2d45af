"""Region.read_into and Region.write_from: guarded copies between a region's
window and any buffer. A client that truncates its object under the mapping
turns a copy into shmreg.Fault; the process (this test process) lives."""

import os

import numpy as np
import pytest

import shmreg

PAGE = os.sysconf("SC_PAGE_SIZE")


def test_read_into_copies_the_window(reg, shm):
    reg.register_system("a", shm.key, 4096, offset=100)
    with reg.acquire("a", 256, 1024) as region:
        out = bytearray(1000)
        region.read_into(out)
        assert bytes(out) == shm.read(356, 1000)
        arr = np.zeros(16, np.uint32)  # as many bytes as the buffer holds: 64
        region.read_into(arr, offset=8)
        assert arr.tobytes() == shm.read(364, 64)
        region.read_into(bytearray(0), offset=1024)  # nothing, at the end: fine
        with pytest.raises(shmreg.OutOfBounds):
            region.read_into(bytearray(2), offset=1023)
        with pytest.raises(shmreg.OutOfBounds):
            region.read_into(bytearray(1025))
    assert reg.status("a")[0].in_use == 0


def test_write_from_copies_into_the_window(reg, shm):
    reg.register_system("a", shm.key, 4096)
    with reg.acquire("a", 512, 512) as region:
        region.write_from(b"hello", offset=20)
        assert shm.read(532, 5) == b"hello"
        region.write_from(np.arange(4, dtype=np.float32))
        assert shm.read(512, 16) == np.arange(4, dtype=np.float32).tobytes()
        region.write_from(memoryview(b"xy"), offset=510)
        assert shm.read(1022, 2) == b"xy"
        with pytest.raises(shmreg.OutOfBounds):
            region.write_from(b"xyz", offset=510)


def test_copy_argument_errors(reg, shm):
    reg.register_system("a", shm.key, 64)
    reg.register_system("ro", shm.key, 64, readonly=True)
    with reg.acquire("a", 0, 64) as region:
        with pytest.raises(TypeError, match=r"^buffer must be a writable C-contiguous buffer, not b'ab'"):
            region.read_into(b"ab")  # bytes are immutable
        with pytest.raises(TypeError, match="^buffer must be a C-contiguous buffer, not 3 "):
            region.write_from(3)
        with pytest.raises(TypeError, match="buffer must be a writable C-contiguous"):
            region.read_into(np.zeros((4, 4), np.uint8)[:, 1])  # strided
        with pytest.raises(shmreg.InvalidArgument, match=r"^offset must be an int in .*, not -1$"):
            region.read_into(bytearray(1), offset=-1)
    with reg.acquire("ro", 0, 64) as region:
        out = bytearray(64)
        region.read_into(out)
        assert bytes(out) == shm.read(0, 64)
        with pytest.raises(shmreg.InvalidArgument, match="read-only"):
            region.write_from(b"x")
        assert shm.read(0, 64) == bytes(out)  # unchanged
    region = reg.acquire("a", 0, 64)
    region.release()
    with pytest.raises(BufferError, match="released"):
        region.read_into(bytearray(1))
    assert reg.stats().references == 0


@pytest.mark.parametrize("size", [1, 4 * 1024 * 1024])  # with and without the GIL
def test_truncated_object_raises_fault_and_the_process_lives(reg, make_shm, size):
    obj = make_shm(size + 2 * PAGE)
    reg.register_system("t", obj.key, size + 2 * PAGE)
    with reg.acquire("t", 0, size + 2 * PAGE) as region:
        before = bytearray(16)
        region.read_into(before)
        os.truncate(obj.path, 0)  # the client shrinks its object under the mapping
        with pytest.raises(shmreg.Fault, match="'t'") as info:
            region.read_into(bytearray(size + PAGE))
        assert info.value.code == 11
        with pytest.raises(shmreg.Fault):
            region.write_from(bytes(size + PAGE))
        # Another region, still whole, is served as before.
        other = make_shm(4096, fill=b"ok")
        reg.register_system("whole", other.key, 4096)
        with reg.acquire("whole", 0, 4096) as fine:
            out = bytearray(2)
            fine.read_into(out)
            assert bytes(out) == b"ok"
        reg.unregister("whole")
    reg.unregister("t")
    assert reg.stats().references == 0


def test_truncated_memfd_raises_fault(make_shm):
    # An unsealed descriptor (accept_unsealed_fds) can shrink under the
    # mapping, exactly as a shm key can.
    fd = os.memfd_create("shmreg-pytest", os.MFD_CLOEXEC)
    try:
        os.ftruncate(fd, 2 * PAGE)
        os.pwrite(fd, b"abc", 0)
        with shmreg.Registry(pin_policy="never", accept_unsealed_fds=True) as reg:
            reg.register_system_fd("m", fd, 2 * PAGE)
            with reg.acquire("m", 0, 2 * PAGE) as region:
                out = bytearray(3)
                region.read_into(out)
                assert bytes(out) == b"abc"
                os.ftruncate(fd, 0)
                with pytest.raises(shmreg.Fault):
                    region.read_into(bytearray(2 * PAGE))
    finally:
        os.close(fd)

