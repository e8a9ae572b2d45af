"""A client that registers a named shm object and then
truncates it must get a 400 naming its region, never kill the server
(SIGBUS) with every other client's requests. Over HTTP and gRPC, for an
input read from the region and an output written into it, while another
client's slow request runs beside it and succeeds.

Over HTTP, the same against the Python server (python/examples/fastapi_server),
whose shmreg.kserve reads and writes regions with guarded copies; gRPC is
the C server's only."""
import os
import threading

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

from grpc_support import start_grpc_server  # noqa: F401 (a fixture)

pytestmark = pytest.mark.servers("c")

IN0 = np.arange(16, dtype=np.int32).reshape(1, 16)
IN1 = np.full((1, 16), 5, dtype=np.int32)
NBYTES = IN0.nbytes
PROTOCOLS = {"http": httpclient, "grpc": grpcclient}


def url_of(server, protocol):
    return server.url if protocol == "http" else server.grpc_url


def simple_inputs(mod, region=None):
    """INPUT0 and INPUT1: from region (offsets 0 and 64) or as data."""
    inputs = [mod.InferInput("INPUT0", [1, 16], "INT32"), mod.InferInput("INPUT1", [1, 16], "INT32")]
    for i, (tensor, data) in enumerate(zip(inputs, (IN0, IN1))):
        if region:
            tensor.set_shared_memory(region, NBYTES, offset=i * NBYTES)
        else:
            tensor.set_data_from_numpy(data)
    return inputs


def honest_slow_request(mod, url, results):
    """Another tenant: simple_delayed with its data in the request."""
    client = mod.InferenceServerClient(url)
    try:
        result = client.infer("simple_delayed", simple_inputs(mod))
        results.append(result.as_numpy("OUTPUT0"))
    except Exception as e:  # checked by the test
        results.append(e)
    finally:
        client.close()


@pytest.fixture
def truncated(shm_key):
    """factory(client) -> a 4 KiB shm object registered as "victim" through
    client, then truncated to 0 bytes by its owner."""
    handles = []

    def make(client):
        handle = shm.create_shared_memory_region("victim", shm_key("victim"), 4096)
        handles.append(handle)
        shm.set_shared_memory_region(handle, [IN0, IN1])
        client.register_system_shared_memory("victim", handle._shm_key, 4096)
        fd = os.open("/dev/shm/" + handle._shm_key.lstrip("/"), os.O_RDWR)
        try:
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)
        return handle

    yield make
    for handle in handles:
        shm.destroy_shared_memory_region(handle)


def truncating_client_is_refused(server, mod, url, truncated, direction, expected):
    """A client truncates its region, then names it for an input or an
    output: `expected` (its status), while another client's slow request
    beside it succeeds, and the server goes on with nothing held."""
    client = mod.InferenceServerClient(url)
    honest = []
    other = threading.Thread(target=honest_slow_request, args=(mod, url, honest))
    try:
        other.start()
        truncated(client)
        if direction == "input":
            inputs, outputs = simple_inputs(mod, "victim"), None
        else:
            inputs = simple_inputs(mod)
            outputs = [mod.InferRequestedOutput("OUTPUT0"), mod.InferRequestedOutput("OUTPUT1")]
            outputs[0].set_shared_memory("victim", NBYTES, offset=0)
            outputs[1].set_shared_memory("victim", NBYTES, offset=NBYTES)
        with pytest.raises(InferenceServerException) as e:
            client.infer("simple", inputs, outputs=outputs)
        assert e.value.status() == expected, e.value.message()
        assert "'victim'" in e.value.message() and "truncated" in e.value.message()
        other.join(30)
        assert len(honest) == 1 and not isinstance(honest[0], Exception), honest
        np.testing.assert_array_equal(honest[0], IN0 + IN1)
        assert server.proc.poll() is None
        # The failed request released what it acquired, and the server goes on.
        status, regions = server.json("GET", "/v2/systemsharedmemory/status")
        assert status == 200 and [r["in_use"] for r in regions] == [0], regions
        assert client.is_server_live()
        client.unregister_system_shared_memory("victim")
    finally:
        other.join(30)
        client.close()


@pytest.mark.parametrize("direction", ["input", "output"])
@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_truncated_region_is_400_and_other_clients_go_on(start_grpc_server, truncated,
                                                         protocol, direction):
    server = start_grpc_server("--delay-ms", "1000", "--threads", "4")
    expected = "400" if protocol == "http" else "StatusCode.INVALID_ARGUMENT"
    truncating_client_is_refused(server, PROTOCOLS[protocol], url_of(server, protocol),
                                 truncated, direction, expected)


@pytest.mark.servers("c", "python")
@pytest.mark.parametrize("direction", ["input", "output"])
def test_truncated_region_over_http_on_every_server(start_server, truncated, direction):
    server = start_server("--delay-ms", "1000", "--threads", "4", "--allow-client-shm", "true")
    truncating_client_is_refused(server, httpclient, server.url, truncated, direction, "400")
