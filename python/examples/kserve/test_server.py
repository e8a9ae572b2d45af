"""python/examples/kserve/server.py, started as a user would, driven by Triton's
own client (tritonclient[http]): server/README.md's snippet unchanged but
for the address, the system shared-memory flow (register, status, infer
with inputs and outputs in a region, unregister), a client that truncates
its object between register and infer (400, the server lives and serves the
next client), and the registry's counters on KServe's /metrics.
Run by scripts/tests.d/67-kserve-example.sh in a venv with kserve."""
from __future__ import annotations

import contextlib
import io
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import numpy as np
import pytest

httpclient = pytest.importorskip("tritonclient.http")
pytest.importorskip("kserve")
import tritonclient.utils.shared_memory as shm  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
README = ROOT / "server" / "README.md"
A = np.arange(16, dtype=np.int32).reshape(1, 16)
B = np.full((1, 16), 10, dtype=np.int32)
N = A.nbytes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    port = free_port()
    log = open(ROOT / "build" / f"kserve-example-{port}.log", "w+") \
        if (ROOT / "build").is_dir() else subprocess.DEVNULL
    proc = subprocess.Popen([sys.executable, str(HERE / "server.py"), "--http_port", str(port),
                             "--enable_grpc", "false", "--allow-client-shm=true"],
                            stdout=log, stderr=subprocess.STDOUT)
    url = f"127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"http://{url}/v2/models/simple/ready", timeout=2) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"the KServe example did not start (exit {proc.poll()})")
        time.sleep(0.2)
    yield proc, url
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(60) == 0 or proc.returncode == -signal.SIGTERM


@pytest.fixture
def key():
    made = []

    def make(name: str) -> str:
        made.append(f"/kserve_example_{os.getpid()}_{uuid.uuid4().hex[:6]}_{name}")
        return made[-1]

    yield make
    for k in made:
        with contextlib.suppress(FileNotFoundError):
            os.unlink("/dev/shm" + k)


def test_readme_snippet_runs_unchanged(server):
    _, url = server
    text = README.read_text()
    block = text[text.index("<!-- server:begin -->"):text.index("<!-- server:end -->")]
    code = re.search(r"```python\n(.*?)```", block, re.S).group(1)
    assert '"127.0.0.1:8000"' in code
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code.replace('"127.0.0.1:8000"', f'"{url}"'), str(README), "exec"), {})
    out = printed.getvalue()
    numbers = lambda t: [int(x) for x in re.findall(r"-?\d+", t)]
    assert numbers(out[out.index("sum"):out.index("diff")]) == list(range(10, 26))
    assert numbers(out[out.index("diff"):out.index("[{")]) == list(range(-10, 6))
    assert "'in_use': 0" in out[out.index("[{"):]


def test_system_shared_memory_flow(server, key):
    _, url = server
    client = httpclient.InferenceServerClient(url)
    k = key("io")
    region = shm.create_shared_memory_region("io", k, 4 * N)
    try:
        shm.set_shared_memory_region(region, [A, B])
        client.unregister_system_shared_memory()
        client.register_system_shared_memory("io", k, 4 * N)
        (status,) = client.get_system_shared_memory_status()
        assert (status["name"], status["key"], status["byte_size"]) == ("io", k, 4 * N)
        # Inputs from the region, one output into it and one in the response.
        inputs = [httpclient.InferInput("INPUT0", [1, 16], "INT32"),
                  httpclient.InferInput("INPUT1", [1, 16], "INT32")]
        inputs[0].set_shared_memory("io", N, offset=0)
        inputs[1].set_shared_memory("io", N, offset=N)
        outputs = [httpclient.InferRequestedOutput("OUTPUT0"),
                   httpclient.InferRequestedOutput("OUTPUT1", binary_data=True)]
        outputs[0].set_shared_memory("io", N, offset=2 * N)
        result = client.infer("simple", inputs, outputs=outputs)
        np.testing.assert_array_equal(shm.get_contents_as_numpy(region, np.int32, [1, 16], 2 * N),
                                      A + B)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), A - B)
        # Inputs as binary data, outputs into the region: the other direction.
        inputs = [httpclient.InferInput("INPUT0", [1, 16], "INT32"),
                  httpclient.InferInput("INPUT1", [1, 16], "INT32")]
        inputs[0].set_data_from_numpy(B)
        inputs[1].set_data_from_numpy(A)
        outputs = [httpclient.InferRequestedOutput("OUTPUT1")]
        outputs[0].set_shared_memory("io", N, offset=3 * N)
        client.infer("simple", inputs, outputs=outputs)
        np.testing.assert_array_equal(shm.get_contents_as_numpy(region, np.int32, [1, 16], 3 * N),
                                      B - A)
        assert client.get_system_shared_memory_status()[0]["in_use"] == 0
        client.unregister_system_shared_memory("io")
        assert client.get_system_shared_memory_status() == []
    finally:
        shm.destroy_shared_memory_region(region)
        client.close()


@pytest.mark.parametrize("direction", ["input", "output"])
def test_truncating_client_gets_400_and_the_server_goes_on(server, key, direction):
    proc, url = server
    client = httpclient.InferenceServerClient(url)
    k = key("victim")
    region = shm.create_shared_memory_region("victim", k, 4 * N)
    try:
        shm.set_shared_memory_region(region, [A, B])
        client.register_system_shared_memory("victim", k, 4 * N)
        os.truncate("/dev/shm" + k, 0)  # the client shrinks its object
        inputs = [httpclient.InferInput("INPUT0", [1, 16], "INT32"),
                  httpclient.InferInput("INPUT1", [1, 16], "INT32")]
        outputs = None
        if direction == "input":
            inputs[0].set_shared_memory("victim", N, offset=0)
            inputs[1].set_shared_memory("victim", N, offset=N)
        else:
            inputs[0].set_data_from_numpy(A)
            inputs[1].set_data_from_numpy(B)
            outputs = [httpclient.InferRequestedOutput("OUTPUT0")]
            outputs[0].set_shared_memory("victim", N, offset=2 * N)
        with pytest.raises(InferenceServerException) as e:
            client.infer("simple", inputs, outputs=outputs)
        assert e.value.status() == "400", e.value.message()
        assert "'victim'" in e.value.message() and "truncated" in e.value.message()
        assert proc.poll() is None
        assert client.get_system_shared_memory_status("victim")[0]["in_use"] == 0
        # Another client is served as before.
        other = [httpclient.InferInput("INPUT0", [1, 16], "INT32"),
                 httpclient.InferInput("INPUT1", [1, 16], "INT32")]
        other[0].set_data_from_numpy(A)
        other[1].set_data_from_numpy(B)
        np.testing.assert_array_equal(client.infer("simple", other).as_numpy("OUTPUT0"), A + B)
        client.unregister_system_shared_memory("victim")
    finally:
        shm.destroy_shared_memory_region(region)
        client.close()


def test_registry_counters_on_kserves_metrics_page(server, key):
    _, url = server
    client = httpclient.InferenceServerClient(url)
    k = key("m")
    region = shm.create_shared_memory_region("m", k, 4096)
    try:
        client.register_system_shared_memory("m", k, 4096)
        with urllib.request.urlopen(f"http://{url}/metrics", timeout=10) as r:
            page = r.read().decode()
        assert re.search(r"^shmreg_regions 1(\.0)?$", page, re.M), page[:2000]
        assert re.search(r"^shmreg_mapped_bytes 4096(\.0)?$", page, re.M)
        assert "# TYPE shmreg_registrations_total counter" in page
        client.unregister_system_shared_memory("m")
    finally:
        shm.destroy_shared_memory_region(region)
        client.close()


def test_help_prints_the_options_and_starts_no_server():
    port = free_port()
    r = subprocess.run([sys.executable, str(HERE / "server.py"), "--help", "--http_port", str(port)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "--http_port" in r.stdout and "shared-memory" in r.stdout
    with socket.socket() as s:  # nothing listens on the port it was given
        assert s.connect_ex(("127.0.0.1", port)) != 0
