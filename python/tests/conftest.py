"""Fixtures of the Python suite: shm objects, registries, and a check after
every test that nothing leaked: no descriptor, no mapping of a test object,
no test object left in /dev/shm, no reference left in a registry."""

from __future__ import annotations

import gc
import itertools
import os

import pytest

import shmreg

PREFIX = f"shmreg-pytest-{os.getpid()}-"
_serial = itertools.count()


def _driver_owned(fd: str) -> bool:
    # The CUDA driver opens its device nodes lazily, per device and context,
    # and keeps them for the process's life: not a leak of this library.
    try:
        return os.readlink(f"/proc/self/fd/{fd}").startswith("/dev/nvidia")
    except OSError:  # the listing's own descriptor, already closed
        return True


def open_fds() -> set[str]:
    return {fd for fd in os.listdir("/proc/self/fd") if not _driver_owned(fd)}


# CUDA initialises (opening the driver's descriptors) on the first call that
# asks; ask once here, before any test takes its baseline.
shmreg.cuda_available()


def test_mappings() -> list[str]:
    with open("/proc/self/maps") as f:
        return [line.rstrip() for line in f if PREFIX in line]


test_mappings.__test__ = False  # type: ignore[attr-defined]


def shm_files() -> list[str]:
    return sorted(n for n in os.listdir("/dev/shm") if n.startswith(PREFIX))


@pytest.fixture(autouse=True)
def no_leaks():
    """Set up first, torn down last: runs after every other fixture's cleanup."""
    gc.collect()
    fds = open_fds()
    yield
    gc.collect()
    assert test_mappings() == [], "a test object is still mapped"
    assert shm_files() == [], "a test object is left in /dev/shm"
    leaked = open_fds() - fds
    assert not leaked, "descriptors leaked: " + ", ".join(
        f"{fd} -> {os.readlink(f'/proc/self/fd/{fd}')}" for fd in leaked if os.path.exists(f"/proc/self/fd/{fd}"))


class ShmObject:
    """A POSIX shm object made with os (what glibc's shm_open does on Linux)."""

    def __init__(self, size: int) -> None:
        self.name = PREFIX + str(next(_serial))
        self.key = "/" + self.name
        self.path = "/dev/shm/" + self.name
        self.size = size
        fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        try:
            os.ftruncate(fd, size)
        finally:
            os.close(fd)

    def read(self, offset: int = 0, size: int | None = None) -> bytes:
        with open(self.path, "rb") as f:
            f.seek(offset)
            return f.read(self.size - offset if size is None else size)

    def write(self, offset: int, data: bytes) -> None:
        with open(self.path, "r+b") as f:
            f.seek(offset)
            f.write(data)

    def unlink(self) -> None:
        if os.path.exists(self.path):
            os.unlink(self.path)


@pytest.fixture
def make_shm():
    made: list[ShmObject] = []

    def make(size: int = 4096, fill: bytes | None = None) -> ShmObject:
        obj = ShmObject(size)
        made.append(obj)
        if fill is not None:
            obj.write(0, (fill * (size // len(fill) + 1))[:size])
        return obj

    yield make
    for obj in made:
        obj.unlink()


@pytest.fixture
def shm(make_shm) -> ShmObject:
    return make_shm(1 << 16, fill=bytes(range(256)))


@pytest.fixture
def reg():
    # pin_policy "never": pinning is the GPU suite's subject; here a region is
    # the same with and without a GPU in the machine.
    r = shmreg.Registry(pin_policy="never")
    yield r
    # Every test must leave its references released; the stats prove it.
    if not r.closed:
        stats = r.stats()
        r.close()
        assert stats.references == 0 and stats.detached_regions == 0, stats
