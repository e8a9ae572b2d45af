"""The lifetime rule: an array or view made from a region holds its own
reference, so the mapping outlives release(), unregister() and the registry."""

import gc
import time
import threading

import pytest

import shmreg
from conftest import test_mappings

np = pytest.importorskip("numpy")


def test_array_outlives_release_and_unregister(reg, shm):
    reg.register_system("a", shm.key, 4096)
    with reg.acquire("a", 0, 4096) as region:
        arr = np.from_dlpack(region)
    reg.unregister("a")
    (s,) = reg.status()
    assert s.pending_unregister and s.in_use == 1
    assert any(shm.name in line for line in test_mappings())
    arr[:4] = [1, 2, 3, 4]  # still mapped: this is the shm object
    assert shm.read(0, 4) == bytes([1, 2, 3, 4])
    del arr
    gc.collect()
    assert reg.status() == []
    assert test_mappings() == []


def test_memoryview_outlives_release_and_unregister(reg, shm):
    reg.register_system("a", shm.key, 128)
    region = reg.acquire("a", 0, 128)
    view = memoryview(region)
    region.release()
    reg.unregister("a")
    assert reg.status()[0].pending_unregister
    view[0] = 42
    assert shm.read(0, 1) == b"\x2a"
    view.release()
    reg.trim()  # the last release handed the region to the reclaim thread
    assert reg.status() == [] and test_mappings() == []


def test_array_outlives_detach_and_the_registry(shm):
    reg = shmreg.Registry("detach", pin_policy="never")
    reg.register_system("a", shm.key, 4096)
    with reg.acquire("a", 0, 4096) as region:
        arr = np.from_dlpack(region)
    reg.unregister("a")
    assert reg.status() == [] and reg.stats().detached_regions == 1
    reg.close()
    del reg
    gc.collect()
    arr[0] = 9
    assert shm.read(0, 1) == b"\x09"
    assert test_mappings()
    del arr
    # The closed registry's reclaim thread unmaps it, then ends.
    for _ in range(5000):
        if not test_mappings():
            break
        time.sleep(0.001)
    assert test_mappings() == []


def test_views_of_views_and_many_arrays(reg, shm):
    reg.register_system("a", shm.key, 4096)
    with reg.acquire("a", 0, 4096) as region:
        arrays = [np.from_dlpack(region)[i:i + 8].view(np.int16) for i in range(0, 64, 8)]
        assert reg.status("a")[0].in_use == 1 + len(arrays)
    reg.unregister("a")
    del arrays[:4]
    assert reg.status()[0].in_use == 4
    del arrays
    assert reg.status() == []


def test_array_freed_on_another_thread(reg, shm):
    reg.register_system("a", shm.key, 64)
    with reg.acquire("a", 0, 64) as region:
        box = [np.from_dlpack(region)]
    reg.unregister("a")
    t = threading.Thread(target=box.clear)
    t.start()
    t.join(10)
    assert not t.is_alive()
    assert reg.status() == []


def test_destroy_under_references_warns(caplog, shm):
    reg = shmreg.Registry(pin_policy="never")
    reg.register_system("a", shm.key, 64)
    region = reg.acquire("a", 0, 64)
    with caplog.at_level("WARNING", logger="shmreg"):
        reg.close()
    assert any(r.name == "shmreg" and r.levelname == "WARNING" for r in caplog.records), caplog.records
    assert not region.released
    memoryview(region)[0] = 1  # still mapped
    region.release()
