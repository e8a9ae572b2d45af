"""The scenarios of Triton's own system shared-memory tests, driven by the
official client (tritonclient.http and tritonclient.utils.shared_memory)."""
import threading

import numpy as np
import pytest
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

IN0 = np.arange(16, dtype=np.int32).reshape(1, 16)
IN1 = np.full((1, 16), 3, dtype=np.int32)
NBYTES = IN0.nbytes  # 64


class Regions:
    """Four shm objects (two inputs, two outputs) created by the client,
    registered on demand, destroyed (unlinked) at the end."""

    def __init__(self, client, key):
        self.client = client
        self.handles = {}
        for name in ("input0", "input1", "output0", "output1"):
            self.handles[name] = shm.create_shared_memory_region(name, key(name), NBYTES)
        shm.set_shared_memory_region(self.handles["input0"], [IN0])
        shm.set_shared_memory_region(self.handles["input1"], [IN1])

    def register(self, *names):
        for name in names or self.handles:
            self.client.register_system_shared_memory(name, self.handles[name]._shm_key, NBYTES)

    def output(self, name):
        return shm.get_contents_as_numpy(self.handles[name], np.int32, [1, 16])

    def destroy(self):
        for handle in self.handles.values():
            shm.destroy_shared_memory_region(handle)


def shm_request(model="simple", client=None, regions=None):
    """Infer model with inputs and outputs in the four regions."""
    inputs = [httpclient.InferInput("INPUT0", [1, 16], "INT32"),
              httpclient.InferInput("INPUT1", [1, 16], "INT32")]
    inputs[0].set_shared_memory("input0", NBYTES)
    inputs[1].set_shared_memory("input1", NBYTES)
    outputs = [httpclient.InferRequestedOutput("OUTPUT0", binary_data=True),
               httpclient.InferRequestedOutput("OUTPUT1", binary_data=True)]
    outputs[0].set_shared_memory("output0", NBYTES)
    outputs[1].set_shared_memory("output1", NBYTES)
    return client.infer(model, inputs, outputs=outputs)


def assert_outputs(regions):
    np.testing.assert_array_equal(regions.output("output0"), IN0 + IN1)
    np.testing.assert_array_equal(regions.output("output1"), IN0 - IN1)


def status_by_name(client):
    return {r["name"]: r for r in client.get_system_shared_memory_status()}


@pytest.fixture
def client(server):
    c = httpclient.InferenceServerClient(server.url)
    yield c
    c.unregister_system_shared_memory()
    c.close()


@pytest.fixture
def regions(client, shm_key):
    r = Regions(client, shm_key)
    yield r
    r.destroy()


# ------------------------------------------------------------ basic lifecycle


def test_register_infer_read_back(client, regions):
    regions.register()
    result = shm_request(client=client, regions=regions)
    assert_outputs(regions)
    # As from Triton: no data and no parameters (the C++ client reads any
    # output "parameters" as binary data).
    assert set(result.get_output("OUTPUT0")) == {"name", "datatype", "shape"}
    assert all(r["in_use"] == 0 for r in client.get_system_shared_memory_status())


def test_shm_inputs_binary_outputs(client, regions):
    regions.register("input0", "input1")
    inputs = [httpclient.InferInput("INPUT0", [1, 16], "INT32"),
              httpclient.InferInput("INPUT1", [1, 16], "INT32")]
    inputs[0].set_shared_memory("input0", NBYTES)
    inputs[1].set_shared_memory("input1", NBYTES)
    result = client.infer("simple", inputs)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), IN0 + IN1)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), IN0 - IN1)


def test_numpy_inputs_binary_by_default(client):
    inputs = [httpclient.InferInput("INPUT0", [1, 16], "INT32"),
              httpclient.InferInput("INPUT1", [1, 16], "INT32")]
    inputs[0].set_data_from_numpy(IN0)
    inputs[1].set_data_from_numpy(IN1, binary_data=False)
    result = client.infer("simple", inputs)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), IN0 + IN1)


def test_reregister_existing_name(client, regions):
    regions.register("input0")
    with pytest.raises(InferenceServerException, match="shared memory region 'input0' already in manager"):
        regions.register("input0")
    assert list(status_by_name(client)) == ["input0"]


def test_unregister_before_register(client, regions):
    client.unregister_system_shared_memory("dummy_data")  # Triton answers success
    assert client.get_system_shared_memory_status() == []


def test_unregister_after_inference(client, regions):
    regions.register()
    shm_request(client=client, regions=regions)
    client.unregister_system_shared_memory("output0")
    assert sorted(status_by_name(client)) == ["input0", "input1", "output1"]
    with pytest.raises(InferenceServerException, match="Unable to find shared memory region: 'output0'"):
        shm_request(client=client, regions=regions)


def test_unregister_all(client, regions):
    regions.register()
    client.unregister_system_shared_memory()
    assert client.get_system_shared_memory_status() == []


# ------------------------------------------------------------ bounds and keys


def test_register_past_end_of_object(client, regions):
    key = regions.handles["input0"]._shm_key
    with pytest.raises(InferenceServerException, match="invalid args"):
        client.register_system_shared_memory("too_big", key, NBYTES + 1)
    with pytest.raises(InferenceServerException, match="invalid args"):
        client.register_system_shared_memory("too_far", key, 8, offset=NBYTES - 4)
    assert client.get_system_shared_memory_status() == []


def test_infer_offset_and_size_out_of_bounds(client, regions):
    regions.register()
    inputs = [httpclient.InferInput("INPUT0", [1, 16], "INT32"),
              httpclient.InferInput("INPUT1", [1, 16], "INT32")]
    inputs[1].set_shared_memory("input1", NBYTES)
    inputs[0].set_shared_memory("input0", NBYTES, offset=NBYTES)
    with pytest.raises(InferenceServerException, match="Invalid offset for shared memory region: 'input0'"):
        client.infer("simple", inputs)
    inputs[0].set_shared_memory("input0", NBYTES, offset=8)
    with pytest.raises(InferenceServerException, match="Invalid offset \\+ byte size"):
        client.infer("simple", inputs)


def test_integer_overflow_in_offset_plus_size(server_kind, client, regions):
    """offset + byte_size past 2**64: the C server reads all of
    uint64 and its registry's bounds check answers, as Triton's does; the
    Python server still refuses numbers beyond int64 while parsing. Within
    int64 the registry's bounds check answers on both."""
    regions.register()
    inputs = [httpclient.InferInput("INPUT0", [1, 16], "INT32"),
              httpclient.InferInput("INPUT1", [1, 16], "INT32")]
    inputs[1].set_shared_memory("input1", NBYTES)
    inputs[0].set_shared_memory("input0", NBYTES, offset=2**64 - 32)
    past_int64 = ("Invalid offset for shared memory region: 'input0'" if server_kind == "c"
                  else "too big integer")
    with pytest.raises(InferenceServerException, match=past_int64) as e:
        client.infer("simple", inputs)
    assert e.value.status() == "400"
    inputs[0].set_shared_memory("input0", NBYTES, offset=2**63 - 32)
    with pytest.raises(InferenceServerException, match="Invalid offset"):
        client.infer("simple", inputs)
    with pytest.raises(InferenceServerException, match="invalid args"):
        client.register_system_shared_memory("ovf", regions.handles["input0"]._shm_key,
                                             2**63 - 1, offset=2**63 - 1)
    assert sorted(status_by_name(client)) == ["input0", "input1", "output0", "output1"]


def test_invalid_and_reserved_keys(start_server, shm_key):
    server = start_server("--reserved-key-prefix", "triton_")
    client = httpclient.InferenceServerClient(server.url)
    handle = shm.create_shared_memory_region("r", "/triton_" + shm_key("reserved").lstrip("/"), 8)
    try:
        with pytest.raises(InferenceServerException, match="contains the reserved prefix 'triton_'"):
            client.register_system_shared_memory("r", handle._shm_key, 8)
        for bad in ("", "/", "///"):
            with pytest.raises(InferenceServerException, match="invalid shm key"):
                client.register_system_shared_memory("r", bad, 8)
        assert client.get_system_shared_memory_status() == []
    finally:
        shm.destroy_shared_memory_region(handle)
        client.close()


# ------------------------------------------ unregister while requests hold them


class SlowRequests:
    """n overlapping simple_delayed requests on their own connections."""

    def __init__(self, server, regions, n):
        self.errors, self.results = [], []
        self.threads = [threading.Thread(target=self._run, args=(server.url, regions))
                        for _ in range(n)]
        for t in self.threads:
            t.start()

    def _run(self, url, regions):
        c = httpclient.InferenceServerClient(url, network_timeout=30)
        try:
            self.results.append(shm_request("simple_delayed", client=c, regions=regions))
        except Exception as e:  # reported by join()
            self.errors.append(e)
        finally:
            c.close()

    def join(self):
        for t in self.threads:
            t.join(30)
        assert self.errors == []


def wait_in_use(server, client, name, n):
    server.wait_until(lambda: status_by_name(client).get(name, {}).get("in_use") == n,
                      what=f"{name} in use by {n}")


@pytest.mark.parametrize("n_requests", [1, 2])
def test_unregister_while_in_use_defer(start_server, shm_key, n_requests):
    server = start_server("--busy-policy", "defer", "--delay-ms", "1500")
    client = httpclient.InferenceServerClient(server.url)
    regions = Regions(client, shm_key)
    try:
        regions.register()
        slow = SlowRequests(server, regions, n_requests)
        wait_in_use(server, client, "input0", n_requests)
        client.unregister_system_shared_memory("input0")
        st = status_by_name(client)["input0"]
        assert (st["pending_unregister"], st["in_use"]) == (True, n_requests)
        client.unregister_system_shared_memory()  # all: the rest go pending too
        assert all(r["pending_unregister"] for r in client.get_system_shared_memory_status())
        slow.join()
        assert_outputs(regions)
        # The last releases removed them, once the responses were sent (a
        # moment after the client has them).
        server.wait_until(lambda: client.get_system_shared_memory_status() == [],
                          what="the pending regions removed")
        # ... and handed them to the library's reclaim thread, which unmaps them
        server.wait_until(lambda: server.shm_mappings(shm_key("")) == [], what="the unmapping")
    finally:
        regions.destroy()
        client.close()


@pytest.mark.parametrize("n_requests", [1, 2])
def test_unregister_while_in_use_detach(start_server, shm_key, n_requests):
    server = start_server("--busy-policy", "detach", "--delay-ms", "1500")
    client = httpclient.InferenceServerClient(server.url)
    regions = Regions(client, shm_key)
    try:
        regions.register()
        slow = SlowRequests(server, regions, n_requests)
        wait_in_use(server, client, "output0", n_requests)
        client.unregister_system_shared_memory("output0")
        assert "output0" not in status_by_name(client)  # the name is free at once
        with pytest.raises(InferenceServerException, match="Unable to find shared memory region: 'output0'"):
            shm_request(client=client, regions=regions)
        regions.register("output0")  # a new registration under the old name
        slow.join()
        assert_outputs(regions)  # the detached mapping stayed valid for the requests
        assert status_by_name(client)["output0"]["in_use"] == 0
        client.unregister_system_shared_memory()
        # The detached mapping's last release (a slow request's) handed it to
        # the library's reclaim thread (--reclaim background), which unmaps
        # it soon after, not before join returns.
        server.wait_until(lambda: server.shm_mappings(shm_key("")) == [], what="the unmapping")
    finally:
        regions.destroy()
        client.close()


@pytest.mark.parametrize("n_requests", [1, 2])
def test_unregister_while_in_use_refuse(start_server, shm_key, n_requests):
    server = start_server("--busy-policy", "refuse", "--delay-ms", "1500")
    client = httpclient.InferenceServerClient(server.url)
    regions = Regions(client, shm_key)
    try:
        regions.register()
        slow = SlowRequests(server, regions, n_requests)
        wait_in_use(server, client, "input1", n_requests)
        with pytest.raises(InferenceServerException) as e:
            client.unregister_system_shared_memory("input1")
        assert e.value.status() == "400"
        # Triton's words up to "in use by"; the 1.0 library counts the
        # references held (each slow request holds one on input1), not requests.
        references = f"{n_requests} reference{'s' if n_requests > 1 else ''}"
        assert (f"Cannot unregister shared memory region 'input1', it is currently in use by "
                f"{references} (views acquired and not yet released).") == e.value.message()
        with pytest.raises(InferenceServerException,
                           match="Failed to unregister the following system shared memory regions"):
            client.unregister_system_shared_memory()
        assert len(client.get_system_shared_memory_status()) == 4  # nothing was removed
        slow.join()
        assert_outputs(regions)
        # A request's references go once its response is sent, a moment
        # after the client has it.
        server.wait_until(lambda: all(r["in_use"] == 0 for r in status_by_name(client).values()),
                          what="the slow requests' references released")
        client.unregister_system_shared_memory()
        assert client.get_system_shared_memory_status() == []
        assert server.shm_mappings(shm_key("")) == []  # unregistering an idle region unmaps it
    finally:
        regions.destroy()
        client.close()


def test_shutdown_finishes_in_flight_request(start_server, shm_key):
    """SIGTERM during a slow request: the request completes with its
    results, then the server destroys the registry and exits with nothing
    mapped (the fixture checks the server's own leftover report)."""
    server = start_server("--delay-ms", "1500")
    client = httpclient.InferenceServerClient(server.url)
    regions = Regions(client, shm_key)
    try:
        regions.register()
        slow = SlowRequests(server, regions, 1)
        wait_in_use(server, client, "input0", 1)
        client.close()
        rc, err = server.stop()
        slow.join()
        assert rc == 0, err
        assert_outputs(regions)
    finally:
        regions.destroy()
