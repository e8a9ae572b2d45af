"""shmreg.kserve on its own, without a server process: what the protocol
tests cannot reach through HTTP. An output in a region registered read-only
is refused with 400 before anything is written (Triton's protocol has no
read-only flag, so only a server that registers regions itself makes one),
every reference a request takes goes back when the request's dependency
ends, and the router answers through FastAPI's TestClient."""
import json
import os
import uuid
from multiprocessing import shared_memory

import numpy as np
import pytest

shmreg = pytest.importorskip("shmreg", reason="the shmreg package is not installed")
kserve = pytest.importorskip("shmreg.kserve", reason="shmreg[fastapi] is not installed")
from fastapi import Depends, FastAPI, Request  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402

IN0 = np.arange(16, dtype=np.int32)

# SharedMemory starts multiprocessing's resource tracker (and its pipe) on
# first use; start it before any test takes its descriptor baseline.
from multiprocessing import resource_tracker  # noqa: E402
resource_tracker.ensure_running()


@pytest.fixture
def region():
    """A 256-byte shm object, IN0 at offset 0: (key, SharedMemory)."""
    key = f"/shmreg_kserve_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    mem = shared_memory.SharedMemory(name=key.lstrip("/"), create=True, size=256)
    mem.buf[:64] = IN0.tobytes()
    yield key, mem
    mem.close()
    mem.unlink()


@pytest.fixture
def registry():
    reg = shmreg.Registry()
    yield reg
    reg.unregister_all()
    reg.close()


def in_use(registry, name):
    return registry.status(name)[0].in_use


def shm_request(region, out_offset):
    return {"inputs": [{"name": "INPUT0", "datatype": "INT32", "shape": [16],
                        "parameters": {"shared_memory_region": region,
                                       "shared_memory_byte_size": 64}}],
            "outputs": [{"name": "OUTPUT0",
                         "parameters": {"shared_memory_region": region,
                                        "shared_memory_offset": out_offset,
                                        "shared_memory_byte_size": 64}}]}


def decode(body, regions):
    return kserve.decode_request(json.dumps(body).encode(), None, "m", regions)


def test_inputs_are_copies_and_the_request_holds_one_reference_per_tensor(registry, region):
    key, mem = region
    registry.register_system("r", key, 256)
    with kserve.RequestRegions(registry) as regions:
        request = decode(shm_request("r", 64), regions)
        (t,) = request.inputs
        np.testing.assert_array_equal(t.data, IN0)
        # A copy, never the mapped bytes: a truncated object cannot fault it.
        assert not np.shares_memory(t.data, np.frombuffer(mem.buf, np.uint8))
        described = [kserve.Tensor("OUTPUT0", "INT32", [16], byte_size=64)]
        (slot,) = kserve.place_outputs(request, "m", described, regions)
        assert in_use(registry, "r") == 2  # one per tensor, as in the C server
        np.multiply(t.data, 2, out=slot.array)
        assert bytes(mem.buf[64:128]) == bytes(64)  # written by encode_response only
        kserve.encode_response("m", request, [slot])
        del t, slot, request
    assert in_use(registry, "r") == 0
    np.testing.assert_array_equal(np.frombuffer(mem.buf[64:128], np.int32), IN0 * 2)


def test_output_in_a_read_only_region_is_refused_with_400(registry, region):
    key, mem = region
    registry.register_system("ro", key, 256, readonly=True)
    with kserve.RequestRegions(registry) as regions:
        request = decode(shm_request("ro", 128), regions)
        np.testing.assert_array_equal(request.inputs[0].data, IN0)  # read as any other
        described = [kserve.Tensor("OUTPUT0", "INT32", [16], byte_size=64)]
        with pytest.raises(kserve.InferError) as e:
            kserve.place_outputs(request, "m", described, regions)
        del request
    assert e.value.status == 400
    assert e.value.message == ("output 'OUTPUT0' cannot be written to shared memory region "
                               "'ro': it was registered read-only")
    assert in_use(registry, "ro") == 0
    assert bytes(mem.buf[128:192]) == bytes(64)


def app_with_infer(registry, **limits):
    """The smallest server: the router (client shared memory allowed) plus an
    echo 'model' over the helpers; limits go to decode_request and
    place_outputs."""
    app = FastAPI()
    app.include_router(kserve.shared_memory_router(registry, allow_client_shm=True))

    @app.post("/v2/models/echo/infer")
    async def infer(request: Request, regions=Depends(kserve.request_regions(registry))):
        try:
            req = kserve.decode_request(await request.body(), None, "echo", regions,
                                        max_copy_bytes=limits.get("max_copy_bytes",
                                                                  kserve.MAX_BODY_BYTES))
            t = req.inputs[0]
            slots = kserve.place_outputs(req, "echo", [kserve.Tensor(
                "OUTPUT0", t.datatype, t.shape, byte_size=t.byte_size)], regions,
                max_response_bytes=limits.get("max_response_bytes", kserve.MAX_BODY_BYTES))
            for s in slots:
                np.copyto(s.array, t.data)
            return kserve.encode_response("echo", req, slots)
        except kserve.InferError as e:
            return e.response()

    return app


def test_router_and_dependency_over_testclient(registry, region):
    key, mem = region
    client = TestClient(app_with_infer(registry))
    base = "/v2/systemsharedmemory"
    assert client.post(f"{base}/region/r/register", json={"key": key, "byte_size": 256}
                       ).status_code == 200
    assert client.post(f"{base}/region/r/register", json={"key": key, "byte_size": 256}
                       ).json() == {"error": "shared memory region 'r' already in manager"}
    resp = client.post("/v2/models/echo/infer", json=shm_request("r", 64))
    assert resp.status_code == 200, resp.text
    assert resp.json()["outputs"] == [{"name": "OUTPUT0", "datatype": "INT32", "shape": [16]}]
    np.testing.assert_array_equal(np.frombuffer(mem.buf[64:128], np.int32), IN0)
    (status,) = client.get(f"{base}/region/r/status").json()
    assert (status["in_use"], status["pending_unregister"]) == (0, False)
    resp = client.post("/v2/models/echo/infer", json=shm_request("nope", 64))
    assert (resp.status_code, resp.json()) == (
        404, {"error": "Unable to find shared memory region: 'nope'"})
    assert client.get("/v2/cudasharedmemory/region/r/status").status_code == 404
    assert client.post(f"{base}/unregister").status_code == 200
    assert client.get(f"{base}/status").json() == []


def truncate(key):
    os.truncate("/dev/shm/" + key.lstrip("/"), 0)


@pytest.mark.parametrize("victim", ["input", "output"])
def test_truncating_client_gets_400_and_others_are_served(registry, region, victim):
    key, mem = region
    client = TestClient(app_with_infer(registry))
    base = "/v2/systemsharedmemory"
    other_key = f"/shmreg_kserve_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    other = shared_memory.SharedMemory(name=other_key.lstrip("/"), create=True, size=256)
    try:
        other.buf[:64] = IN0.tobytes()
        for name, k in (("bad", key), ("good", other_key)):
            assert client.post(f"{base}/region/{name}/register",
                               json={"key": k, "byte_size": 256}).status_code == 200
        # The client shrinks its object between register and infer.
        truncate(key)
        body = shm_request("bad", 64)
        if victim == "output":  # the input from a whole region, the output into the bad one
            body["inputs"][0]["parameters"]["shared_memory_region"] = "good"
        resp = client.post("/v2/models/echo/infer", json=body)
        assert resp.status_code == 400, resp.text
        assert "'bad'" in resp.json()["error"]
        assert client.get(f"{base}/region/bad/status").json()[0]["in_use"] == 0
        resp = client.post("/v2/models/echo/infer", json=shm_request("good", 64))
        assert resp.status_code == 200, resp.text
        np.testing.assert_array_equal(np.frombuffer(other.buf[64:128], np.int32), IN0)
        assert client.post(f"{base}/unregister").status_code == 200
    finally:
        other.close()
        other.unlink()


def test_metrics_router_serves_the_c_servers_names(registry, region):
    prometheus_client = pytest.importorskip("prometheus_client")
    from prometheus_client.parser import text_string_to_metric_families
    key, mem = region
    app = FastAPI()
    app.include_router(kserve.metrics_router(registry))
    client = TestClient(app)
    registry.register_system("r", key, 256)
    with pytest.raises(shmreg.AlreadyExists):
        registry.register_system("r", key, 256)
    with registry.acquire("r", 0, 16):
        resp = client.get("/metrics")
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(resp.text)}
    samples = {s.name: s.value for f in families.values() for s in f.samples}
    assert [n for n in samples if not n.startswith("shmreg_")] == []
    assert samples["shmreg_regions"] == 1 and samples["shmreg_references"] == 1
    assert samples["shmreg_mapped_bytes"] == 256
    assert samples["shmreg_registrations_total"] == 1
    assert samples["shmreg_registration_refusals_total"] == 1
    assert families["shmreg_registrations"].type == "counter"
    assert families["shmreg_mapped_bytes"].type == "gauge"
    # Every name of the C server's registry table (registry_metrics[] in
    # server/src/http/metrics.c), none more. The C page's other shmreg_
    # families are the server's own (tensor paths, a tenant's figures), not
    # the registry's.
    from pathlib import Path
    import re
    c_source = (Path(__file__).resolve().parents[2] / "server" / "src" / "http" / "metrics.c").read_text()
    table = c_source[c_source.index("registry_metrics[] = {"):]
    table = table[:table.index("};")]
    c_names = set(re.findall(r'\{"(shmreg_\w+)"', table))
    assert len(c_names) >= 15, c_names
    assert set(samples) == c_names


def test_large_integers_are_refused_while_parsing():
    with pytest.raises(kserve.InferError, match="too big integer"):
        kserve.parse_json(b'{"offset": 18446744073709551584}')
    assert kserve.parse_json(b'{"offset": 9223372036854775807}') == {"offset": 2**63 - 1}


def docs_snippet():
    """The two Python blocks of docs/python.md's shmreg.kserve section, joined."""
    from pathlib import Path
    import re
    text = (Path(__file__).resolve().parents[2] / "docs" / "python.md").read_text()
    section = text[text.index("<!-- kserve:begin"):text.index("<!-- kserve:end -->")]
    return "\n".join(re.findall(r"```python\n(.*?)```", section, re.S))


def test_docs_snippet_serves_double_through_shared_memory(region):
    key, mem = region
    scope = {}
    exec(compile(docs_snippet(), "docs/python.md", "exec"), scope)
    registry = scope["registry"]
    try:
        client = TestClient(scope["app"])
        assert client.post("/v2/systemsharedmemory/region/r/register",
                           json={"key": key, "byte_size": 256}).status_code == 200
        body = shm_request("r", 64)
        body["outputs"][0]["name"] = "OUTPUT0"
        resp = client.post("/v2/models/double/infer", json=body)
        assert resp.status_code == 200, resp.text
        np.testing.assert_array_equal(np.frombuffer(mem.buf[64:128], np.int32), IN0 * 2)
        resp = client.post("/v2/models/double/infer", json={"inputs": [
            {"name": "INPUT0", "datatype": "INT32", "shape": [2], "data": [1, 2]}]})
        assert resp.json()["outputs"][0]["data"] == [2, 4]
        assert client.get("/v2/systemsharedmemory/status").json()[0]["in_use"] == 0
    finally:
        registry.unregister_all()
        registry.close()


# ------------------------------------------- the C server's defences, here too


def test_client_shm_is_refused_unless_allowed(registry, region):
    """Registering makes the server map an object a client names: off by
    default, with Triton's (and the C server's) 501 and words; status open."""
    key, _ = region
    app = FastAPI()
    app.include_router(kserve.shared_memory_router(registry))
    client = TestClient(app)
    for kind in ("system", "cuda"):
        base = f"/v2/{kind}sharedmemory"
        for path in (f"{base}/region/r/register", f"{base}/region/r/unregister",
                     f"{base}/unregister"):
            resp = client.post(path, json={"key": key, "byte_size": 256})
            assert (resp.status_code, resp.json()) == (501, {"error": (
                "Client shared memory is disabled. Start the server with "
                "'--allow-client-shm=true' to enable.")}), path
        assert client.get(f"{base}/status").status_code == 200
    assert registry.status() == []


@pytest.fixture
def sparse(registry):
    """sparse(name, size): a sparse object of size bytes registered as name."""
    keys = []

    def make(name, size):
        keys.append(f"/shmreg_kserve_{os.getpid()}_{uuid.uuid4().hex[:6]}")
        fd = os.open("/dev/shm" + keys[-1], os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        try:
            os.ftruncate(fd, size)  # costs the client nothing: no page is written
        finally:
            os.close(fd)
        registry.register_system(name, keys[-1], size)

    yield make
    for key in keys:
        os.unlink("/dev/shm" + key)


def uint8_request(region, size, **output_parameters):
    body = {"inputs": [{"name": "INPUT0", "datatype": "UINT8", "shape": [size],
                        "parameters": {"shared_memory_region": region,
                                       "shared_memory_byte_size": size}}]}
    if output_parameters:
        body["outputs"] = [{"name": "OUTPUT0", "parameters": output_parameters}]
    return body


def test_a_tensor_copied_out_of_shared_memory_is_bounded(registry, sparse):
    """A sparse object of any size let a client make the server copy it
    (and answer it as JSON): past the bound, 400 in the C server's words,
    before anything is allocated, and the reference goes back."""
    assert kserve.MAX_BODY_BYTES == 256 << 20  # the C server's --max-body-mb default
    sparse("big", 2 << 20)
    client = TestClient(app_with_infer(registry, max_copy_bytes=1 << 20))
    resp = client.post("/v2/models/echo/infer", json=uint8_request("big", 2 << 20))
    assert (resp.status_code, resp.json()) == (400, {"error": (
        f"input 'INPUT0' takes {2 << 20} bytes of shared memory region 'big', more than this "
        f"server copies for one tensor ({1 << 20}, --max-body-mb)")})
    assert registry.status("big")[0].in_use == 0
    body = uint8_request("big", 1 << 20, binary_data=True)
    assert client.post("/v2/models/echo/infer", json=body).status_code == 200


def test_a_response_is_bounded_before_its_outputs_are_made(registry, sparse):
    sparse("r", 1 << 20)
    client = TestClient(app_with_infer(registry, max_response_bytes=4 << 20))
    # 1 MiB as JSON: up to 7 MiB of text, past the 4 MiB bound.
    resp = client.post("/v2/models/echo/infer", json=uint8_request("r", 1 << 20))
    assert (resp.status_code, resp.json()) == (400, {"error": (
        f"the response could take up to {7 << 20} bytes, more than this server sends "
        f"({4 << 20}, --max-body-mb): ask for large outputs in shared memory, or as binary "
        "data rather than JSON")})
    assert registry.status("r")[0].in_use == 0
    # The same as binary data, or in the region, is served.
    body = uint8_request("r", 1 << 20, binary_data=True)
    assert client.post("/v2/models/echo/infer", json=body).status_code == 200
    body = uint8_request("r", 1 << 20, shared_memory_region="r",
                         shared_memory_byte_size=1 << 20)
    assert client.post("/v2/models/echo/infer", json=body).status_code == 200


def test_json_outputs_of_many_elements_are_whole():
    """JSON data is written in pieces: the answer must still be the array."""
    data = np.arange(200_000, dtype=np.int32) - 100_000
    with kserve.RequestRegions(None) as regions:
        request = kserve.decode_request(json.dumps({"id": "x", "inputs": [
            {"name": "INPUT0", "datatype": "INT32", "shape": [2], "data": [1, 2]}]}).encode(),
            None, "m", regions)
        described = [kserve.Tensor("A", "INT32", [200_000]), kserve.Tensor("B", "BOOL", [3])]
        slots = kserve.place_outputs(request, "m", described, regions)
        slots[0].array[...] = data
        slots[1].array[...] = [True, False, True]
        answer = json.loads(kserve.encode_response("m", request, slots).body)
    assert answer["id"] == "x"
    assert answer["outputs"][0]["data"] == data.tolist()
    assert answer["outputs"][1]["data"] == [True, False, True]


def echo_status(body: bytes) -> tuple[int, str]:
    with kserve.RequestRegions(None) as regions:
        try:
            kserve.decode_request(body, None, "echo", regions)
        except kserve.InferError as e:
            return e.status, e.message
    return 200, ""


def test_a_very_deep_body_is_400():
    status, message = echo_status(b"[" * 200_000 + b"]" * 200_000)
    assert (status, message) == (400, "failed to parse the request JSON buffer: nesting too deep")
    # Data nested deeper than its shape, within Python's recursion limit.
    deep = "[" * 500 + "1" + "]" * 500
    body = ('{"inputs": [{"name": "INPUT0", "datatype": "INT32", "shape": [1], "data": %s}]}'
            % deep).encode()
    assert echo_status(body)[0] == 400


@pytest.mark.parametrize("shape", [[2**32, 2**32], [2**21, 2**21, 2**21]])
def test_a_shape_whose_size_overflows_is_400(shape):
    """numpy's int64 product of these wraps to 0, which empty data matched
    before the reshape failed (500)."""
    body = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "UINT8", "shape": shape,
                                   "data": []}]}).encode()
    assert echo_status(body) == (400, "input 'INPUT0': shape too large")
