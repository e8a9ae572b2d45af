"""CUDA IPC, CUDA VMM descriptor and pinned regions made into PyTorch and
CuPy tensors: zero copy, writes that the memory's owner sees, the lifetime
rule. Runs on the GPU machine (python/tests/gpu/run.sh); without a usable
device, or without torch / cupy, every test here is skipped.

A CUDA IPC handle cannot be opened by the process that made it, so its
memory comes from a child process (EXPORTER below, CuPy) that fills it with a
pattern and answers "dump OFFSET SIZE" with the bytes it sees. VMM memory is
made here through the driver API (ctypes over libcuda) and registered twice:
what one registration's tensor writes, the other's reads.
"""

from __future__ import annotations

import ctypes
import gc
import subprocess
import sys
import textwrap

import pytest

import shmreg
from conftest import test_mappings

if not shmreg.cuda_available():
    pytest.skip("no usable CUDA device (shmreg.cuda_available() is False)", allow_module_level=True)

np = pytest.importorskip("numpy")

SIZE = 1 << 20
PATTERN = (np.arange(SIZE) % 251).astype(np.uint8)

EXPORTER = textwrap.dedent("""
    import sys
    import cupy as cp
    n = int(sys.argv[1])
    mem = cp.cuda.memory.Memory(n)  # its own cudaMalloc: the handle's base is the buffer's
    arr = cp.ndarray((n,), dtype=cp.uint8, memptr=cp.cuda.memory.MemoryPointer(mem, 0))
    arr[:] = (cp.arange(n) % 251).astype(cp.uint8)
    cp.cuda.Device().synchronize()
    print(bytes(cp.cuda.runtime.ipcGetMemHandle(mem.ptr)).hex(), flush=True)
    for line in sys.stdin:
        cmd = line.split()
        if cmd[0] == "dump":
            off, k = int(cmd[1]), int(cmd[2])
            cp.cuda.Device().synchronize()
            print(cp.asnumpy(arr[off:off + k]).tobytes().hex(), flush=True)
        else:
            break
""")


class Exporter:
    """A child process owning a cudaMalloc'ed buffer, shared by IPC handle."""

    def __init__(self, size: int) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", EXPORTER, str(size)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().strip()
        if not line:
            self.proc.kill()
            self.proc.wait()
            pytest.fail("the exporter process did not start (is CuPy usable in a child?)")
        self.handle = bytes.fromhex(line)

    def dump(self, offset: int, size: int) -> bytes:
        self.proc.stdin.write(f"dump {offset} {size}\n")
        self.proc.stdin.flush()
        return bytes.fromhex(self.proc.stdout.readline().strip())

    def close(self) -> None:
        self.proc.stdin.write("exit\n")
        self.proc.stdin.close()
        self.proc.stdout.close()
        self.proc.wait(30)


# Made once for the whole test run, and each makes its CUDA context at
# once: a framework's first CUDA call opens descriptors (pipes, eventfds) it
# keeps for the process, and a fixture of that scope is set up before the
# per-test leak check (conftest.no_leaks) takes its baseline.
@pytest.fixture(scope="session")
def torch():
    t = pytest.importorskip("torch")
    if not t.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    t.zeros(1, device="cuda")
    t.cuda.synchronize()
    return t


@pytest.fixture(scope="session")
def cupy():
    cp = pytest.importorskip("cupy")
    cp.zeros(1)
    cp.cuda.Device(0).synchronize()
    return cp


@pytest.fixture
def exporter(cupy):
    # Tests take it before `reg`, so that the registry (and every handle it
    # opened) is closed before the exporter frees its memory and exits.
    e = Exporter(SIZE)
    yield e
    e.close()


@pytest.fixture
def ipc_region(exporter, reg):
    """The exporter's buffer registered as CUDA region "gpu"."""
    reg.register_cuda_ipc("gpu", exporter.handle, 0, SIZE, tag="t")
    (s,) = reg.status("gpu")
    assert (s.kind, s.device_id, s.byte_size, s.key, s.tag) == ("cuda", 0, SIZE, None, "t")
    return "gpu"


# ---------------------------------------------------------------- CUDA IPC

def test_ipc_region_into_torch(torch, exporter, reg, ipc_region):
    with reg.acquire(ipc_region, 4096, 8192) as region:
        assert (region.kind, region.device_id, region.byte_size) == ("cuda", 0, 8192)
        assert region.__dlpack_device__() == (2, 0)
        with pytest.raises(BufferError):
            memoryview(region)  # device memory has no buffer protocol
        t = torch.from_dlpack(region)
        assert t.device == torch.device("cuda", 0) and t.dtype == torch.uint8 and t.shape == (8192,)
        assert t.data_ptr() == region.addr
        assert bytes(t[:64].cpu().numpy()) == bytes(PATTERN[4096:4096 + 64])
        t[:4] = torch.tensor([1, 2, 3, 4], dtype=torch.uint8, device="cuda")
        t.view(torch.float32)[1] = 2.5  # bytes 4..7 of the window
        torch.cuda.synchronize()
        assert exporter.dump(4096, 8) == bytes([1, 2, 3, 4]) + np.float32(2.5).tobytes()
        del t
    assert reg.status(ipc_region)[0].in_use == 0


def test_ipc_region_into_cupy(cupy, exporter, reg, ipc_region):
    with reg.acquire(ipc_region, 0, SIZE) as region:
        a = cupy.from_dlpack(region)
        assert a.dtype == cupy.uint8 and a.shape == (SIZE,) and a.data.ptr == region.addr
        assert bool((a[:1000] == cupy.asarray(PATTERN[:1000])).all())
        a[100:104] = 7
        cupy.cuda.Device().synchronize()
        assert exporter.dump(100, 4) == bytes([7] * 4)
        del a


def test_ipc_tensor_outlives_release_and_unregister(torch, exporter, reg, ipc_region):
    with reg.acquire(ipc_region, 0, SIZE) as region:
        t = torch.from_dlpack(region)
    reg.unregister(ipc_region)
    (s,) = reg.status()
    assert s.pending_unregister and s.in_use == 1
    t[:2] = 42  # the handle is still open: the write lands in the exporter's buffer
    torch.cuda.synchronize()
    assert exporter.dump(0, 2) == bytes([42, 42])
    del t
    gc.collect()
    assert reg.status() == []


def test_ipc_readonly_region(torch, cupy, exporter, reg):
    reg.register_cuda_ipc("ro", exporter.handle, 0, SIZE, readonly=True)
    with reg.acquire("ro", 0, 16) as region:
        assert not region.writable
        # torch and cupy ignore DLPack's read-only flag: refused, with a way
        # to a copy, and no reference left behind by the refusal.
        with pytest.raises(BufferError, match="read-only.*clone"):
            torch.from_dlpack(region)
        with pytest.raises(BufferError, match="read-only"):
            cupy.from_dlpack(region)
        assert reg.status("ro")[0].in_use == 1
        with region.readonly_dlpack() as trusted:
            with pytest.raises(BufferError):
                trusted.__dlpack__()  # legacy capsules cannot carry read-only
            copy = torch.from_dlpack(trusted).clone()
        assert bytes(copy[:16].cpu().numpy()) == bytes(PATTERN[:16])
        copy[0] = 1  # the copy is the caller's own memory
        torch.cuda.synchronize()
        assert exporter.dump(0, 1) == bytes(PATTERN[:1])
        del copy
    gc.collect()
    assert reg.status("ro")[0].in_use == 0


def test_ipc_errors(exporter, reg):
    with pytest.raises(shmreg.InvalidArgument):
        reg.register_cuda_ipc("bad", exporter.handle[:63], 0, SIZE)
    with pytest.raises(shmreg.OutOfBounds):
        reg.register_cuda_ipc("big", exporter.handle, 0, SIZE * 2)
    with pytest.raises(shmreg.Error):
        reg.register_cuda_ipc("junk", bytes(64), 0, SIZE)
    reg.register_cuda_ipc("ok", exporter.handle, 0, SIZE)
    with pytest.raises(shmreg.WrongKind):
        reg.unregister("ok", "system")
    assert [s.name for s in reg.status()] == ["ok"]


# ------------------------------------------------------------ VMM (POSIX fd)

class CUmemLocation(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class CUmemAllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class CUmemAllocationProp(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int),
                ("location", CUmemLocation), ("win32HandleMetaData", ctypes.c_void_p),
                ("allocFlags", CUmemAllocFlags)]


CU_MEM_ALLOCATION_TYPE_PINNED = 1
CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 1
CU_MEM_LOCATION_TYPE_DEVICE = 1


def vmm_allocation():
    """(fd, size, release) of a fresh cuMemCreate allocation on device 0."""
    cuda = ctypes.CDLL("libcuda.so.1")

    def check(rc, what):
        if rc != 0:
            pytest.fail(f"{what} failed: CUresult {rc}")

    check(cuda.cuInit(0), "cuInit")
    prop = CUmemAllocationProp()
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
    prop.location = CUmemLocation(CU_MEM_LOCATION_TYPE_DEVICE, 0)
    gran = ctypes.c_size_t()
    check(cuda.cuMemGetAllocationGranularity(ctypes.byref(gran), ctypes.byref(prop), 0), "cuMemGetAllocationGranularity")
    size = gran.value
    handle = ctypes.c_ulonglong()
    check(cuda.cuMemCreate(ctypes.byref(handle), ctypes.c_size_t(size), ctypes.byref(prop), ctypes.c_ulonglong(0)),
          "cuMemCreate")
    fd = ctypes.c_int(-1)
    rc = cuda.cuMemExportToShareableHandle(ctypes.byref(fd), handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                           ctypes.c_ulonglong(0))
    if rc != 0:
        cuda.cuMemRelease(handle)
        pytest.fail(f"cuMemExportToShareableHandle failed: CUresult {rc}")
    return fd.value, size, lambda: cuda.cuMemRelease(handle)


def test_vmm_fd_region(torch, reg):
    if not shmreg._shmreg._cuda_bits() & 8:
        pytest.skip("device 0 cannot import VMM POSIX descriptors")
    torch.zeros(1, device="cuda")  # the primary context, current on this thread
    import os
    fd, size, release = vmm_allocation()
    try:
        reg.register_cuda_fd("vmm-a", fd, 0, size)
        reg.register_cuda_fd("vmm-b", fd, 0, size)  # a second import of the same memory
    finally:
        os.close(fd)  # the caller keeps its descriptor; the registry needs it no longer
        release()     # the imports hold the allocation
    with reg.acquire("vmm-a", 0, size) as a, reg.acquire("vmm-b", 0, size) as b:
        assert a.__dlpack_device__() == (2, 0) and a.addr != b.addr
        ta, tb = torch.from_dlpack(a), torch.from_dlpack(b)
        ta[:8] = torch.arange(8, dtype=torch.uint8, device="cuda")
        torch.cuda.synchronize()
        assert tb[:8].cpu().tolist() == list(range(8))
    reg.unregister("vmm-a")
    reg.unregister("vmm-b")
    assert reg.status("vmm-a")[0].pending_unregister  # ta, tb still hold references
    tb[8] = 99  # still mapped after release and unregister
    torch.cuda.synchronize()
    assert int(ta[8].item()) == 99
    del ta, tb
    gc.collect()
    assert reg.status() == []


# ------------------------------------------------------------------ pinned

def test_pinned_system_region(make_shm):
    obj = make_shm(SIZE, fill=bytes(range(256)))
    with shmreg.Registry(pin_policy="always") as reg:
        reg.register_system("pinned", obj.key, SIZE)
        (s,) = reg.status()
        assert s.pinned and reg.stats().pinned_bytes >= SIZE
        with reg.acquire("pinned", 0, SIZE) as region:
            # kDLCPU by default (torch refuses kDLCUDAHost); kDLCUDAHost on request.
            assert region.pinned and region.__dlpack_device__() == (1, 0)
            cap = region.__dlpack__(max_version=(1, 0), dl_device=(3, 0))
            del cap
            arr = np.from_dlpack(region)
            assert arr.tobytes()[:256] == bytes(range(256))
            arr[:4] = 5
            assert obj.read(0, 4) == bytes([5] * 4)
            m = memoryview(region)
            assert m[0] == 5
            m.release()
            del arr
        reg.unregister("pinned")
        assert reg.stats().pinned_bytes == 0


def test_pinned_region_into_torch(torch, make_shm):
    obj = make_shm(SIZE, fill=bytes(range(256)))
    with shmreg.Registry(pin_policy="always") as reg:
        reg.register_system("pinned", obj.key, SIZE)
        with reg.acquire("pinned", 0, SIZE) as region:
            # As CPU memory, which pinned host memory also is (dl_device).
            cpu = torch.from_dlpack(region.__dlpack__(max_version=(1, 0), dl_device=(1, 0)))
            assert cpu.device.type == "cpu" and cpu.data_ptr() == region.addr
            # A device copy from it runs at the pinned rate and may be async.
            dev = cpu.to("cuda", non_blocking=True)
            torch.cuda.synchronize()
            assert dev[:256].cpu().tolist() == list(range(256))
            dev[:4] = 9
            cpu[:4].copy_(dev[:4], non_blocking=True)
            torch.cuda.synchronize()
            assert obj.read(0, 4) == bytes([9] * 4)
            del cpu, dev
            # The default export is kDLCPU, which every torch takes: no
            # capsule is taken and refused (whose traceback kept the region
            # mapped when the default was kDLCUDAHost).
            t = torch.from_dlpack(region)
            assert t.device.type == "cpu" and t.data_ptr() == region.addr
            dev = t.to("cuda", non_blocking=True)
            torch.cuda.synchronize()
            assert dev[4:256].cpu().tolist() == list(range(4, 256))
            del t, dev
        reg.unregister("pinned")
    gc.collect()
    assert test_mappings() == []


def test_readonly_system_region_into_torch(torch, make_shm):
    obj = make_shm(SIZE, fill=bytes(range(256)))
    with shmreg.Registry(pin_policy="never") as reg:
        reg.register_system("ro", obj.key, SIZE, readonly=True)
        with reg.acquire("ro", 0, SIZE) as region:
            with pytest.raises(BufferError, match="read-only.*read_into"):
                torch.from_dlpack(region)
            assert reg.status("ro")[0].in_use == 1  # the refusal holds nothing
            t = torch.empty(SIZE, dtype=torch.uint8)
            region.read_into(t.numpy())  # the copy the message points to
            assert t[:256].tolist() == list(range(256))
            t[0] = 7  # the caller's own memory
            assert obj.read(0, 1) == b"\x00"
            del t
        reg.unregister("ro")


def test_pinned_lifetime(torch, make_shm):
    # Every page written, so that the bytes read back are the ones written.
    obj = make_shm(SIZE, fill=bytes(range(256)))
    reg = shmreg.Registry(pin_policy="always")
    reg.register_system("pinned", obj.key, SIZE)
    with reg.acquire("pinned", 0, SIZE) as region:
        t = torch.from_dlpack(region.__dlpack__(max_version=(1, 0), dl_device=(1, 0)))
    reg.unregister("pinned")
    assert reg.status()[0].pending_unregister and reg.stats().pinned_bytes >= SIZE
    reg.close()
    t[0] = 3
    assert obj.read(0, 1) == b"\x03" and test_mappings()
    del t
    gc.collect()
    assert test_mappings() == []
