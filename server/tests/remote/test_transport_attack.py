"""A peer below UCP against the running server: tests/remote/uct_attacker
(UCX's transport layer, UCT, with no handshake, secret or key) aimed at
every TCP port the server process listens on (HTTP, gRPC, the remote
engine's listener and any port a UCX transport of its own opened), at the
address where the server maps a registered system shared-memory region.
scripts/tests.d/63-remote.sh sets UCT_ATTACKER to the binary.

Asserted, for the server started as scripts/run.sh and docs/remote.md start
it (client shared memory allowed, HTTP and gRPC, no --remote-* flag): no port takes the
tcp transport's connection, no put or get completes, the region's bytes
are unchanged, and the server lives on and answers v2/health/ready. And
the positive control, where the server has --remote-tcp-device: with tcp
opened on lo, the attacker's put lands in the region, which is what that
flag exposes to every process that reaches lo."""
import os
import subprocess
from multiprocessing import shared_memory

import pytest

from grpc_support import on_a_free_grpc_port
from server_process import binary

ATTACKER = os.environ.get("UCT_ATTACKER")
pytestmark = [
    pytest.mark.servers("c"),
    pytest.mark.skipif(not ATTACKER, reason="UCT_ATTACKER is not set (the uct_attacker of tests/remote, built "
                       "where UCX's UCT headers are; scripts/tests.d/63-remote.sh sets it)"),
]

SIZE = 4096
CANARY = 0x5A
ZCOPY_PUT = 0xA3  # the byte uct_attacker's PUT_ZCOPY writes


@pytest.fixture
def canary(start_server, shm_key):
    """start(*args) -> (server, the region's bytes, its address in the server):
    a server with a 4096-byte shm region "canary" registered, every byte 0x5a,
    and its remote engine asked to start (a connect call)."""
    made = []

    def start(*args):
        server = on_a_free_grpc_port(start_server, *args)  # HTTP and gRPC, as run.sh
        key = shm_key(f"canary{len(made)}")
        mem = shared_memory.SharedMemory(name=key.lstrip("/"), create=True, size=SIZE)
        made.append((server, mem))
        mem.buf[:SIZE] = bytes([CANARY]) * SIZE
        assert server.json("POST", "/v2/systemsharedmemory/region/canary/register",
                           {"key": key, "byte_size": SIZE}) == (200, None)
        # The engine starts at the first remote call where it does not at start.
        server.request("POST", "/v2/remotememory/connect", {})
        maps = server.shm_mappings(key.lstrip("/"))
        assert maps, f"the server does not map {key}"
        return server, mem, int(maps[0].split("-")[0], 16)

    yield start
    for server, mem in made:
        server.json("POST", "/v2/systemsharedmemory/unregister")
        mem.close()
        mem.unlink()


def attack(server, address, ops):
    """The attacker's lines, against every listening port of the server."""
    out = subprocess.run([ATTACKER, str(server.pid), f"{address:x}", str(SIZE), "--ops", ops,
                          "--timeout-ms", "1000"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines and lines[-1] == "DONE", out.stdout + out.stderr
    return lines


def completed(lines, what):
    """Attempts of kind what (CONNECT, PUT_ZCOPY, ...) that answered ok."""
    return [line for line in lines if line.startswith("TCP ") and line.split()[2:4] == [what, "ok"]]


def assert_serving(server):
    assert server.proc.poll() is None, "the server died"
    assert server.request("GET", "/v2/health/ready")[0] == 200


def test_default_server_takes_no_transport_attack(canary):
    server, mem, address = canary()
    lines = attack(server, address, "get,put,am")
    print("\n".join(lines))
    assert lines[0].startswith("PORTS ") and int(lines[0].split()[1]) >= 1  # HTTP at least
    connected = completed(lines, "CONNECT")
    assert connected == [], f"a port of the server took the tcp transport's connection: {connected}"
    assert [line for line in lines if line.startswith("TCP ") and line.endswith(" ok")] == []
    assert bytes(mem.buf[:SIZE]) == bytes([CANARY]) * SIZE
    assert_serving(server)


def has_tcp_device_flag():
    out = subprocess.run([binary(), "--help"], capture_output=True, text=True, timeout=30)
    return "--remote-tcp-device" in out.stdout + out.stderr


def test_tcp_device_lets_a_put_land(canary):
    if not has_tcp_device_flag():
        pytest.skip("this server has no --remote-tcp-device")
    server, mem, address = canary("--remote-tcp-device", "lo")
    lines = attack(server, address, "put")
    print("\n".join(lines))
    assert completed(lines, "PUT_ZCOPY"), "\n".join(lines)
    assert mem.buf[0] == ZCOPY_PUT
    assert_serving(server)
