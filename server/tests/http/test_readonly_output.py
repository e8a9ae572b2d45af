"""An output placed in a region registered read-only is refused with 400
before the model runs, every reference is released, and the server goes on
serving; reading inputs from that region still works.

No HTTP request can register a region read-only (Triton's protocol has no
such flag, and the server adds none), so the server here is
shmreg-server-readonly-test, built next to the server: the server's
own HTTP server and request path over a registry in which the test's region
"ro" was registered with SHMREG_READONLY before it started listening
(server/tests/support/readonly_server.c)."""
import struct
from multiprocessing import shared_memory

import pytest

from server_process import Server, sibling_binary

IN0 = list(range(16))
IN1 = [3] * 16
SIZE = 256  # INPUT0 at 0, INPUT1 at 64, room for an output at 128 and 192


@pytest.fixture
def readonly(shm_key):
    """(server, SharedMemory, key): the client's object, registered read-only as "ro"."""
    key = shm_key("ro")
    mem = shared_memory.SharedMemory(name=key.lstrip("/"), create=True, size=SIZE)
    mem.buf[0:64] = struct.pack("<16i", *IN0)
    mem.buf[64:128] = struct.pack("<16i", *IN1)
    program = sibling_binary("shmreg-server-readonly-test")
    server = Server("--threads", "2", command=[program, "ro", key, str(SIZE)])
    yield server, mem, key
    rc, err = server.stop()
    mem.close()
    mem.unlink()
    assert rc == 0, f"the read-only test server exited {rc}:\n{err}"


def ro_input(name, offset):
    return {"name": name, "datatype": "INT32", "shape": [1, 16],
            "parameters": {"shared_memory_region": "ro", "shared_memory_offset": offset,
                           "shared_memory_byte_size": 64}}


def ro_output(name, offset):
    return {"name": name, "parameters": {"shared_memory_region": "ro",
                                         "shared_memory_offset": offset,
                                         "shared_memory_byte_size": 64}}


def status_of_ro(server):
    status, regions = server.json("GET", "/v2/systemsharedmemory/region/ro/status")
    assert status == 200, regions
    (region,) = regions
    return region


def test_the_region_is_registered_and_idle(readonly):
    server, _, key = readonly
    assert status_of_ro(server) == {"name": "ro", "key": key, "offset": 0,
                                    "byte_size": SIZE, "in_use": 0,
                                    "pending_unregister": False}


@pytest.mark.parametrize("inputs_in_ro", [True, False], ids=["inputs-in-ro", "json-inputs"])
def test_output_in_readonly_region_is_400_before_the_model_runs(readonly, inputs_in_ro):
    server, mem, _ = readonly
    inputs = ([ro_input("INPUT0", 0), ro_input("INPUT1", 64)] if inputs_in_ro else
              [{"name": "INPUT0", "datatype": "INT32", "shape": [1, 16], "data": IN0},
               {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16], "data": IN1}])
    # OUTPUT1 goes to the response: only OUTPUT0 names the read-only region.
    body = {"inputs": inputs,
            "outputs": [{"name": "OUTPUT1"}, ro_output("OUTPUT0", 128)]}
    before = bytes(mem.buf)
    status, answer = server.json("POST", "/v2/models/simple/infer", body)
    assert (status, answer) == (400, {
        "error": "output 'OUTPUT0' cannot be written to shared memory region 'ro': "
                 "it was registered read-only"})
    assert bytes(mem.buf) == before
    # Every reference the request took (two inputs and the output, or the
    # output alone) was released with the reply.
    assert status_of_ro(server)["in_use"] == 0
    assert server.request("GET", "/v2/health/live")[0] == 200


def test_reading_a_readonly_region_works_after_a_refusal(readonly):
    server, _, _ = readonly
    refused = {"inputs": [ro_input("INPUT0", 0), ro_input("INPUT1", 64)],
               "outputs": [ro_output("OUTPUT1", 192)]}
    assert server.json("POST", "/v2/models/simple/infer", refused)[0] == 400
    status, answer = server.json("POST", "/v2/models/simple/infer",
                                 {"inputs": refused["inputs"]})
    assert status == 200, answer
    out = {o["name"]: o["data"] for o in answer["outputs"]}
    assert out == {"OUTPUT0": [a + b for a, b in zip(IN0, IN1)],
                   "OUTPUT1": [a - b for a, b in zip(IN0, IN1)]}
    assert status_of_ro(server)["in_use"] == 0


def test_unregister_after_a_refusal_unmaps_at_once(readonly):
    server, _, key = readonly
    assert server.json("POST", "/v2/models/simple/infer", {
        "inputs": [ro_input("INPUT0", 0), ro_input("INPUT1", 64)],
        "outputs": [ro_output("OUTPUT0", 128)]})[0] == 400
    assert server.json("POST", "/v2/systemsharedmemory/region/ro/unregister") == (200, None)
    assert server.json("GET", "/v2/systemsharedmemory/status") == (200, [])
    assert server.shm_mappings(key.lstrip("/")) == []
