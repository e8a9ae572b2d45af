"""The remote_memory extension over HTTP and gRPC: client
processes that connect to the server (POST v2/remotememory/connect, then
UCX with the one-time secret it answers), export memory over their
connection (python/shmreg/remote.py, run by remote_agent.py) and a server
that reads its inputs from it and writes its outputs into it, over tcp on
the loopback device: every server here is started with --remote-tcp-device
lo and every client connects with tcp_device="lo" (CI has no RDMA device).
scripts/tests.d/63-remote.sh runs this file and sets SHMREG_LIBRARY to the
library the server was built against.

Every client is a process of its own (remote_agent.py, started by exec: UCX
must not run in a fork of a process where it already runs); the test
itself speaks HTTP and gRPC to the server only.

Asserted: connect, register, status (with the connection's transports),
infer (the identity model's 1,474,560-byte FP16 input read from the
client, its output written into the client's memory, the bytes compared)
over HTTP and gRPC, unregister; an unregister while a request is in flight,
under each busy policy; a client killed with SIGKILL, whose regions the
server unregisters by itself and whose in-flight request ends with an
error, never a hang; malformed descriptors and the --allow-client-shm gate.

And the attacks, each answered with a clear refusal that reads and writes
nothing, after which the server still serves (v2/health/ready) and the
victim's memory is unchanged: a descriptor of version 1 (a worker address
and a key, aimed at the server's own worker); tenant bob registering a
window of tenant alice's connection; a window id never announced, a stale
generation, a withdrawn window, a window past the announced length; a
secret used twice; a connect without a known token; a client that stops
answering (SIGSTOP), whose copy fails after --remote-timeout-ms while the
other tenant is served, and whose tenant's second copy is refused at once
under --remote-max-copies 1; --remote-max-connections; ten requests on a
stopped client's regions, which hold at most their tenant's turns of the
worker threads (the rest refused at once) while the other tenant's
requests, and without --tenants the requests without a remote region, are
served at their usual latency."""
import base64
import importlib.util
import json
import os
import pathlib
import select
import signal
import struct
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
REMOTE_PY = ROOT / "python" / "shmreg" / "remote.py"
AGENT = pathlib.Path(__file__).resolve().parent / "remote_agent.py"


def load_remote():
    spec = importlib.util.spec_from_file_location("shmreg_remote", REMOTE_PY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Only remote.available() runs here (it loads UCX without starting it); the
# clients are the agents' processes.
remote = load_remote()
if not remote.available():
    pytest.skip("no UCX in this process (libshmreg built without it, or UCX not installed)",
                allow_module_level=True)

pytestmark = pytest.mark.servers("c")

SHAPE = [3, 384, 640]  # 1,474,560 bytes of FP16
NBYTES = 2 * 3 * 384 * 640
REMOTE = "/v2/remotememory"
ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdefghij"
TWO_TENANTS = f"{ALICE} alice\n{BOB} bob\n"
AGENT_TIMEOUT_S = 30


def bearer(token):
    return {"Authorization": f"Bearer {token}"} if token else {}


class RemoteRefused(AssertionError):
    pass


# The network device on which servers and clients here open tcp: the
# loopback, which only this host's processes reach.
TCP_DEVICE = "lo"


@pytest.fixture
def start_server(start_server):
    """conftest's start_server, with tcp opened on the loopback device."""
    return lambda *args: start_server("--remote-tcp-device", TCP_DEVICE, *args)


class Agent:
    """A client process (remote_agent.py). call(op, **fields) -> its answer;
    a refusal raises RemoteRefused unless refused=True is given, which
    returns the answer of a refusal and fails on a success. connect and
    join go over tcp on TCP_DEVICE unless tcp_device says otherwise."""

    def __init__(self, **env):
        self.env = {**os.environ, **env}
        self.proc = subprocess.Popen([sys.executable, str(AGENT), str(REMOTE_PY)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=self.env)

    def call(self, op, refused=False, timeout=AGENT_TIMEOUT_S, **fields):
        if op in ("connect", "join"):
            fields.setdefault("tcp_device", TCP_DEVICE)
        self.proc.stdin.write((json.dumps({"op": op, **fields}) + "\n").encode())
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else b""
        if not line:
            raise AssertionError(f"the client did not answer {op} within {timeout} s "
                                 f"(exit code {self.proc.poll()})")
        answer = json.loads(line)
        if answer["ok"] == refused:
            raise RemoteRefused(f"{op}: {answer}") if not refused else AssertionError(
                f"{op} was not refused: {answer}")
        return answer

    def connect(self, server, token=None):
        return self.call("connect", url=server.url, token=token)

    def export(self, nbytes, seed=None, allocate=False):
        """(window, descriptor bytes) of nbytes of random bytes (seed) or zeros."""
        a = self.call("allocate" if allocate else "export", nbytes=nbytes, seed=seed)
        return a["window"], base64.b64decode(a["descriptor"])

    def read(self, window):
        return base64.b64decode(self.call("read", window=window)["b64"])

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)  # one a test stopped
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()


@pytest.fixture
def agents():
    """Factory: agents() -> a new client process, stopped afterwards."""
    started = []

    def start(**env):
        a = Agent(**env)
        started.append(a)
        return a

    yield start
    for a in started:
        a.stop()


def random_bytes(seed, n):
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()


def register(server, name, descriptor, byte_size, offset=0, token=None):
    return server.json("POST", f"{REMOTE}/region/{name}/register",
                       {"descriptor": {"b64": base64.b64encode(descriptor).decode()},
                        "byte_size": byte_size, "offset": offset}, bearer(token))


def status(server, name=None, token=None):
    path = f"{REMOTE}/region/{name}/status" if name else f"{REMOTE}/status"
    return server.json("GET", path, None, bearer(token))


def unregister(server, name=None, token=None):
    path = f"{REMOTE}/region/{name}/unregister" if name else f"{REMOTE}/unregister"
    return server.json("POST", path, None, bearer(token))


def invitation(server, token=None):
    """POST v2/remotememory/connect: (status, body)."""
    return server.json("POST", f"{REMOTE}/connect", {}, bearer(token))


def identity_request(in_name, out_name, nbytes=NBYTES):
    return {"inputs": [{"name": "INPUT0", "datatype": "FP16", "shape": SHAPE,
                        "parameters": {"shared_memory_region": in_name,
                                       "shared_memory_byte_size": nbytes}}],
            "outputs": [{"name": "OUTPUT0",
                         "parameters": {"shared_memory_region": out_name,
                                        "shared_memory_byte_size": nbytes}}]}


def infer(server, in_name, out_name, token=None):
    return server.json("POST", "/v2/models/identity/infer", identity_request(in_name, out_name),
                       bearer(token))


def assert_serving(server):
    assert server.request("GET", "/v2/health/ready")[0] == 200


def client_with_io(agents, server, token=None, seed=1):
    """A connected client with an input window of random bytes (seed) and a
    zeroed output window, registered as "in" and "out": (agent, in window,
    out window)."""
    agent = agents()
    agent.connect(server, token)
    wx, dx = agent.export(NBYTES, seed=seed)
    wy, dy = agent.export(NBYTES)
    assert register(server, "in", dx, NBYTES, token=token) == (200, None)
    assert register(server, "out", dy, NBYTES, token=token) == (200, None)
    return agent, wx, wy


# ------------------------------------------------------------ the identity model


def test_connect_register_infer_unregister(start_server, agents):
    server = start_server()
    status_code, meta = server.json("GET", "/v2")
    assert status_code == 200 and "remote_memory" in meta["extensions"]
    agent, wx, wy = client_with_io(agents, server)
    code, listed = status(server)
    assert code == 200, listed
    listed = {r["name"]: r for r in listed}
    assert listed["in"]["byte_size"] == NBYTES and listed["out"]["offset"] == 0
    # The UCX transports of the client's connection, as UCX names them.
    assert isinstance(listed["in"]["transports"], str) and listed["in"]["transports"], listed
    for _ in range(3):
        code, body = infer(server, "in", "out")
        assert code == 200, body
        assert "data" not in body["outputs"][0]  # the bytes went to the client
        assert agent.read(wy) == random_bytes(1, NBYTES)
    # Remote regions are not system ones, and the reverse.
    code, body = server.json("GET", "/v2/systemsharedmemory/region/in/status")
    assert code == 404, body
    assert unregister(server, "in") == (200, None)
    assert unregister(server) == (200, None)
    assert status(server) == (200, [])


def test_grpc_inference_on_remote_regions(agents):
    """Regions registered over HTTP serve an inference over gRPC."""
    grpcclient = pytest.importorskip("tritonclient.grpc")
    from grpc_support import assert_clean_stop, start_with_grpc
    server = start_with_grpc("--remote-tcp-device", TCP_DEVICE)
    try:
        agent, wx, wy = client_with_io(agents, server, seed=7)
        client = grpcclient.InferenceServerClient(server.grpc_url)
        inp = grpcclient.InferInput("INPUT0", SHAPE, "FP16")
        inp.set_shared_memory("in", NBYTES)
        out = grpcclient.InferRequestedOutput("OUTPUT0")
        out.set_shared_memory("out", NBYTES)
        client.infer("identity", [inp], outputs=[out])
        assert agent.read(wy) == random_bytes(7, NBYTES)
        client.close()
        assert unregister(server) == (200, None)
    finally:
        assert_clean_stop(server)


def test_allocated_memory(start_server, agents):
    """remote.allocate: the library's memory, filled and read through numpy."""
    server = start_server()
    agent = agents()
    agent.connect(server)
    wx, dx = agent.export(NBYTES, seed=2, allocate=True)
    wy, dy = agent.export(NBYTES, allocate=True)
    assert agent.read(wy) == bytes(NBYTES)  # zero-filled
    assert register(server, "ain", dx, NBYTES) == (200, None)
    assert register(server, "aout", dy, NBYTES) == (200, None)
    code, body = infer(server, "ain", "aout")
    assert code == 200, body
    assert agent.read(wy) == random_bytes(2, NBYTES)
    assert unregister(server) == (200, None)
    agent.call("close", window=wx)
    agent.call("close", window=wy)


def test_window_and_bounds(start_server, agents):
    server = start_server()
    agent = agents()
    agent.connect(server)
    w, d = agent.export(4096, seed=3)
    assert register(server, "part", d, 1024, offset=512) == (200, None)
    code, [entry] = status(server, "part")
    assert (entry["offset"], entry["byte_size"]) == (512, 1024)
    for size, offset in ((4096, 1), (4097, 0), (1, 4096), (1, 2**64 - 1)):
        code, body = register(server, "past", d, size, offset=offset)
        assert code == 400 and "past the end of the 4096 bytes the client announced" in body["error"], body
    assert [r["name"] for r in status(server)[1]] == ["part"]
    assert unregister(server) == (200, None)
    assert agent.read(w) == random_bytes(3, 4096)


def b64(data):
    return base64.b64encode(data).decode()


@pytest.mark.parametrize("descriptor, words", [
    ("!!!", "base64"),
    (b64(b"\x02\0\0\0"), "not 40 bytes long"),
    (b64(b"\x02" + bytes(40)), "not 40 bytes long"),
    (b64(b"\x03" + bytes(39)), "unknown version"),
    (b64(b"\x02\x01" + bytes(38)), "reserved bytes are not zero"),
    (b64(b"\x02" + bytes(39)), "no connection id"),
    ("A" * 70000, "got 70000 characters"),
])
def test_bad_descriptors(start_server, descriptor, words):
    server = start_server()
    code, body = server.json("POST", f"{REMOTE}/region/bad/register",
                             {"descriptor": {"b64": descriptor}, "byte_size": 8})
    assert code == 400 and words in body["error"], body
    code, body = server.json("POST", f"{REMOTE}/region/bad/register", {"byte_size": 8})
    assert code == 400 and "no 'descriptor'" in body["error"], body
    assert status(server) == (200, [])


def test_gated_like_client_shm(start_server):
    server = start_server("--allow-client-shm=false")
    code, body = invitation(server)
    assert code == 501 and "--allow-client-shm=true" in body["error"], body
    code, body = register(server, "r", b"\x02" + bytes(7) + b"\x01" * 32, 8)
    assert code == 501, body
    assert status(server) == (200, [])


@pytest.mark.parametrize("policy", ["defer", "detach", "refuse"])
def test_unregister_in_flight(start_server, agents, policy):
    """A request reads its inputs, then sleeps in the model (simple_delayed)
    while its output region is unregistered; its output is still written
    remotely."""
    server = start_server("--busy-policy", policy, "--delay-ms", "600")
    agent = agents()
    agent.connect(server)
    wa, da = agent.export(64, seed=10)
    wb, db = agent.export(64, seed=11)
    a = np.frombuffer(random_bytes(10, 64), np.int32)
    b = np.frombuffer(random_bytes(11, 64), np.int32)
    wo, do = agent.export(128)
    for name, d, size in (("a", da, 64), ("b", db, 64), ("o", do, 128)):
        assert register(server, name, d, size) == (200, None)
    request = {"inputs": [{"name": f"INPUT{i}", "datatype": "INT32", "shape": [1, 16],
                           "parameters": {"shared_memory_region": n,
                                          "shared_memory_byte_size": 64}}
                          for i, n in enumerate("ab")],
               "outputs": [{"name": f"OUTPUT{i}",
                            "parameters": {"shared_memory_region": "o",
                                           "shared_memory_offset": 64 * i,
                                           "shared_memory_byte_size": 64}}
                           for i in range(2)]}
    result = {}
    t = threading.Thread(target=lambda: result.update(
        r=server.json("POST", "/v2/models/simple_delayed/infer", request)))
    t.start()
    server.wait_until(lambda: status(server, "o")[1][0]["in_use"],
                      what="the request to hold its output region")
    code, body = unregister(server, "o")
    if policy == "refuse":
        assert code == 400 and "in use" in body["error"], body
    else:
        assert code == 200, body
    t.join()
    assert result["r"][0] == 200, result
    out = np.frombuffer(agent.read(wo), np.int32)
    assert np.array_equal(out[:16], a + b) and np.array_equal(out[16:], a - b)
    assert unregister(server) == (200, None)
    server.wait_until(lambda: status(server) == (200, []), what="every region gone")


def test_client_killed(start_server, agents):
    """A client dies (SIGKILL) while requests use its regions: the request
    ends (an error or, where the transport still reached the pages, a
    result), never hangs; the server unregisters the client's regions by
    itself."""
    server = start_server("--threads", "4", "--remote-timeout-ms", "2000")
    agent, _, _ = client_with_io(agents, server)
    results = []

    def infer_loop():
        while True:
            try:
                code, body = infer(server, "in", "out")
            except OSError as e:  # the server hung up: it died
                code, body = None, repr(e)
            results.append((code, body))
            if code != 200:
                return

    t = threading.Thread(target=infer_loop)
    t.start()
    while not results:
        time.sleep(0.005)
    killed = time.monotonic()
    agent.proc.send_signal(signal.SIGKILL)
    t.join(timeout=30)
    assert not t.is_alive(), "requests on a killed client's regions did not end in 30 s"
    code, body = results[-1]
    print(f"killed client: {len(results)} requests, the last {code} after "
          f"{time.monotonic() - killed:.3f} s: {body}")
    assert code is not None, f"the server died with the client: {body}"
    assert code != 200
    server.wait_until(lambda: status(server) == (200, []), timeout=15,
                      what="the killed client's regions to be unregistered")
    assert_serving(server)


def test_client_disconnect_sweeps_its_regions(start_server, agents):
    """remote.disconnect says goodbye: the server unregisters the
    connection's regions by itself."""
    server = start_server()
    agent = agents()
    agent.connect(server)
    w, d = agent.export(64, seed=4)
    assert register(server, "bye", d, 64) == (200, None)
    agent.call("close", window=w)
    agent.call("disconnect")
    server.wait_until(lambda: status(server) == (200, []), timeout=15,
                      what="the regions of a client that said goodbye to go")


def test_remote_transports(start_server, agents):
    """--remote-transports tcp: a client that opens tcp connects over it; one
    with the library's default transports (hardware only, none here) cannot
    connect."""
    server = start_server("--remote-transports", "tcp")
    refused = agents().call("connect", refused=True, url=server.url, tcp_device=None)
    assert refused["code"].startswith("SHMREG_ERR_"), refused
    print(f"a client without tcp: {refused}")
    agent = agents()
    agent.connect(server)
    w, d = agent.export(64, seed=15)
    assert register(server, "tcp_only", d, 64) == (200, None)
    [entry] = status(server, "tcp_only")[1]
    assert entry["transports"] == "tcp", entry
    assert unregister(server) == (200, None)


def test_remote_port(start_server, agents):
    from grpc_support import free_port
    port = free_port()
    server = start_server("--remote-port", str(port))
    code, body = invitation(server)
    assert code == 200 and body["address"] == f"127.0.0.1:{port}", body
    agents().call("join", address=body["address"], secret=body["secret"]["b64"])


def test_remote_options_are_checked():
    from server_process import binary
    for args, words in ((["--remote-max-copies", "0"], "--remote-max-copies wants an integer"),
                        (["--remote-max-connections", "x"], "--remote-max-connections wants"),
                        (["--remote-transports", ""], "--remote-transports wants"),
                        (["--remote-tcp-device", ""], "--remote-tcp-device wants"),
                        (["--remote-tcp-ports", ""], "--remote-tcp-ports wants"),
                        (["--remote-port", "65536"], "--remote-port wants an integer in [0, 65535]")):
        proc = subprocess.run([binary(), "--port", "0", *args], capture_output=True, text=True,
                              timeout=20)
        assert proc.returncode == 2 and words in proc.stderr, (args, proc.stderr)
    help_text = subprocess.run([binary(), "--help"], capture_output=True, text=True).stdout
    for option in ("--remote-port N", "--remote-transports LIST", "--remote-tcp-device DEV",
                   "--remote-tcp-ports LOW-HIGH", "--remote-max-connections N",
                   "--remote-max-copies N"):
        assert option in help_text


# ----------------------------------------------------------------- the attacks


def v1_descriptor(address, length=4096, target=0x10000):
    """A descriptor of version 1: a worker address (here the server's own
    listener's, in its place), a remote key, and an address and length in
    that worker's memory."""
    rkey = b"\x5a" * 16
    return (struct.pack("<B3xII4xQQ", 1, len(address), len(rkey), target, length) +
            address + rkey)


def test_descriptor_of_version_1_is_refused(start_server):
    server = start_server()
    code, body = invitation(server)
    assert code == 200, body
    address = body["address"].encode()
    for d in (v1_descriptor(address), v1_descriptor(address)[:40]):
        code, body = register(server, "v1", d, 4096)
        assert code == 400 and "version 1" in body["error"], body
    assert status(server) == (200, [])
    assert_serving(server)


def test_connect_needs_a_known_token(start_server, tmp_path):
    tenants = tmp_path / "tenants"
    tenants.write_text(TWO_TENANTS)
    tenants.chmod(0o600)
    server = start_server("--tenants", str(tenants))
    for headers in ({}, bearer("not-a-known-token-at-all"), bearer(ALICE[:-1]),
                    {"Authorization": ALICE}):
        code, resp_headers, data = server.request("POST", f"{REMOTE}/connect", b"{}", headers)
        assert code == 401 and b"known token" in data, (code, data)
        assert resp_headers["WWW-Authenticate"] == "Bearer"
    code, body = invitation(server, ALICE)
    assert code == 200 and len(base64.b64decode(body["secret"]["b64"])) == 32, body
    # The listener's address, on --host.
    assert body["address"].startswith("127.0.0.1:") and int(body["address"].split(":")[1]) > 0, body
    assert server.json("GET", f"{REMOTE}/connect")[0] == 405


def test_connect_needs_the_restricted_header(start_server):
    server = start_server("--http-restricted-api", "shared-memory:api-key=letmein")
    code, body = invitation(server)
    assert code == 403 and "api-key" in body["error"], body
    code, body = server.json("POST", f"{REMOTE}/connect", {}, {"api-key": "letmein"})
    assert code == 200, body


@pytest.fixture
def tenanted(start_server, tmp_path):
    """start(*args): a server with tenants alice and bob."""
    tenants = tmp_path / "tenants"
    tenants.write_text(TWO_TENANTS)
    tenants.chmod(0o600)
    return lambda *args: start_server("--tenants", str(tenants), *args)


def test_tenant_cannot_register_another_tenants_window(tenanted, agents):
    """Three processes: the server, alice's client and bob's. Bob, who has
    his own connection, registers the descriptor of alice's window: refused
    as if there were no such window, and nothing of alice's is read or
    written, through that descriptor or through alice's own region."""
    server = tenanted()
    alice, bob = agents(), agents()
    alice.connect(server, ALICE)
    bob.connect(server, BOB)
    wa, da = alice.export(NBYTES, seed=5)
    wb, db = bob.export(NBYTES, seed=6)
    for name in ("in", "out"):
        code, body = register(server, name, da, NBYTES, token=BOB)
        assert code == 404 and "no window of this tenant's connections" in body["error"], body
    # Nor without a token: 401 before the descriptor is looked at.
    assert register(server, "in", da, NBYTES)[0] == 401
    assert status(server, token=BOB) == (200, [])
    # Bob's own window registers; alice registers hers under the same name.
    assert register(server, "out", db, NBYTES, token=BOB) == (200, None)
    assert register(server, "in", da, NBYTES, token=ALICE) == (200, None)
    # Bob reads alice's region by name: absent for him.
    code, body = infer(server, "in", "out", token=BOB)
    assert code == 404, body
    assert [r["name"] for r in status(server, token=BOB)[1]] == ["out"]
    assert [r["name"] for r in status(server, token=ALICE)[1]] == ["in"]
    assert alice.read(wa) == random_bytes(5, NBYTES)
    assert bob.read(wb) == random_bytes(6, NBYTES)
    # Alice's descriptor read by alice: her own connection serves her.
    assert register(server, "copy", da, NBYTES, token=ALICE) == (200, None)
    code, body = infer(server, "in", "copy", token=ALICE)
    assert code == 200, body
    assert_serving(server)
    assert unregister(server, token=ALICE) == (200, None)
    assert unregister(server, token=BOB) == (200, None)


def with_fields(descriptor, window=None, generation=None, connection=None):
    """descriptor with its window id, generation or connection id changed."""
    d = bytearray(descriptor)
    if connection is not None:
        d[8:24] = connection
    if window is not None:
        d[24:32] = struct.pack("<Q", window)
    if generation is not None:
        d[32:40] = struct.pack("<Q", generation)
    return bytes(d)


def test_unannounced_stale_and_withdrawn_windows(start_server, agents):
    server = start_server()
    agent = agents()
    agent.connect(server)
    w, d = agent.export(4096, seed=8)
    window, generation = struct.unpack("<QQ", d[24:40])
    for forged in (with_fields(d, window=window + 1000), with_fields(d, window=2**64 - 1),
                   with_fields(d, generation=generation + 1),
                   with_fields(d, generation=generation - 1 if generation else 7),
                   with_fields(d, connection=bytes(15) + b"\x01")):
        code, body = register(server, "forged", forged, 64)
        assert code == 404 and "no window of this tenant's connections" in body["error"], body
    # Past the announced length: out of bounds.
    code, body = register(server, "forged", d, 4097)
    assert code == 400 and "past the end" in body["error"], body
    # A withdrawn window: its descriptor is stale.
    w2, d2 = agent.export(64, seed=9)
    assert register(server, "early", d2, 64) == (200, None)
    agent.call("close", window=w2)
    code, body = register(server, "late", d2, 64)
    assert code == 404, body
    # A region registered before the withdrawal fails its copies, cleanly.
    code, body = server.json("POST", "/v2/models/identity/infer", {
        "inputs": [{"name": "INPUT0", "datatype": "FP16", "shape": [1, 32],
                    "parameters": {"shared_memory_region": "early", "shared_memory_byte_size": 64}}]})
    assert code >= 400 and "withdrawn" in body["error"], body
    assert [r["name"] for r in status(server)[1]] == ["early"]
    assert agent.read(w) == random_bytes(8, 4096)
    assert_serving(server)
    assert unregister(server) == (200, None)


def test_secret_is_good_once(start_server, agents):
    server = start_server()
    code, body = invitation(server)
    assert code == 200, body
    address, secret = body["address"], body["secret"]["b64"]
    first, second = agents(), agents()
    first.call("join", address=address, secret=secret)
    refused = second.call("join", refused=True, address=address, secret=secret)
    assert refused["code"] == "SHMREG_ERR_NOT_FOUND", refused
    # A secret that was never issued.
    refused = agents().call("join", refused=True, address=address, secret=b64(bytes(32)))
    assert refused["code"] == "SHMREG_ERR_NOT_FOUND", refused
    # The first connection works.
    w, d = first.export(64, seed=12)
    assert register(server, "once", d, 64) == (200, None)
    assert unregister(server) == (200, None)
    assert_serving(server)


def test_connection_limit_per_tenant(tenanted, agents):
    server = tenanted("--remote-max-connections", "2")
    agents().connect(server, ALICE)
    assert invitation(server, ALICE)[0] == 200  # an unused invitation counts too
    code, body = invitation(server, ALICE)
    assert code == 429 and "alice" in body["error"], body
    a3 = agents()
    refused = a3.call("connect", refused=True, url=server.url, token=ALICE)
    assert refused["code"] == 429, refused
    # Bob has his own.
    agents().connect(server, BOB)
    assert invitation(server, BOB)[0] == 200


def test_client_that_never_answers(tenanted, agents):
    """Alice's client stops (SIGSTOP) with her regions registered: her
    request fails after --remote-timeout-ms with a clear error, her second
    request meanwhile is refused at once by the library (--remote-max-copies
    1, below her share of --threads 8: 3), and bob's requests are served all
    along."""
    server = tenanted("--remote-timeout-ms", "2000", "--remote-max-copies", "1", "--threads", "8")
    alice, _, _ = client_with_io(agents, server, ALICE, seed=13)
    bob, _, bob_out = client_with_io(agents, server, BOB, seed=14)
    code, body = infer(server, "in", "out", token=ALICE)
    assert code == 200, body
    alice.proc.send_signal(signal.SIGSTOP)
    result = {}

    def stalled():
        start = time.monotonic()
        result["r"] = infer(server, "in", "out", token=ALICE)
        result["s"] = time.monotonic() - start

    t = threading.Thread(target=stalled)
    t.start()
    time.sleep(0.3)  # alice's copy is in flight, waiting for her client
    start = time.monotonic()
    code, body = infer(server, "in", "out", token=ALICE)
    assert code == 429 and "in flight" in body["error"], body
    assert time.monotonic() - start < 1.0, "the copy over the limit waited"
    for _ in range(3):
        code, body = infer(server, "in", "out", token=BOB)
        assert code == 200, body
    assert bob.read(bob_out) == random_bytes(14, NBYTES)
    t.join(timeout=30)
    assert not t.is_alive()
    code, body = result["r"]
    print(f"a stopped client's copy, after {result['s']:.3f} s: {code} {body}")
    assert code >= 400 and code != 404, body
    assert "remote region 'in'" in body["error"] and "2000 ms" in body["error"], body
    assert 1.5 < result["s"] < 15, result
    assert_serving(server)
    assert infer(server, "in", "out", token=BOB)[0] == 200
    # Alice's client wakes up and answers the copy long abandoned: the
    # answer is dropped, and the server serves on.
    alice.proc.send_signal(signal.SIGCONT)
    time.sleep(0.5)
    assert_serving(server)
    assert infer(server, "in", "out", token=BOB)[0] == 200


def grpc_infer(client, token, in_name="in", out_name="out"):
    """identity over gRPC on remote regions: (0, None) or (the status code's
    name, the message)."""
    grpcclient = pytest.importorskip("tritonclient.grpc")
    from tritonclient.utils import InferenceServerException
    inp = grpcclient.InferInput("INPUT0", SHAPE, "FP16")
    inp.set_shared_memory(in_name, NBYTES)
    out = grpcclient.InferRequestedOutput("OUTPUT0")
    out.set_shared_memory(out_name, NBYTES)
    try:
        client.infer("identity", [inp], outputs=[out],
                     headers={"authorization": f"Bearer {token}"})
    except InferenceServerException as e:
        return e.status(), e.message()
    return 0, None


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_silent_client_holds_no_other_tenants_request(tmp_path, agents, protocol):
    """Bob's client stops answering (SIGSTOP) and ten of his requests read
    from it at once, on a server of four worker threads whose copies wait
    up to 4 s: at most his share of the threads waits for his client, the
    rest are refused at once (429 / RESOURCE_EXHAUSTED, naming bob and
    --threads), and alice's requests meanwhile are served at their usual
    latency, well under the timeout."""
    grpcclient = pytest.importorskip("tritonclient.grpc")
    from grpc_support import assert_clean_stop, start_with_grpc
    tenants = tmp_path / "tenants"
    tenants.write_text(TWO_TENANTS)
    tenants.chmod(0o600)
    server = start_with_grpc("--remote-tcp-device", TCP_DEVICE, "--tenants", str(tenants),
                             "--threads", "4", "--remote-timeout-ms", "4000")
    try:
        alice, _, alice_out = client_with_io(agents, server, ALICE, seed=16)
        bob, _, _ = client_with_io(agents, server, BOB, seed=17)
        client = grpcclient.InferenceServerClient(server.grpc_url)

        def infer_as(token):
            if protocol == "grpc":
                return grpc_infer(client, token)
            code, body = infer(server, "in", "out", token=token)
            return (0, None) if code == 200 else (code, body["error"])

        assert infer_as(BOB) == (0, None)
        bob.proc.send_signal(signal.SIGSTOP)
        results = []
        stalled = [threading.Thread(target=lambda: results.append(infer_as(BOB))) for _ in range(10)]
        for t in stalled:
            t.start()
        time.sleep(0.5)  # bob's requests have reached the worker threads
        for _ in range(3):
            start = time.monotonic()
            answer = infer_as(ALICE)
            took = time.monotonic() - start
            print(f"{protocol}: alice's request beside bob's stalled ones: {took:.3f} s")
            assert answer == (0, None), answer
            assert took < 1.0, f"alice's request waited {took:.3f} s behind bob's silent client"
        assert alice.read(alice_out) == random_bytes(16, NBYTES)
        for t in stalled:
            t.join(timeout=30)
        assert not any(t.is_alive() for t in stalled)
        client.close()
        refused = [message for code, message in results
                   if code in (429, "StatusCode.RESOURCE_EXHAUSTED")]
        print(f"{protocol}: bob's ten requests: {results}")
        assert refused, results
        for message in refused:
            assert "'bob'" in message and "--threads" in message, message
        assert_serving(server)
    finally:
        assert_clean_stop(server)


def test_silent_client_leaves_a_thread_for_other_requests(start_server, agents):
    """Without --tenants: a client that stops answering holds at most
    --threads less one of the worker threads with its copies (the rest of
    its requests are refused at once, naming --threads), so that a request
    without a remote region is served meanwhile at its usual latency."""
    server = start_server("--threads", "4", "--remote-timeout-ms", "4000")
    agent, _, _ = client_with_io(agents, server, seed=18)
    agent.proc.send_signal(signal.SIGSTOP)
    results = []
    stalled = [threading.Thread(target=lambda: results.append(infer(server, "in", "out")))
               for _ in range(10)]
    for t in stalled:
        t.start()
    time.sleep(0.5)  # the requests have reached the worker threads
    data = list(range(32))
    start = time.monotonic()
    code, body = server.json("POST", "/v2/models/identity/infer", {  # a worker's model
        "inputs": [{"name": "INPUT0", "datatype": "INT32", "shape": [1, 32], "data": data}]})
    took = time.monotonic() - start
    assert code == 200 and body["outputs"][0]["data"] == data, body
    assert took < 1.0, f"a request without remote regions waited {took:.3f} s behind a silent client"
    for t in stalled:
        t.join(timeout=30)
    refused = [body["error"] for code, body in results if code == 429]
    assert len(refused) >= 10 - 3, results
    assert all("--threads 4 less one" in message for message in refused), refused
    assert_serving(server)


# ------------------------------------------------------------ the engine at start


def run_binary(*args, timeout=20):
    """The server run with args until it exits or timeout: (exit code or
    None when it was still running and was stopped, stderr)."""
    from server_process import binary
    proc = subprocess.Popen([binary(), "--port", "0", "--allow-client-shm=true", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        return proc.wait(timeout=timeout), proc.stderr.read()
    except subprocess.TimeoutExpired:
        proc.terminate()
        proc.wait()
        return None, proc.stderr.read()


@pytest.mark.parametrize("args, words", [
    (["--remote-transports", "posix"], ["'posix'", "--remote-transports"]),
    (["--remote-transports", "posix,sysv,cma", "--remote-tcp-device", TCP_DEVICE],
     ["'posix'", "--remote-transports"]),
    (["--remote-transports", "ud"], ["'ud'", "--remote-transports"]),
    (["--remote-transports", "ud_verbs,rc"], ["'ud_verbs'", "--remote-transports"]),
    (["--remote-transports", "tcp"], ["'tcp'", "--remote-tcp-device"]),
])
def test_refused_transports_stop_the_start(args, words):
    """A transport on which a peer could read or write the server's memory
    unchecked, and tcp without a trusted device, stop the server at start
    with the library's message naming the transport and the flag."""
    code, err = run_binary(*args)
    assert code == 1, (code, err)
    assert "error: remote_memory" in err and all(w in err for w in words), err
    assert "listening on" not in err


def test_remote_port_in_use_stops_the_start():
    """A --remote-port another socket holds fails at start, not at the
    first client's connect."""
    import socket
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, err = run_binary("--host", "127.0.0.1", "--remote-tcp-device", TCP_DEVICE,
                               "--remote-port", str(port))
    assert code == 1 and "error: remote_memory (--remote-port given)" in err, (code, err)
    assert f":{port}" in err, err


def test_remote_port_reused_at_once(start_server, agents):
    """A server stopped while a client was connected leaves its listener's
    connection in TIME_WAIT; a server started at once on the same
    --remote-port binds it (the library has UCX reuse the address)."""
    from grpc_support import assert_clean_stop, free_port
    port = free_port()
    first = start_server("--remote-port", str(port))
    agent = agents()
    agent.connect(first)
    agent.export(64, seed=19)
    assert_clean_stop(first)
    agent.stop()
    waiting = subprocess.run(["ss", "-tanH", "state", "time-wait", f"( sport = :{port} )"],
                             capture_output=True, text=True).stdout
    print(f"connections of port {port} in TIME_WAIT: {waiting!r}")
    second = start_server("--remote-port", str(port))
    code, body = invitation(second)
    assert code == 200 and body["address"] == f"127.0.0.1:{port}", body


def test_tcp_exposure_is_said_at_start():
    """With tcp open, the start-up says that any host that reaches the
    device's address can write into the server's memory."""
    from server_process import Server
    server = Server("--remote-tcp-device", TCP_DEVICE, "--remote-tcp-ports", "42000-42999")
    code, err = server.stop()
    assert code == 0, err
    assert "remote_memory listening on 127.0.0.1:" in err, err
    assert (f"tcp is open on {TCP_DEVICE}: any host that reaches {TCP_DEVICE}'s address" in err
            and "(42000-42999)" in err and "can write into this server's memory" in err), err


def test_engine_endpoint(tenanted):
    server = tenanted("--remote-tcp-ports", "42000-42999", "--remote-transports", "tcp")
    code, body = server.json("GET", f"{REMOTE}/engine", None, bearer(ALICE))
    assert code == 200, body
    host, port = body["listen"].rsplit(":", 1)
    assert host == "127.0.0.1" and int(port) > 0, body
    assert body == {"listen": body["listen"], "transports": "tcp", "tcp_device": TCP_DEVICE,
                    "tcp_ports": "42000-42999", "open_to_any_host_on_tcp_device": True}, body
    # Gated like the other remotememory calls.
    code, _, data = server.request("GET", f"{REMOTE}/engine")
    assert code == 401 and b"known token" in data, (code, data)
    assert server.json("POST", f"{REMOTE}/engine", {}, bearer(ALICE))[0] == 405


def test_engine_endpoint_needs_client_memory(start_server):
    server = start_server("--allow-client-shm=false")
    code, body = server.json("GET", f"{REMOTE}/engine")
    assert code == 501 and "--allow-client-shm=true" in body["error"], body
    assert "remote_memory" not in server.json("GET", "/v2")[1]["extensions"]


def test_engine_off_without_flags(agents):
    """Without any engine flag, on a host with no RDMA device, the server
    starts with remote_memory off: one line says why, v2 does not list the
    extension, and connect and the engine endpoint answer 501 with the
    reason."""
    from server_process import Server
    server = Server()
    try:
        status_code, meta = server.json("GET", "/v2")
        if "remote_memory" in meta["extensions"]:
            pytest.skip("this host has an RDMA device: the engine starts without flags")
        for method, path in (("POST", "connect"), ("GET", "engine")):
            code, body = server.json(method, f"{REMOTE}/{path}", {} if method == "POST" else None)
            assert code == 501 and "remote_memory is off" in body["error"], body
            assert "--remote-tcp-device" in body["error"], body
        assert status(server) == (200, [])
    finally:
        code, err = server.stop()
    assert code == 0, err
    [line] = [line for line in err.splitlines() if line.startswith("remote_memory")]
    assert line.startswith("remote_memory: off") and "--remote-tcp-device" in line, err


def test_a_live_upgrade_needs_a_remote_port_of_its_own(tmp_path):
    """Remote regions are not carried by a live upgrade, and the old server
    holds its --remote-port until it stops: a successor given the same port
    fails at start and the old one serves on; one given a port of its own
    takes over, and its engine listens there."""
    from grpc_support import free_port
    from server_process import Server, binary, leftover_report
    hand = str(tmp_path / "up.sock")
    remote_port, successor_port = free_port(), free_port()
    flags = ["--remote-tcp-device", TCP_DEVICE, "--handover-socket", hand]
    old = Server(*flags, "--remote-port", str(remote_port))
    new = None
    try:
        same = subprocess.run([binary(), "--take-over", hand, "--allow-client-shm=true", *flags,
                               "--remote-port", str(remote_port)], capture_output=True, text=True,
                              timeout=60)
        assert same.returncode == 1, same.stderr
        assert "cannot start the remote engine" in same.stderr, same.stderr
        assert old.json("GET", "/v2/health/ready")[0] == 200
        new = Server("--take-over", hand, *flags, "--remote-port", str(successor_port))
        assert new.port == old.port
        old.proc.wait(timeout=30)
        rc, err = old.stop()
        assert rc == 0 and leftover_report(err) == (0, 0), err
        code, body = new.json("GET", f"{REMOTE}/engine")
        assert code == 200 and body["listen"] == f"127.0.0.1:{successor_port}", body
    finally:
        for server in (old, new):
            if server:
                server.stop()
    rc, err = new.stop()
    assert rc == 0 and leftover_report(err) == (0, 0), err
