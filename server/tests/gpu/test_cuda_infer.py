"""The built-in models with tensors in CUDA regions, on a GPU machine.

The test process allocates device buffers with CuPy and exports them as raw
cudaIpcMemHandle bytes; the server (a separate process, as CUDA IPC
requires: the exporting process cannot open its own handle) registers them
through v2/cudasharedmemory and copies through the device. Requests are plain
urllib: tritonclient is not installed on the GPU machine.

$SERVER_BIN names the binary (server/tests/gpu/run.sh sets it). Without
CuPy or a visible device every test is skipped.
"""
import base64
import json
import os
import sys
import urllib.error
import urllib.request
import uuid
from multiprocessing import shared_memory

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "support"))
from server_process import Server, leftover_report  # noqa: E402

cp = pytest.importorskip("cupy", reason="CuPy is not installed")


def _device_count():
    try:
        return cp.cuda.runtime.getDeviceCount()
    except Exception:  # no driver, or a driver too old for this CuPy
        return 0


if _device_count() == 0:
    pytest.skip("no CUDA device is visible", allow_module_level=True)

PREFIX = f"fegpu_{os.getpid()}_{uuid.uuid4().hex[:6]}"


# ----------------------------------------------------------------- HTTP ---

def call(server, method, path, body=None):
    """(status, parsed JSON or None) for one request; errors are returned too."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"http://127.0.0.1:{server.port}/{path}", data=data,
                                 method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            status, raw = resp.status, resp.read()
    except urllib.error.HTTPError as err:
        status, raw = err.code, err.read()
    return status, (json.loads(raw) if raw else None)


def ok(server, method, path, body=None):
    status, answer = call(server, method, path, body)
    assert status == 200, f"{method} {path}: {status} {answer}"
    return answer


def shm_params(region, byte_size, offset=0):
    return {"shared_memory_region": region, "shared_memory_byte_size": byte_size,
            "shared_memory_offset": offset}


def nothing_in_use(server, kind):
    regions = ok(server, "GET", f"v2/{kind}sharedmemory/status")
    return all(r["in_use"] == 0 and not r["pending_unregister"] for r in regions)


# ------------------------------------------------------------- fixtures ---

@pytest.fixture
def server():
    s = Server("--threads", "4")
    yield s
    rc, err = s.stop()
    assert rc == 0, f"server exited {rc}:\n{err}"
    assert leftover_report(err) == (0, 0), err


class DeviceRegion:
    """A cudaMalloc'ed buffer of its own (not from CuPy's pool, whose
    sub-allocations would not start at the IPC handle's base), registered
    with the server as a CUDA region."""

    def __init__(self, server, name, nbytes):
        self.name, self.nbytes = name, nbytes
        self.mem = cp.cuda.memory.Memory(nbytes)
        handle = bytes(cp.cuda.runtime.ipcGetMemHandle(self.mem.ptr))
        ok(server, "POST", f"v2/cudasharedmemory/region/{name}/register",
           {"raw_handle": {"b64": base64.b64encode(handle).decode()}, "device_id": 0,
            "byte_size": nbytes})

    def array(self, dtype, shape, offset=0):
        """A CuPy view of the buffer at offset."""
        ptr = cp.cuda.memory.MemoryPointer(self.mem, offset)
        return cp.ndarray(shape, dtype=dtype, memptr=ptr)


@pytest.fixture
def cuda_region(server):
    """Factory: cuda_region(suffix, nbytes) -> DeviceRegion, unregistered
    (and checked gone) before its memory is freed."""
    made = []

    def make(suffix, nbytes):
        region = DeviceRegion(server, f"{PREFIX}_{suffix}", nbytes)
        made.append(region)
        return region

    yield make
    cp.cuda.Device().synchronize()
    for region in made:
        ok(server, "POST", f"v2/cudasharedmemory/region/{region.name}/unregister")
    assert ok(server, "GET", "v2/cudasharedmemory/status") == []


@pytest.fixture
def system_region(server):
    """Factory: system_region(suffix, nbytes) -> (name, SharedMemory)."""
    made = []

    def make(suffix, nbytes):
        name = f"{PREFIX}_{suffix}"
        mem = shared_memory.SharedMemory(name=name, create=True, size=nbytes)
        made.append((name, mem))
        ok(server, "POST", f"v2/systemsharedmemory/region/{name}/register",
           {"key": "/" + name, "offset": 0, "byte_size": nbytes})
        return name, mem

    yield make
    for name, mem in made:
        ok(server, "POST", f"v2/systemsharedmemory/region/{name}/unregister")
        mem.close()
        mem.unlink()


def infer(server, model, inputs, outputs):
    server_answer = ok(server, "POST", f"v2/models/{model}/infer",
                       {"inputs": inputs, "outputs": outputs})
    # The references are released once the response has been sent, a moment
    # after the client has read it.
    server.wait_until(lambda: nothing_in_use(server, "cuda") and nothing_in_use(server, "system"),
                      what="every region released")
    return server_answer


# ---------------------------------------------------------------- tests ---

def test_identity_cuda_in_cuda_out(server, cuda_region):
    shape, nbytes = (4, 1000), 4 * 1000 * 4
    src, dst = cuda_region("in", nbytes), cuda_region("out", nbytes)
    expected = cp.arange(4000, dtype=cp.float32).reshape(shape) * 0.5 - 7
    src.array(cp.float32, shape)[...] = expected
    dst.array(cp.float32, shape)[...] = -1
    cp.cuda.Device().synchronize()  # the server reads through its own context

    answer = infer(server, "identity",
                   [{"name": "INPUT0", "datatype": "FP32", "shape": list(shape),
                     "parameters": shm_params(src.name, nbytes)}],
                   [{"name": "OUTPUT0", "parameters": shm_params(dst.name, nbytes)}])
    assert answer["outputs"][0]["shape"] == list(shape)
    assert "data" not in answer["outputs"][0]
    assert bool(cp.array_equal(dst.array(cp.float32, shape), expected))


def test_simple_inputs_and_outputs_at_offsets_of_cuda_regions(server, cuda_region):
    tensor = 16 * 4
    inputs, outputs = cuda_region("inputs", 2 * tensor), cuda_region("outputs", 3 * tensor)
    in0 = cp.arange(16, dtype=cp.int32).reshape(1, 16)
    in1 = cp.full((1, 16), 3, dtype=cp.int32)
    inputs.array(cp.int32, (1, 16), 0)[...] = in0
    inputs.array(cp.int32, (1, 16), tensor)[...] = in1
    outputs.array(cp.int32, (3 * 16,))[...] = 99
    cp.cuda.Device().synchronize()

    infer(server, "simple",
          [{"name": "INPUT0", "datatype": "INT32", "shape": [1, 16],
            "parameters": shm_params(inputs.name, tensor, 0)},
           {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16],
            "parameters": shm_params(inputs.name, tensor, tensor)}],
          [{"name": "OUTPUT0", "parameters": shm_params(outputs.name, tensor, 0)},
           {"name": "OUTPUT1", "parameters": shm_params(outputs.name, tensor, 2 * tensor)}])
    assert bool(cp.array_equal(outputs.array(cp.int32, (1, 16), 0), in0 + in1))
    # Only the bytes of each output are written: the gap keeps its 99s.
    assert bool(cp.all(outputs.array(cp.int32, (1, 16), tensor) == 99))
    assert bool(cp.array_equal(outputs.array(cp.int32, (1, 16), 2 * tensor), in0 - in1))


def test_mixed_cuda_input_system_output(server, cuda_region, system_region):
    shape, nbytes = (2, 8), 2 * 8 * 2
    src = cuda_region("in", nbytes)
    name, mem = system_region("out", nbytes)
    expected = cp.arange(16, dtype=cp.float16).reshape(shape) / 4
    src.array(cp.float16, shape)[...] = expected
    cp.cuda.Device().synchronize()

    infer(server, "identity",
          [{"name": "INPUT0", "datatype": "FP16", "shape": list(shape),
            "parameters": shm_params(src.name, nbytes)}],
          [{"name": "OUTPUT0", "parameters": shm_params(name, nbytes)}])
    got = np.frombuffer(bytes(mem.buf[:nbytes]), dtype=np.float16).reshape(shape)
    np.testing.assert_array_equal(got, cp.asnumpy(expected))


def test_mixed_system_input_cuda_output_and_json_output(server, cuda_region, system_region):
    tensor = 16 * 4
    name, mem = system_region("in", 2 * tensor)
    mem.buf[:2 * tensor] = np.stack([np.arange(16) * 10, np.arange(16)]).astype(np.int32).tobytes()
    dst = cuda_region("out", tensor)

    answer = infer(server, "simple",
                   [{"name": "INPUT0", "datatype": "INT32", "shape": [1, 16],
                     "parameters": shm_params(name, tensor, 0)},
                    {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16],
                     "parameters": shm_params(name, tensor, tensor)}],
                   [{"name": "OUTPUT0", "parameters": shm_params(dst.name, tensor)},
                    {"name": "OUTPUT1"}])
    expected_sum = (np.arange(16) * 11).astype(np.int32)
    np.testing.assert_array_equal(cp.asnumpy(dst.array(cp.int32, (16,))), expected_sum)
    out1 = next(o for o in answer["outputs"] if o["name"] == "OUTPUT1")
    assert out1["data"] == (np.arange(16) * 9).tolist()


def test_cuda_input_json_output(server, cuda_region):
    src = cuda_region("in", 8 * 8)
    values = cp.arange(8, dtype=cp.int64) - 3
    src.array(cp.int64, (8,))[...] = values
    cp.cuda.Device().synchronize()
    answer = infer(server, "identity",
                   [{"name": "INPUT0", "datatype": "INT64", "shape": [8],
                     "parameters": shm_params(src.name, 64)}],
                   [{"name": "OUTPUT0"}])
    assert answer["outputs"][0]["data"] == cp.asnumpy(values).tolist()


def test_cuda_output_too_small_is_400_and_released(server, cuda_region):
    src, dst = cuda_region("in", 64), cuda_region("out", 32)
    status, answer = call(server, "POST", "v2/models/identity/infer",
                          {"inputs": [{"name": "INPUT0", "datatype": "INT32", "shape": [16],
                                       "parameters": shm_params(src.name, 64)}],
                           "outputs": [{"name": "OUTPUT0",
                                        "parameters": shm_params(dst.name, 32)}]})
    assert status == 400 and "at least 64 bytes" in answer["error"], answer
    server.wait_until(lambda: nothing_in_use(server, "cuda"), what="every region released")


def test_cuda_region_named_under_the_system_endpoints_is_404(server, cuda_region):
    """The other kind: one library call answers it (SHMREG_ERR_WRONG_KIND),
    with the library's message saying which kind the name is; the region
    stays registered. server/tests/http/test_protocol.py checks the reverse."""
    region = cuda_region("kind", 64)
    expected = (f"The region named '{region.name}' is registered as CUDA shared memory, "
                "not system shared memory")
    for method, verb in (("GET", "status"), ("POST", "unregister")):
        assert call(server, method, f"v2/systemsharedmemory/region/{region.name}/{verb}") == (
            404, {"error": expected}), verb
    assert [r["name"] for r in ok(server, "GET", "v2/cudasharedmemory/status")] == [region.name]
    assert ok(server, "GET", "v2/systemsharedmemory/status") == []


def test_many_requests_leave_nothing_in_use(server, cuda_region):
    """Repeated copies through the worker threads: each thread's device and
    stream are left as found, and every reference comes back."""
    src, dst = cuda_region("in", 4096), cuda_region("out", 4096)
    for round_ in range(20):
        values = cp.full((1024,), round_, dtype=cp.int32)
        src.array(cp.int32, (1024,))[...] = values
        cp.cuda.Device().synchronize()
        infer(server, "identity",
              [{"name": "INPUT0", "datatype": "INT32", "shape": [1024],
                "parameters": shm_params(src.name, 4096)}],
              [{"name": "OUTPUT0", "parameters": shm_params(dst.name, 4096)}])
        assert bool(cp.array_equal(dst.array(cp.int32, (1024,)), values)), round_
