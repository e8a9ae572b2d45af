"""--uds PATH: clients register sealed memfds over a Unix
socket, then infer over HTTP and gRPC naming them; a connection's regions
go when it closes, after the requests that use them; a hostile client is
refused with a clear message and bounded in connections and regions.

The clients are python/shmreg/memfd_client.py, loaded by path (standard
library only), in this process or in their own (uds_client.py)."""
import contextlib
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from server_process import sibling_binary
from grpc_support import start_grpc_server  # noqa: F401 (a fixture)
from uds_fixtures import (  # noqa: F401 (fixtures)
    open_fds, settled_open_fds, sock_path, status, uds_server, wait_uds_line)
from uds_client import (IN0, IN1, N, NBYTES, REGION_BYTES, filled_region, infer_body, load_memfd_client,
                        register_region)
from readme_snippets import blocks, numbers, run_block

pytestmark = pytest.mark.servers("c")

mc = load_memfd_client()
UDS_CLIENT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "support", "uds_client.py")


def memfd_mappings(server):
    with open(f"/proc/{server.pid}/maps") as maps:
        return [line for line in maps if " /memfd:" in line]


def infer(server, name, model="simple", outputs_in_region=True):
    return server.json("POST", f"/v2/models/{model}/infer", infer_body(name, outputs_in_region))


def outputs_of(buf):
    return (np.frombuffer(buf, np.int32, N, 2 * NBYTES), np.frombuffer(buf, np.int32, N, 3 * NBYTES))


def refused(sock, name, fd, size, offset=0, flags=0):
    with pytest.raises(mc.RegionRefused) as e:
        mc.register(sock, name, fd, size, offset, flags)
    return e.value


# ------------------------------------------------------------- the happy path


def test_register_infer_over_http_and_unregister_on_close(uds_server):
    server = uds_server()
    sock, buf = register_region(server.sock_path, "uds_io")
    entry = status(server)["uds_io"]
    assert (entry["byte_size"], entry["key"], entry["in_use"]) == (REGION_BYTES, "", 0)
    code, body = infer(server, "uds_io")
    assert code == 200, body
    out0, out1 = outputs_of(buf)
    np.testing.assert_array_equal(out0, np.array(IN0) + IN1)
    np.testing.assert_array_equal(out1, np.array(IN0) - IN1)
    sock.close()
    server.wait_until(lambda: "uds_io" not in status(server), what="the region to go with its connection")
    server.wait_until(lambda: not memfd_mappings(server), what="the memfd to be unmapped")


def unshare_refusal():
    """None when this process may make an IPC and mount namespace, else why not."""
    if not shutil.which("unshare"):
        return "unshare(1) is not installed"
    probe = subprocess.run(["unshare", "--ipc", "--mount", "true"], capture_output=True, text=True)
    return None if probe.returncode == 0 else f"unshare --ipc --mount is not permitted: {probe.stderr.strip()}"


def test_client_in_its_own_ipc_and_mount_namespace(uds_server, shm_key):
    why = unshare_refusal()
    if why:
        pytest.skip(why)
    server = uds_server()
    # A file in the server's /dev/shm that the client must not see: proof
    # that it runs in a /dev/shm of its own, where POSIX shm could not work.
    marker = shm_key("ns_marker").lstrip("/")
    with open(f"/dev/shm/{marker}", "w"):
        pass
    try:
        script = ("mount -t tmpfs shmreg-ns /dev/shm && exec \"$0\" \"$@\"")
        proc = subprocess.run(["unshare", "--ipc", "--mount", "--propagation", "private", "sh", "-c", script,
                               sys.executable, UDS_CLIENT, "infer", server.sock_path, "ns_io",
                               str(server.port), marker],
                              capture_output=True, text=True, timeout=60)
    finally:
        os.unlink(f"/dev/shm/{marker}")
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr
    # The client exited: its connection closed and its region went with it.
    server.wait_until(lambda: "ns_io" not in status(server), what="the exited client's region to go")


def test_grpc_inference_with_a_uds_region(start_grpc_server, sock_path):
    server = wait_uds_line(start_grpc_server("--uds", sock_path))
    sock, buf = register_region(sock_path, "grpc_uds")
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        inputs = [grpcclient.InferInput("INPUT0", [1, N], "INT32"),
                  grpcclient.InferInput("INPUT1", [1, N], "INT32")]
        inputs[0].set_shared_memory("grpc_uds", NBYTES, offset=0)
        inputs[1].set_shared_memory("grpc_uds", NBYTES, offset=NBYTES)
        outputs = [grpcclient.InferRequestedOutput("OUTPUT0"), grpcclient.InferRequestedOutput("OUTPUT1")]
        outputs[0].set_shared_memory("grpc_uds", NBYTES, offset=2 * NBYTES)
        outputs[1].set_shared_memory("grpc_uds", NBYTES, offset=3 * NBYTES)
        client.infer("simple", inputs, outputs=outputs)
        out0, out1 = outputs_of(buf)
        np.testing.assert_array_equal(out0, np.array(IN0) + IN1)
        np.testing.assert_array_equal(out1, np.array(IN0) - IN1)
        listed = client.get_system_shared_memory_status(as_json=True)["regions"]["grpc_uds"]
        assert int(listed["byte_size"]) == REGION_BYTES
    finally:
        client.close()
        sock.close()


# ------------------------------------------------------------ a dying client


def test_killed_client_regions_go_after_its_inflight_request(uds_server):
    server = uds_server("--delay-ms", "1500")
    client = subprocess.Popen([sys.executable, UDS_CLIENT, "hold", server.sock_path, "doomed"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert client.stdout.readline().strip() == "ready", client.stderr.read()
        result = {}
        slow = threading.Thread(target=lambda: result.update(
            answer=infer(server, "doomed", "simple_delayed", outputs_in_region=False)))
        slow.start()
        server.wait_until(lambda: status(server)["doomed"]["in_use"] > 0, what="the slow request to acquire")
        client.send_signal(signal.SIGKILL)
        client.wait(timeout=10)
        # Its connection closed; the region waits for the request (defer).
        server.wait_until(lambda: status(server)["doomed"]["pending_unregister"],
                          what="the killed client's region to be unregistered")
        assert slow.is_alive(), "the request finished before the check: raise --delay-ms"
        assert memfd_mappings(server), "unmapped under an in-flight request"
        slow.join(timeout=30)
        code, body = result["answer"]
        assert code == 200, body
        sums = next(o for o in body["outputs"] if o["name"] == "OUTPUT0")["data"]
        assert sums == [a + b for a, b in zip(IN0, IN1)]
        server.wait_until(lambda: "doomed" not in status(server), what="the region to go after the request")
        # Unmapped by the background reclaim thread, a moment after status drops it.
        server.wait_until(lambda: not memfd_mappings(server), what="the memfd to be unmapped")
    finally:
        if client.poll() is None:
            client.kill()
        client.communicate()


def test_refuse_policy_retries_until_the_request_is_done(uds_server):
    server = uds_server("--delay-ms", "1000", "--busy-policy", "refuse")
    sock, _ = register_region(server.sock_path, "busy_on_close")
    result = {}
    slow = threading.Thread(target=lambda: result.update(
        answer=infer(server, "busy_on_close", "simple_delayed", outputs_in_region=False)))
    slow.start()
    server.wait_until(lambda: status(server)["busy_on_close"]["in_use"] > 0, what="the slow request")
    sock.close()
    time.sleep(0.3)
    assert "busy_on_close" in status(server), "refuse: a busy region is kept while its request runs"
    slow.join(timeout=30)
    assert result["answer"][0] == 200, result
    server.wait_until(lambda: "busy_on_close" not in status(server), what="the retried unregister")


# --------------------------------------------------------- what is refused


def test_sealed_region_cannot_be_truncated(uds_server):
    server = uds_server()
    fd = mc.create_sealed_memfd(REGION_BYTES, "sealed")
    sock = mc.connect(server.sock_path)
    mc.register(sock, "sealed", fd, REGION_BYTES)
    for size in (0, REGION_BYTES // 2, REGION_BYTES * 2):
        with pytest.raises(PermissionError):
            os.ftruncate(fd, size)
    assert os.fstat(fd).st_size == REGION_BYTES
    code, body = infer(server, "sealed")  # the server still reads all of it
    assert code == 200, body
    os.close(fd)
    sock.close()


def test_unsealed_fd_is_refused_and_nothing_changes(uds_server):
    server = uds_server()
    sock = mc.connect(server.sock_path)
    fd = os.memfd_create("unsealed", os.MFD_CLOEXEC)
    os.ftruncate(fd, REGION_BYTES)
    e = refused(sock, "unsealed", fd, REGION_BYTES)
    assert e.code == "SHMREG_ERR_INVALID_ARG"
    assert "is not sealed against shrinking (F_SEAL_SHRINK)" in e.message, e.message
    assert "unsealed" not in status(server)
    assert memfd_mappings(server) == []
    os.close(fd)
    # The connection is still good for a sealed one.
    fd, _ = filled_region(mc)
    mc.register(sock, "sealed_after", fd, REGION_BYTES)
    os.close(fd)
    assert "sealed_after" in status(server)
    sock.close()


def test_bad_requests_get_clear_errors(uds_server):
    server = uds_server()
    sock, _ = register_region(server.sock_path, "taken")
    fd = mc.create_sealed_memfd(REGION_BYTES, "bad")
    cases = [
        (("bad\nname", fd, 64), "SHMREG_ERR_INVALID_ARG", "name"),
        (("taken\0junk", fd, 64), "SHMREG_ERR_INVALID_ARG", "name"),  # never cut to 'taken'
        (("free\0junk", fd, 64), "SHMREG_ERR_INVALID_ARG", "name"),
        (("taken", fd, 64), "SHMREG_ERR_ALREADY_EXISTS", "'taken' already in manager"),
        (("past_end", fd, 64, REGION_BYTES - 1), "SHMREG_ERR_OUT_OF_BOUNDS", "past the end"),
        (("zero", fd, 0), "SHMREG_ERR_OUT_OF_BOUNDS", "zero"),
        (("pinned", fd, 64, 0, 0x2), "SHMREG_ERR_INVALID_ARG", "only SHMREG_READONLY"),
    ]
    for args, code, part in cases:
        e = refused(sock, *args)
        assert e.code == code, (args, e.code, e.message)
        assert part in e.message, (args, e.message)
    r, w = os.pipe()
    e = refused(sock, "a_pipe", r, 64)
    assert e.code == "SHMREG_ERR_INVALID_ARG", e.message
    os.close(r)
    os.close(w)
    # Not the request format: too short, wrong magic, no descriptor.
    for raw in (b"\x00" * 8, b"XXXX" + b"\x00" * 20 + b"n"):
        socket.send_fds(sock, [mc._FRAME.pack(mc._FRAME_MAGIC, len(raw)) + raw], [fd])
        code, _, message = sock.recv(mc.ANSWER_MAX).decode().partition(" ")
        assert code == "SHMREG_ERR_INVALID_ARG", message
    sock.send(mc.request_bytes("no_fd", 64))
    code, _, message = sock.recv(mc.ANSWER_MAX).decode().partition(" ")
    assert code == "SHMREG_ERR_NOT_FOUND" and "carries no descriptor" in message, message
    assert sorted(status(server)) == ["taken"]
    assert len(memfd_mappings(server)) == 1
    os.close(fd)
    sock.close()


def test_an_empty_record_is_answered_and_the_connection_kept(uds_server):
    """A zero-length SOCK_SEQPACKET record closed the connection with no
    answer; it is a malformed request like any other. One that carries a
    descriptor is answered too, and the descriptor is not kept."""
    server = uds_server()
    sock = mc.connect(server.sock_path)
    fds_before = settled_open_fds(server)
    fd = mc.create_sealed_memfd(REGION_BYTES, "empty")
    for send in (lambda: sock.send(b""), lambda: socket.send_fds(sock, [b""], [fd])):
        send()
        code, _, message = sock.recv(mc.ANSWER_MAX).decode().partition(" ")
        assert code == "SHMREG_ERR_INVALID_ARG", message
        assert "an empty record is not a request" in message, message
    os.close(fd)
    assert settled_open_fds(server) == fds_before
    assert not [f for f in os.listdir(f"/proc/{server.pid}/fd")
                if "memfd:empty" in os.readlink(f"/proc/{server.pid}/fd/{f}")]
    assert memfd_mappings(server) == []
    # The same connection still registers.
    fd, _ = filled_region(mc)
    mc.register(sock, "after_empty", fd, REGION_BYTES)
    os.close(fd)
    assert "after_empty" in status(server)
    sock.close()
    # A client that only shuts down its sending side is gone: its regions go.
    sock, _ = register_region(server.sock_path, "half_closed")
    sock.shutdown(socket.SHUT_WR)
    server.wait_until(lambda: "half_closed" not in status(server), what="the region to go")
    sock.close()


def test_socket_file_is_made_safely(start_server, sock_path):
    # Never clobbers what is not a socket.
    with open(sock_path, "w") as f:
        f.write("precious")
    with pytest.raises(RuntimeError, match="exists and is not a socket; refusing to replace it"):
        start_server("--uds", sock_path)
    with open(sock_path) as f:
        assert f.read() == "precious"
    os.unlink(sock_path)
    # Replaces a stale socket (a server that died), with the default mode.
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as stale:
        stale.bind(sock_path)
    server = wait_uds_line(start_server("--uds", sock_path))
    assert stat.S_ISSOCK(os.lstat(sock_path).st_mode)
    assert stat.S_IMODE(os.lstat(sock_path).st_mode) == 0o600
    # Refuses a live one.
    with pytest.raises(RuntimeError, match="another server is listening on it"):
        start_server("--uds", sock_path)
    rc, _ = server.stop()
    assert rc == 0
    assert not os.path.exists(sock_path), "the socket file outlived the server"
    server = wait_uds_line(start_server("--uds", sock_path, "--uds-mode", "0660"))
    assert stat.S_IMODE(os.lstat(sock_path).st_mode) == 0o660


# ------------------------------------------------------------------- bounds


def test_connection_flood_is_bounded(uds_server):
    server = uds_server("--uds-max-connections", "4")
    held = [register_region(server.sock_path, f"c{i}")[0] for i in range(4)]
    baseline = open_fds(server)
    extra = mc.connect(server.sock_path)
    code, _, message = extra.recv(mc.ANSWER_MAX).decode().partition(" ")
    assert code == "SHMREG_ERR_NO_MEMORY" and "too many connections" in message, message
    assert extra.recv(mc.ANSWER_MAX) == b"", "the refused connection stays open"
    extra.close()
    flood = []
    for _ in range(200):
        with contextlib.suppress(OSError):
            flood.append(mc.connect(server.sock_path, timeout=5))
    for s in flood:  # each was answered and closed
        assert s.recv(mc.ANSWER_MAX).startswith(b"SHMREG_ERR_NO_MEMORY too many connections")
    assert open_fds(server) <= baseline + 2, "refused connections keep descriptors"
    for s in flood:
        s.close()
    # A slot frees when its client leaves.
    held.pop().close()
    server.wait_until(lambda: "c3" not in status(server), what="the closed client's region")
    sock, _ = register_region(server.sock_path, "after_flood")
    assert sorted(status(server)) == ["after_flood", "c0", "c1", "c2"]
    for s in held + [sock]:
        s.close()


def test_regions_per_connection_are_bounded(uds_server):
    server = uds_server("--uds-max-regions", "3")
    sock = mc.connect(server.sock_path)
    fd, _ = filled_region(mc)
    for i in range(3):
        mc.register(sock, f"r{i}", fd, REGION_BYTES)
    e = refused(sock, "r3", fd, REGION_BYTES)
    assert e.code == "SHMREG_ERR_NO_MEMORY"
    assert "already holds 3 regions" in e.message and "--uds-max-regions 3" in e.message, e.message
    assert sorted(status(server)) == ["r0", "r1", "r2"]
    # The limit is per connection: another one has its own.
    other = mc.connect(server.sock_path)
    mc.register(other, "o0", fd, REGION_BYTES)
    os.close(fd)
    sock.close()
    server.wait_until(lambda: sorted(status(server)) == ["o0"], what="the first connection's regions to go")
    other.close()


def test_silent_client_does_not_stall_others(uds_server):
    server = uds_server()
    silent = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    silent.connect(server.sock_path)  # and never says anything
    start = time.monotonic()
    sock, _ = register_region(server.sock_path, "not_stalled")
    assert time.monotonic() - start < 5
    assert "not_stalled" in status(server)
    silent.close()
    sock.close()


def test_c_client_registers_with_shmreg_send_region(uds_server, tmp_path):
    server = uds_server()
    inputs = tmp_path / "inputs.bin"
    inputs.write_bytes(np.array(IN0, np.int32).tobytes() + np.array(IN1, np.int32).tobytes())
    client = subprocess.Popen([sibling_binary("shmreg-memfd-client"), server.sock_path, "c_io",
                               str(REGION_BYTES), str(inputs)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert client.stdout.readline().strip() == "registered c_io", client.stderr.read()
        code, body = infer(server, "c_io")
        assert code == 200, body
        out, err = client.communicate("\n", timeout=30)
        assert client.returncode == 0, err
        region = bytes.fromhex(out.strip())
        out0, out1 = outputs_of(region)
        np.testing.assert_array_equal(out0, np.array(IN0) + IN1)
        np.testing.assert_array_equal(out1, np.array(IN0) - IN1)
        server.wait_until(lambda: "c_io" not in status(server), what="the C client's region to go")
    finally:
        if client.poll() is None:
            client.kill()
            client.communicate()


def test_readme_memfd_snippet_runs_as_written(uds_server):
    """README's memfd block, with the test server's socket and port."""
    server = uds_server()
    out = run_block(blocks("memfd")[0], {'"/tmp/shmreg.sock"': repr(server.sock_path),
                                         '"127.0.0.1:8000"': f'"{server.url}"'})
    printed = numbers(out[out.index("sum"):])
    assert printed == list(np.arange(16) + 10) + list(np.arange(16) - 10), out
    server.wait_until(lambda: "memfd_io" not in status(server), what="the snippet's region to go")


def test_peer_uid_outside_the_allow_list_is_refused(uds_server):
    """--allow-uid covers the socket's peers too: a memfd's owner is whoever
    sent it, and this server accepts only uid 4242 (not ours)."""
    server = uds_server("--allow-uid", "4242")
    sock = mc.connect(server.sock_path)
    code, _, message = sock.recv(mc.ANSWER_MAX).decode().partition(" ")
    assert code == "SHMREG_ERR_INVALID_ARG", message
    assert f"uid {os.geteuid()} is not accepted by this server (--allow-uid)" in message
    assert sock.recv(mc.ANSWER_MAX) == b"", "the refused connection stays open"
    sock.close()
    assert status(server) == {}


def test_uds_and_tenants_are_refused_together(sock_path, tmp_path):
    tokens = tmp_path / "tenants"
    tokens.write_text("a-token-of-twenty-chars alice\n")
    tokens.chmod(0o600)
    proc = subprocess.run([sibling_binary("shmreg-server"), "--port", "0", "--uds", sock_path,
                           "--tenants", str(tokens)], capture_output=True, text=True, timeout=20)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "--uds and --tenants cannot be used together" in proc.stderr


def test_each_uid_has_its_share_of_the_limits(uds_server):
    """With two uids allowed, each has half of --max-regions and
    --max-mapped-bytes, whatever its number of connections, so one uid's
    peers cannot fill the registry for the other's; the refusal quotes that
    uid's usage only."""
    me = os.geteuid()
    server = uds_server("--allow-uid", str(me), "--allow-uid", "4242", "--max-regions", "4",
                        "--max-mapped-bytes", str(5 * REGION_BYTES))
    fd, _ = filled_region(mc)
    first, second = mc.connect(server.sock_path), mc.connect(server.sock_path)
    mc.register(first, "r0", fd, REGION_BYTES)
    mc.register(second, "r1", fd, REGION_BYTES)
    e = refused(second, "r2", fd, REGION_BYTES)
    assert (e.code, e.message) == ("SHMREG_ERR_NO_MEMORY", f"uid {me}'s connections hold 2 regions, its share "
                                                           "of --max-regions among the 2 uids --allow-uid accepts")
    # Names stay one namespace across connections, as before.
    e = refused(first, "r1", fd, REGION_BYTES)
    assert (e.code, e.message) == ("SHMREG_ERR_ALREADY_EXISTS", "shared memory region 'r1' already in manager")
    first.close()
    server.wait_until(lambda: sorted(status(server)) == ["r1"], what="the first connection's region to go")
    # Bytes: the share is 2.5 regions' worth; r1 holds one.
    e = refused(second, "big", fd, 2 * REGION_BYTES)
    assert e.code == "SHMREG_ERR_NO_MEMORY", e.message
    assert e.message == (f"{2 * REGION_BYTES} more mapped bytes would pass uid {me}'s share of "
                         f"--max-mapped-bytes, {5 * REGION_BYTES // 2} ({REGION_BYTES} in use by its connections)")
    mc.register(second, "r2", fd, REGION_BYTES)
    os.close(fd)
    second.close()
