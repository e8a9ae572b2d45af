"""What Triton serves and this server does not (server/README.md's table):
each such endpoint answers at once, HTTP 404 "Not Found" and gRPC
UNIMPLEMENTED, so that a Triton client learns it is absent instead of
waiting; and the parameters of extensions it lacks are ignored, the
inference answered in full."""
import json
import urllib.error
import urllib.request

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from grpc_support import assert_clean_stop, start_with_grpc

HTTP_ABSENT = [
    ("POST", "v2/repository/index"),
    ("POST", "v2/repository/models/simple/load"),
    ("POST", "v2/repository/models/simple/unload"),
    ("GET", "v2/trace/setting"),
    ("POST", "v2/trace/setting"),
    ("GET", "v2/models/simple/trace/setting"),
    ("GET", "v2/logging"),
    ("POST", "v2/logging"),
    ("POST", "v2/models/simple/generate"),
    ("POST", "v2/models/simple/generate_stream"),
    ("POST", "v2/models/simple/versions/1/generate"),
]
GRPC_ABSENT = [
    "/inference.GRPCInferenceService/RepositoryIndex",
    "/inference.GRPCInferenceService/RepositoryModelLoad",
    "/inference.GRPCInferenceService/RepositoryModelUnload",
    "/inference.GRPCInferenceService/TraceSetting",
    "/inference.GRPCInferenceService/LogSettings",
    "/grpc.health.v1.Health/Check",
]


@pytest.fixture(scope="module")
def server():
    s = start_with_grpc("--threads", "2")
    yield s
    assert_clean_stop(s)


@pytest.mark.parametrize("method, path", HTTP_ABSENT)
def test_http_endpoint_not_served_is_404(server, method, path):
    request = urllib.request.Request(f"http://{server.url}/{path}", data=b"{}" if method == "POST"
                                     else None, method=method)
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(request, timeout=10)
    assert e.value.code == 404 and json.loads(e.value.read()) == {"error": "Not Found"}


@pytest.mark.parametrize("method", GRPC_ABSENT)
def test_grpc_method_not_served_is_unimplemented(server, method):
    with grpc.insecure_channel(server.grpc_url) as channel:
        call = channel.unary_unary(method, request_serializer=bytes, response_deserializer=bytes)
        with pytest.raises(grpc.RpcError) as e:
            call(b"", timeout=10)
    assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED, e.value


def test_stream_infer_is_unimplemented(server):
    with grpc.insecure_channel(server.grpc_url) as channel:
        call = channel.stream_stream("/inference.GRPCInferenceService/ModelStreamInfer",
                                     request_serializer=bytes, response_deserializer=bytes)
        with pytest.raises(grpc.RpcError) as e:
            list(call(iter([b""]), timeout=10))
    assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED, e.value


def test_classification_sequence_and_priority_are_ignored(server):
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    inputs = [grpcclient.InferInput(name, [1, 16], "INT32") for name in ("INPUT0", "INPUT1")]
    for tensor in inputs:
        tensor.set_data_from_numpy(a)
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        result = client.infer("simple", inputs,
                               outputs=[grpcclient.InferRequestedOutput("OUTPUT0", class_count=2)],
                               sequence_id=7, sequence_start=True, priority=1, timeout=100)
    finally:
        client.close()
    assert (result.as_numpy("OUTPUT0") == 2 * a).all()  # the whole tensor, no class labels
