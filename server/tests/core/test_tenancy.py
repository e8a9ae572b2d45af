"""The C server as a multi-tenant server, over HTTP and
gRPC: the flags of the library's protections (--allow-uid, --max-regions,
--max-mapped-bytes, --max-pinned-bytes), Triton's --http-restricted-api and
--grpc-restricted-protocol, and --tenants, with two tenants trying to list,
read, write, unregister and probe each other's regions.

Every refusal is checked for its status and message and for changing
nothing. A test here fails on a server without the feature it names: the
flags are refused at start, or the other tenant's region is seen.
"""
import http.client
import json
import os
import struct
import subprocess
from multiprocessing import shared_memory

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from server_process import binary
from grpc_support import start_grpc_server  # noqa: F401 (a fixture)

# The flags are the C server's (python/examples/fastapi_server has none of them).
pytestmark = pytest.mark.servers("c")

NBYTES = 64  # one [1, 16] INT32 tensor
ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdefghij"
ALICE_SECOND = "alice-second-token-0123456789"
NOBODY = 65534
SYS = "/v2/systemsharedmemory"

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown of a shm object needs root")


def bearer(token):
    return {"Authorization": f"Bearer {token}"}


def grpc_bearer(token):
    return {"authorization": f"Bearer {token}"}


@pytest.fixture
def shm(shm_key):
    """make(suffix, values=None, size=4*NBYTES) -> key of a new shm object
    holding values (INT32) at its start; unlinked afterwards."""
    created = []

    def make(suffix, values=None, size=4 * NBYTES):
        key = shm_key(suffix)
        mem = shared_memory.SharedMemory(name=key.lstrip("/"), create=True, size=size)
        created.append(mem)
        if values is not None:
            mem.buf[:4 * len(values)] = struct.pack(f"<{len(values)}i", *values)
        return key

    yield make
    for mem in created:
        mem.close()
        mem.unlink()


def register(server, name, key, size=4 * NBYTES, headers=None):
    return server.json("POST", f"{SYS}/region/{name}/register",
                       {"key": key, "offset": 0, "byte_size": size}, headers)


def status(server, name=None, headers=None):
    path = f"{SYS}/region/{name}/status" if name else f"{SYS}/status"
    return server.json("GET", path, None, headers)


def unregister(server, name=None, headers=None):
    path = f"{SYS}/region/{name}/unregister" if name else f"{SYS}/unregister"
    return server.json("POST", path, None, headers)


def infer_from(server, region, headers=None):
    """simple on INPUT0, INPUT1 at offsets 0 and 64 of region; OUTPUT0
    (the sum) in the JSON reply. (status, body)."""
    def shm_input(name, offset):
        return {"name": name, "datatype": "INT32", "shape": [1, 16],
                "parameters": {"shared_memory_region": region, "shared_memory_offset": offset,
                               "shared_memory_byte_size": NBYTES}}
    body = {"inputs": [shm_input("INPUT0", 0), shm_input("INPUT1", NBYTES)],
            "outputs": [{"name": "OUTPUT0"}]}
    return server.json("POST", "/v2/models/simple/infer", body, headers)


def infer_into(server, region, headers=None):
    """simple with its inputs in the request, OUTPUT0 written to offset
    2 * 64 of region. (status, body)."""
    body = {"inputs": [{"name": n, "datatype": "INT32", "shape": [1, 16], "data": [-1] * 16}
                       for n in ("INPUT0", "INPUT1")],
            "outputs": [{"name": "OUTPUT0", "parameters": {
                "shared_memory_region": region, "shared_memory_offset": 2 * NBYTES,
                "shared_memory_byte_size": NBYTES}}]}
    return server.json("POST", "/v2/models/simple/infer", body, headers)


def sum_of(reply):
    status, body = reply
    assert status == 200, body
    return body["outputs"][0]["data"]


def listing(server, headers):
    """[(name, key)] of every system region the caller sees, sorted."""
    status_code, regions = status(server, headers=headers)
    assert status_code == 200, regions
    return sorted((r["name"], r["key"]) for r in regions)


def grpc_raises(code, fn, *args, **kwargs):
    """fn fails with this gRPC code; returns its message."""
    with pytest.raises(InferenceServerException) as e:
        fn(*args, **kwargs)
    assert e.value.status() == f"StatusCode.{code}", e.value.message()
    return e.value.message()


def grpc_infer(client, region, headers=None):
    inputs = [grpcclient.InferInput("INPUT0", [1, 16], "INT32"),
              grpcclient.InferInput("INPUT1", [1, 16], "INT32")]
    inputs[0].set_shared_memory(region, NBYTES, offset=0)
    inputs[1].set_shared_memory(region, NBYTES, offset=NBYTES)
    result = client.infer("simple", inputs, outputs=[grpcclient.InferRequestedOutput("OUTPUT0")],
                          headers=headers)
    return result.as_numpy("OUTPUT0").reshape(-1).tolist()


def grpc_infer_into(client, region, headers=None):
    inputs = [grpcclient.InferInput(n, [1, 16], "INT32") for n in ("INPUT0", "INPUT1")]
    for i in inputs:
        i.set_data_from_numpy(np.full((1, 16), -1, dtype=np.int32))
    output = grpcclient.InferRequestedOutput("OUTPUT0")
    output.set_shared_memory(region, NBYTES, offset=2 * NBYTES)
    client.infer("simple", inputs, outputs=[output], headers=headers)


def start_refused(*args):
    """The server with args exits 2 at start: its stderr."""
    proc = subprocess.run([binary(), "--port", "0", *args], capture_output=True, text=True,
                          timeout=20)
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    return proc.stderr


def tenants_file(tmp_path, text, mode=0o600):
    path = tmp_path / "tenants"
    path.write_text(text)
    path.chmod(mode)
    return str(path)


TWO_TENANTS = f"# token tenant\n{ALICE} alice\n\n{BOB}\tbob\n{ALICE_SECOND} alice\n"


# ------------------------------------------------------------ bad flags


@pytest.mark.parametrize("args, message", [
    (["--http-restricted-api", "shared-memory"],
     "--http-restricted-api wants <apis>:<key>=<value>"),
    (["--http-restricted-api", "shared-memory:key="], "wants <apis>:<key>=<value>"),
    (["--http-restricted-api", "bogus:k=v"], "unknown restricted api 'bogus'"),
    (["--http-restricted-api", "health,shared-memory:k=v"],
     "restricted api 'health' is not one this server can restrict (only shared-memory)"),
    (["--http-restricted-api", "shared-memory:k=v", "--http-restricted-api", "shared-memory:j=w"],
     "restricted api 'shared-memory' can not be specified in multiple config groups"),
    (["--http-restricted-api", "shared-memory:bad key=v"], "is not an HTTP header name"),
    (["--grpc-restricted-protocol", "shared-memory:Admin=v"], "must be lower case letters"),
    (["--grpc-restricted-protocol", "model-repository:k=v"],
     "restricted protocol 'model-repository' is not one this server can restrict"),
    (["--allow-uid", "-1"], "--allow-uid wants an integer in [0, 4294967294], got '-1'"),
    (["--allow-uid", "root"], "--allow-uid wants an integer"),
    (["--allow-uid", "any", "--allow-uid", "0"], "--allow-uid any cannot be combined"),
    (["--max-regions", "-3"], "--max-regions wants an integer"),
    (["--max-mapped-bytes", "1G"], "--max-mapped-bytes wants an integer"),
    (["--max-pinned-bytes", ""], "--max-pinned-bytes wants an integer"),
    (["--tenants", "/nonexistent/tenants"], "--tenants /nonexistent/tenants: No such file"),
])
def test_bad_flags_are_refused_at_start(args, message):
    assert message in start_refused(*args)


@pytest.mark.parametrize("text, mode, message", [
    (TWO_TENANTS, 0o644, "other users can read it (mode 0644); it holds secrets: chmod o-rwx"),
    (TWO_TENANTS, 0o602, "other users can write it (mode 0602)"),
    ("# nobody\n\n", 0o600, "no tenant in the file"),
    ("short alice\n", 0o600, ":1: a token must be 16..512 characters"),
    (f"{ALICE}\n", 0o600, ":1: want TOKEN TENANT, then optionally max-regions=N"),
    (f"{ALICE} alice extra\n", 0o600,
     ":1: 'extra': after TOKEN TENANT only max-regions=N, max-mapped-bytes=N and max-pinned-bytes=N"),
    (f"{ALICE} alice max-regions=x\n", 0o600, ":1: 'max-regions=x': after TOKEN TENANT only"),
    (f"{ALICE} alice max-regions=\n", 0o600, ":1: 'max-regions=': after TOKEN TENANT only"),
    (f"{ALICE} alice max-regions=2\n{ALICE_SECOND} alice max-regions=3\n", 0o600,
     ":2: tenant alice's quota differs from its line above"),
    (f"{ALICE} al/ice\n", 0o600, ":1: a tenant name must be 1..64 characters"),
    (f"{ALICE} {'a' * 65}\n", 0o600, ":1: a tenant name must be"),
    (f"{ALICE} alice\n{ALICE} bob\n", 0o600, ":2: this token is already given to a tenant above"),
    (f"{ALICE}\x01 alice\n", 0o600, ":1: a token must be"),
])
def test_bad_tenants_file_is_refused_at_start(tmp_path, text, mode, message):
    assert message in start_refused("--tenants", tenants_file(tmp_path, text, mode))


@pytest.mark.parametrize("text, args, message", [
    (f"{ALICE} alice max-regions=3000\n{BOB} bob max-regions=2000\n", [],
     "the tenants' own max-regions add up to more than --max-regions 4096"),
    (f"{ALICE} alice max-mapped-bytes=0\n", ["--max-mapped-bytes", "100"],
     "the tenants' own max-mapped-bytes add up to more than --max-mapped-bytes 100 (or one is 0"),
    (f"{ALICE} alice max-regions=4096\n{BOB} bob\n", [],
     "--max-regions 4096 leaves no share for the 1 tenants without their own max-regions"),
])
def test_tenant_quotas_that_cannot_fit_the_limits_are_refused_at_start(tmp_path, text, args, message):
    """The quotas together must fit the global limits, or one
    tenant could still make another's registration fail."""
    assert message in start_refused("--tenants", tenants_file(tmp_path, text), *args)


def test_tenants_file_that_is_a_directory_is_refused(tmp_path):
    assert "not a regular file" in start_refused("--tenants", str(tmp_path))


# ------------------------------------------------- owner allow-list and limits


@needs_root
def test_allow_uid_defaults_to_the_servers_own_uid(start_grpc_server, shm):
    server = start_grpc_server()
    theirs = shm("other_owner")
    os.chown(f"/dev/shm/{theirs.lstrip('/')}", NOBODY, -1)
    status_code, body = register(server, "theirs", theirs)
    assert status_code == 400, body
    assert body["error"] == (f"cannot register shared memory region 'theirs': shm key '{theirs}' "
                             f"is owned by uid {NOBODY}, which this registry does not accept")
    client = grpcclient.InferenceServerClient(server.grpc_url)
    message = grpc_raises("INVALID_ARGUMENT", client.register_system_shared_memory, "theirs",
                          theirs, 4 * NBYTES)
    assert f"is owned by uid {NOBODY}" in message
    assert status(server) == (200, [])  # the refusal changed nothing
    assert register(server, "mine", shm("own_owner")) == (200, None)
    assert unregister(server) == (200, None)
    client.close()


@needs_root
def test_allow_uid_list_and_any(start_server, shm):
    listed = start_server("--allow-uid", str(NOBODY))
    theirs, mine = shm("listed_owner"), shm("root_owner")
    os.chown(f"/dev/shm/{theirs.lstrip('/')}", NOBODY, -1)
    assert register(listed, "theirs", theirs) == (200, None)
    # An explicit list is the whole list: the server's own objects are out.
    status_code, body = register(listed, "mine", mine)
    assert status_code == 400 and "is owned by uid 0, which this registry" in body["error"]
    anyone = start_server("--allow-uid", "any")
    assert register(anyone, "theirs", theirs) == (200, None)
    assert register(anyone, "mine", mine) == (200, None)
    for server in (listed, anyone):
        assert unregister(server) == (200, None)


def test_max_regions(start_grpc_server, shm):
    server = start_grpc_server("--max-regions", "2")
    key = shm("limit_regions")
    assert register(server, "r1", key) == (200, None)
    assert register(server, "r2", key) == (200, None)
    refused = (429, {"error": "cannot register shared memory region 'r3': this registry holds its "
                              "limit of 2 regions"})
    assert register(server, "r3", key) == refused
    client = grpcclient.InferenceServerClient(server.grpc_url)
    message = grpc_raises("RESOURCE_EXHAUSTED", client.register_system_shared_memory, "r3", key,
                          4 * NBYTES)
    assert message == refused[1]["error"]
    assert sorted(r["name"] for r in status(server)[1]) == ["r1", "r2"]
    assert unregister(server, "r1") == (200, None)
    assert register(server, "r3", key) == (200, None)  # room again
    assert unregister(server) == (200, None)
    client.close()


def test_max_mapped_bytes(start_server, shm):
    server = start_server("--max-mapped-bytes", "8192")
    key = shm("limit_bytes", size=8192)
    assert register(server, "a", key, size=4096) == (200, None)
    assert register(server, "b", key, size=8192) == (429, {
        "error": "cannot register shared memory region 'b': 8192 more mapped bytes would pass "
                 "this registry's limit of 8192 (4096 in use)"})
    assert register(server, "b", key, size=4096) == (200, None)
    assert unregister(server) == (200, None)


def test_default_limits_are_in_force(start_server, shm):
    """No flag: 4096 regions at most (the 4097th is refused)."""
    server = start_server()
    key = shm("default_limit")
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)  # one, kept alive
    for i in range(4096):
        conn.request("POST", f"{SYS}/region/d{i}/register",
                     json.dumps({"key": key, "byte_size": 4 * NBYTES}))
        response = conn.getresponse()
        assert response.status == 200, response.read()
        response.read()
    conn.close()
    status_code, body = register(server, "d4096", key)
    assert (status_code, body["error"]) == (429, "cannot register shared memory region 'd4096': "
                                                 "this registry holds its limit of 4096 regions")
    assert unregister(server) == (200, None)


def test_max_pinned_bytes(start_server, shm):
    """--pin always with a pinned-bytes limit: a registration past it is
    refused. Pinning needs a usable CUDA device; without one the server
    answers 501 to any pinning demand, and the limit cannot be reached."""
    server = start_server("--pin", "always", "--max-pinned-bytes", "4096")
    key = shm("limit_pinned", size=8192)
    status_code, body = register(server, "small", key, size=4096)
    if status_code == 501:
        pytest.skip(f"no pinning here: {body['error']}")
    assert status_code == 200, body
    status_code, body = register(server, "big", key, size=8192)
    assert status_code == 429 and "pinned bytes would pass this registry's limit of 4096" in body[
        "error"], body
    assert unregister(server) == (200, None)


# ------------------------------------------------ Triton's restricted API


def test_http_restricted_api(start_grpc_server, shm):
    server = start_grpc_server("--http-restricted-api", "shared-memory:admin-key=s3cret")
    key = shm("restricted", list(range(16)) + [2] * 16)
    refused = (403, {"error": "This API is restricted, expecting header 'admin-key'"})
    for headers in (None, {"admin-key": "wrong"}, {"admin-key": "s3cret "}, {"other": "s3cret"}):
        assert register(server, "r", key, headers=headers) == refused
        assert status(server, headers=headers) == refused
        assert status(server, "r", headers=headers) == refused
        assert unregister(server, "r", headers=headers) == refused
        assert unregister(server, headers=headers) == refused
    ok = {"Admin-Key": "s3cret"}  # header names are case-insensitive
    assert status(server, headers=ok) == (200, [])  # the refusals registered nothing
    assert register(server, "r", key, headers=ok) == (200, None)
    # Only the shared-memory endpoints are restricted, as in Triton.
    assert sum_of(infer_from(server, "r")) == [i + 2 for i in range(16)]
    assert server.request("GET", "/v2/health/ready")[0] == 200
    # gRPC is --grpc-restricted-protocol's: not restricted here.
    client = grpcclient.InferenceServerClient(server.grpc_url)
    assert "r" in client.get_system_shared_memory_status(as_json=True)["regions"]
    assert unregister(server, "r", headers={"admin-key": "wrong"}) == refused
    assert unregister(server, "r", headers=ok) == (200, None)
    client.close()


def test_grpc_restricted_protocol(start_grpc_server, shm):
    server = start_grpc_server("--grpc-restricted-protocol", "shared-memory:admin-key=s3cret")
    key = shm("grpc_restricted", list(range(16)) + [5] * 16)
    client = grpcclient.InferenceServerClient(server.grpc_url)
    refusal = "This protocol is restricted, expecting header 'triton-grpc-protocol-admin-key'"
    for headers in (None, {"triton-grpc-protocol-admin-key": "nope"}, {"admin-key": "s3cret"}):
        calls = [(client.register_system_shared_memory, ("r", key, 4 * NBYTES)),
                 (client.get_system_shared_memory_status, ()),
                 (client.unregister_system_shared_memory, ("r",)),
                 (client.unregister_system_shared_memory, ()),
                 (client.get_cuda_shared_memory_status, ()),
                 (client.unregister_cuda_shared_memory, ())]
        for fn, args in calls:
            assert grpc_raises("UNAVAILABLE", fn, *args, headers=headers) == refusal
    ok = {"triton-grpc-protocol-admin-key": "s3cret"}
    assert client.get_system_shared_memory_status(headers=ok, as_json=True) == {}
    client.register_system_shared_memory("r", key, 4 * NBYTES, headers=ok)
    assert grpc_infer(client, "r") == [i + 5 for i in range(16)]  # inference is not restricted
    assert status(server)[0] == 200  # HTTP is --http-restricted-api's
    client.unregister_system_shared_memory("r", headers=ok)
    client.close()


# ---------------------------------------------------------------- tenants


@pytest.fixture
def tenanted(start_grpc_server, tmp_path):
    return start_grpc_server("--tenants", tenants_file(tmp_path, TWO_TENANTS))


def test_requests_without_a_known_token_are_refused(tenanted, shm):
    server = tenanted
    key = shm("no_token", list(range(16)) * 2)
    refused = (401, {"error": "this server keeps shared memory per tenant: send a known token "
                              "as 'Authorization: Bearer <token>'"})
    for headers in (None, bearer("not-a-known-token-at-all"), bearer(ALICE[:-1]),
                    bearer(ALICE + "x"), {"Authorization": ALICE},
                    {"Authorization": f"Basic {ALICE}"}):
        assert register(server, "r", key, headers=headers) == refused
        assert status(server, headers=headers) == refused
        assert status(server, "r", headers=headers) == refused
        assert unregister(server, "r", headers=headers) == refused
        assert unregister(server, headers=headers) == refused
        assert infer_from(server, "r", headers) == refused
    status_code, headers, _ = server.request("GET", f"{SYS}/status")
    assert status_code == 401 and headers["WWW-Authenticate"] == "Bearer"
    # Inference that names no region needs no token.
    body = {"inputs": [{"name": n, "datatype": "INT32", "shape": [1, 16], "data": [1] * 16}
                       for n in ("INPUT0", "INPUT1")]}
    assert server.json("POST", "/v2/models/simple/infer", body)[0] == 200
    # The scheme is case-insensitive; the refusals above registered nothing.
    assert status(server, headers={"Authorization": f"bearer  {ALICE} "}) == (200, [])

    client = grpcclient.InferenceServerClient(server.grpc_url)
    for headers in (None, grpc_bearer("not-a-known-token-at-all")):
        for fn, args in [(client.register_system_shared_memory, ("r", key, 4 * NBYTES)),
                         (client.get_system_shared_memory_status, ()),
                         (client.unregister_system_shared_memory, ()),
                         (client.get_cuda_shared_memory_status, ()),
                         (grpc_infer, (client, "r"))]:
            assert grpc_raises("UNAUTHENTICATED", fn, *args, headers=headers) == refused[1]["error"]
    client.close()


def test_two_tenants_keep_their_own_regions_over_http(tenanted, shm):
    server, a, b = tenanted, bearer(ALICE), bearer(BOB)
    key_a = shm("tenant_a", list(range(16)) + [100] * 16)
    key_b = shm("tenant_b", list(range(16)) + [7] * 16)
    # The same name for both: no "already in manager" tells Bob that Alice has it.
    assert register(server, "io", key_a, headers=a) == (200, None)
    assert register(server, "io", key_b, headers=b) == (200, None)
    assert register(server, "only_a", key_a, headers=a) == (200, None)
    # Each lists, reads and writes its own.
    assert listing(server, a) == [("io", key_a), ("only_a", key_a)]
    assert listing(server, b) == [("io", key_b)]
    assert sum_of(infer_from(server, "io", a)) == [i + 100 for i in range(16)]
    assert sum_of(infer_from(server, "io", b)) == [i + 7 for i in range(16)]
    # Alice's tenant has two tokens: both see the same regions.
    assert status(server, "only_a", bearer(ALICE_SECOND))[0] == 200

    # Bob probes only_a (lists, reads, writes, unregisters it): every answer
    # is the one he gets once it is absent.
    def probes():
        return (status(server, "only_a", b), infer_from(server, "only_a", b),
                infer_into(server, "only_a", b), unregister(server, "only_a", b))
    while_alice_has_it = probes()
    assert while_alice_has_it[0] == (404, {"error": "Unable to find system shared memory region: "
                                                    "'only_a'"})
    assert while_alice_has_it[1] == while_alice_has_it[2] == (
        404, {"error": "Unable to find shared memory region: 'only_a'"})
    assert while_alice_has_it[3] == (200, None)  # absent is success, and Alice keeps it
    assert status(server, "only_a", a)[0] == 200
    assert sum_of(infer_from(server, "only_a", a)) == [i + 100 for i in range(16)]  # unwritten
    assert infer_into(server, "only_a", a)[0] == 200  # Alice can write it
    assert unregister(server, None, b) == (200, None)  # Bob's unregister-all: Bob's regions only
    assert listing(server, a) == [("io", key_a), ("only_a", key_a)]
    assert status(server, headers=b) == (200, [])
    assert unregister(server, None, a) == (200, None)
    assert probes() == while_alice_has_it

    # Registering a name twice speaks of the client's name, not the server's.
    assert register(server, "dup", key_a, headers=a) == (200, None)
    assert register(server, "dup", key_a, headers=a) == (
        400, {"error": "shared memory region 'dup' already in manager"})
    assert unregister(server, None, a) == (200, None)


def test_two_tenants_keep_their_own_regions_over_grpc(tenanted, shm):
    server = tenanted
    a, b = grpc_bearer(ALICE), grpc_bearer(BOB)
    key_a = shm("grpc_tenant_a", list(range(16)) + [40] * 16)
    key_b = shm("grpc_tenant_b", list(range(16)) + [3] * 16)
    client = grpcclient.InferenceServerClient(server.grpc_url)
    client.register_system_shared_memory("io", key_a, 4 * NBYTES, headers=a)
    client.register_system_shared_memory("io", key_b, 4 * NBYTES, headers=b)
    client.register_system_shared_memory("only_a", key_a, 4 * NBYTES, headers=a)
    listed = client.get_system_shared_memory_status(headers=a, as_json=True)["regions"]
    assert {n: r["key"] for n, r in listed.items()} == {"io": key_a, "only_a": key_a}
    listed = client.get_system_shared_memory_status(headers=b, as_json=True)["regions"]
    assert {n: r["key"] for n, r in listed.items()} == {"io": key_b}
    assert grpc_infer(client, "io", a) == [i + 40 for i in range(16)]
    assert grpc_infer(client, "io", b) == [i + 3 for i in range(16)]

    def probes():
        return (grpc_raises("NOT_FOUND", client.get_system_shared_memory_status, "only_a",
                            headers=b),
                grpc_raises("NOT_FOUND", grpc_infer, client, "only_a", b),
                grpc_raises("NOT_FOUND", grpc_infer_into, client, "only_a", b))
    while_alice_has_it = probes()
    assert while_alice_has_it == ("Unable to find system shared memory region: 'only_a'",
                                  "Unable to find shared memory region: 'only_a'",
                                  "Unable to find shared memory region: 'only_a'")
    client.unregister_system_shared_memory("only_a", headers=b)  # absent: success
    client.unregister_system_shared_memory(headers=b)            # Bob's regions only
    listed = client.get_system_shared_memory_status(headers=a, as_json=True)["regions"]
    assert sorted(listed) == ["io", "only_a"]
    assert client.get_system_shared_memory_status(headers=b, as_json=True) == {}
    # Bob may register Alice's name: nothing tells him she holds it.
    client.register_system_shared_memory("only_a", key_b, 4 * NBYTES, headers=b)
    client.unregister_system_shared_memory(headers=b)
    client.unregister_system_shared_memory(headers=a)
    assert probes() == while_alice_has_it
    client.close()


def test_tenant_names_stay_inside_the_namespace(tenanted, shm):
    """A name that looks like another tenant's internal name stays the
    caller's own: Bob's 'alice/io' is not Alice's 'io'."""
    server = tenanted
    key_a = shm("ns_a", list(range(16)) + [1] * 16)
    key_b = shm("ns_b", list(range(16)) + [9] * 16)
    assert register(server, "io", key_a, headers=bearer(ALICE)) == (200, None)
    client = grpcclient.InferenceServerClient(server.grpc_url)  # HTTP URLs cannot hold a '/'
    client.register_system_shared_memory("alice/io", key_b, 4 * NBYTES, headers=grpc_bearer(BOB))
    assert sum_of(infer_from(server, "alice/io", bearer(BOB))) == [i + 9 for i in range(16)]
    assert sum_of(infer_from(server, "io", bearer(ALICE))) == [i + 1 for i in range(16)]
    assert listing(server, bearer(BOB)) == [("alice/io", key_b)]
    assert listing(server, bearer(ALICE)) == [("io", key_a)]
    for token in (ALICE, BOB):
        assert unregister(server, None, bearer(token)) == (200, None)
    client.close()


def test_tenants_and_restriction_together(start_grpc_server, tmp_path, shm):
    """Triton's header is checked first, then the tenant's token."""
    server = start_grpc_server("--tenants", tenants_file(tmp_path, TWO_TENANTS),
                                 "--http-restricted-api", "shared-memory:admin-key=k")
    assert status(server, headers=bearer(ALICE))[0] == 403
    assert status(server, headers={"admin-key": "k"})[0] == 401
    assert status(server, headers={"admin-key": "k", **bearer(ALICE)}) == (200, [])



# ------------------------------------------------------ quotas per tenant


def test_default_share_leaves_the_other_tenant_room(start_grpc_server, tmp_path, shm):
    """--max-regions 4 between two tenants is 2 each. Alice filling
    hers leaves Bob's registrations working over HTTP and gRPC, and her
    refusal quotes her own usage only (before: 429 for Bob once Alice held
    the registry's 4)."""
    server = start_grpc_server("--tenants", tenants_file(tmp_path, TWO_TENANTS), "--max-regions", "4")
    a, b = bearer(ALICE), bearer(BOB)
    key = shm("share")
    assert register(server, "r1", key, headers=a) == (200, None)
    assert register(server, "r2", key, headers=a) == (200, None)
    refused = (429, {"error": "cannot register shared memory region 'r3': this owner tag holds its "
                              "limit of 2 regions"})
    assert register(server, "r3", key, headers=a) == refused
    client = grpcclient.InferenceServerClient(server.grpc_url)
    assert grpc_raises("RESOURCE_EXHAUSTED", client.register_system_shared_memory, "r3", key,
                       4 * NBYTES, headers=grpc_bearer(ALICE)) == refused[1]["error"]
    assert register(server, "r1", key, headers=b) == (200, None)
    client.register_system_shared_memory("r2", key, 4 * NBYTES, headers=grpc_bearer(BOB))
    assert listing(server, b) == [("r1", key), ("r2", key)]
    assert unregister(server, "r1", a) == (200, None)
    assert register(server, "r3", key, headers=a) == (200, None)  # her room again
    for token in (ALICE, BOB):
        assert unregister(server, None, bearer(token)) == (200, None)
    client.close()


def test_own_quota_of_mapped_bytes(start_grpc_server, tmp_path, shm):
    """A tenant's own quota from the tenants file; the other keeps the
    default share (what --max-mapped-bytes leaves). Alice's refusal quotes
    her bytes, never Bob's 7777."""
    text = f"{ALICE} alice max-mapped-bytes=8192\n{BOB} bob\n"
    server = start_grpc_server("--tenants", tenants_file(tmp_path, text), "--max-mapped-bytes", "20000")
    a, b = bearer(ALICE), bearer(BOB)
    key = shm("own_quota", size=16384)
    assert register(server, "b", key, size=7777, headers=b) == (200, None)
    assert register(server, "a", key, size=6000, headers=a) == (200, None)
    refused = (429, {"error": "cannot register shared memory region 'a2': 4000 more mapped bytes would "
                              "pass the limit of 8192 for this owner tag (6000 in use by it)"})
    assert register(server, "a2", key, size=4000, headers=a) == refused
    client = grpcclient.InferenceServerClient(server.grpc_url)
    assert grpc_raises("RESOURCE_EXHAUSTED", client.register_system_shared_memory, "a2", key, 4000,
                       headers=grpc_bearer(ALICE)) == refused[1]["error"]
    # Bob's share is 20000 - 8192 = 11808: 4000 more still fit.
    client.register_system_shared_memory("b2", key, 4000, headers=grpc_bearer(BOB))
    status_code, body = register(server, "b3", key, size=100, headers=b)
    assert (status_code, body["error"]) == (429, "cannot register shared memory region 'b3': 100 more "
                                                 "mapped bytes would pass the limit of 11808 for this owner "
                                                 "tag (11777 in use by it)")
    for token in (ALICE, BOB):
        assert unregister(server, None, bearer(token)) == (200, None)
    client.close()


def test_pinned_quota_per_tenant(start_server, tmp_path, shm):
    """--pin always: Alice's pinned bytes are bounded by her share of
    --max-pinned-bytes, and Bob still pins. Needs a usable CUDA device
    (pinning answers 501 elsewhere)."""
    server = start_server("--tenants", tenants_file(tmp_path, TWO_TENANTS), "--pin", "always",
                            "--max-pinned-bytes", "16384")
    a, b = bearer(ALICE), bearer(BOB)
    key = shm("pinned_quota", size=16384)
    status_code, body = register(server, "a", key, size=8192, headers=a)
    if status_code == 501:
        pytest.skip(f"no pinning here: {body['error']}")
    assert status_code == 200, body
    status_code, body = register(server, "a2", key, size=4096, headers=a)
    assert (status_code, body["error"]) == (429, "cannot register shared memory region 'a2': 4096 more "
                                                 "pinned bytes would pass the limit of 8192 for this owner "
                                                 "tag (8192 in use by it)")
    assert register(server, "b", key, size=8192, headers=b) == (200, None)
    for token in (ALICE, BOB):
        assert unregister(server, None, bearer(token)) == (200, None)


# ------------------------------------------------------------- statistics


def simple_counts(server, headers):
    """simple's (success, fail) counts in v2/models/simple/stats."""
    status_code, body = server.json("GET", "/v2/models/simple/stats", None, headers)
    assert status_code == 200, body
    stats = body["model_stats"][0]["inference_stats"]
    return stats["success"]["count"], stats["fail"]["count"]


def test_each_tenant_sees_only_its_own_statistics(tenanted):
    """The models' statistics told every caller, without a token, when and
    how much the other tenants inferred: each tenant's token now reads its
    own book over v2/models/stats, /metrics and gRPC's ModelStatistics."""
    from prometheus_text import parse
    server = tenanted
    a, b = bearer(ALICE), bearer(BOB)
    data = {"inputs": [{"name": n, "datatype": "INT32", "shape": [1, 16], "data": [1] * 16}
                       for n in ("INPUT0", "INPUT1")]}
    bad = {"inputs": [dict(i, shape=[1, 15]) for i in data["inputs"]]}
    for headers, n in ((a, 3), (bearer(ALICE_SECOND), 1), (b, 1), (None, 2)):
        for _ in range(n):
            assert server.json("POST", "/v2/models/simple/infer", data, headers)[0] == 200
    assert server.json("POST", "/v2/models/simple/infer", bad, b)[0] == 400
    client = grpcclient.InferenceServerClient(server.grpc_url)
    inputs = [grpcclient.InferInput(n, [1, 16], "INT32") for n in ("INPUT0", "INPUT1")]
    for i in inputs:
        i.set_data_from_numpy(np.ones((1, 16), dtype=np.int32))
    client.infer("simple", inputs, headers=grpc_bearer(BOB))

    # Alice's two tokens are one tenant; requests without a token are no one's.
    assert simple_counts(server, a) == simple_counts(server, bearer(ALICE_SECOND)) == (4, 0)
    assert simple_counts(server, b) == (2, 1)
    refused = (401, {"error": "this server keeps shared memory per tenant: send a known token "
                              "as 'Authorization: Bearer <token>'"})
    assert server.json("GET", "/v2/models/stats") == refused
    unknown = bearer("not-a-known-token")
    assert server.json("GET", "/v2/models/simple/stats", None, unknown) == refused
    status_code, body = server.json("GET", "/v2/models/stats", None, b)
    assert status_code == 200 and {m["name"]: m["inference_count"] for m in body["model_stats"]}[
        "simple"] == 2, body

    for headers, (ok, failed) in ((a, (4, 0)), (b, (2, 1))):
        status_code, _, text = server.request("GET", "/metrics", headers=headers)
        assert status_code == 200, text
        metrics = parse(text.decode())
        assert metrics.value("nv_inference_request_success", model="simple", version="1") == ok
        assert metrics.value("nv_inference_request_failure", model="simple", version="1") == failed
        assert metrics.value("nv_inference_count", model="simple", version="1") == ok
    assert server.request("GET", "/metrics")[0] == 401

    for token, ok in ((ALICE, 4), (BOB, 2)):
        stats = client.get_inference_statistics("simple", headers=grpc_bearer(token), as_json=True)
        assert int(stats["model_stats"][0]["inference_stats"]["success"]["count"]) == ok, stats
    assert "per tenant" in grpc_raises("UNAUTHENTICATED", client.get_inference_statistics, "simple")
    client.close()
