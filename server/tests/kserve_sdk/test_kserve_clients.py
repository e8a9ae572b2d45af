"""KServe's own Python SDK clients, unmodified, against the C server:
InferenceRESTClient with protocol v2 (server live and ready from the health
bodies, model ready, inference on `simple` as JSON and as binary tensor
data; the metadata validated by the SDK's own data models) and
InferenceGRPCClient, which sends an input given as a list in its typed
contents (int_contents for INT32).

The SDK pins its own FastAPI, grpcio and protobuf, so it has a venv of its
own: scripts/tests.d/60-server.sh runs this folder there, against the
server that tier builds, and fails when it is skipped."""
import asyncio

import numpy as np
import pytest

kserve = pytest.importorskip("kserve", reason="KServe's SDK (pip install kserve) is not installed")
httpx = pytest.importorskip("httpx")
from kserve.protocol.rest.v2_datamodels import (  # noqa: E402
    ModelMetadataResponse, ServerMetadataResponse)

from grpc_support import assert_clean_stop, start_with_grpc  # noqa: E402

IN0 = np.arange(16, dtype=np.int32).reshape(1, 16)
IN1 = np.full((1, 16), 3, dtype=np.int32)


@pytest.fixture(scope="module")
def server():
    s = start_with_grpc("--threads", "2")
    yield s
    assert_clean_stop(s)


def run(coroutine):
    return asyncio.run(coroutine)


def simple_request(as_numpy):
    inputs = []
    for name, value in (("INPUT0", IN0), ("INPUT1", IN1)):
        x = kserve.InferInput(name, list(value.shape), "INT32")
        if as_numpy:
            x.set_data_from_numpy(value, binary_data=True)
        else:
            x = kserve.InferInput(name, list(value.shape), "INT32", data=value.ravel().tolist())
        inputs.append(x)
    return kserve.InferRequest(model_name="simple", infer_inputs=inputs, request_id="kserve-1")


def outputs(response):
    return {o.name: o.as_numpy() for o in response.outputs}


def assert_simple(response):
    out = outputs(response)
    np.testing.assert_array_equal(out["OUTPUT0"].reshape(1, 16), IN0 + IN1)
    np.testing.assert_array_equal(out["OUTPUT1"].reshape(1, 16), IN0 - IN1)


async def rest_calls(base, as_numpy):
    client = kserve.InferenceRESTClient(kserve.RESTConfig(protocol="v2", retries=0))
    try:
        return (await client.is_server_live(base), await client.is_server_ready(base),
                await client.is_model_ready(base, "simple"),
                await client.is_model_ready(base, "no_such_model"),
                await client.infer(base, simple_request(as_numpy), model_name="simple"))
    finally:
        await client.close()


@pytest.mark.parametrize("as_numpy", [False, True], ids=["json", "binary"])
def test_rest_client_v2(server, as_numpy):
    live, ready, simple_ready, absent_ready, response = run(
        rest_calls(f"http://{server.url}", as_numpy))
    assert (live, ready, simple_ready, absent_ready) == (True, True, True, False)
    assert (response.model_name, response.id) == ("simple", "kserve-1")
    assert_simple(response)


def test_metadata_fits_the_sdks_data_models(server):
    """The SDK's REST client has no metadata call; the SDK's models of the
    protocol's answers read the server's."""
    meta = ServerMetadataResponse.model_validate(httpx.get(f"http://{server.url}/v2").json())
    assert "binary_tensor_data" in meta.extensions
    model = ModelMetadataResponse.model_validate(
        httpx.get(f"http://{server.url}/v2/models/simple").json())
    assert [(t.name, t.datatype, t.shape) for t in model.inputs] == [
        ("INPUT0", "INT32", [-1, 16]), ("INPUT1", "INT32", [-1, 16])]


async def grpc_calls(url, request):
    client = kserve.InferenceGRPCClient(url, retries=0)
    try:
        return (await client.is_server_live(), await client.is_server_ready(),
                await client.is_model_ready("simple"), await client.infer(request))
    finally:
        await client.close()


def test_grpc_client_sends_typed_contents(server):
    request = simple_request(as_numpy=False)
    sent = request.to_grpc()
    assert sent.inputs[0].contents.int_contents and not sent.raw_input_contents
    live, ready, simple_ready, response = run(grpc_calls(server.grpc_url, request))
    assert (live, ready, simple_ready) == (True, True, True)
    assert response.model_name == "simple"
    assert_simple(response)


def test_grpc_client_with_numpy_sends_raw_contents(server):
    request = simple_request(as_numpy=True)
    assert request.to_grpc().raw_input_contents
    assert_simple(run(grpc_calls(server.grpc_url, request))[3])
