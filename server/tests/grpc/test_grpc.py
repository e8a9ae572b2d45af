"""The gRPC side on its own: health, metadata, statistics, inference with raw
contents, the status codes and messages of the shared-memory calls, unsigned
64-bit offsets and sizes, CUDA handles of the wrong size, and the port.

The scenarios shared with HTTP are in test_tritonclient_protocols.py.
"""
import base64
import os
import signal
import threading

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

from server_process import Server
from grpc_support import (  # noqa: F401 (start_grpc_server: a fixture)
    assert_clean_stop, call, proto_classes, region_status, start_grpc_server, start_with_grpc)

IN0 = np.arange(16, dtype=np.int32).reshape(1, 16)
IN1 = np.full((1, 16), 3, dtype=np.int32)
NBYTES = IN0.nbytes


@pytest.fixture(scope="module")
def server():
    s = start_with_grpc("--threads", "2")
    yield s
    assert_clean_stop(s)


@pytest.fixture
def client(server):
    c = grpcclient.InferenceServerClient(server.grpc_url)
    yield c
    c.unregister_system_shared_memory()
    c.close()


@pytest.fixture
def region(client, shm_key):
    """A 4 * 64-byte shm object holding IN0 and IN1, registered as "io"."""
    handle = shm.create_shared_memory_region("io", shm_key("io"), 4 * NBYTES)
    shm.set_shared_memory_region(handle, [IN0, IN1])
    client.register_system_shared_memory("io", handle._shm_key, 4 * NBYTES)
    yield handle
    shm.destroy_shared_memory_region(handle)


def raises(code, message, fn, *args, **kwargs):
    """fn(*args) fails with this gRPC code and a message containing message."""
    with pytest.raises(InferenceServerException) as e:
        fn(*args, **kwargs)
    assert e.value.status() == f"StatusCode.{code}", e.value.message()
    assert message in e.value.message()
    return e.value


def simple_inputs():
    return [grpcclient.InferInput("INPUT0", [1, 16], "INT32"),
            grpcclient.InferInput("INPUT1", [1, 16], "INT32")]


# ------------------------------------------------------- health and metadata


def test_health(client):
    assert client.is_server_live()
    assert client.is_server_ready()
    assert client.is_model_ready("simple")
    assert client.is_model_ready("simple", "1")
    assert not client.is_model_ready("simple", "2")
    assert not client.is_model_ready("no_such_model")  # an answer, not an error, as in Triton


def test_server_metadata(client):
    md = client.get_server_metadata(as_json=True)
    assert md["name"] == "shmreg-server"
    assert set(md["extensions"]) >= {"system_shared_memory", "cuda_shared_memory", "statistics"}


def test_model_metadata(client):
    md = client.get_model_metadata("simple", as_json=True)
    assert (md["name"], md["versions"], md["platform"]) == ("simple", ["1"], "shmreg_builtin")
    assert [(t["name"], t["datatype"], t["shape"]) for t in md["inputs"]] == [
        ("INPUT0", "INT32", ["-1", "16"]), ("INPUT1", "INT32", ["-1", "16"])]
    raises("NOT_FOUND", "Request for unknown model: 'nope' is not found",
           client.get_model_metadata, "nope")
    raises("NOT_FOUND", "Request for unknown model: 'simple' version 7 is not found",
           client.get_model_metadata, "simple", "7")


def test_statistics_count_inferences(server, client):
    def successes():
        stats = client.get_inference_statistics("identity", as_json=True)["model_stats"]
        return int(stats[0]["inference_stats"].get("success", {}).get("count", 0))

    before = successes()
    x = grpcclient.InferInput("INPUT0", [4], "UINT8")
    x.set_data_from_numpy(np.arange(4, dtype=np.uint8))
    client.infer("identity", [x])
    assert successes() == before + 1
    # The same numbers as the HTTP side reports.
    status, http = server.json("GET", "/v2/models/identity/stats")
    assert http["model_stats"][0]["inference_stats"]["success"]["count"] == before + 1
    every = client.get_inference_statistics(as_json=True)["model_stats"]
    assert sorted(m["name"] for m in every) == ["identity", "simple", "simple_delayed", "yolo"]
    raises("NOT_FOUND", "Request for unknown model: 'nope'", client.get_inference_statistics, "nope")


def test_model_config(server, client):
    config = client.get_model_config("simple", as_json=True)["config"]
    assert (config["name"], config["max_batch_size"], config["backend"]) == ("simple", 8,
                                                                            "shmreg_builtin")
    assert [(i["name"], i["data_type"], i["dims"]) for i in config["input"]] == [
        ("INPUT0", "TYPE_INT32", ["16"]), ("INPUT1", "TYPE_INT32", ["16"])]
    assert config["instance_group"] == [{"count": 1, "kind": "KIND_CPU"}]
    # What the HTTP side says, field for field.
    status, http = server.json("GET", "/v2/models/identity/config")
    grpc_identity = client.get_model_config("identity", as_json=True)["config"]
    assert [i["data_type"] for i in grpc_identity["input"]] == [i["data_type"] for i in http["input"]]
    assert [int(d) for d in grpc_identity["input"][0]["dims"]] == http["input"][0]["dims"]
    raises("NOT_FOUND", "Request for unknown model: 'nope' is not found",
           client.get_model_config, "nope")


def test_unserved_rpc_is_unimplemented(client):
    raises("UNIMPLEMENTED", "", client.get_model_repository_index)


# ----------------------------------------------------------------- inference


def test_raw_contents_round_trip(client):
    data = (np.arange(2 * 3 * 4) * 0.5).astype(np.float16).reshape(2, 3, 4)
    x = grpcclient.InferInput("INPUT0", list(data.shape), "FP16")
    x.set_data_from_numpy(data)
    result = client.infer("identity", [x], request_id="req-7")
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), data)
    response = result.get_response()
    assert (response.model_name, response.model_version, response.id) == ("identity", "1", "req-7")


def test_requested_output_subset(client):
    inputs = simple_inputs()
    inputs[0].set_data_from_numpy(IN0)
    inputs[1].set_data_from_numpy(IN1)
    result = client.infer("simple", inputs, outputs=[grpcclient.InferRequestedOutput("OUTPUT1")])
    assert [o.name for o in result.get_response().outputs] == ["OUTPUT1"]
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), IN0 - IN1)
    raises("INVALID_ARGUMENT", "unexpected inference output 'OUTPUT9' for model 'simple'",
           client.infer, "simple", inputs, outputs=[grpcclient.InferRequestedOutput("OUTPUT9")])


def test_inference_errors(server, client):
    raises("NOT_FOUND", "Request for unknown model: 'nope' is not found",
           client.infer, "nope", simple_inputs())
    inputs = simple_inputs()
    inputs[0].set_data_from_numpy(IN0)
    raises("INVALID_ARGUMENT",
           "unable to find data for input tensor 'INPUT1' for model 'simple' in request.",
           client.infer, "simple", inputs)
    c = proto_classes()
    req = c["inference.ModelInferRequest"](model_name="simple")
    for name in ("INPUT0", "INPUT1"):
        req.inputs.add(name=name, datatype="INT32", shape=[1, 16])
    req.raw_input_contents.extend([IN0.tobytes(), IN1[:, :8].tobytes()])
    assert infer_error(server, req) == (
        "INVALID_ARGUMENT", "[request id: <id_unknown>] input byte size mismatch for input "
        "'INPUT1' for model 'simple'. "
        "Expected 64, got 32")


def infer_request(region, params0, model="simple"):
    """A ModelInferRequest of the server's own classes: INPUT0 with
    parameters params0 (name -> InferParameter field and value), INPUT1 in
    region at offset 64."""
    c = proto_classes()
    req = c["inference.ModelInferRequest"](model_name=model)
    for name, params in (("INPUT0", params0), ("INPUT1", {
            "shared_memory_region": ("string_param", region),
            "shared_memory_byte_size": ("int64_param", NBYTES),
            "shared_memory_offset": ("int64_param", NBYTES)})):
        t = req.inputs.add(name=name, datatype="INT32", shape=[1, 16])
        for key, (field, value) in params.items():
            setattr(t.parameters[key], field, value)
    return req


def infer_error(server, req):
    c = proto_classes()
    resp, err = call(server.grpc_url, "ModelInfer", req, c["inference.ModelInferResponse"])
    assert resp is None
    return err.code().name, err.details()


def test_shared_memory_parameters_in_tritons_words(server, region):
    wrong_type = {"shared_memory_region": ("int64_param", 3),
                  "shared_memory_byte_size": ("int64_param", NBYTES)}
    assert infer_error(server, infer_request("io", wrong_type)) == (
        "INVALID_ARGUMENT", "invalid value type for 'shared_memory_region' parameter for tensor "
        "'INPUT0', expected string_param.")
    size_as_uint = {"shared_memory_region": ("string_param", "io"),
                    "shared_memory_byte_size": ("uint64_param", NBYTES)}
    assert infer_error(server, infer_request("io", size_as_uint)) == (
        "INVALID_ARGUMENT", "invalid value type for 'shared_memory_byte_size' parameter for tensor "
        "'INPUT0', expected int64_param.")
    no_region = {"shared_memory_offset": ("int64_param", 0)}
    assert infer_error(server, infer_request("io", no_region)) == (
        "INVALID_ARGUMENT", "'shared_memory_offset' can not be specified without "
        "'shared_memory_region' parameter for tensor 'INPUT0'")


# ------------------------------------------------- a NUL inside a string

NUL_WORDS = "holds a NUL character, which no name, key or parameter may contain"
IN_IO = {"shared_memory_region": ("string_param", "io"),
         "shared_memory_byte_size": ("int64_param", NBYTES),
         "shared_memory_offset": ("int64_param", 0)}


def nul_infer_request(where):
    """simple's inputs in region io, with a NUL byte in one string: protobuf
    strings may hold one, and the server reads them as C strings."""
    req = infer_request("io", IN_IO)
    req.outputs.add(name="OUTPUT0")
    if where == "region":
        req.inputs[0].parameters["shared_memory_region"].string_param = "io\0junk"
    elif where == "model_name":
        req.model_name = "simple\0x"
    elif where == "model_version":
        req.model_version = "1\0x"
    elif where == "id":
        req.id = "r\0forged"
    elif where == "inputs.name":
        req.inputs[1].name = "INPUT1\0x"
    elif where == "inputs.datatype":
        req.inputs[0].datatype = "INT32\0x"
    elif where == "outputs.name":
        req.outputs[0].name = "OUTPUT0\0x"
    elif where == "parameter key":
        params = req.inputs[0].parameters
        params["shared_memory_region\0x"].string_param = "io"
    elif where == "parameter value":
        req.parameters["note"].string_param = "a\0b"
    return req


@pytest.mark.parametrize("where", ["region", "model_name", "model_version", "id", "inputs.name",
                                   "inputs.datatype", "outputs.name", "parameter key",
                                   "parameter value"])
def test_a_nul_in_any_string_of_an_inference_is_invalid_argument(server, region, where):
    """Region "io\\0junk" was served from io, model "simple\\0x" by simple."""
    code, message = infer_error(server, nul_infer_request(where))
    assert code == "INVALID_ARGUMENT", message
    assert NUL_WORDS in message, message
    assert region_status(server.grpc_url)["io"].in_use == 0
    c = proto_classes()
    resp, err = call(server.grpc_url, "ModelInfer", nul_infer_request(None),
                     c["inference.ModelInferResponse"])
    assert err is None, err


@pytest.mark.parametrize("method, fields", [
    ("SystemSharedMemoryRegister", {"name": "r\0x", "key": "K", "byte_size": 64}),
    ("SystemSharedMemoryRegister", {"name": "r", "key": "K\0zz", "byte_size": 64}),
    ("SystemSharedMemoryStatus", {"name": "io\0x"}),
    ("SystemSharedMemoryUnregister", {"name": "io\0x"}),
    ("CudaSharedMemoryRegister", {"name": "c\0x", "raw_handle": b"h" * 64, "byte_size": 64}),
    ("CudaSharedMemoryStatus", {"name": "c\0x"}),
    ("CudaSharedMemoryUnregister", {"name": "c\0x"}),
    ("ModelReady", {"name": "simple\0x"}),
    ("ModelMetadata", {"name": "simple\0x"}),
    ("ModelConfig", {"name": "simple", "version": "1\0x"}),
    ("ModelStatistics", {"name": "simple\0x"}),
])
def test_a_nul_in_a_name_or_key_is_invalid_argument(server, region, method, fields):
    """A key "K\\0zz" registered K, and a name "io\\0x" unregistered io."""
    c = proto_classes()
    if fields.get("key") == "K":
        fields = dict(fields, key=region._shm_key)
    elif "key" in fields:
        fields = dict(fields, key=region._shm_key + "\0zz")
    req = c[f"inference.{method}Request"](**fields)
    resp, err = call(server.grpc_url, method, req, c[f"inference.{method}Response"])
    assert resp is None and err.code().name == "INVALID_ARGUMENT", (resp, err)
    assert NUL_WORDS in err.details(), err.details()
    assert sorted(region_status(server.grpc_url)) == ["io"]


# ------------------------------------------ unsigned 64-bit offsets and sizes


@pytest.mark.parametrize("offset", [2**63, 2**64 - 32, 2**64 - 1])
def test_infer_offsets_past_int64_reach_the_bounds_check(server, region, offset):
    """An int64 parameter carries the protocol's uint64 bits: -32 is 2^64 - 32."""
    params = {"shared_memory_region": ("string_param", "io"),
              "shared_memory_byte_size": ("int64_param", NBYTES),
              "shared_memory_offset": ("int64_param", offset - 2**64)}
    assert infer_error(server, infer_request("io", params)) == (
        "INVALID_ARGUMENT", "Invalid offset for shared memory region: 'io'")


def test_infer_size_past_int64_reaches_the_overflow_check(server, region):
    """BYTES has no fixed size, so the window goes to the library as sent."""
    c = proto_classes()
    req = c["inference.ModelInferRequest"](model_name="identity")
    t = req.inputs.add(name="INPUT0", datatype="BYTES", shape=[1])
    t.parameters["shared_memory_region"].string_param = "io"
    t.parameters["shared_memory_offset"].int64_param = 8
    t.parameters["shared_memory_byte_size"].int64_param = -1  # 2^64 - 1
    code, message = infer_error(server, req)
    assert code == "INVALID_ARGUMENT"
    assert message.startswith("Integer overflow detected: byte_size (18446744073709551615) + "
                              "offset (8) exceeds maximum value"), message


def test_infer_output_offset_past_int64(server, region):
    c = proto_classes()
    params = {"shared_memory_region": ("string_param", "io"),
              "shared_memory_byte_size": ("int64_param", NBYTES),
              "shared_memory_offset": ("int64_param", 0)}
    req = infer_request("io", params)
    out = req.outputs.add(name="OUTPUT0")
    out.parameters["shared_memory_region"].string_param = "io"
    out.parameters["shared_memory_byte_size"].int64_param = NBYTES
    out.parameters["shared_memory_offset"].int64_param = -NBYTES  # 2^64 - 64
    assert infer_error(server, req) == ("INVALID_ARGUMENT",
                                        "Invalid offset for shared memory region: 'io'")
    # What was acquired is released once the answer has been sent.
    server.wait_until(lambda: region_status(server.grpc_url)["io"].in_use == 0, what="release")
    # A window within the region works, and the output lands there.
    out.parameters["shared_memory_offset"].int64_param = 2 * NBYTES
    resp, err = call(server.grpc_url, "ModelInfer", req, c["inference.ModelInferResponse"])
    assert err is None, err
    np.testing.assert_array_equal(shm.get_contents_as_numpy(region, np.int32, [1, 16],
                                                            offset=2 * NBYTES), IN0 + IN1)


@pytest.mark.parametrize("offset,byte_size", [
    (2**64 - 1, 2**64 - 1), (2**64 - 32, 64), (2**63, 8), (0, 2**64 - 1), (0, 2**63)])
def test_register_uint64_offsets_and_sizes(client, shm_key, offset, byte_size):
    handle = shm.create_shared_memory_region("big", shm_key("big"), 64)
    try:
        e = raises("INVALID_ARGUMENT", "failed to register shared memory region 'big': invalid args",
                   client.register_system_shared_memory, "big", handle._shm_key, byte_size,
                   offset=offset)
        assert str(offset) in e.message() and str(byte_size) in e.message()
        assert client.get_system_shared_memory_status(as_json=True) == {}
    finally:
        shm.destroy_shared_memory_region(handle)


# ---------------------------------------------------- shared-memory control


def test_system_status_fields(server, client, region):
    status = client.get_system_shared_memory_status("io", as_json=True)["regions"]["io"]
    assert (status["name"], status["key"], status["byte_size"]) == ("io", region._shm_key,
                                                                     str(4 * NBYTES))
    own = region_status(server.grpc_url)["io"]
    assert (own.in_use, own.pending_unregister) == (0, False)


def test_unregister_unknown_is_success(client):
    client.unregister_system_shared_memory("never_registered")
    client.unregister_cuda_shared_memory("never_registered")
    client.unregister_cuda_shared_memory()


def test_wrong_kind_is_not_found(client, region):
    raises("NOT_FOUND", "The region named 'io' is registered as system shared memory, not CUDA "
           "shared memory", client.get_cuda_shared_memory_status, "io")
    raises("NOT_FOUND", "is registered as system shared memory",
           client.unregister_cuda_shared_memory, "io")
    raises("NOT_FOUND", "Unable to find cuda shared memory region: 'nope'",
           client.get_cuda_shared_memory_status, "nope")
    assert "io" in client.get_system_shared_memory_status(as_json=True)["regions"]


@pytest.mark.parametrize("size", [0, 10, 63, 65, 128])
def test_cuda_raw_handle_of_the_wrong_size(client, size):
    raises("INVALID_ARGUMENT", "'raw_handle' must be a valid base64 encoded cudaIpcMemHandle_t",
           client.register_cuda_shared_memory, "c", base64.b64encode(bytes(size)), 0, 64)
    assert client.get_cuda_shared_memory_status(as_json=True) == {}


def test_cuda_register_answers_the_librarys_code(client):
    """A 64-byte handle reaches the library: without CUDA (this machine) that
    is UNSUPPORTED, UNIMPLEMENTED over gRPC; with a GPU, a bogus handle is
    the driver's refusal, INTERNAL."""
    with pytest.raises(InferenceServerException) as e:
        client.register_cuda_shared_memory("c", base64.b64encode(bytes(64)), 0, 64)
    assert e.value.status() in ("StatusCode.UNIMPLEMENTED", "StatusCode.INTERNAL")
    assert "'c'" in e.value.message() or "CUDA" in e.value.message()


# ---------------------------------------------------------------------- port


def test_grpc_is_off_by_default(start_server):
    """No --grpc-port: HTTP only, and the one line on stdout."""
    server = start_server()
    assert server.request("GET", "/v2/health/live")[0] == 200
    assert "--grpc-port" not in server.args


def serving_threads(server):
    """The server's threads named as gRPC's serving threads."""
    tasks = f"/proc/{server.proc.pid}/task"
    names = []
    for tid in os.listdir(tasks):
        try:
            with open(f"{tasks}/{tid}/comm") as f:
                names.append(f.read().strip())
        except FileNotFoundError:  # a thread that ended meanwhile
            pass
    return names.count("grpc-serving")


def test_grpc_threads_sets_the_serving_threads(start_grpc_server):
    """--grpc-threads N: N threads read and answer the calls, and every call
    still gets its answer; by default half the cores, two to eight."""
    cores = os.cpu_count()
    default = 2 if cores < 4 else 8 if cores > 16 else cores // 2
    for args, expected in ((("--grpc-threads", "3"), 3), ((), default),
                           (("--grpc-threads", "1"), 1)):
        server = start_grpc_server(*args)
        assert serving_threads(server) == expected, args
        c = grpcclient.InferenceServerClient(server.grpc_url)
        inputs = simple_inputs()
        inputs[0].set_data_from_numpy(IN0)
        inputs[1].set_data_from_numpy(IN1)
        outs = [c.infer("simple", inputs) for _ in range(20)]
        assert all((r.as_numpy("OUTPUT0") == IN0 + IN1).all() for r in outs)
        assert c.is_server_ready()
        c.close()


def test_grpc_port_in_use_fails_to_start(start_grpc_server):
    first = start_grpc_server()
    # No adapter's line is printed: a client is told of no port of a
    # server that then exits (main.c prints them once all are up).
    with pytest.raises(RuntimeError) as refused:
        Server("--grpc-port", str(first.grpc_port))
    assert "server did not start: ''" in str(refused.value)
    assert f"cannot listen for gRPC on 127.0.0.1:{first.grpc_port}" in str(refused.value)
    assert first.request("GET", "/v2/health/live")[0] == 200


# ------------------------------------------------------------------ shutdown


def slow_shm_infer(mod, url, region_name, results, errors):
    """simple_delayed with inputs and outputs in region_name (4 * 64 bytes)."""
    client = mod.InferenceServerClient(url)
    try:
        inputs = [mod.InferInput("INPUT0", [1, 16], "INT32"),
                  mod.InferInput("INPUT1", [1, 16], "INT32")]
        inputs[0].set_shared_memory(region_name, NBYTES, offset=0)
        inputs[1].set_shared_memory(region_name, NBYTES, offset=NBYTES)
        outputs = [mod.InferRequestedOutput("OUTPUT0"), mod.InferRequestedOutput("OUTPUT1")]
        outputs[0].set_shared_memory(region_name, NBYTES, offset=2 * NBYTES)
        outputs[1].set_shared_memory(region_name, NBYTES, offset=3 * NBYTES)
        results.append(client.infer("simple_delayed", inputs, outputs=outputs))
    except Exception as e:  # checked by the test
        errors.append(e)
    finally:
        client.close()


def test_sigterm_drains_both_protocols_at_once(start_grpc_server, shm_key):
    """A slow request on each protocol when SIGTERM arrives: both complete
    with their results, a new gRPC call is refused meanwhile, and the server
    exits 0 with nothing mapped (the fixture checks its leftover report)."""
    server = start_grpc_server("--delay-ms", "1500")
    handles = {}
    try:
        for name in ("via_http", "via_grpc"):
            handles[name] = shm.create_shared_memory_region(name, shm_key(name), 4 * NBYTES)
            shm.set_shared_memory_region(handles[name], [IN0, IN1])
            status, _ = server.json("POST", f"/v2/systemsharedmemory/region/{name}/register",
                                    {"key": handles[name]._shm_key, "byte_size": 4 * NBYTES})
            assert status == 200
        results, errors = [], []
        threads = [threading.Thread(target=slow_shm_infer,
                                    args=(httpclient, server.url, "via_http", results, errors)),
                   threading.Thread(target=slow_shm_infer,
                                    args=(grpcclient, server.grpc_url, "via_grpc", results, errors))]
        for t in threads:
            t.start()
        # Each request holds 4 references: two inputs and two outputs.
        server.wait_until(lambda: [r.in_use for r in region_status(server.grpc_url).values()]
                          == [4, 4], what="both requests in flight")
        server.proc.send_signal(signal.SIGTERM)

        def refused():
            late = grpcclient.InferenceServerClient(server.grpc_url)
            try:
                late.is_server_live(client_timeout=1)
                return False
            except InferenceServerException as e:
                return e.status() == "StatusCode.UNAVAILABLE"
            finally:
                late.close()

        server.wait_until(refused, what="new gRPC calls refused")
        assert results == []  # the slow requests were still running meanwhile
        for t in threads:
            t.join(30)
        assert errors == []
        assert len(results) == 2
        for handle in handles.values():
            np.testing.assert_array_equal(
                shm.get_contents_as_numpy(handle, np.int32, [1, 16], offset=2 * NBYTES), IN0 + IN1)
    finally:
        for handle in handles.values():
            shm.destroy_shared_memory_region(handle)


def shm_calls_until_refused(url, name, key, size, calls, errors):
    """Register + unregister of name, then a status, until a call fails."""
    client = grpcclient.InferenceServerClient(url)
    try:
        while True:
            client.register_system_shared_memory(name, key, size)
            client.unregister_system_shared_memory(name)
            client.get_system_shared_memory_status()
            calls.append(name)
    except InferenceServerException as e:
        errors.append(e)
    finally:
        client.close()


def test_sigterm_during_shared_memory_calls(start_grpc_server, shm_key):
    """Clients calling register, unregister and status back to back when
    SIGTERM arrives: each client's calls are answered until one is refused
    (CANCELLED: caught by the shutdown; UNAVAILABLE: after it), none is left
    waiting for the drain deadline (--drain-s 30: gRPC's core can strand a
    call that arrives as the stop begins, which the server then cancels a
    second after its own calls are done), and the server exits 0 with nothing left
    registered or mapped (the fixture checks its leftover report; the ASan
    build, that no call's state leaked)."""
    server = start_grpc_server("--drain-s", "30")
    handles = [shm.create_shared_memory_region(f"busy{i}", shm_key(f"busy{i}"), NBYTES)
               for i in range(3)]
    try:
        calls, errors = [], []
        threads = [threading.Thread(target=shm_calls_until_refused,
                                    args=(server.grpc_url, f"busy{i}", h._shm_key, NBYTES,
                                          calls, errors))
                   for i, h in enumerate(handles)]
        for t in threads:
            t.start()
        server.wait_until(lambda: len(set(calls)) == 3 and len(calls) >= 30,
                          what="every client calling")
        server.proc.send_signal(signal.SIGTERM)
        for t in threads:
            t.join(10)
        assert not any(t.is_alive() for t in threads), "a call still waits"
        assert len(errors) == 3
        assert all(e.status() in ("StatusCode.CANCELLED", "StatusCode.UNAVAILABLE")
                   for e in errors), [(e.status(), e.message()) for e in errors]
    finally:
        for handle in handles:
            shm.destroy_shared_memory_region(handle)
