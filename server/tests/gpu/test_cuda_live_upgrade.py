"""A live upgrade of a server that holds a CUDA region of each kind a client
can register with it: a new server started with --take-over takes the
running one's registry, its listening sockets and its Unix-socket clients'
connections, and serves every region in place with the bytes exact.

The regions, each in a process that keeps its memory for the whole test
(CUDA IPC cannot be opened by the process that exported it):
- a 50 MiB window of PyTorch's expandable segments, starting mid-chunk
  across at least three chunks (a VMM range: a descriptor per chunk);
- a tensor of a stream-ordered pool with a POSIX-descriptor handle type,
  under torch's backend:cudaMallocAsync (the pool's descriptor and the
  allocation's export data);
- a slice 1,000 bytes into a block of PyTorch's caching allocator (legacy
  CUDA IPC at an offset);
  these three from tensor_client.py over --uds, as test_framework_tensors.py
  registers them;
- a cudaMalloc'ed buffer of this process (CuPy), registered over HTTP with
  its raw IPC handle (legacy CUDA IPC), as test_cuda_infer.py registers it.
A VMM allocation registered by its one descriptor (shmreg_register_cuda_fd)
is carried by the library too (docs/handover.md), but no client of the
server registers one: the --uds request sends a VMM allocation as a range
of its chunks, and HTTP and gRPC take a legacy IPC handle only. The
library's tests/cuda/test_cuda_handover.c hands that kind over.

Each region first serves an identity infer in place through the old server
(the client checks the output's bytes in its own memory) and a read-back in
a response. Then the new server starts; the old one exits 0 with nothing
left mapped, its handover line printed for information; the new one's
restore report and v2/cudasharedmemory/status list every region; each
region serves the same infers through the new server with the bytes exact;
closing each client's connection, which came along, unregisters its region
in the new server, and the HTTP region unregisters over HTTP; the new
server stops clean.

$SERVER_BIN names the server (server/tests/gpu/run.sh runs this file on its
own, with the shmreg package built for this interpreter on PYTHONPATH).
Without CuPy, torch, the package's cuda_client or a visible device, the
whole file is skipped: the two modules imported below skip it as they skip
themselves.
"""
import json
import os
import re
import sys
import uuid
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "support"))
sys.path.insert(0, HERE)
from server_process import Server, assert_exits_clean  # noqa: E402
from tensor_client import CLEAR  # noqa: E402
from uds_fixtures import sock_path, wait_uds_line  # noqa: E402,F401 (sock_path: a fixture)
# Each skips this module where CuPy and a device, or torch and the package's
# cuda_client, are missing.
from test_cuda_infer import DeviceRegion, cp  # noqa: E402
from test_framework_tensors import (MIB, WINDOW, Client, chunks_without_descriptors, cuda_status,  # noqa: E402
                                    exchange, expandable_windows, ok, read_back, registered)

PREFIX = f"cup_{os.getpid()}_{uuid.uuid4().hex[:6]}"
SERVER_ARGS = ("--threads", "4")
HTTP_REGION_BYTES = 4 * MIB


class HttpRegion:
    """A buffer of this process registered over HTTP (test_cuda_infer.py's
    DeviceRegion: cudaMalloc, legacy IPC) that holds tensor_client.py's
    pattern and answers its prepare and check commands, so that exchange
    and read_back drive it as they drive a client."""

    def __init__(self, server, name, nbytes):
        self.name, self.nbytes = name, nbytes
        self.region = DeviceRegion(server, name, nbytes)
        self.bytes = self.region.array(cp.uint8, (nbytes,))
        self.ready = {"registered": True, "nbytes": nbytes}
        self.command("prepare 0 0")

    @staticmethod
    def pattern(start, size):
        i = cp.arange(start, start + size, dtype=cp.int64)
        return ((7 * i + 3) % 251).astype(cp.uint8)

    def command(self, text):
        cmd, *args = text.split()
        nums = [int(a) for a in args]
        if cmd == "prepare":
            off, size = nums
            self.bytes[...] = self.pattern(0, self.nbytes)
            self.bytes[off:off + size] = CLEAR
            cp.cuda.Device().synchronize()  # the server reads through its own context
            return {"prepared": size}
        assert cmd == "check", text
        src, dst, size = nums
        cp.cuda.Device().synchronize()
        got, want = self.bytes[dst:dst + size], self.pattern(src, size)
        equal = bool(cp.array_equal(got, want))
        near = [i for i in (dst - 1, dst + size) if 0 <= i < self.nbytes]
        return {"equal": equal, "bytes": size,
                "guards_ok": all(int(self.bytes[i]) == int(self.pattern(i, 1)[0]) for i in near),
                "first_mismatch": None if equal else int(cp.flatnonzero(got != want)[0])}


def start_clients(server, started):
    """tensor_client.py of each kind over server's --uds socket: [(client,
    input offset, output offset)] of those that registered, the output
    window clear of the input. Each is appended to started as it starts,
    for the caller to kill. Expandable segments whose chunks have
    no descriptor to send are left out with a warning (the other kinds
    still make the upgrade's case)."""
    served = []
    for mode, conf in (("expandable", "expandable_segments:True"), ("pool", "backend:cudaMallocAsync"),
                       ("cached-block", None)):
        c = Client(mode, server, f"{PREFIX}_{mode.replace('-', '_')}",
                   env={"PYTORCH_CUDA_ALLOC_CONF": conf} if conf else None)
        started.append(c)
        print(f"{mode}: {json.dumps(c.ready)}")
        if mode == "expandable":
            why = chunks_without_descriptors(c.ready)
            if why:
                warnings.warn(f"expandable segments (a VMM range) left out of the upgrade: {why}")
                c.finish(server)
                continue
            src, dst = expandable_windows(c.ready)
        elif mode == "pool":
            assert c.ready["tensor_pool"] == c.ready["pool"], (
                f"torch did not allocate from the device's current pool: {c.ready}")
            src, dst = 12345, 4 * MIB + 4096
        else:
            assert c.ready["offset_in_allocation"] >= 1000, c.ready
            src, dst = 0, 2 * MIB + 1
        served.append((c, src, dst))
    return served


def serves_in_place(server, served, when):
    """Each region is listed with its size, an identity infer writes its
    output window from its input window in place with the bytes exact, and
    a read-back in a response is exact."""
    for region, src, dst in served:
        print(f"{region.name} through the {when} server:")
        registered(server, region)
        exchange(server, region, src, dst, WINDOW, repeat=2)
        read_back(server, region, src)


def test_live_upgrade_carries_a_region_of_each_cuda_kind(sock_path):
    handover = os.path.join(os.path.dirname(sock_path), "up.sock")
    old = wait_uds_line(Server("--uds", sock_path, "--handover-socket", handover, *SERVER_ARGS))
    old.sock_path = sock_path  # where the clients connect; the new server inherits it
    new, clients = None, []
    try:
        served = start_clients(old, clients)
        http = HttpRegion(old, f"{PREFIX}_http_ipc", HTTP_REGION_BYTES)
        served.append((http, 4097, 2 * MIB + 3))
        names = {region.name for region, _, _ in served}
        serves_in_place(old, served, "old")

        new = wait_uds_line(Server("--take-over", handover, "--handover-socket", handover, *SERVER_ARGS))
        err = assert_exits_clean(old, by_itself=True)
        assert "serves now; this server stops" in err, err
        handed = re.search(r"upgrade: handed over .*", err)
        print(f"old server: {handed[0] if handed else 'no handover line with a time'}")
        new.wait_stderr("upgrade: restored ", timeout=15)
        report = new.early_stderr.decode(errors="replace")
        assert f"upgrade: {len(served)} region(s) restored, 0 failed, 0 not carried" in report, report
        restored = re.search(r"upgrade: restored .*", report)
        print(f"new server: {restored[0]}")
        listed = cuda_status(new)
        assert set(listed) == names, f"the new server lists {sorted(listed)}, not {sorted(names)}"
        serves_in_place(new, served, "new")

        # Each client's connection came along: closing it unregisters its
        # region in the new server (finish waits for that), then the client
        # frees its memory and exits 0.
        for c, _, _ in served[:-1]:
            c.finish(new)
        ok(new, "POST", f"v2/cudasharedmemory/region/{http.name}/unregister")
        new.wait_until(lambda: cuda_status(new) == {}, timeout=10, what="every region unregistered")
        assert_exits_clean(new)
    finally:
        for server in (new, old):
            if server is not None:
                server.stop()
        for c in clients:
            c.kill()
