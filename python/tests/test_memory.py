"""No call leaks memory, on its success or its error path: memory use stays
flat over many rounds of every call (a leak of one small struct a round
would show as megabytes)."""

import ctypes
import gc

import pytest

import shmreg

np = pytest.importorskip("numpy")


def rss_kib() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4


def test_memory_stays_flat(reg, shm):
    reg.register_system("a", shm.key, 4096)
    reg.register_system("ro", shm.key, 64, readonly=True)

    buf = bytearray(16)

    def rounds(n):
        for _ in range(n):
            with reg.acquire("a", 0, 4096) as r:
                np.from_dlpack(r)
                memoryview(r)
                r.__dlpack__()
                r.__dlpack__(max_version=(1, 0))
            with reg.acquire("ro", 0, 16) as r:
                with r.readonly_dlpack() as trusted:
                    np.from_dlpack(trusted)
                with pytest.raises(BufferError):
                    r.__dlpack__()  # read-only: refused by default
                r.read_into(buf)
                with pytest.raises(shmreg.InvalidArgument):
                    r.write_from(buf)  # read-only: the library refuses
                with pytest.raises((BufferError, TypeError)):
                    ctypes.c_char.from_buffer(r)  # a writable buffer of a read-only region
            with pytest.raises(shmreg.NotFound):
                reg.acquire("missing", 0, 1)
            with pytest.raises(shmreg.AlreadyExists):
                reg.register_system("a", shm.key, 16)
            reg.status()
            reg.stats()

    rounds(3000)  # warm: allocator pools, numpy's caches
    gc.collect()
    before = rss_kib()
    rounds(15000)
    gc.collect()
    growth = rss_kib() - before
    assert growth < 1024, f"memory grew by {growth} KiB over 15000 rounds"
    assert reg.stats().references == 0
