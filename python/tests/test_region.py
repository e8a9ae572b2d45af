"""Region: acquire, release, the context manager, the buffer protocol."""

import ctypes

import pytest

import shmreg


def test_acquire_properties(reg, shm):
    reg.register_system("a", shm.key, 4096, 1024)
    region = reg.acquire("a", 16, 100)
    try:
        assert (region.name, region.kind, region.byte_size, region.device_id) == ("a", "system", 100, -1)
        assert region.writable and not region.pinned and not region.released
        assert region.addr != 0
        assert "'a'" in repr(region) and "100 bytes" in repr(region)
        assert reg.status("a")[0].in_use == 1
    finally:
        region.release()
    assert region.released and "released" in repr(region)
    region.release()  # idempotent
    assert reg.status("a")[0].in_use == 0


def test_acquire_errors(reg, shm):
    reg.register_system("a", shm.key, 100)
    with pytest.raises(shmreg.NotFound, match="'b'"):
        reg.acquire("b", 0, 1)
    with pytest.raises(shmreg.OutOfBounds):
        reg.acquire("a", 0, 101)
    with pytest.raises(shmreg.OutOfBounds):
        reg.acquire("a", 101, 0)
    with pytest.raises(shmreg.OutOfBounds):
        reg.acquire("a", 1, 2**64 - 1)
    with pytest.raises(shmreg.InvalidArgument, match="name must be a str without NUL"):
        reg.acquire("a\0", 0, 1)
    # Argument errors name the argument and the value.
    with pytest.raises(shmreg.InvalidArgument, match=r"^offset must be an int in \[0, 2\*\*64\), not -1$"):
        reg.acquire("a", -1, 1)
    with pytest.raises(shmreg.InvalidArgument, match=r"byte_size .* not 18446744073709551616"):
        reg.acquire("a", 0, 2**64)
    with pytest.raises(TypeError, match=r"^name must be a str, not b'a' \(bytes\)$"):
        reg.acquire(b"a", 0, 1)
    with pytest.raises(TypeError, match=r"^byte_size must be an int, not '1' \(str\)$"):
        reg.acquire("a", 0, "1")
    with pytest.raises(TypeError, match=r"^offset must be an int, not True \(bool\)$"):
        reg.acquire("a", True, 1)
    with pytest.raises(TypeError, match=r"^tag must be a str, not 3 \(int\)$"):
        reg.acquire("a", 0, 1, tag=3)
    assert reg.stats().references == 0


def test_context_manager_releases(reg, shm):
    reg.register_system("a", shm.key, 100)
    with reg.acquire("a", 0, 100) as region:
        assert isinstance(region, shmreg.Region)
        assert reg.status("a")[0].in_use == 1
    assert region.released and reg.status("a")[0].in_use == 0
    with pytest.raises(ZeroDivisionError):
        with reg.acquire("a", 0, 100):
            1 / 0
    assert reg.status("a")[0].in_use == 0


def test_dropping_the_object_releases(reg, shm):
    reg.register_system("a", shm.key, 100)
    region = reg.acquire("a", 0, 100)
    del region
    assert reg.status("a")[0].in_use == 0


def test_zero_size_window(reg, shm):
    reg.register_system("a", shm.key, 100)
    with reg.acquire("a", 50, 0) as region:
        assert region.byte_size == 0
        assert len(memoryview(region)) == 0


def test_memoryview_reads_and_writes(reg, shm):
    reg.register_system("a", shm.key, 4096, 4096)
    with reg.acquire("a", 8, 16) as region:
        view = memoryview(region)
        assert view.format == "B" and view.nbytes == 16 and not view.readonly and view.contiguous
        assert bytes(view) == shm.read(4096 + 8, 16)
        view[:4] = b"abcd"
        assert shm.read(4096 + 8, 4) == b"abcd"
        shm.write(4096 + 12, b"xyz")
        assert bytes(view[4:7]) == b"xyz"
        assert reg.status("a")[0].in_use == 2  # the view holds its own reference
        view.release()
        assert reg.status("a")[0].in_use == 1


def test_memoryview_of_a_readonly_region(reg, shm):
    reg.register_system("ro", shm.key, 64, readonly=True)
    with reg.acquire("ro", 0, 64) as region:
        assert not region.writable
        view = memoryview(region)
        assert view.readonly and bytes(view) == shm.read(0, 64)
        with pytest.raises(TypeError):
            view[0] = 1
        with pytest.raises((BufferError, TypeError)):
            (ctypes.c_char * 64).from_buffer(region)  # asks for a writable buffer
        view.release()
    assert reg.status("ro")[0].in_use == 0


def test_released_region_has_no_buffer(reg, shm):
    reg.register_system("a", shm.key, 64)
    region = reg.acquire("a", 0, 64)
    region.release()
    with pytest.raises(BufferError, match="released"):
        memoryview(region)
    with pytest.raises(BufferError, match="released"):
        region.__dlpack__()


def test_regions_cannot_be_made_directly():
    with pytest.raises(TypeError):
        shmreg.Region()
