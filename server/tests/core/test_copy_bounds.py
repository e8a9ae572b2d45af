"""Shared memory is no way around the bounds on what a client
makes the server hold. A region's window is copied into the server only up
to --max-body-mb, a response (JSON text included) is refused before it is
built when it could pass that bound, and the mapped bytes of all regions are
bounded by default (--max-mapped-bytes 1 TiB), while a window past its
object still gets Triton's "invalid args", never the limit's answer.

Both servers: the Python one has the same flags and answers."""
import json
import os

import pytest

MIB = 1 << 20
SYS = "/v2/systemsharedmemory"


@pytest.fixture
def shm_object(shm_key):
    """Factory: a shm object of size bytes (sparse past `written`); unlinked after."""
    made = []

    def make(suffix, size, written=0):
        key = shm_key(suffix)
        fd = os.open("/dev/shm" + key, os.O_CREAT | os.O_RDWR, 0o600)
        os.ftruncate(fd, size)
        if written:
            os.pwrite(fd, b"\x01" * written, 0)
        os.close(fd)
        made.append(key)
        return key

    yield make
    for key in made:
        os.unlink("/dev/shm" + key)


def register(server, name, key, size, offset=0):
    return server.json("POST", f"{SYS}/region/{name}/register",
                       {"key": key, "offset": offset, "byte_size": size})


def identity_from_region(server, region, nbytes, outputs=None):
    """(status, the JSON error body, or None for an answer with data)."""
    body = {"inputs": [{"name": "INPUT0", "shape": [nbytes], "datatype": "UINT8",
                        "parameters": {"shared_memory_region": region,
                                       "shared_memory_byte_size": nbytes}}]}
    if outputs is not None:
        body["outputs"] = outputs
    status, _, data = server.request("POST", "/v2/models/identity/infer", body)
    return status, (json.loads(data) if status != 200 else None)


def test_input_copied_from_a_region_is_bounded(start_server, shm_object):
    server = start_server("--max-body-mb", "1")
    key = shm_object("copy_in", 4 * MIB, written=4 * MIB)
    assert register(server, "big", key, 4 * MIB) == (200, None)
    status, body = identity_from_region(server, "big", 2 * MIB,
                                        outputs=[{"name": "OUTPUT0",
                                                  "parameters": {"binary_data": True}}])
    assert status == 400, body
    assert body["error"] == (f"input 'INPUT0' takes {2 * MIB} bytes of shared memory region "
                             f"'big', more than this server copies for one tensor ({MIB}, "
                             "--max-body-mb)")
    # Within the bound the same region serves.
    status, _ = identity_from_region(server, "big", MIB // 2,
                                     outputs=[{"name": "OUTPUT0",
                                               "parameters": {"binary_data": True}}])
    assert status == 200


def test_json_response_is_refused_before_it_is_built(start_server, shm_object):
    server = start_server("--max-body-mb", "1")
    key = shm_object("json_out", MIB, written=MIB)
    assert register(server, "in", key, MIB) == (200, None)
    # 256 KiB of UINT8 as JSON could take 7 bytes a byte: past 1 MiB.
    status, body = identity_from_region(server, "in", 256 * 1024)
    assert status == 400, body
    assert body["error"] == (f"the response could take up to {7 * 256 * 1024} bytes, more than "
                             f"this server sends ({MIB}, --max-body-mb): ask for large outputs "
                             "in shared memory, or as binary data rather than JSON")
    # As binary data the same output fits.
    status, _ = identity_from_region(server, "in", 256 * 1024,
                                     outputs=[{"name": "OUTPUT0",
                                               "parameters": {"binary_data": True}}])
    assert status == 200


def test_mapped_bytes_are_bounded_by_default(start_server, shm_object):
    """Without the flag: 1 TiB of mappings at most. A sparse 768 GiB object
    maps once, not twice (it costs the client nothing to make)."""
    server = start_server()
    key = shm_object("sparse", 768 << 30)
    assert register(server, "a", key, 768 << 30) == (200, None)
    status, body = register(server, "b", key, 768 << 30)
    assert status == 429, body
    assert "would pass this registry's limit of 1099511627776" in body["error"]
    assert server.json("POST", f"{SYS}/region/a/unregister") == (200, None)


def test_window_past_its_object_is_invalid_args_above_the_limit(start_server, shm_object):
    """The object's own checks answer before any limit: Triton's words."""
    server = start_server("--max-mapped-bytes", "8192")
    key = shm_object("small", 4096, written=4096)
    status, body = register(server, "w", key, 1 << 41)
    assert status == 400, body
    assert body["error"].startswith("failed to register shared memory region 'w': invalid args")
