"""A client process of test_framework_tensors.py: it allocates a PyTorch
tensor the way MODE says, fills it with a known pattern, registers it with
the server's --uds socket through shmreg.cuda_client, prints one JSON line of
facts, then obeys commands on stdin, one a line, answering each with one
JSON line. CUDA IPC cannot be opened by the process that exported it, so
the tensor lives here and the server opens it from its own process.

    tensor_client.py MODE SOCKET NAME

MODE (the parent sets PYTORCH_CUDA_ALLOC_CONF and CUDA_VISIBLE_DEVICES):
    expandable    a 50 MiB window of an expandable segment, starting mid-chunk
    pool          an allocation of a pool made with a POSIX-descriptor handle
                  type, set as the device's current pool before torch allocates
    default-pool  an allocation of the device's default pool: refused
    cached-block  a slice at an offset inside a block of the caching allocator
    plain         a tensor of its own (the device named by UUID in the parent)

Commands:
    prepare OFF SIZE     write the pattern again, then 0xEE into [OFF, OFF+SIZE)
    check IN OUT SIZE    whether [OUT, OUT+SIZE) holds the pattern of
                         [IN, IN+SIZE), and the bytes around it are untouched
    close                close the connection (the server unregisters)
    exit                 free everything and exit 0
Byte i of the tensor holds (7 * i + 3) % 251 until a command changes it.
"""
import ctypes
import json
import os
import sys

MIB = 1 << 20
CLEAR = 0xEE


def pattern(torch, start, size):
    i = torch.arange(start, start + size, dtype=torch.int64, device="cuda")
    return ((7 * i + 3) % 251).to(torch.uint8)


class Driver:
    """The few driver calls the tests' facts need, through libcuda.so.1."""

    CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE = 17

    def __init__(self):
        self.lib = ctypes.CDLL("libcuda.so.1")
        self.ok(self.lib.cuInit(0), "cuInit")

    def ok(self, rc, what):
        if rc != 0:
            raise RuntimeError(f"{what}: CUresult {rc}")

    def address_range(self, ptr):
        """(base, size) of the allocation (a VMM chunk: its mapping) holding ptr."""
        base, size = ctypes.c_uint64(), ctypes.c_size_t()
        self.ok(self.lib.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(ptr)),
                "cuMemGetAddressRange")
        return base.value, size.value

    def chunks(self, ptr, nbytes):
        """[(base, size)] of each address range [ptr, ptr + nbytes) touches."""
        out, at = [], ptr
        while at < ptr + nbytes:
            base, size = self.address_range(at)
            out.append((base, size))
            at = base + size
        return out

    def handle_types(self, ptr):
        """The handle types the VMM allocation holding ptr was created with
        (CUmemAllocationProp.requestedHandleTypes: 1 POSIX descriptor, 8
        fabric)."""

        class AllocationProp(ctypes.Structure):  # CUmemAllocationProp, 32 bytes
            _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int),
                        ("location", ctypes.c_int * 2), ("win32HandleMetaData", ctypes.c_void_p),
                        ("allocFlags", ctypes.c_ubyte * 8)]

        handle, prop = ctypes.c_ulonglong(), AllocationProp()
        self.ok(self.lib.cuMemRetainAllocationHandle(ctypes.byref(handle), ctypes.c_void_p(ptr)),
                "cuMemRetainAllocationHandle")
        try:
            self.ok(self.lib.cuMemGetAllocationPropertiesFromHandle(ctypes.byref(prop), handle),
                    "cuMemGetAllocationPropertiesFromHandle")
        finally:
            self.lib.cuMemRelease(handle)
        return prop.requestedHandleTypes

    def pool_of(self, ptr):
        pool = ctypes.c_void_p()
        self.ok(self.lib.cuPointerGetAttribute(ctypes.byref(pool), self.CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE,
                                               ctypes.c_uint64(ptr)), "cuPointerGetAttribute(MEMPOOL_HANDLE)")
        return pool.value or 0

    def exportable_pool(self):
        """A pool of device 0 with handle type POSIX descriptor, made the
        device's current pool: cudaMallocAsync (torch's backend:cudaMallocAsync)
        then allocates from it."""

        class Location(ctypes.Structure):
            _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]

        class PoolProps(ctypes.Structure):  # CUmemPoolProps: 88 bytes, the rest zero
            _fields_ = [("allocType", ctypes.c_int), ("handleTypes", ctypes.c_int), ("location", Location),
                        ("win32SecurityAttributes", ctypes.c_void_p), ("reserved", ctypes.c_ubyte * 64)]

        device, ctx, pool = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_void_p()
        self.ok(self.lib.cuDeviceGet(ctypes.byref(device), 0), "cuDeviceGet")
        # The primary context, torch's own, current on this thread.
        self.ok(self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), device), "cuDevicePrimaryCtxRetain")
        self.ok(self.lib.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
        props = PoolProps(allocType=1, handleTypes=1,  # PINNED, POSIX_FILE_DESCRIPTOR
                          location=Location(type=1, id=device.value))  # LOCATION_TYPE_DEVICE
        self.ok(self.lib.cuMemPoolCreate(ctypes.byref(pool), ctypes.byref(props)), "cuMemPoolCreate")
        self.ok(self.lib.cuDeviceSetMemPool(device, pool), "cuDeviceSetMemPool")
        return pool.value


def allocate(mode, torch, driver):
    """(the tensor to register, the objects that must outlive it, facts)."""
    if mode == "expandable":
        # A slice 3 MiB + 4103 bytes into a 60 MiB tensor: whatever chunk
        # the big one starts at, the slice starts inside one (chunks are
        # 2 MiB-aligned) and its 50 MiB touch at least three 20 MiB chunks.
        big = torch.empty(60 * MIB, dtype=torch.uint8, device="cuda")
        t = big[3 * MIB + 4103:][:50 * MIB]
        chunks = driver.chunks(t.data_ptr(), t.numel())
        facts = {"chunks": [[b - t.data_ptr(), s] for b, s in chunks],
                 "starts_mid_chunk": chunks[0][0] < t.data_ptr(),
                 "handle_types": driver.handle_types(t.data_ptr())}
        return t, [big], facts
    if mode == "pool":
        pool = driver.exportable_pool()
        t = torch.empty(8 * MIB, dtype=torch.uint8, device="cuda")
        facts = {"pool": hex(pool), "tensor_pool": hex(driver.pool_of(t.data_ptr()))}
        return t, [], facts
    if mode == "default-pool":
        t = torch.empty(4 * MIB, dtype=torch.uint8, device="cuda")
        return t, [], {"tensor_pool": hex(driver.pool_of(t.data_ptr()))}
    if mode == "cached-block":
        big = torch.empty(4 * MIB + 1000, dtype=torch.uint8, device="cuda")
        t = big[1000:]
        base, size = driver.address_range(t.data_ptr())
        return t, [big], {"offset_in_allocation": t.data_ptr() - base, "allocation_bytes": size}
    if mode == "plain":
        t = torch.empty(4 * MIB, dtype=torch.uint8, device="cuda")
        return t, [], {"cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES", "")}
    raise SystemExit(f"unknown mode {mode!r}")


def say(**fields):
    print(json.dumps(fields), flush=True)


def serve(t, sock, torch):
    """Obey the parent's commands until exit."""
    for line in sys.stdin:
        cmd, *args = line.split()
        nums = [int(a) for a in args]
        if cmd == "prepare":
            off, size = nums
            t.copy_(pattern(torch, 0, t.numel()))  # what earlier outputs wrote is gone
            t[off:off + size].fill_(CLEAR)
            torch.cuda.synchronize()
            say(prepared=size)
        elif cmd == "check":
            src, dst, size = nums
            torch.cuda.synchronize()  # nothing of ours is pending; the server's copies are its own
            out = t[dst:dst + size]
            equal = bool(torch.equal(out, pattern(torch, src, size)))
            guards = [i for i in (dst - 1, dst + size) if 0 <= i < t.numel()]
            guards_ok = all(int(t[i]) == int(pattern(torch, i, 1)[0]) for i in guards)
            say(equal=equal, guards_ok=guards_ok, bytes=size,
                first_mismatch=None if equal else int((out != pattern(torch, src, size)).nonzero()[0]))
        elif cmd == "close":
            if sock is not None:
                sock.close()
            say(closed=True)
        elif cmd == "exit":
            say(exiting=True)
            return
        else:
            say(error=f"unknown command {cmd!r}")


def main():
    mode, path, name = sys.argv[1:4]
    import torch
    from shmreg import cuda_client
    import shmreg

    driver = Driver()
    t, keep, facts = allocate(mode, torch, driver)
    t.copy_(pattern(torch, 0, t.numel()))
    torch.cuda.synchronize()  # the pattern is in memory before the server may read it
    ns = os.readlink("/proc/self/ns/pid")
    sock = cuda_client.connect(path)
    try:
        nbytes = cuda_client.register_tensor(sock, name, t)
    except shmreg.Error as e:
        say(registered=False, error=type(e).__name__, message=str(e), pid=os.getpid(), pid_ns=ns, **facts)
        sock.close()
        serve(t, None, torch)
        return
    say(registered=True, ptr=t.data_ptr(), nbytes=nbytes, pid=os.getpid(), pid_ns=ns, **facts)
    serve(t, sock, torch)
    del keep


if __name__ == "__main__":
    main()
