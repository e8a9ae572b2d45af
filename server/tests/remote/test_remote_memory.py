"""The remote_memory extension (issue 20) over HTTP: a client process that
exports its arrays through UCX (python/shmreg/remote.py) and a server that
reads its inputs and writes its outputs remotely. scripts/tests.d/63-remote.sh
runs this file twice, with UCX_TLS=tcp and with the shared-memory transports,
and sets SHMREG_LIBRARY to the library the server was built against.

Asserted: register, status, infer (the identity model's 1,474,560-byte FP16
input read from the client, its output written into the client's array, the
bytes compared), unregister; an unregister while a request is in flight,
under each busy policy; a client killed with SIGKILL, whose regions the
server unregisters by itself and whose in-flight request ends with an error,
never a hang; malformed descriptors and the --allow-client-shm gate."""
import base64
import importlib.util
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
REMOTE_PY = ROOT / "python" / "shmreg" / "remote.py"


def load_remote():
    spec = importlib.util.spec_from_file_location("shmreg_remote", REMOTE_PY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


remote = load_remote()
if not remote.available():
    pytest.skip("no UCX in this process (libshmreg built without it, or UCX not installed)",
                allow_module_level=True)

pytestmark = pytest.mark.frontends("c")

SHAPE = [3, 384, 640]  # 1,474,560 bytes of FP16


def identity_request(in_name, out_name, nbytes):
    return {"inputs": [{"name": "INPUT0", "datatype": "FP16", "shape": SHAPE,
                        "parameters": {"shared_memory_region": in_name,
                                       "shared_memory_byte_size": nbytes}}],
            "outputs": [{"name": "OUTPUT0",
                         "parameters": {"shared_memory_region": out_name,
                                        "shared_memory_byte_size": nbytes}}]}


def test_register_infer_unregister(start_frontend):
    server = start_frontend()
    x = np.random.default_rng(1).standard_normal(SHAPE).astype(np.float16)
    y = np.zeros_like(x)
    with remote.export(x) as wx, remote.export(y) as wy:
        remote.register(server.url, "in", wx)
        remote.register(server.url, "out", wy)
        listed = {r["name"]: r for r in remote.status(server.url)}
        assert listed["in"]["byte_size"] == x.nbytes and listed["out"]["offset"] == 0
        for _ in range(3):
            y[...] = 0
            status, body = server.json("POST", "/v2/models/identity/infer",
                                       identity_request("in", "out", x.nbytes))
            assert status == 200, body
            assert "data" not in body["outputs"][0]  # the bytes went to the client
            assert np.array_equal(x.view(np.uint16), y.view(np.uint16))
        # Remote regions are not system ones, and the reverse.
        status, body = server.json("GET", "/v2/systemsharedmemory/region/in/status")
        assert status == 404, body
        remote.unregister(server.url, "in")
        remote.unregister(server.url)
        assert remote.status(server.url) == []


def test_allocated_memory(start_frontend):
    """remote.allocate: UCX's memory, filled and read through numpy."""
    server = start_frontend()
    nbytes = 2 * 3 * 384 * 640
    wx, wy = remote.allocate(nbytes), remote.allocate(nbytes)
    x = np.frombuffer(wx.memory, np.float16).reshape(SHAPE)
    y = np.frombuffer(wy.memory, np.float16).reshape(SHAPE)
    x[...] = np.random.default_rng(2).standard_normal(SHAPE)
    y[...] = 0
    remote.register(server.url, "ain", wx)
    remote.register(server.url, "aout", wy)
    status, body = server.json("POST", "/v2/models/identity/infer",
                               identity_request("ain", "aout", nbytes))
    assert status == 200, body
    assert np.array_equal(x.view(np.uint16), y.view(np.uint16))
    remote.unregister(server.url)
    del x, y
    wx.close()
    wy.close()


def test_window_and_bounds(start_frontend):
    server = start_frontend()
    x = np.arange(4096, dtype=np.uint8)
    with remote.export(x) as w:
        remote.register(server.url, "part", w, byte_size=1024, offset=512)
        [entry] = remote.status(server.url, "part")
        assert (entry["offset"], entry["byte_size"]) == (512, 1024)
        with pytest.raises(remote.RemoteError) as e:
            remote.register(server.url, "past", w, byte_size=4096, offset=1)
        assert e.value.code == 400 and "past the end" in e.value.message
        remote.unregister(server.url)


def b64(data):
    return base64.b64encode(data).decode()


@pytest.mark.parametrize("descriptor, words", [
    ("!!!", "base64"),
    (b64(b"\x01\0\0\0"), "header"),
    (b64(b"\x02" + bytes(40)), "version"),
    (b64(b"\x01" + bytes(3) + b"\xff\xff\0\0\x01" + bytes(27)), "outside 1..8192"),
])
def test_bad_descriptors(start_frontend, descriptor, words):
    server = start_frontend()
    status, body = server.json("POST", "/v2/remotememory/region/bad/register",
                               {"descriptor": {"b64": descriptor}, "byte_size": 8})
    assert status == 400 and words in body["error"], body
    status, body = server.json("POST", "/v2/remotememory/region/bad/register", {"byte_size": 8})
    assert status == 400 and "no 'descriptor'" in body["error"], body
    assert remote.status(server.url) == []


def test_gated_like_client_shm(start_frontend):
    server = start_frontend("--allow-client-shm=false")
    x = np.ones(64, dtype=np.uint8)
    with remote.export(x) as w:
        with pytest.raises(remote.RemoteError) as e:
            remote.register(server.url, "r", w)
        assert e.value.code >= 400
    assert remote.status(server.url) == []


@pytest.mark.parametrize("policy", ["defer", "detach", "refuse"])
def test_unregister_in_flight(start_frontend, policy):
    """A request reads its input, then sleeps in the model (simple_delayed)
    while the region is unregistered; its output is still written remotely."""
    server = start_frontend("--busy-policy", policy, "--delay-ms", "600")
    a = np.arange(16, dtype=np.int32)
    b = np.full(16, 5, dtype=np.int32)
    out = np.zeros(32, dtype=np.int32)
    with remote.export(a) as wa, remote.export(b) as wb, remote.export(out) as wo:
        for name, w in (("a", wa), ("b", wb), ("o", wo)):
            remote.register(server.url, name, w)
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
        server.wait_until(lambda: remote.status(server.url, "o")[0]["in_use"],
                          what="the request to hold its output region")
        status, body = server.json("POST", "/v2/remotememory/region/o/unregister")
        if policy == "refuse":
            assert status == 400 and "in use" in body["error"], body
        else:
            assert status == 200, body
        t.join()
        assert result["r"][0] == 200, result
        assert np.array_equal(out[:16], a + b) and np.array_equal(out[16:], a - b)
        remote.unregister(server.url)
        server.wait_until(lambda: remote.status(server.url) == [], what="every region gone")


CLIENT = """
import sys, time, importlib.util, numpy as np
spec = importlib.util.spec_from_file_location("r", sys.argv[1]); r = importlib.util.module_from_spec(spec)
spec.loader.exec_module(r)
x = np.ones([3, 384, 640], dtype=np.float16); y = np.zeros_like(x)
wx, wy = r.export(x), r.export(y)
r.register(sys.argv[2], "dead_in", wx); r.register(sys.argv[2], "dead_out", wy)
print("ready", flush=True)
time.sleep(600)
"""


def test_client_killed(start_frontend):
    """A client dies (SIGKILL) while a request uses its regions: the request
    ends (an error or, where the transport still reached the pages, a
    result), never hangs; the server unregisters the client's regions by
    itself."""
    server = start_frontend("--threads", "4", "--remote-timeout-ms", "2000")
    client = subprocess.Popen([sys.executable, "-c", CLIENT, str(REMOTE_PY), server.url],
                              stdout=subprocess.PIPE, env=os.environ)
    try:
        assert client.stdout.readline().strip() == b"ready"
        assert {r["name"] for r in remote.status(server.url)} == {"dead_in", "dead_out"}
        results = []

        def infer_loop():
            while True:
                st, body = server.json("POST", "/v2/models/identity/infer",
                                       identity_request("dead_in", "dead_out", 1474560))
                results.append((st, body))
                if st != 200:
                    return

        t = threading.Thread(target=infer_loop)
        t.start()
        while not results:
            time.sleep(0.005)
        killed = time.monotonic()
        client.send_signal(signal.SIGKILL)
        t.join(timeout=30)
        assert not t.is_alive(), "requests on a killed client's regions did not end in 30 s"
        status, body = results[-1]
        print(f"killed client: {len(results)} requests, the last {status} after "
              f"{time.monotonic() - killed:.3f} s: {body}")
        assert status != 200
        server.wait_until(lambda: remote.status(server.url) == [], timeout=15,
                          what="the killed client's regions to be unregistered")
    finally:
        client.kill()
        client.wait()
