"""The scenarios of server/tests/http/test_tritonclient_shm.py (Triton's own
system shared-memory tests, through the official client), run over each
protocol: tritonclient.http against the HTTP port and tritonclient.grpc
against the gRPC port of one server. Where the two protocols answer a
failure differently (a status number, a gRPC code), each expectation names
both; the messages are the same.

Region status over gRPC comes from the server's own proto (grpc_support),
which carries the in_use and pending_unregister that tritonclient's does not.
"""
import os
import sys
import threading

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

from grpc_support import (  # noqa: F401 (start_grpc_server: a fixture)
    assert_clean_stop, region_status, start_grpc_server, start_with_grpc)
# The HTTP suite's data and regions (../http); its Regions takes either protocol's client.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "http"))
from test_tritonclient_shm import IN0, IN1, NBYTES, Regions, assert_outputs  # noqa: E402

PROTOCOLS = ["http", "grpc"]


class Side:
    """One protocol's view of a server: its tritonclient module and a client."""

    def __init__(self, protocol, server):
        self.protocol = protocol
        self.server = server
        self.mod = httpclient if protocol == "http" else grpcclient
        self.url = server.url if protocol == "http" else server.grpc_url
        self.client = self.new_client()

    def new_client(self):
        return self.mod.InferenceServerClient(self.url)

    def status(self):
        """{name: {"in_use", "pending_unregister", ...}} of the system regions."""
        if self.protocol == "http":
            return {r["name"]: r for r in self.client.get_system_shared_memory_status()}
        return {name: {"name": r.name, "key": r.key, "offset": r.offset, "byte_size": r.byte_size,
                       "in_use": r.in_use, "pending_unregister": r.pending_unregister}
                for name, r in region_status(self.url).items()}

    def code(self, http, grpc):
        """What InferenceServerException.status() says for this protocol."""
        return str(http) if self.protocol == "http" else f"StatusCode.{grpc}"

    def close(self):
        self.client.close()


def simple_inputs(mod):
    return [mod.InferInput("INPUT0", [1, 16], "INT32"), mod.InferInput("INPUT1", [1, 16], "INT32")]


def shm_request(side, model="simple", client=None):
    """Infer model with inputs and outputs in the four regions."""
    mod = side.mod
    inputs = simple_inputs(mod)
    inputs[0].set_shared_memory("input0", NBYTES)
    inputs[1].set_shared_memory("input1", NBYTES)
    outputs = [mod.InferRequestedOutput("OUTPUT0"), mod.InferRequestedOutput("OUTPUT1")]
    outputs[0].set_shared_memory("output0", NBYTES)
    outputs[1].set_shared_memory("output1", NBYTES)
    return (client or side.client).infer(model, inputs, outputs=outputs)


@pytest.fixture(scope="module")
def grpc_server():
    """A server serving both protocols, shared by the module."""
    s = start_with_grpc("--delay-ms", "1500", "--threads", "4")
    yield s
    assert_clean_stop(s)


@pytest.fixture(params=PROTOCOLS)
def protocol(request):
    return request.param


@pytest.fixture
def side(grpc_server, protocol):
    s = Side(protocol, grpc_server)
    yield s
    s.client.unregister_system_shared_memory()
    s.close()


@pytest.fixture
def regions(side, shm_key):
    r = Regions(side.client, shm_key)
    yield r
    r.destroy()


@pytest.fixture
def own_server(start_grpc_server, protocol, shm_key):  # noqa: F811
    """Factory: a server of its own with these options, its Side and its
    Regions; the client and regions are closed and destroyed afterwards."""
    made = []

    def make(*args):
        side = Side(protocol, start_grpc_server(*args))
        regions = Regions(side.client, shm_key)
        made.append((side, regions))
        return side, regions

    yield make
    for side, regions in made:
        regions.destroy()
        side.close()


# ------------------------------------------------------------ basic lifecycle


def test_register_infer_read_back(side, regions):
    regions.register()
    result = shm_request(side)
    assert_outputs(regions)
    if side.protocol == "http":
        # As from Triton: no data and no parameters (the C++ client reads any
        # output "parameters" as binary data).
        assert set(result.get_output("OUTPUT0")) == {"name", "datatype", "shape"}
    else:
        # As from Triton: every output listed, each with an empty raw entry.
        response = result.get_response()
        assert [o.name for o in response.outputs] == ["OUTPUT0", "OUTPUT1"]
        assert list(response.raw_output_contents) == [b"", b""]
        assert not response.outputs[0].parameters
    wait_released(side)


def test_shm_inputs_binary_outputs(side, regions):
    regions.register("input0", "input1")
    inputs = simple_inputs(side.mod)
    inputs[0].set_shared_memory("input0", NBYTES)
    inputs[1].set_shared_memory("input1", NBYTES)
    result = side.client.infer("simple", inputs)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), IN0 + IN1)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), IN0 - IN1)


def test_numpy_inputs(side):
    inputs = simple_inputs(side.mod)
    inputs[0].set_data_from_numpy(IN0)
    inputs[1].set_data_from_numpy(IN1)
    result = side.client.infer("simple", inputs)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), IN0 + IN1)


def test_reregister_existing_name(side, regions):
    regions.register("input0")
    with pytest.raises(InferenceServerException,
                       match="shared memory region 'input0' already in manager") as e:
        regions.register("input0")
    assert e.value.status() == side.code(400, "ALREADY_EXISTS")
    assert list(side.status()) == ["input0"]


def test_unregister_before_register(side, regions):
    side.client.unregister_system_shared_memory("dummy_data")  # Triton answers success
    assert side.status() == {}


def test_unregister_after_inference(side, regions):
    regions.register()
    shm_request(side)
    side.client.unregister_system_shared_memory("output0")
    assert sorted(side.status()) == ["input0", "input1", "output1"]
    with pytest.raises(InferenceServerException,
                       match="Unable to find shared memory region: 'output0'") as e:
        shm_request(side)
    assert e.value.status() == side.code(404, "NOT_FOUND")


def test_unregister_all(side, regions):
    regions.register()
    side.client.unregister_system_shared_memory()
    assert side.status() == {}


def test_status_of_unknown_name(side):
    with pytest.raises(InferenceServerException,
                       match="Unable to find system shared memory region: 'nope'") as e:
        side.client.get_system_shared_memory_status("nope")
    assert e.value.status() == side.code(404, "NOT_FOUND")


# ------------------------------------------------------------ bounds and keys


def test_register_past_end_of_object(side, regions):
    key = regions.handles["input0"]._shm_key
    for size, offset in ((NBYTES + 1, 0), (8, NBYTES - 4)):
        with pytest.raises(InferenceServerException, match="invalid args") as e:
            side.client.register_system_shared_memory("too_big", key, size, offset=offset)
        assert e.value.status() == side.code(400, "INVALID_ARGUMENT")
    assert side.status() == {}


def test_infer_offset_and_size_out_of_bounds(side, regions):
    regions.register()
    inputs = simple_inputs(side.mod)
    inputs[1].set_shared_memory("input1", NBYTES)
    inputs[0].set_shared_memory("input0", NBYTES, offset=NBYTES)
    with pytest.raises(InferenceServerException,
                       match="Invalid offset for shared memory region: 'input0'") as e:
        side.client.infer("simple", inputs)
    assert e.value.status() == side.code(400, "INVALID_ARGUMENT")
    inputs[0].set_shared_memory("input0", NBYTES, offset=8)
    with pytest.raises(InferenceServerException, match="Invalid offset \\+ byte size"):
        side.client.infer("simple", inputs)


def test_large_offsets_reach_the_bounds_checks(side, regions):
    """Within int64 on both protocols (HTTP's JSON beyond that is section 3's
    parser work; gRPC's full uint64 range is in test_grpc.py)."""
    regions.register()
    inputs = simple_inputs(side.mod)
    inputs[1].set_shared_memory("input1", NBYTES)
    inputs[0].set_shared_memory("input0", NBYTES, offset=2**63 - 32)
    with pytest.raises(InferenceServerException, match="Invalid offset"):
        side.client.infer("simple", inputs)
    with pytest.raises(InferenceServerException, match="invalid args"):
        side.client.register_system_shared_memory("ovf", regions.handles["input0"]._shm_key,
                                                  2**63 - 1, offset=2**63 - 1)
    assert sorted(side.status()) == ["input0", "input1", "output0", "output1"]


def test_invalid_and_reserved_keys(own_server, shm_key):
    side, _ = own_server("--reserved-key-prefix", "triton_")
    handle = shm.create_shared_memory_region("r", "/triton_" + shm_key("reserved").lstrip("/"), 8)
    try:
        with pytest.raises(InferenceServerException,
                           match="contains the reserved prefix 'triton_'") as e:
            side.client.register_system_shared_memory("r", handle._shm_key, 8)
        assert e.value.status() == side.code(400, "INVALID_ARGUMENT")
        for bad in ("", "/", "///"):
            with pytest.raises(InferenceServerException, match="invalid shm key"):
                side.client.register_system_shared_memory("r", bad, 8)
        assert side.status() == {}
    finally:
        shm.destroy_shared_memory_region(handle)


# ------------------------------------------ unregister while requests hold them


class SlowRequests:
    """n overlapping simple_delayed requests, each on its own client."""

    def __init__(self, side, n):
        self.errors, self.results = [], []
        self.threads = [threading.Thread(target=self._run, args=(side,)) for _ in range(n)]
        for t in self.threads:
            t.start()

    def _run(self, side):
        c = side.new_client()
        try:
            self.results.append(shm_request(side, "simple_delayed", client=c))
        except Exception as e:  # reported by join()
            self.errors.append(e)
        finally:
            c.close()

    def join(self):
        for t in self.threads:
            t.join(30)
        assert self.errors == []


def wait_in_use(side, name, n):
    side.server.wait_until(lambda: side.status().get(name, {}).get("in_use") == n,
                           what=f"{name} in use by {n}")


def wait_unmapped(side, shm_key):
    """The reclaim thread unmaps what the last releases handed over: wait
    until no mapping of this test's objects is left, bounded."""
    side.server.wait_until(lambda: side.server.shm_mappings(shm_key("")) == [],
                           what="the unmapping")


def wait_released(side):
    """A request's references are released once its response has been sent,
    which a client may see a moment before the server's release runs (over
    gRPC the release follows the call's completion): wait for it, bounded."""
    side.server.wait_until(lambda: all(r["in_use"] == 0 for r in side.status().values()),
                           what="every reference released")


@pytest.mark.parametrize("n_requests", [1, 2])
def test_unregister_while_in_use_defer(own_server, shm_key, n_requests):
    side, regions = own_server("--busy-policy", "defer", "--delay-ms", "1500")
    regions.register()
    slow = SlowRequests(side, n_requests)
    wait_in_use(side, "input0", n_requests)
    side.client.unregister_system_shared_memory("input0")
    st = side.status()["input0"]
    assert (st["pending_unregister"], st["in_use"]) == (True, n_requests)
    side.client.unregister_system_shared_memory()  # all: the rest go pending too
    assert all(r["pending_unregister"] for r in side.status().values())
    slow.join()
    wait_released(side)
    assert_outputs(regions)
    assert side.status() == {}  # the last release removed them
    wait_unmapped(side, shm_key)


@pytest.mark.parametrize("n_requests", [1, 2])
def test_unregister_while_in_use_detach(own_server, shm_key, n_requests):
    side, regions = own_server("--busy-policy", "detach", "--delay-ms", "1500")
    regions.register()
    slow = SlowRequests(side, n_requests)
    wait_in_use(side, "output0", n_requests)
    side.client.unregister_system_shared_memory("output0")
    assert "output0" not in side.status()  # the name is free at once
    with pytest.raises(InferenceServerException,
                       match="Unable to find shared memory region: 'output0'"):
        shm_request(side)
    regions.register("output0")  # a new registration under the old name
    slow.join()
    wait_released(side)
    assert_outputs(regions)  # the detached mapping stayed valid for the requests
    assert side.status()["output0"]["in_use"] == 0
    side.client.unregister_system_shared_memory()
    wait_unmapped(side, shm_key)


@pytest.mark.parametrize("n_requests", [1, 2])
def test_unregister_while_in_use_refuse(own_server, shm_key, n_requests):
    side, regions = own_server("--busy-policy", "refuse", "--delay-ms", "1500")
    regions.register()
    slow = SlowRequests(side, n_requests)
    wait_in_use(side, "input1", n_requests)
    with pytest.raises(InferenceServerException) as e:
        side.client.unregister_system_shared_memory("input1")
    # HTTP: 400, this server's choice; gRPC: INTERNAL, the code Triton gave
    # its own refusal ("it is currently in use") when it refused.
    assert e.value.status() == side.code(400, "INTERNAL")
    references = f"{n_requests} reference{'s' if n_requests > 1 else ''}"
    assert (f"Cannot unregister shared memory region 'input1', it is currently in use by "
            f"{references} (views acquired and not yet released).") == e.value.message()
    with pytest.raises(InferenceServerException,
                       match="Failed to unregister the following system shared memory regions"):
        side.client.unregister_system_shared_memory()
    assert len(side.status()) == 4  # nothing was removed
    slow.join()
    wait_released(side)
    assert_outputs(regions)
    side.client.unregister_system_shared_memory()
    assert side.status() == {}
    wait_unmapped(side, shm_key)


def test_shutdown_finishes_in_flight_request(own_server):
    """SIGTERM during a slow request: the request completes with its
    results, then the server destroys the registry and exits with nothing
    mapped (the fixture checks the server's own leftover report)."""
    side, regions = own_server("--delay-ms", "1500")
    regions.register()
    slow = SlowRequests(side, 1)
    wait_in_use(side, "input0", 1)
    rc, err = side.server.stop()
    slow.join()
    assert rc == 0, err
    assert_outputs(regions)
