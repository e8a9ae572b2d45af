"""Not a test: a program that uses the whole API with annotations, which
test_typing.py runs `mypy --strict` over against the installed stub and
py.typed. A stub that drifted from the API fails there."""

from __future__ import annotations

import socket

import shmreg
from shmreg import _shmreg, cuda_client


def serve(reg: shmreg.Registry, key: str) -> list[int]:
    reg.register_system("in", key, 4096, 0, pin=None, readonly=False, tag="t")
    region: shmreg.Region = reg.acquire("in", 0, 16)
    with region as r:
        size: int = r.byte_size
        kind: str = r.kind
        device: tuple[int, int] = r.__dlpack_device__()
        capsule = r.__dlpack__(max_version=(1, 0))
        view = memoryview(r)
        out = bytearray(16)
        r.read_into(out, 0)
        r.write_from(b"ok", offset=2)
        with r.readonly_dlpack() as trusted:
            flagged = trusted.__dlpack__(max_version=(1, 0))
        del capsule, view, flagged
    region.release()
    statuses: list[shmreg.RegionStatus] = reg.status(kind="system")
    in_use: int = statuses[0].in_use
    pending: bool = statuses[0].pending_unregister
    stats: shmreg.Stats = reg.stats()
    waiting: int = stats.reclaim_waiting_bytes + stats.cached_bytes + stats.cache_hits
    with reg.acquire("in", 0, 1, tag="t"):
        pass
    reg.register_system_fd("fd", 3, 4096, 0, readonly=True, tag="t")
    reg.unregister("fd", "system", tag="t")
    print(waiting, reg.status("in", tag="t"))
    try:
        reg.unregister("in", "system")
    except shmreg.Busy as e:
        code: int = e.code
        print(code, str(e))
    reg.unregister_all("any", tag="t")
    version: str = shmreg.__version__
    gpu: bool = shmreg.cuda_available()
    print(kind, version, gpu, pending)
    return [size, device[0], in_use, stats.references]


def send_tensor(sock: socket.socket, tensor: object) -> int:
    ptr, nbytes, read_only = cuda_client.cuda_window(tensor)
    _shmreg.send_cuda_region(sock.fileno(), "t", ptr, nbytes, readonly=read_only)
    sent: int = cuda_client.register_tensor(sock, "t", tensor, readonly=True)
    return sent + cuda_client.register_tensor(sock.fileno(), "u", tensor)


def main() -> None:
    with shmreg.Registry("defer", ("/secret",), pin_policy="never", max_regions=8,
                         reclaim="inline", cache_bytes=1 << 20, accept_unsealed_fds=False) as reg:
        serve(reg, "/client")
        reg.register_cuda_ipc("g", bytes(64), 0, 1 << 20, readonly=True)
        reg.register_cuda_fd("v", 3, 0, 1 << 21, tag=None)
    for owners in (None, "any", [0, 1000]):
        shmreg.Registry(allowed_owner_uids=owners, max_mapped_bytes=0).close()
