"""The C server's defences, asked of every server shipped in Python: the
FastAPI example (python/examples/fastapi_server) and KServe's model server
(python/examples/kserve), each started as a user would, and the C server beside
them when $SERVER_BIN names one, so that each answer is compared with its.

What a hostile client tried: register without client shared memory being
allowed; name another uid's 0600 object to a server run as root; register
one sparse 1 TiB object again and again, or many small ones; make the
server copy, or answer as JSON, a region larger than any body; send a body
past the bound, a body nested 200,000 deep, a shape whose size overflows.

The KServe example runs under the interpreter $SHMREG_KSERVE_PYTHON (a venv
with kserve; tier 65 makes one); the FastAPI example needs uvicorn here.
"""
from __future__ import annotations

import http.client
import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

pytest.importorskip("shmreg.kserve", reason="shmreg[fastapi] is not installed")

ROOT = Path(__file__).resolve().parents[2]
FASTAPI_SERVER = ROOT / "python" / "examples" / "fastapi_server" / "server.py"
KSERVE_SERVER = ROOT / "python" / "examples" / "kserve" / "server.py"
NOBODY = 65534
MIB = 1 << 20
DISABLED = ("Client shared memory is disabled. Start the server with "
            "'--allow-client-shm=true' to enable.")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One server process of kind "c", "fastapi" or "kserve" on a free
    loopback port, with the C server's flags (args)."""

    def __init__(self, kind: str, *args: str) -> None:
        self.kind = kind
        if kind == "kserve":
            self.port = free_port()
            command = [os.environ["SHMREG_KSERVE_PYTHON"], str(KSERVE_SERVER),
                       "--http_port", str(self.port), "--enable_grpc", "false"]
        else:
            command = ([os.environ["SERVER_BIN"]] if kind == "c"
                       else [sys.executable, str(FASTAPI_SERVER)]) + ["--port", "0"]
        # The log to a file: KServe logs every request, and a pipe nobody
        # reads would fill and stop the server.
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([*command, *args], bufsize=0, stderr=self.log,
                                     stdout=self.log if kind == "kserve" else subprocess.PIPE)
        if kind == "kserve":
            self._wait_ready()
        else:
            ready, _, _ = select.select([self.proc.stdout], [], [], 30)
            line = self.proc.stdout.readline().decode() if ready else ""
            match = re.match(r"listening on 127\.0\.0\.1:(\d+)", line)
            if not match:
                self.stop()
                raise AssertionError(f"the {kind} server did not start: {line!r} {self.tail()}")
            self.port = int(match.group(1))

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                if self.request("GET", "/v2/models/simple/ready")[0] == 200:
                    return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise AssertionError(f"the KServe example did not start (exit {self.proc.poll()}): "
                             f"{self.tail()}")

    def tail(self) -> str:
        self.log.seek(0)
        return self.log.read()[-3000:].decode(errors="replace")

    def request(self, method: str, path: str, body: object = None) -> tuple[int, dict | None]:
        if body is not None and not isinstance(body, bytes):
            body = json.dumps(body).encode()
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            conn.request(method, path, body=body)
            resp = conn.getresponse()
            data = resp.read()
        finally:
            conn.close()
        try:
            return resp.status, json.loads(data) if data else None
        except ValueError:
            return resp.status, {"error": data[:200].decode(errors="replace")}

    def register(self, name: str, key: str, size: int) -> tuple[int, dict | None]:
        return self.request("POST", f"/v2/systemsharedmemory/region/{name}/register",
                            {"key": key, "byte_size": size})

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()
        self.log.close()


def kinds() -> list:
    """Every server shipped in Python, and the C one when it is built."""
    out = []
    for kind, needs in (("c", "SERVER_BIN"), ("fastapi", None), ("kserve", "SHMREG_KSERVE_PYTHON")):
        missing = needs is not None and not os.environ.get(needs)
        out.append(pytest.param(kind, marks=pytest.mark.skipif(
            missing, reason=f"${needs} names no {kind} server here")) if missing else kind)
    return out


@pytest.fixture(scope="module", params=kinds())
def kind(request) -> str:
    if request.param == "fastapi":
        pytest.importorskip("uvicorn", reason="the FastAPI example needs uvicorn")
    return request.param


@pytest.fixture(scope="module")
def bounded(kind):
    """A server that allows client shared memory, with --max-body-mb 1."""
    server = Server(kind, "--allow-client-shm=true", "--max-body-mb", "1")
    yield server
    server.stop()
    assert server.proc.returncode in (0, -signal.SIGTERM)


@pytest.fixture
def sparse():
    """sparse(size, owner=None) -> key: a 0600 object of size bytes, no page written."""
    keys = []

    def make(size: int, owner: int | None = None) -> str:
        keys.append(f"/shmreg_defences_{os.getpid()}_{uuid.uuid4().hex[:8]}")
        fd = os.open("/dev/shm" + keys[-1], os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        try:
            os.ftruncate(fd, size)
            if owner is not None:
                os.write(fd, b"another uid's secret")
                os.fchown(fd, owner, owner)
        finally:
            os.close(fd)
        return keys[-1]

    yield make
    for key in keys:
        os.unlink("/dev/shm" + key)


def infer(server: Server, region: str, nbytes: int, binary_output: bool = False):
    """Infer with every input of the server's model an INT32 window of
    nbytes of region: "identity" (one input) in the C and FastAPI servers,
    "simple" (two) in KServe's."""
    model, names = (("simple", ("INPUT0", "INPUT1")) if server.kind == "kserve"
                    else ("identity", ("INPUT0",)))
    body = {"inputs": [{"name": n, "datatype": "INT32", "shape": [1, nbytes // 4],
                        "parameters": {"shared_memory_region": region,
                                       "shared_memory_byte_size": nbytes}} for n in names],
            "parameters": {"binary_data_output": binary_output}}
    return server.request("POST", f"/v2/models/{model}/infer", body)


def test_client_shm_is_refused_unless_allowed(kind, sparse):
    server = Server(kind)
    try:
        key = sparse(4096)
        assert server.register("r", key, 4096) == (501, {"error": DISABLED})
        assert server.request("POST", "/v2/systemsharedmemory/region/r/unregister") == (
            501, {"error": DISABLED})
        assert server.request("GET", "/v2/systemsharedmemory/status") == (200, [])
    finally:
        server.stop()


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give an object to another uid")
def test_another_uids_object_is_refused(kind, bounded, sparse):
    """Run as root, a server without an allow-list read another uid's 0600
    object back to any HTTP client; by default only its own uid's objects."""
    key = sparse(4096, owner=NOBODY)
    status, answer = bounded.register("theirs", key, 4096)
    assert status == 400, answer
    assert f"is owned by uid {NOBODY}" in answer["error"], answer
    assert bounded.request("GET", "/v2/systemsharedmemory/status") == (200, [])


def test_registrations_are_limited(kind, bounded, sparse):
    """One sparse 1 TiB object, free to its client, registered three times:
    the first only (1 TiB mapped at most), then --max-regions' default."""
    key = sparse(1 << 40)
    answers = [bounded.register(f"tib{i}", key, 1 << 40) for i in range(3)]
    assert [status for status, _ in answers] == [200, 429, 429], answers
    assert "would pass this registry's limit of 1099511627776" in answers[1][1]["error"]
    assert bounded.request("POST", "/v2/systemsharedmemory/unregister")[0] == 200


def test_max_regions_is_a_flag(kind, sparse):
    server = Server(kind, "--allow-client-shm=true", "--max-regions", "2")
    try:
        key = sparse(4096)
        answers = [server.register(f"r{i}", key, 4096)[0] for i in range(3)]
        assert answers == [200, 200, 429]
        assert server.request("POST", "/v2/systemsharedmemory/unregister")[0] == 200
    finally:
        server.stop()


def test_a_tensor_copied_out_of_shared_memory_is_bounded(kind, bounded, sparse):
    """A region is not a way around --max-body-mb: a 2 MiB window is 400
    before it is copied, where a body of 2 MiB would be refused too."""
    key = sparse(2 * MIB)
    assert bounded.register("big", key, 2 * MIB)[0] == 200
    try:
        status, answer = infer(bounded, "big", 2 * MIB, binary_output=True)
        assert status == 400, answer
        assert answer["error"] == (f"input 'INPUT0' takes {2 * MIB} bytes of shared memory region "
                                   f"'big', more than this server copies for one tensor ({MIB}, "
                                   "--max-body-mb)")
        (entry,) = bounded.request("GET", "/v2/systemsharedmemory/status")[1]
        assert entry["in_use"] == 0
    finally:
        bounded.request("POST", "/v2/systemsharedmemory/region/big/unregister")


def test_a_response_is_bounded(kind, bounded, sparse):
    """256 KiB of shared memory answered as JSON could take 1.75 MiB of
    text a tensor: 400 past --max-body-mb; as binary data it is served."""
    key = sparse(256 << 10)
    assert bounded.register("r", key, 256 << 10)[0] == 200
    try:
        status, answer = infer(bounded, "r", 256 << 10)
        assert status == 400, answer
        assert re.fullmatch(r"the response could take up to \d+ bytes, more than this server "
                            rf"sends \({MIB}, --max-body-mb\): ask for large outputs in shared "
                            r"memory, or as binary data rather than JSON", answer["error"]), answer
        assert infer(bounded, "r", 256 << 10, binary_output=True)[0] == 200
    finally:
        bounded.request("POST", "/v2/systemsharedmemory/region/r/unregister")


def test_a_body_past_the_bound_is_400(kind, bounded):
    status, answer = bounded.request("POST", "/v2/models/simple/infer", b" " * (2 * MIB))
    assert (status, answer) == (400, {"error": (
        f"request JSON size of {2 * MIB} bytes exceeds the maximum allowed input size of {MIB} "
        "bytes. Use --max-body-mb to increase the limit.")})


def test_a_very_deep_body_is_400(kind, bounded):
    status, answer = bounded.request("POST", "/v2/models/simple/infer",
                                     b"[" * 200_000 + b"]" * 200_000)
    assert status == 400, answer
    assert answer["error"].startswith("failed to parse the request JSON buffer: nesting too deep")


def test_a_shape_whose_size_overflows_is_400(kind, bounded):
    model = "simple" if kind == "kserve" else "identity"
    body = {"inputs": [{"name": "INPUT0", "datatype": "UINT8", "shape": [2**32, 2**32],
                        "data": []}]}
    assert bounded.request("POST", f"/v2/models/{model}/infer", body) == (
        400, {"error": "input 'INPUT0': shape too large"})


def test_listens_on_loopback_only_unless_told(kind, bounded):
    """KServe's REST server took every interface: a client of another host
    could register. Bound to 127.0.0.1, 127.0.0.2 (loopback too, but
    another address) finds nothing there."""
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.2", bounded.port), timeout=5).close()
