"""PyTorch tensors, however allocated, registered over the server's --uds
socket by shmreg.cuda_client in a client process of their own, then named
by HTTP infer requests as the input and the output of the model 'identity'.

Each case starts tensor_client.py (CUDA IPC cannot be opened by the process
that exported the memory), which fills its tensor with a known pattern,
registers it and prints what it found (the chunks a window spans, the
tensor's offset in its allocation, its pool). The test then infers from one
window of the tensor into another and has the client check the bytes in its
own memory (the server read the input from the tensor and wrote the output
into it), and reads a small window back in a response (the bytes the server
read, checked here). Closing the client's connection unregisters the region.

Cases: PyTorch's expandable segments (a window starting mid-chunk across at
least three cuMemCreate chunks, from a client in the server's PID namespace
and from one in its own, where /proc is remounted for it), a
stream-ordered pool with a POSIX-descriptor handle type under torch's
backend:cudaMallocAsync (the default pool refused with the library's
reason), a slice inside a block of the caching allocator (legacy IPC with an
offset), and a client that names the GPU by UUID in CUDA_VISIBLE_DEVICES.
Each prints its facts and, for information only, the best time of a 1 MiB
identity infer through it (no figure is judged; the library's own copy rate
through a VMM range against cudaMemcpy between plain allocations is printed
by tests/cuda/test_cuda_frameworks.c).

$SERVER_BIN names the server (server/tests/gpu/run.sh sets it, with the
shmreg package built for this interpreter on PYTHONPATH). Without torch, a
visible device or the package's cuda_client, every case is skipped.
"""
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "support"))
from server_process import START_TIMEOUT_S, Server, leftover_report  # noqa: E402

CLIENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tensor_client.py")
MIB = 1 << 20
WINDOW = MIB
PREFIX = f"ft_{os.getpid()}_{uuid.uuid4().hex[:6]}"


def _probe():
    """Why the cases cannot run here, or None: the client's interpreter must
    import torch and shmreg.cuda_client and see a device."""
    code = ("import torch, shmreg, shmreg.cuda_client; "
            "print(torch.cuda.is_available() and torch.cuda.device_count(), shmreg.cuda_available())")
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return "probing torch and shmreg timed out"
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["?"])[-1]
        return f"torch or shmreg.cuda_client does not import: {last}"
    devices, cuda = out.stdout.split()
    if devices in ("False", "0"):
        return "torch sees no CUDA device"
    if cuda != "True":
        return "the shmreg package was built without CUDA (or sees no device)"
    return None


_why_not = _probe()
if _why_not:
    pytest.skip(_why_not, allow_module_level=True)


# --------------------------------------------------------------- server ---

def _read_line_within(stream, seconds):
    got = []
    reader = threading.Thread(target=lambda: got.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(seconds)
    return got[0].decode() if got else ""


@pytest.fixture
def server():
    folder = tempfile.mkdtemp(prefix="shmreg-ft-")
    path = os.path.join(folder, "fe.sock")
    s = Server("--uds", path, "--threads", "4")
    line = _read_line_within(s.proc.stdout, START_TIMEOUT_S)
    assert line.startswith("uds listening on "), f"no uds listening line: {line!r}"
    s.sock_path = path
    yield s
    rc, err = s.stop()
    shutil.rmtree(folder)
    assert rc == 0, f"server exited {rc}:\n{err}"
    assert leftover_report(err) == (0, 0), err


def ok(server, method, path, body=None):
    status, answer = server.json(method, "/" + path, body)
    assert status == 200, f"{method} {path}: {status} {answer}"
    return answer


def cuda_status(server):
    return {r["name"]: r for r in ok(server, "GET", "v2/cudasharedmemory/status")}


def place(region, offset, size):
    return {"shared_memory_region": region, "shared_memory_offset": offset, "shared_memory_byte_size": size}


def infer_in_place(server, region, src, dst, size):
    """identity from [src, src+size) of the region into [dst, dst+size)."""
    answer = ok(server, "POST", "v2/models/identity/infer",
                {"inputs": [{"name": "INPUT0", "datatype": "UINT8", "shape": [1, size],
                             "parameters": place(region, src, size)}],
                 "outputs": [{"name": "OUTPUT0", "parameters": place(region, dst, size)}]})
    assert "data" not in answer["outputs"][0], "the output came back in the response, not in the region"


def infer_to_response(server, region, src, size):
    """The bytes the server reads from [src, src+size), as it answers them."""
    answer = ok(server, "POST", "v2/models/identity/infer",
                {"inputs": [{"name": "INPUT0", "datatype": "UINT8", "shape": [1, size],
                             "parameters": place(region, src, size)}],
                 "outputs": [{"name": "OUTPUT0"}]})
    return answer["outputs"][0]["data"]


def pattern(start, size):
    """tensor_client.py's bytes at [start, start+size)."""
    return [(7 * i + 3) % 251 for i in range(start, start + size)]


# --------------------------------------------------------------- client ---

class Client:
    """tensor_client.py in its own process (under `prefix`, e.g. unshare);
    ready holds its first line, the facts of its tensor."""

    def __init__(self, mode, server, name, env=None, prefix=()):
        self.name = name
        self.err = tempfile.TemporaryFile()
        full_env = {k: v for k, v in os.environ.items() if k != "PYTORCH_CUDA_ALLOC_CONF"}
        full_env.update(env or {})
        self.proc = subprocess.Popen([*prefix, sys.executable, CLIENT, mode, server.sock_path, name],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err,
                                     env=full_env, text=True)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.ready = self.answer(timeout=180)  # torch's import and CUDA's start

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def stderr(self):
        self.err.seek(0)
        return self.err.read().decode(errors="replace")[-4000:]

    def answer(self, timeout=60):
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            line = None
        assert line is not None, f"the client said nothing (exit {self.proc.poll()}):\n{self.stderr()}"
        return json.loads(line)

    def command(self, text):
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()
        return self.answer()

    def finish(self, server):
        """Close the connection, see the region go, then let the client free
        its memory (the server's import goes first) and exit."""
        if self.ready.get("registered"):
            assert self.command("close") == {"closed": True}
            server.wait_until(lambda: self.name not in cuda_status(server), timeout=30,
                              what=f"region {self.name} unregistered after its connection closed")
        assert self.command("exit") == {"exiting": True}
        assert self.proc.wait(timeout=60) == 0, self.stderr()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.err.close()


@pytest.fixture
def client(server):
    """Factory: client(mode, suffix, env=..., prefix=...) -> Client."""
    made = []

    def make(mode, suffix, **kw):
        c = Client(mode, server, f"{PREFIX}_{suffix}", **kw)
        made.append(c)
        print(f"{mode}: {json.dumps(c.ready)}")
        return c

    yield make
    for c in made:
        c.kill()


def exchange(server, c, src, dst, size, repeat=5):
    """Infer from [src, src+size) of c's tensor into [dst, dst+size) repeat
    times; the client checks the output's bytes and the bytes around them.
    Returns the best time of one infer in seconds."""
    assert c.command(f"prepare {dst} {size}") == {"prepared": size}
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        infer_in_place(server, c.name, src, dst, size)
        best = min(best, time.perf_counter() - start)
    got = c.command(f"check {src} {dst} {size}")
    assert got["equal"], f"the output window differs from the input's bytes at byte {got['first_mismatch']}"
    assert got["guards_ok"], "a byte next to the output window changed"
    print(f"  {size} bytes from offset {src} written to offset {dst}: exact "
          f"(identity infer, best of {repeat}: {best * 1e3:.2f} ms)")
    return best


def read_back(server, c, src, size=4096):
    """The server's answer of [src, src+size) is the client's pattern."""
    assert infer_to_response(server, c.name, src, size) == pattern(src, size)
    print(f"  {size} bytes at offset {src} read back in a response: exact")


def registered(server, c):
    assert c.ready.get("registered"), f"registration refused: {c.ready}\n{c.stderr()}"
    entry = cuda_status(server).get(c.name)
    assert entry is not None, f"{c.name} is not in v2/cudasharedmemory/status"
    assert entry["byte_size"] == c.ready["nbytes"], entry
    print(f"  status: {json.dumps(entry)}")
    return entry


# ----------------------------------------------------------------- cases ---

# The CUDA driver starts only where /proc is the namespace's own (with the
# host's /proc, its own pid names another process), so --mount-proc first.
UNSHARE_PREFIXES = (
    ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc"],
    ["unshare", "--user", "--map-root-user", "--pid", "--fork", "--kill-child", "--mount-proc"],
    ["unshare", "--pid", "--fork", "--kill-child"],
)
CUINIT = "import ctypes; print(ctypes.CDLL('libcuda.so.1').cuInit(0))"


def _unshare_prefix():
    """(prefix, None): a prefix under which a client in a PID namespace of its
    own starts the CUDA driver; (None, why) when none here does."""
    if not shutil.which("unshare"):
        return None, "no unshare here"
    tried = []
    for prefix in UNSHARE_PREFIXES:
        got = subprocess.run([*prefix, sys.executable, "-c", CUINIT], capture_output=True, text=True)
        if got.returncode == 0 and got.stdout.strip() == "0":
            return prefix, None
        tried.append(f"{' '.join(prefix[1:])}: exit {got.returncode}, "
                     f"cuInit {got.stdout.strip() or '-'} {got.stderr.strip()[-120:]}")
    return None, "; ".join(tried)


def chunks_without_descriptors(facts):
    """Why an expandable-segments client could not register, where PyTorch
    made its chunks with fabric handles first (it does where the driver
    allows them, with IMEX channels: none is a descriptor to send); else
    None."""
    if facts["registered"] or facts["handle_types"] & 1:
        return None
    return (f"PyTorch made the chunks without a POSIX-descriptor handle type "
            f"(handle types {facts['handle_types']:#x}): {facts['message']}")


def expandable_windows(facts):
    """(input offset, output offset) of a WINDOW each in an expandable-
    segments client's tensor, which starts mid-chunk and spans at least
    three chunks: the input in the third chunk, the output across the first
    two chunks' boundary."""
    chunks = facts["chunks"]  # [offset of the chunk's start from the tensor's, chunk bytes]
    assert facts["starts_mid_chunk"] and chunks[0][0] < 0, chunks
    assert len(chunks) >= 3, f"the tensor spans {len(chunks)} chunks: {chunks}"
    second, third = chunks[1][0], chunks[2][0]
    src, dst = third + 4099, second - WINDOW // 2
    assert dst > 0 and src + WINDOW <= facts["nbytes"], chunks
    return src, dst


@pytest.mark.parametrize("namespace", ["same", "own"], ids=["same-pid-namespace", "own-pid-namespace"])
def test_expandable_segments_window_across_chunks(server, client, namespace):
    prefix = []
    if namespace == "own":
        prefix, why = _unshare_prefix()
        if prefix is None:
            pytest.skip(f"no client in a PID namespace of its own starts CUDA here: {why}")
    c = client("expandable", f"expandable_{namespace}",
               env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}, prefix=prefix)
    facts = c.ready
    why = chunks_without_descriptors(facts)
    if why:
        pytest.skip(why)
    registered(server, c)
    if namespace == "own":
        assert facts["pid_ns"] != os.readlink("/proc/self/ns/pid"), "the client shares this PID namespace"
    src, dst = expandable_windows(facts)
    chunks = facts["chunks"]
    print(f"  {' '.join(prefix) or 'same namespace'}: client pid {facts['pid']} in {facts['pid_ns']}; "
          f"{facts['nbytes']} bytes from {-chunks[0][0]} bytes into chunk 0, over {len(chunks)} chunks of "
          f"{sorted({size for _, size in chunks})} bytes")
    exchange(server, c, src, dst, WINDOW)
    read_back(server, c, src)
    # Large windows, each across a chunk boundary: 16 MiB from the start into
    # [24 MiB, 40 MiB).
    exchange(server, c, 0, 24 * MIB, 16 * MIB, repeat=3)
    c.finish(server)


def test_pool_with_a_descriptor_handle_type_under_backend_cudamallocasync(server, client):
    c = client("pool", "pool", env={"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"})
    assert c.ready["tensor_pool"] == c.ready["pool"], (
        f"torch did not allocate from the device's current pool: {c.ready}")
    registered(server, c)
    exchange(server, c, 12345, 4 * MIB + 4096, WINDOW)
    read_back(server, c, 12345)
    c.finish(server)


def test_default_pool_is_refused_with_the_reason(server, client):
    c = client("default-pool", "default_pool", env={"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"})
    assert c.ready["tensor_pool"] not in ("0x0", None), "the tensor is not in a stream-ordered pool"
    assert c.ready["registered"] is False and c.ready["error"] == "Unsupported", c.ready
    assert "default pool" in c.ready["message"] and "cudaMemPoolCreate" in c.ready["message"], c.ready
    assert c.name not in cuda_status(server)
    print(f"  refused: {c.ready['message']}")
    c.finish(server)


def test_slice_inside_a_cached_block_is_legacy_ipc_at_its_offset(server, client):
    c = client("cached-block", "cached_block")
    assert c.ready["offset_in_allocation"] >= 1000, c.ready
    registered(server, c)
    print(f"  the tensor starts {c.ready['offset_in_allocation']} bytes into a "
          f"{c.ready['allocation_bytes']}-byte allocation")
    exchange(server, c, 0, 2 * MIB + 1, WINDOW)
    read_back(server, c, 0)
    c.finish(server)


def _gpu_uuid():
    if not shutil.which("nvidia-smi"):
        return None
    out = subprocess.run(["nvidia-smi", "--query-gpu=uuid", "--format=csv,noheader", "-i", "0"],
                         capture_output=True, text=True)
    line = out.stdout.strip()
    return line if out.returncode == 0 and line.startswith(("GPU-", "MIG-")) else None


def test_client_names_the_gpu_by_uuid_server_by_ordinal(server, client):
    gpu = _gpu_uuid()
    if gpu is None:
        pytest.skip("nvidia-smi does not give GPU 0's UUID")
    c = client("plain", "by_uuid", env={"CUDA_VISIBLE_DEVICES": gpu})
    assert c.ready["cuda_visible_devices"] == gpu
    entry = registered(server, c)
    # The server has every GPU by ordinal: the one the client named is its 0
    # on a machine of one GPU.
    assert entry["device_id"] == 0, entry
    if "device_uuid" in entry:
        assert entry["device_uuid"] == gpu, entry
    else:
        print("  (the server's status lists the ordinal, not the UUID)")
    exchange(server, c, 4096, 2 * MIB, WINDOW)
    read_back(server, c, 4096)
    c.finish(server)
