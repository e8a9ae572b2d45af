"""The C server's JSON against Triton's answers: unsigned 64-bit offsets, sizes and UINT64 data, malformed CUDA
handles, declared output windows past a region's end, --allow-client-shm,
NaN and Infinity outputs, output JSON without amplification, and region
names that are not UTF-8. HTTP and, where the item has a gRPC side, gRPC.
"""
import base64
import json
import math
import struct
from multiprocessing import shared_memory

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

from grpc_support import (  # noqa: F401 (start_grpc_server: a fixture)
    SERVICE, region_status, start_grpc_server)

pytestmark = pytest.mark.servers("c")

U64_MAX = 2**64 - 1
DISABLED = ("Client shared memory is disabled. Start the server with "
            "'--allow-client-shm=true' to enable.")
BAD_HANDLE = "'raw_handle' must be a valid base64 encoded cudaIpcMemHandle_t"


def assert_error(status_body, status, fragment):
    got, body = status_body
    assert got == status, body
    assert fragment in body["error"], body


@pytest.fixture
def region(server, shm_key):
    """A 256-byte shm object registered as "jp" over HTTP: (key, SharedMemory)."""
    key = shm_key("jp")
    mem = shared_memory.SharedMemory(name=key.lstrip("/"), create=True, size=256)
    assert server.json("POST", "/v2/systemsharedmemory/region/jp/register",
                       {"key": key, "byte_size": 256}) == (200, None)
    yield key, mem
    assert server.json("POST", "/v2/systemsharedmemory/unregister") == (200, None)
    mem.close()
    mem.unlink()


def simple_shm_request(output_params):
    def tensor(name, offset):
        return {"name": name, "datatype": "INT32", "shape": [1, 16], "parameters": {
            "shared_memory_region": "jp", "shared_memory_offset": offset,
            "shared_memory_byte_size": 64}}
    return {"inputs": [tensor("INPUT0", 0), tensor("INPUT1", 64)],
            "outputs": [{"name": "OUTPUT0", "parameters": output_params}]}


# ------------------------------------- unsigned 64-bit offsets, sizes and data


@pytest.mark.parametrize("offset, byte_size, fragment", [
    (U64_MAX, 1, f"(offset {U64_MAX} + byte_size 1 overflows)"),
    (2**63, 8, f"(offset {2**63} + byte_size 8 is past the end"),
    (0, 2**63, f"(offset 0 + byte_size {2**63} is past the end"),
])
def test_register_uint64_reaches_the_bounds_checks(server, shm_key, offset, byte_size, fragment):
    key = shm_key("u64")
    mem = shared_memory.SharedMemory(name=key.lstrip("/"), create=True, size=64)
    try:
        assert_error(server.json("POST", "/v2/systemsharedmemory/region/u64/register",
                                 {"key": key, "offset": offset, "byte_size": byte_size}),
                     400, fragment)
        assert server.json("GET", "/v2/systemsharedmemory/status") == (200, [])
    finally:
        mem.close()
        mem.unlink()


@pytest.mark.parametrize("body, fragment", [
    ('{"key": "/k", "byte_size": 18446744073709551616}', "too big integer 18446744073709551616"),
    ({"key": "/k", "byte_size": -8}, "'byte_size' must be an unsigned integer, got the negative -8"),
    ({"key": "/k", "byte_size": 8, "offset": -1},
     "'offset' must be an unsigned integer, got the negative -1"),
])
def test_register_out_of_range_and_negative_are_clear_400s(server, body, fragment):
    assert_error(server.json("POST", "/v2/systemsharedmemory/region/neg/register", body), 400,
                 fragment)
    assert server.json("GET", "/v2/systemsharedmemory/status") == (200, [])


@pytest.mark.parametrize("offset, size, message", [
    (2**63, 64, "Invalid offset for shared memory region: 'jp'"),
    (U64_MAX - 31, 64, "Invalid offset for shared memory region: 'jp'"),
    (-64, 64, "'shared_memory_offset' of input 'INPUT0' must be a non-negative integer"),
])
def test_infer_uint64_offsets_reach_the_bounds_checks(server, region, offset, size, message):
    req = simple_shm_request({"shared_memory_region": "jp", "shared_memory_byte_size": 64,
                              "shared_memory_offset": 128})
    req["inputs"][0]["parameters"].update(shared_memory_offset=offset,
                                          shared_memory_byte_size=size)
    assert_error(server.json("POST", "/v2/models/simple/infer", req), 400, message)


def test_infer_uint64_size_reaches_the_overflow_check(server, region):
    """BYTES has no fixed size, so the window reaches the library as sent."""
    req = {"inputs": [{"name": "INPUT0", "datatype": "BYTES", "shape": [1], "parameters": {
        "shared_memory_region": "jp", "shared_memory_offset": 8,
        "shared_memory_byte_size": U64_MAX}}]}
    assert_error(server.json("POST", "/v2/models/identity/infer", req), 400,
                 f"Integer overflow detected: byte_size ({U64_MAX}) + offset (8) exceeds")


def test_uint64_data_round_trips_exactly_in_json(server):
    values = [0, 1, 2**63 - 1, 2**63, 2**64 - 2, U64_MAX]
    req = {"inputs": [{"name": "INPUT0", "datatype": "UINT64", "shape": [6], "data": values}]}
    status, body = server.json("POST", "/v2/models/identity/infer", req)
    assert status == 200, body
    assert body["outputs"][0]["data"] == values
    req["inputs"][0]["data"] = values[:5] + [2**64]
    assert_error(server.json("POST", "/v2/models/identity/infer", json.dumps(req)), 400,
                 "too big integer 18446744073709551616")
    req["inputs"][0]["data"] = values[:5] + [-1]
    assert_error(server.json("POST", "/v2/models/identity/infer", req), 400,
                 "unable to parse 'data' of input 'INPUT0'")


def test_int64_refuses_values_past_its_range(server):
    req = {"inputs": [{"name": "INPUT0", "datatype": "INT64", "shape": [1], "data": [2**63]}]}
    assert_error(server.json("POST", "/v2/models/identity/infer", req), 400,
                 "unable to parse 'data' of input 'INPUT0'")
    req["inputs"][0]["data"] = [-2**63]
    status, body = server.json("POST", "/v2/models/identity/infer", req)
    assert (status, body["outputs"][0]["data"]) == (200, [-2**63])


# ------------------------------------------------------- malformed CUDA handles


@pytest.mark.parametrize("b64", [
    base64.b64encode(bytes(63)).decode(),
    base64.b64encode(bytes(65)).decode(),
    base64.b64encode(bytes(128)).decode(),
    "@@not base64@@",
    "",
])
def test_malformed_raw_handle_gets_tritons_message(server, b64):
    body = {"raw_handle": {"b64": b64}, "device_id": 0, "byte_size": 64}
    assert server.json("POST", "/v2/cudasharedmemory/region/c0/register", body) == (
        400, {"error": BAD_HANDLE})
    assert server.json("GET", "/v2/cudasharedmemory/status") == (200, [])


# ------------------------------------- a declared output window past the end


def test_output_window_past_the_region_end_is_refused_over_http(server, region):
    """OUTPUT0 (64 bytes) would fit at offset 128 of the 256-byte region, but
    the declared 192-byte window runs 64 bytes past its end."""
    window = {"shared_memory_region": "jp", "shared_memory_offset": 128,
              "shared_memory_byte_size": 192}
    assert server.json("POST", "/v2/models/simple/infer", simple_shm_request(window)) == (
        400, {"error": "Invalid offset + byte size for shared memory region: 'jp'"})
    window["shared_memory_byte_size"] = 128  # exactly to the end: accepted
    assert server.json("POST", "/v2/models/simple/infer", simple_shm_request(window))[0] == 200
    status, regions = server.json("GET", "/v2/systemsharedmemory/status")
    assert regions[0]["in_use"] == 0  # the refused request released what it took


def test_output_window_past_the_region_end_is_refused_over_grpc(start_grpc_server, shm_key):
    server = start_grpc_server()
    client = grpcclient.InferenceServerClient(server.grpc_url)
    handle = shm.create_shared_memory_region("gjp", shm_key("gjp"), 256)
    try:
        client.register_system_shared_memory("gjp", handle._shm_key, 256)
        inputs = [grpcclient.InferInput(n, [1, 16], "INT32") for n in ("INPUT0", "INPUT1")]
        inputs[0].set_shared_memory("gjp", 64, offset=0)
        inputs[1].set_shared_memory("gjp", 64, offset=64)
        out = grpcclient.InferRequestedOutput("OUTPUT0")
        out.set_shared_memory("gjp", 192, offset=128)
        with pytest.raises(InferenceServerException) as e:
            client.infer("simple", inputs, outputs=[out])
        assert e.value.status() == "StatusCode.INVALID_ARGUMENT"
        assert e.value.message() == "Invalid offset + byte size for shared memory region: 'gjp'"
        server.wait_until(lambda: region_status(server.grpc_url)["gjp"].in_use == 0,
                          what="release")
        client.unregister_system_shared_memory()
    finally:
        client.close()
        shm.destroy_shared_memory_region(handle)


# ------------------------------------------------------------ --allow-client-shm


def test_client_shm_is_refused_without_the_flag(start_grpc_server, shm_key):
    server = start_grpc_server("--allow-client-shm=false")
    for kind, body in (("system", {"key": shm_key("off"), "byte_size": 8}),
                       ("cuda", {"raw_handle": {"b64": ""}, "device_id": 0, "byte_size": 8})):
        base = f"/v2/{kind}sharedmemory"
        for path in (f"{base}/region/off/register", f"{base}/region/off/unregister",
                     f"{base}/unregister"):
            assert server.json("POST", path, body) == (501, {"error": DISABLED}), path
        assert server.json("GET", f"{base}/status") == (200, [])  # status stays open
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        calls = [lambda: client.register_system_shared_memory("off", shm_key("off"), 8),
                 lambda: client.unregister_system_shared_memory("off"),
                 lambda: client.register_cuda_shared_memory("off", bytes(64), 0, 8),
                 lambda: client.unregister_cuda_shared_memory()]
        for fn in calls:
            with pytest.raises(InferenceServerException) as e:
                fn()
            assert (e.value.status(), e.value.message()) == ("StatusCode.UNIMPLEMENTED", DISABLED)
        assert client.get_system_shared_memory_status(as_json=True) == {}
    finally:
        client.close()


def test_allow_client_shm_wants_true_or_false(start_server):
    with pytest.raises(RuntimeError, match="--allow-client-shm wants true or false, got 'yes'"):
        start_server("--allow-client-shm=yes")


# ------------------------------------------------------ NaN and Infinity outputs


@pytest.mark.parametrize("datatype, fmt", [("FP32", "<f"), ("FP64", "<d")])
def test_nan_and_infinity_outputs_are_written_as_triton_writes_them(server, datatype, fmt):
    values = [math.nan, math.inf, -math.inf, 1.5, 0.1]
    payload = struct.pack(f"<{len(values)}{fmt[1]}", *values)
    header = json.dumps({"inputs": [{"name": "INPUT0", "datatype": datatype, "shape": [5],
                                     "parameters": {"binary_data_size": len(payload)}}]}).encode()
    status, _, data = server.request("POST", "/v2/models/identity/infer", header + payload,
                                     {"Inference-Header-Content-Length": str(len(header))})
    assert status == 200, data
    assert b'"data":[NaN,Infinity,-Infinity,1.5,' in data  # Triton's writer's words
    got = json.loads(data)["outputs"][0]["data"]
    assert math.isnan(got[0]) and got[1:4] == [math.inf, -math.inf, 1.5]
    assert got[4] == struct.unpack(fmt, struct.pack(fmt, 0.1))[0]  # exact, as stored


# --------------------------------------- output JSON without amplification


def peak_rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def test_large_json_output_keeps_server_memory_bounded(start_server):
    """A 16 MiB UINT8 input returned as JSON (~58 MiB of text): the reply
    once peaked at ~774 MiB of server memory (a JSON object per element)."""
    server = start_server()
    size = 16 << 20
    payload = np.random.default_rng(1).integers(0, 256, size, dtype=np.uint8).tobytes()
    header = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "UINT8", "shape": [size],
                                     "parameters": {"binary_data_size": size}}]}).encode()
    before = peak_rss_mib(server.pid)
    status, _, data = server.request("POST", "/v2/models/identity/infer", header + payload,
                                     {"Inference-Header-Content-Length": str(len(header))},
                                     timeout=120)
    assert status == 200, data[:200]
    grown = peak_rss_mib(server.pid) - before
    # the body (16) + the output (16) + the text (~58) + slack; ~740 before
    assert grown < 200, f"peak RSS grew {grown:.0f} MiB for a 16 MiB input"
    out = json.loads(data)["outputs"][0]
    assert bytes(out["data"]) == payload


# ------------------------------------------------ names that are not UTF-8


def raw_register(url, name: bytes, key: bytes, byte_size: int):
    """SystemSharedMemoryRegister with a name of any bytes, which no protobuf
    library will build: the message is encoded by hand (fields 1, 2, 4)."""
    def field(number, data):
        return bytes([number << 3 | 2, len(data)]) + data
    msg = field(1, name) + field(2, key) + bytes([4 << 3, byte_size])
    with grpc.insecure_channel(url) as channel:
        stub = channel.unary_unary(f"/{SERVICE}/SystemSharedMemoryRegister",
                                   request_serializer=lambda b: b,
                                   response_deserializer=lambda b: b)
        try:
            stub(msg, timeout=30)
            return grpc.StatusCode.OK, ""
        except grpc.RpcError as e:
            return e.code(), e.details()


def test_names_that_are_not_utf8_are_refused_at_register(start_grpc_server, shm_key):
    server = start_grpc_server()
    key = shm_key("utf8")
    mem = shared_memory.SharedMemory(name=key.lstrip("/"), create=True, size=64)
    try:
        status, _, body = server.request(
            "POST", "/v2/systemsharedmemory/region/bad%FFname/register",
            {"key": key, "byte_size": 8})
        assert status == 400, body
        assert json.loads(body) == {"error": "cannot register shared memory region "
                                             "'bad\ufffdname': the name is not valid UTF-8"}
        code, _ = raw_register(server.grpc_url, b"bad\xffname", key.encode(), 8)
        assert code != grpc.StatusCode.OK
        # A good name still registers, and status of all answers on both.
        assert server.json("POST", "/v2/systemsharedmemory/region/good/register",
                           {"key": key, "byte_size": 8}) == (200, None)
        status, regions = server.json("GET", "/v2/systemsharedmemory/status")
        assert (status, [r["name"] for r in regions]) == (200, ["good"])
        assert list(region_status(server.grpc_url)) == ["good"]
        assert server.json("POST", "/v2/systemsharedmemory/unregister") == (200, None)
    finally:
        mem.close()
        mem.unlink()
