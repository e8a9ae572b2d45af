"""Every endpoint and every error status, over plain HTTP (http.client)."""
import base64
import json
import math
import re
import struct
from multiprocessing import shared_memory

import pytest

SIMPLE_IN0 = list(range(16))
SIMPLE_IN1 = [1] * 16


def simple_json_request(in0=SIMPLE_IN0, in1=SIMPLE_IN1):
    return {
        "inputs": [
            {"name": "INPUT0", "datatype": "INT32", "shape": [1, 16], "data": in0},
            {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16], "data": in1},
        ]
    }


def assert_error(status_body, status, fragment):
    status_got, body = status_body
    assert status_got == status, body
    assert fragment in body["error"], body


def assert_serving(server):
    assert server.request("GET", "/v2/health/live")[0] == 200


@pytest.fixture
def shm(shm_key):
    """A 256-byte shm object, unlinked afterwards: (key, SharedMemory)."""
    created = []

    def make(suffix, size=256):
        key = shm_key(suffix)
        mem = shared_memory.SharedMemory(name=key.lstrip("/"), create=True, size=size)
        created.append(mem)
        return key, mem

    yield make
    for mem in created:
        mem.close()
        mem.unlink()


# ------------------------------------------------------------- health, metadata


def test_health_live_and_ready(server):
    for path in ("/v2/health/live", "/v2/health/ready"):
        assert server.request("GET", path)[0] == 200


@pytest.mark.servers("c")
def test_health_answers_the_open_inference_protocols_bodies(server):
    """KServe's clients read {"live": true} and {"ready": true}; Triton's
    read the status (200), which Triton sends with an empty body."""
    for path, body in (("/v2/health/live", {"live": True}), ("/v2/health/ready", {"ready": True})):
        status, headers, data = server.request("GET", path)
        assert (status, json.loads(data)) == (200, body)
        assert headers["Content-Type"] == "application/json"


@pytest.mark.servers("c")
def test_tritonclient_http_reads_health_from_the_status(server):
    import tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(server.url)
    try:
        assert client.is_server_live() and client.is_server_ready()
        assert client.is_model_ready("simple")
    finally:
        client.close()


def test_server_metadata_lists_shared_memory_extensions(server):
    status, meta = server.json("GET", "/v2")
    assert status == 200
    assert {"system_shared_memory", "cuda_shared_memory", "binary_tensor_data"} <= set(
        meta["extensions"]
    )


@pytest.mark.servers("c")
def test_server_metadata_names_the_server_as_its_program(server):
    # Triton's own health and metadata examples check the server's name; it
    # is the program's, the same over gRPC (test_grpc.py). The Python
    # server (examples/) names itself.
    status, meta = server.json("GET", "/v2")
    assert status == 200
    assert meta["name"] == "shmreg-server"


def test_model_metadata_ready_and_config(server):
    status, meta = server.json("GET", "/v2/models/simple")
    assert status == 200
    assert [(t["name"], t["datatype"], t["shape"]) for t in meta["inputs"]] == [
        ("INPUT0", "INT32", [-1, 16]),
        ("INPUT1", "INT32", [-1, 16]),
    ]
    assert server.request("GET", "/v2/models/simple/ready")[0] == 200
    assert server.request("GET", "/v2/models/simple/versions/1/ready")[0] == 200
    status, config = server.json("GET", "/v2/models/simple/config")
    assert status == 200
    assert config["max_batch_size"] == 8
    assert config["input"][0]["dims"] == [16] and config["input"][0]["data_type"] == "TYPE_INT32"
    status, config = server.json("GET", "/v2/models/identity/config")
    assert (status, config["max_batch_size"]) == (200, 0)


def test_unknown_model_and_version_are_404(server):
    assert_error(server.json("GET", "/v2/models/nope"), 404, "unknown model: 'nope'")
    assert_error(server.json("GET", "/v2/models/nope/ready"), 404, "nope")
    assert_error(server.json("GET", "/v2/models/simple/versions/7"), 404, "version 7")
    assert_error(server.json("POST", "/v2/models/nope/infer", simple_json_request()), 404, "nope")
    assert_error(server.json("POST", "/v2/models/simple/versions/2/infer", simple_json_request()),
                 404, "version 2")
    assert server.json("POST", "/v2/models/simple/versions/1/infer", simple_json_request())[0] == 200


def test_unknown_route_is_404_and_wrong_method_405(server):
    assert server.request("GET", "/v2/nothing/here")[0] == 404
    assert server.request("GET", "/")[0] == 404
    assert server.request("GET", "/v2/models/simple/infer")[0] == 405
    assert server.request("POST", "/v2/health/live")[0] == 405
    assert server.request("GET", "/v2/systemsharedmemory/region/x/register")[0] == 405


def test_statistics_count_inferences(server):
    def success_count():
        status, stats = server.json("GET", "/v2/models/simple/stats")
        assert status == 200
        (entry,) = stats["model_stats"]
        return entry["inference_stats"]["success"]["count"]

    before = success_count()
    assert server.json("POST", "/v2/models/simple/infer", simple_json_request())[0] == 200
    assert success_count() == before + 1


# -------------------------------------------------------------------- infer


def test_infer_json_data(server):
    status, resp = server.json("POST", "/v2/models/simple/infer", simple_json_request())
    assert status == 200
    out = {o["name"]: o for o in resp["outputs"]}
    assert out["OUTPUT0"]["data"] == [a + b for a, b in zip(SIMPLE_IN0, SIMPLE_IN1)]
    assert out["OUTPUT1"]["data"] == [a - b for a, b in zip(SIMPLE_IN0, SIMPLE_IN1)]
    assert out["OUTPUT0"]["shape"] == [1, 16] and out["OUTPUT0"]["datatype"] == "INT32"


def test_infer_binary_tensor_extension(server):
    header = json.dumps(
        {
            "id": "req-7",
            "inputs": [
                {"name": n, "datatype": "INT32", "shape": [1, 16],
                 "parameters": {"binary_data_size": 64}}
                for n in ("INPUT0", "INPUT1")
            ],
            "outputs": [{"name": "OUTPUT1", "parameters": {"binary_data": True}}],
        }
    ).encode()
    a = list(range(100, 116))
    b = list(range(16))
    body = header + struct.pack("<16i", *a) + struct.pack("<16i", *b)
    status, headers, data = server.request(
        "POST", "/v2/models/simple/infer", body,
        {"Inference-Header-Content-Length": str(len(header))},
    )
    assert status == 200, data
    json_len = int(headers["Inference-Header-Content-Length"])
    resp = json.loads(data[:json_len])
    assert resp["id"] == "req-7"
    assert [o["name"] for o in resp["outputs"]] == ["OUTPUT1"]
    assert resp["outputs"][0]["parameters"]["binary_data_size"] == 64
    assert list(struct.unpack("<16i", data[json_len:])) == [x - y for x, y in zip(a, b)]


def test_identity_any_datatype_roundtrip(server):
    payload = bytes(range(24))
    header = json.dumps({
        "inputs": [{"name": "INPUT0", "datatype": "UINT8", "shape": [2, 3, 4],
                    "parameters": {"binary_data_size": 24}}],
        "parameters": {"binary_data_output": True},
    }).encode()
    status, headers, data = server.request(
        "POST", "/v2/models/identity/infer", header + payload,
        {"Inference-Header-Content-Length": str(len(header))},
    )
    assert status == 200, data
    json_len = int(headers["Inference-Header-Content-Length"])
    out = json.loads(data[:json_len])["outputs"][0]
    assert (out["datatype"], out["shape"]) == ("UINT8", [2, 3, 4])
    assert data[json_len:] == payload


@pytest.mark.parametrize(
    "body, fragment",
    [
        ("{not json", "failed to parse the request JSON"),
        ("[1, 2]", "must be a JSON object"),
        ({}, "non-empty 'inputs'"),
        ({"inputs": "INPUT0"}, "non-empty 'inputs'"),
        ({"inputs": [{"name": "INPUT0", "shape": [1, 16], "data": [0] * 16}]}, "'datatype'"),
        ({"inputs": [{"name": 5, "datatype": "INT32", "shape": [1, 16]}]}, "string 'name'"),
        ({"inputs": [{"name": "INPUT0", "datatype": "INT33", "shape": [1], "data": [1]}]},
         "unknown datatype 'INT33'"),
        ({"inputs": [{"name": "INPUT0", "datatype": "INT32", "shape": "1,16", "data": []}]},
         "'shape' must be an array"),
        ({"inputs": [{"name": "INPUT0", "datatype": "INT32", "shape": [-1, 16], "data": []}]},
         "non-negative"),
        ('{"inputs": [{"name": "INPUT0", "datatype": "INT32", "shape": [100000000000000000000]}]}',
         "too big integer"),
        ({"inputs": [{"name": "INPUT0", "datatype": "INT32", "shape": [1, 16],
                      "data": [2**40] + [0] * 15},
                     {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16], "data": [0] * 16}]},
         "unable to parse 'data' of input 'INPUT0'"),
        (simple_json_request(in0=[1] * 15), "expected 16 INT32 elements"),
        ({"inputs": simple_json_request()["inputs"][:1]}, "expected 2 inputs but got 1"),
        ({"inputs": [dict(simple_json_request()["inputs"][0], shape=[1, 15], data=[0] * 15),
                     dict(simple_json_request()["inputs"][1], shape=[1, 15], data=[0] * 15)]},
         "unexpected shape for input 'INPUT0'"),
        ({"inputs": [dict(simple_json_request()["inputs"][0], datatype="FP32"),
                     simple_json_request()["inputs"][1]]},
         "data-type is 'FP32', but model 'simple' expects 'INT32'"),
        ({"inputs": [dict(simple_json_request()["inputs"][0], name="INPUT9"),
                     simple_json_request()["inputs"][1]]},
         "unexpected inference input 'INPUT9'"),
        (dict(simple_json_request(), outputs=[{"name": "OUTPUT7"}]),
         "unexpected inference output 'OUTPUT7'"),
        ({"inputs": [dict(simple_json_request()["inputs"][0], parameters={"binary_data_size": 64}),
                     simple_json_request()["inputs"][1]]},
         "Input must set only one of the following fields: 'data', 'binary_data_size' in "
         "'parameters', 'shared_memory_region' in 'parameters'. But set 'data' "
         "'binary_data_size'"),
    ],
)
def test_bad_infer_requests_are_400_and_server_keeps_serving(server, body, fragment):
    assert_error(server.json("POST", "/v2/models/simple/infer", body), 400, fragment)
    assert_serving(server)


@pytest.mark.servers("c")
@pytest.mark.parametrize("broken", [
    '{"id": "\\ud800\\uZZZZ", "inputs": []}',  # a surrogate pair cut by a bad escape
    '{"id": "\\ud800',                         # the text ends inside a surrogate pair
])
def test_a_request_cut_inside_a_string_leaves_the_next_ones_alone(server, broken):
    """What a broken request left half-read must not reach the strings of
    the requests that follow it on the same thread."""
    assert_error(server.json("POST", "/v2/models/simple/infer", broken), 400,
                 "failed to parse the request JSON")
    req = dict(simple_json_request(), id="\u00e9\ud83d\ude00")
    status, body = server.json("POST", "/v2/models/simple/infer", json.dumps(req))
    assert status == 200, body
    assert body["id"] == "\u00e9\U0001f600"


@pytest.mark.servers("c")
def test_long_digit_runs_in_strings_are_not_integers(server):
    """Only a number past 64 bits is refused: the same digits in a string are
    an id like any other."""
    digits = "123456789012345678901234567890"
    status, body = server.json("POST", "/v2/models/simple/infer",
                               dict(simple_json_request(), id=digits))
    assert (status, body.get("id")) == (200, digits), body
    req = json.dumps(simple_json_request()).replace("[1, 1, 1", "[" + digits + ", 1, 1", 1)
    assert_error(server.json("POST", "/v2/models/simple/infer", req), 400,
                 f"too big integer {digits[:24]}...")


IDENTITY_FP64 = ('{"inputs": [{"name": "INPUT0", "datatype": "FP64", "shape": [4], '
                 '"data": [-0, -0.0, 0.1, 1e-320]}]}')


@pytest.mark.servers("c")
@pytest.mark.parametrize("text", [
    IDENTITY_FP64,  # plain ASCII
    IDENTITY_FP64.replace('"INPUT0"', '"INPUT\\u0030"'),  # an escape
    IDENTITY_FP64.replace('"inputs"', '"id": "\u00e9", "inputs"'),  # UTF-8
    " " + IDENTITY_FP64 + "\n",  # whitespace around the object
    IDENTITY_FP64.replace('"data"', '"data": [1], "data"'),  # a repeated key: the last counts
    IDENTITY_FP64.replace("[-0, -0.0, 0.1, 1e-320]", "[" * 20 + "-0, -0.0, 0.1, 1e-320" + "]" * 20),
], ids=["plain", "escape", "utf8", "whitespace", "repeated-key", "nested"])
def test_every_spelling_of_a_request_gets_the_same_answer(server, text):
    """Escapes, UTF-8, whitespace, a repeated key and nesting change nothing
    in what the reader (http/json_doc.h) reads: the tensor must come out
    the same, the sign of a zero and a subnormal included."""
    status, body = server.json("POST", "/v2/models/identity/infer", text)
    assert status == 200, body
    data = body["outputs"][0]["data"]
    assert data == [0.0, -0.0, 0.1, 1e-320], body
    assert [math.copysign(1, x) for x in data[:2]] == [1, -1], body


@pytest.mark.servers("c")
def test_numbers_with_exponents_read_as_strtod_reads_them(server):
    """Exponents that RapidJSON 1.1's own number reading misreads (a zero
    mantissa, an overflow, many digits) are read with strtod: each element
    is the double nearest to its text, as Python's float() gives it."""
    texts = ["0e-79", "-0E71", "1.797693138623157e+308", "4.9406564584124654e324",
             "2.2250738585072011e-308", "70990099009990090.6281514609E-88", "1e-05", "1.5e+16"]
    req = ('{"inputs": [{"name": "INPUT0", "datatype": "FP64", "shape": [%d], "data": [%s]}]}'
           % (len(texts), ", ".join(texts)))
    status, body = server.json("POST", "/v2/models/identity/infer", req)
    assert status == 200, body
    data = body["outputs"][0]["data"]
    assert [struct.pack("<d", x) for x in data] == [struct.pack("<d", float(t)) for t in texts]


@pytest.mark.servers("c")
def test_nesting_past_json_c_depth_is_refused_in_its_words(server):
    text = IDENTITY_FP64.replace("[-0, -0.0, 0.1, 1e-320]", "[" * 40 + "1" + "]" * 40)
    assert_error(server.json("POST", "/v2/models/identity/infer", text), 400,
                 "failed to parse the request JSON buffer: nesting too deep at ")
    assert_serving(server)


def test_binary_section_errors(server):
    header = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "UINT8", "shape": [8],
                                     "parameters": {"binary_data_size": 8}}]}).encode()
    path = "/v2/models/identity/infer"
    assert_error(server.json("POST", path, header + b"x" * 4,
                             {"Inference-Header-Content-Length": str(len(header))}),
                 400, "only 4 remain")
    assert_error(server.json("POST", path, header + b"x" * 9,
                             {"Inference-Header-Content-Length": str(len(header))}),
                 400, "1 bytes of binary data that no input claims")
    nine = header.replace(b'"binary_data_size": 8', b'"binary_data_size": 9')
    assert_error(server.json("POST", "/v2/models/simple/infer", nine + b"x" * 9,
                             {"Inference-Header-Content-Length": str(len(nine))}),
                 400, "input byte size mismatch for input 'INPUT0' for model 'simple'. Expected 8, got 9")
    assert_error(server.json("POST", path, header,
                             {"Inference-Header-Content-Length": str(len(header) + 1)}),
                 400, "outside the request body")
    assert_error(server.json("POST", path, header, {"Inference-Header-Content-Length": "ten"}),
                 400, "non-negative integer")
    assert_serving(server)


def test_body_over_the_limit_is_400_in_tritons_words(start_server):
    small = start_server("--max-body-mb", "1")
    body = b"{" + b" " * (2 << 20) + b"}"
    assert_error(small.json("POST", "/v2/models/identity/infer", body), 400,
                 f"request JSON size of {len(body)} bytes exceeds the maximum allowed input size of "
                 f"{1 << 20} bytes. Use --max-body-mb to increase the limit.")
    assert_serving(small)


# ---------------------------------------------- shared memory over plain HTTP


def test_system_register_status_unregister(server, shm):
    key, _ = shm("reg")
    base = "/v2/systemsharedmemory"
    assert server.json("POST", f"{base}/region/p_reg/register",
                       {"key": key, "offset": 16, "byte_size": 64}) == (200, None)
    status, regions = server.json("GET", f"{base}/region/p_reg/status")
    assert status == 200
    assert regions == [{"name": "p_reg", "key": key, "offset": 16, "byte_size": 64,
                        "in_use": 0, "pending_unregister": False}]
    assert_error(server.json("POST", f"{base}/region/p_reg/register",
                             {"key": key, "byte_size": 64}), 400, "already in manager")
    assert server.json("POST", f"{base}/region/p_reg/unregister") == (200, None)
    assert_error(server.json("GET", f"{base}/region/p_reg/status"), 404,
                 "Unable to find system shared memory region: 'p_reg'")


def test_status_of_all_lists_regions_in_name_order(server, shm):
    """As Triton's HTTP status does (its regions are a std::map); the
    library's own order is its table's. Registered in reverse order, 12 of
    them, so that a table order that happens to be sorted is unlikely."""
    key, _ = shm("order")
    names = [f"p_ord{i:02d}" for i in range(12)]
    for name in reversed(names):
        assert server.json("POST", f"/v2/systemsharedmemory/region/{name}/register",
                           {"key": key, "byte_size": 64}) == (200, None)
    status, regions = server.json("GET", "/v2/systemsharedmemory/status")
    assert status == 200
    assert [r["name"] for r in regions] == names
    assert server.json("POST", "/v2/systemsharedmemory/unregister") == (200, None)


@pytest.mark.parametrize(
    "body, status, fragment",
    [
        ("{", 400, "failed to parse the request JSON"),
        ([], 400, "must be a JSON object"),
        ({"offset": 0, "byte_size": 64}, 400, "Shared memory register request has no 'key' field"),
        ({"key": 7, "byte_size": 64}, 400, "'key' must be given"),
        ({"key": "K"}, 400, "'byte_size' must be given"),
        ({"key": "K", "byte_size": "64"}, 400, "'byte_size' must be given"),
        ({"key": "K", "byte_size": 64, "offset": -1}, 400, "'offset' must be"),
        ('{"key": "K", "byte_size": 99999999999999999999999}', 400, "too big integer"),
        ({"key": "K", "byte_size": 0}, 400, "invalid args"),
        ({"key": "K", "byte_size": 4096}, 400, "invalid args"),
        ({"key": "K", "offset": 250, "byte_size": 16}, 400, "invalid args"),
        ({"key": "K", "offset": 2**63 - 1, "byte_size": 2**63 - 1}, 400, "invalid args"),
        ({"key": "/", "byte_size": 8}, 400, "invalid shm key '/'"),
        ({"key": "/no_such_object_for_shmreg", "byte_size": 8}, 500,
         "Unable to open shared memory region"),
    ],
)
def test_bad_system_registrations(server, shm, body, status, fragment):
    key, _ = shm("bad")
    if isinstance(body, dict) and body.get("key") == "K":
        body = dict(body, key=key)
    assert_error(server.json("POST", "/v2/systemsharedmemory/region/p_bad/register", body),
                 status, fragment)
    assert server.json("GET", "/v2/systemsharedmemory/status") == (200, [])
    assert_serving(server)


def test_unregister_unknown_is_ok_and_wrong_kind_is_404(server, shm):
    assert server.json("POST", "/v2/systemsharedmemory/region/never/unregister") == (200, None)
    assert server.json("POST", "/v2/cudasharedmemory/region/never/unregister") == (200, None)
    assert server.json("GET", "/v2/cudasharedmemory/region/never/status") == (
        404, {"error": "Unable to find cuda shared memory region: 'never'"})
    key, _ = shm("kind")
    assert server.json("POST", "/v2/systemsharedmemory/region/p_kind/register",
                       {"key": key, "byte_size": 8})[0] == 200
    # A system region named under the CUDA endpoints: the whole answer, as
    # before the library had SHMREG_ERR_WRONG_KIND (the reverse needs a GPU:
    # server/tests/gpu/test_cuda_infer.py).
    wrong_kind = (404, {"error": "The region named 'p_kind' is registered as system shared "
                                 "memory, not CUDA shared memory"})
    assert server.json("POST", "/v2/cudasharedmemory/region/p_kind/unregister") == wrong_kind
    assert server.json("GET", "/v2/cudasharedmemory/region/p_kind/status") == wrong_kind
    assert [r["name"] for r in server.json("GET", "/v2/systemsharedmemory/status")[1]] == ["p_kind"]
    assert server.json("POST", "/v2/systemsharedmemory/unregister") == (200, None)
    assert server.json("GET", "/v2/systemsharedmemory/status") == (200, [])


def test_cuda_endpoints_without_gpu(server):
    base = "/v2/cudasharedmemory"
    handle = base64.b64encode(bytes(64)).decode()
    status, body = server.json("POST", f"{base}/region/c0/register",
                               {"raw_handle": {"b64": handle}, "device_id": 0, "byte_size": 64})
    # No GPU on CI machines: UNSUPPORTED is 501. On a GPU machine the zero
    # handle is rejected by the driver instead (CUDA error, 500).
    assert status in (501, 500), body
    assert "c0" in body["error"] or "CUDA" in body["error"], body
    assert_error(server.json("POST", f"{base}/region/c0/register",
                             {"raw_handle": {"b64": "@@not base64@@"}, "device_id": 0,
                              "byte_size": 64}), 400, "base64")
    assert_error(server.json("POST", f"{base}/region/c0/register",
                             {"raw_handle": handle, "device_id": 0, "byte_size": 64}),
                 400, "'raw_handle' must be given")
    assert_error(server.json("POST", f"{base}/region/c0/register",
                             {"raw_handle": {"b64": handle}, "byte_size": 64}), 400, "'device_id'")
    assert_error(server.json("POST", f"{base}/region/c0/register",
                             {"device_id": 0, "byte_size": 64}),
                 400, "Shared memory register request has no 'raw_handle' field")
    assert server.json("GET", f"{base}/status") == (200, [])
    assert server.json("POST", f"{base}/unregister") == (200, None)


def test_infer_shm_errors(server, shm):
    key, _ = shm("inf", 128)
    assert server.json("POST", "/v2/systemsharedmemory/region/p_inf/register",
                       {"key": key, "byte_size": 128})[0] == 200

    def shm_input(name, **params):
        return {"name": name, "datatype": "INT32", "shape": [1, 16],
                "parameters": {"shared_memory_region": "p_inf", **params}}

    def infer(inputs, outputs=None):
        body = {"inputs": inputs}
        if outputs is not None:
            body["outputs"] = outputs
        return server.json("POST", "/v2/models/simple/infer", body)

    ok_inputs = [shm_input("INPUT0", shared_memory_byte_size=64),
                 shm_input("INPUT1", shared_memory_byte_size=64, shared_memory_offset=64)]
    assert infer(ok_inputs)[0] == 200
    assert_error(infer([dict(ok_inputs[0], parameters={"shared_memory_region": "nope",
                                                       "shared_memory_byte_size": 64}),
                        ok_inputs[1]]),
                 404, "Unable to find shared memory region: 'nope'")
    # No byte size: an empty window, refused with Triton's words (its HTTP
    # reads the size as 0, and offset + 0 - 1 wraps past the region).
    assert_error(infer([shm_input("INPUT0"), ok_inputs[1]]), 400,
                 "Invalid offset + byte size for shared memory region: 'p_inf'")
    assert_error(infer([shm_input("INPUT0", shared_memory_byte_size=60), ok_inputs[1]]), 400,
                 "[request id: <id_unknown>] input byte size mismatch for input 'INPUT0' for "
                 "model 'simple'. Expected 64, got 60")
    # Triton's core names the request id the client sent.
    status, body = server.json("POST", "/v2/models/simple/infer",
                               {"id": "r-7", "inputs": [shm_input("INPUT0", shared_memory_byte_size=60),
                                                        ok_inputs[1]]})
    assert (status, body["error"]) == (400, "[request id: r-7] input byte size mismatch for input "
                                            "'INPUT0' for model 'simple'. Expected 64, got 60")
    # A window past the region's end is refused before its size is compared
    # with the tensor's, in Triton's order.
    assert_error(infer([shm_input("INPUT0", shared_memory_byte_size=2**62), ok_inputs[1]]),
                 400, "Invalid offset + byte size for shared memory region: 'p_inf'")
    # An offset without a region is not looked at; the input then has no data.
    assert_error(infer([{"name": "INPUT0", "datatype": "INT32", "shape": [1, 16],
                         "parameters": {"shared_memory_offset": 0}}, ok_inputs[1]]), 400,
                 "Input must set only one of the following fields: 'data', 'binary_data_size' in "
                 "'parameters', 'shared_memory_region' in 'parameters'. But no field is set")
    assert_error(infer([shm_input("INPUT0", shared_memory_byte_size=64, shared_memory_offset=128),
                        ok_inputs[1]]), 400, "Invalid offset for shared memory region: 'p_inf'")
    assert_error(infer([shm_input("INPUT0", shared_memory_byte_size=64, shared_memory_offset=96),
                        ok_inputs[1]]), 400, "Invalid offset + byte size")
    assert_error(infer(ok_inputs, [{"name": "OUTPUT0", "parameters": {
        "shared_memory_region": "p_inf", "shared_memory_byte_size": 4}}]), 400,
        "shared memory size specified with the request for output 'OUTPUT0' (4 bytes) should be "
        "at least 64 bytes to hold the results")
    status, regions = server.json("GET", "/v2/systemsharedmemory/status")
    assert status == 200 and regions[0]["in_use"] == 0  # every error path released
    assert server.json("POST", "/v2/systemsharedmemory/unregister") == (200, None)


# ------------------------------------------------------- a NUL inside a string

NUL_MESSAGE = ("the request JSON holds a NUL character (\\u0000) in a string, which no name, "
               "key or parameter may contain")


def nul_infer_body(where):
    """simple's inputs in region p_nul, with a NUL put into one string (or
    object key) of the header, as json.dumps spells it: "\\u0000"."""
    def tensor(name, offset, region="p_nul"):
        return {"name": name, "datatype": "INT32", "shape": [1, 16], "parameters": {
            "shared_memory_region": region, "shared_memory_offset": offset,
            "shared_memory_byte_size": 64}}
    body = {"inputs": [tensor("INPUT0", 0), tensor("INPUT1", 64)],
            "outputs": [{"name": "OUTPUT0"}]}
    if where == "region":
        body["inputs"][0] = tensor("INPUT0", 0, region="p_nul\0junk")
    elif where == "input name":
        body["inputs"][1]["name"] = "INPUT1\0x"
    elif where == "output name":
        body["outputs"][0]["name"] = "OUTPUT0\0x"
    elif where == "datatype":
        body["inputs"][0]["datatype"] = "INT32\0x"
    elif where == "id":
        body["id"] = "r\0forged"
    elif where == "parameter key":
        params = body["inputs"][0]["parameters"]
        params["shared_memory_region\0x"] = params.pop("shared_memory_region")
    elif where == "parameter value":
        body["parameters"] = {"note": "a\0b"}
    return body


@pytest.fixture
def nul_region(server, shm):
    key, mem = shm("nul", 128)
    assert server.json("POST", "/v2/systemsharedmemory/region/p_nul/register",
                       {"key": key, "byte_size": 128}) == (200, None)
    yield key
    assert server.json("POST", "/v2/systemsharedmemory/unregister") == (200, None)


@pytest.mark.servers("c")
@pytest.mark.parametrize("spelling", ["escape-only", "long-exponent"])
@pytest.mark.parametrize("where", ["region", "input name", "output name", "datatype", "id",
                                   "parameter key", "parameter value"])
def test_a_nul_in_any_string_of_an_inference_is_400(server, nul_region, where, spelling):
    """A region named "p_nul\\u0000junk" was served from p_nul: every string
    is read as a C string, which the NUL cut short. The second spelling
    also carries a number of many exponent digits, which RapidJSON's own
    number reading would misread (http/json_doc.h)."""
    text = json.dumps(nul_infer_body(where))
    if spelling == "long-exponent":
        text = text.replace('"outputs"', '"parameters_x": 1.5e+0016, "outputs"', 1)
    assert "\\u0000" in text
    status, body = server.json("POST", "/v2/models/simple/infer", text)
    assert status == 400, body
    assert body["error"].startswith(NUL_MESSAGE), body
    status, regions = server.json("GET", "/v2/systemsharedmemory/status")
    assert status == 200 and regions[0]["in_use"] == 0, regions
    # The same request without the NUL is served.
    assert server.json("POST", "/v2/models/simple/infer", nul_infer_body(None))[0] == 200


@pytest.mark.servers("c")
def test_a_nul_in_a_registered_key_is_400_and_registers_nothing(server, shm):
    """A key "K\\u0000zz" registered K (shm_open reads a C string)."""
    key, _ = shm("nulkey")
    status, body = server.json("POST", "/v2/systemsharedmemory/region/p_nulkey/register",
                               {"key": key + "\0zz", "byte_size": 8})
    assert status == 400, body
    # at the escape's place: after '{"key": "' and the key
    assert body["error"] == f"{NUL_MESSAGE} at {len(key) + 9}", body
    assert server.json("GET", "/v2/systemsharedmemory/status") == (200, [])
    assert_serving(server)


@pytest.mark.servers("c")
@pytest.mark.parametrize("body", [
    {"key\0": "/k", "byte_size": 8},  # an object key: read as the C string "key"
    {"raw_handle": {"b64": "AAAA\0"}, "device_id": 0, "byte_size": 8},
    {"raw_handle\0x": {"b64": "AAAA"}, "device_id": 0, "byte_size": 8},
], ids=["system-key-name", "cuda-handle", "cuda-key-name"])
def test_a_nul_in_any_register_body_is_400(server, body):
    kind = "cuda" if any(k.startswith("raw_handle") for k in body) else "system"
    status, got = server.json("POST", f"/v2/{kind}sharedmemory/region/p_nulbody/register", body)
    assert status == 400, got
    assert got["error"].startswith(NUL_MESSAGE), got
    assert server.json("GET", f"/v2/{kind}sharedmemory/status") == (200, [])


@pytest.mark.servers("c")
@pytest.mark.parametrize("method, path", [
    ("GET", "/v2/models/simple%00x/ready"),  # was simple's metadata: the path cut at the NUL
    ("GET", "/v2/models/simple%00x"),
    ("POST", "/v2/models/simple%00x/infer"),
    ("POST", "/v2/systemsharedmemory/region/p_nul%00x/register"),
    ("GET", "/v2/systemsharedmemory/region/p_nul%00x/status"),
    ("POST", "/v2/systemsharedmemory/region/p_nul%00x/unregister"),
])
def test_a_nul_in_the_path_is_400(server, shm, method, path):
    key, _ = shm("nulpath")
    status, body = server.json(method, path, {"key": key, "byte_size": 8} if method == "POST"
                               else None)
    assert status == 400, body
    assert body["error"] == ("the request's path holds a NUL or DEL character (%00, %7F), "
                             "which no model or region name may contain"), body
    assert server.json("GET", "/v2/systemsharedmemory/status") == (200, [])


@pytest.mark.servers("c")
def test_backslashes_before_u0000_are_no_nul(server, shm):
    """"\\\\u0000" is a backslash and the text u0000: a name may hold it."""
    key, _ = shm("bs")
    status, body = server.json("POST", "/v2/systemsharedmemory/region/p_bs/register",
                               {"key": key, "byte_size": 8, "note": "\\u0000"})
    assert status == 200, body
    assert server.json("POST", "/v2/systemsharedmemory/region/p_bs/unregister") == (200, None)


def test_verbose_logs_one_line_per_request(start_server):
    logged = start_server("-v")
    assert logged.request("GET", "/v2/health/live")[0] == 200
    assert logged.request("GET", "/v2/models/a%0Aforged/ready")[0] == 404
    _, err = logged.stop()
    # Start-up (the GPU model's line, remote_memory's) and shutdown lines aside.
    lines = [l for l in err.splitlines()
             if not l.startswith(("shutdown:", "gpu model ", "remote_memory"))]
    assert len(lines) == 2, err
    assert re.match(r"GET /v2/health/live 200 [0-9.]+ ms$", lines[0])
    # A percent-encoded newline must not start a line of its own in the log.
    assert re.match(r"GET /v2/models/a\?forged/ready 404 [0-9.]+ ms$", lines[1])
