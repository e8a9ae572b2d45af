"""A live upgrade: a server started with --take-over takes the running
server's regions (a system shm region registered over HTTP, a sealed memfd
registered over the Unix socket), its listening sockets and its Unix-socket
clients, while inferences go on over HTTP and gRPC on new connections: none
fails, whether the old server or the new one accepted its connection (none
is refused, answered 503 or cancelled, none meets an unknown region or
wrong bytes; an HTTP request closed unanswered is sent again once, as
HTTP clients do), the old server exits 0 with nothing left mapped, and the
new one serves both regions. Also: a peer of another uid is refused, nothing
listening is a clear error, a new server that fails half-way leaves the old
one serving, and regions that came without their connection go after
--orphan-grace-s."""
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm

from grpc_support import start_with_grpc, with_grpc
from server_process import Server, assert_exits_clean, binary
from uds_client import (IN0, IN1, N, NBYTES, REGION_BYTES, filled_region, infer_body, load_memfd_client,
                        register_region)
from uds_fixtures import status, wait_uds_line

mc = load_memfd_client()
SUM = (np.array(IN0) + np.array(IN1)).tolist()


@pytest.fixture
def folder():
    """A folder of its own for the sockets (short enough for sun_path)."""
    path = tempfile.mkdtemp(prefix="shmreg-up-")
    yield path
    shutil.rmtree(path)


def start_old(folder, *args):
    """A server with gRPC, --uds and --handover-socket in folder."""
    return wait_uds_line(start_with_grpc("--uds", os.path.join(folder, "uds.sock"), "--handover-socket",
                                         os.path.join(folder, "up.sock"), *args))


def start_new(folder, *args):
    """A server that takes over the one in folder; its lines as the old one's."""
    hand = os.path.join(folder, "up.sock")
    return wait_uds_line(with_grpc(Server("--take-over", hand, "--handover-socket", hand, *args)))


def system_region(shm_key, server):
    """A shm object holding simple's inputs, registered over HTTP as 'sysio'."""
    key = shm_key("up")
    handle = shm.create_shared_memory_region("sysio", key, REGION_BYTES)
    shm.set_shared_memory_region(handle, [np.array(IN0, np.int32), np.array(IN1, np.int32)])
    code, body = server.json("POST", "/v2/systemsharedmemory/region/sysio/register",
                             {"key": key, "byte_size": REGION_BYTES})
    assert code == 200, body
    return handle


def http_once(port, region):
    probe = Server.__new__(Server)
    probe.port = port
    code, body = probe.json("POST", "/v2/models/simple/infer", infer_body(region, False))
    if code != 200 or body["outputs"][0]["data"] != SUM:
        return f"http {region}: {code} {body}"
    return None


def http_infer(port, region):
    """One inference on a new connection, inputs in region: None or what
    failed. A connection closed before its request was read (no byte of an
    answer) is sent again once; a refused one is a failure."""
    try:
        return http_once(port, region)
    except ConnectionRefusedError as e:
        return f"http {region}: {e!r}"
    except (ConnectionResetError, BrokenPipeError):
        try:
            return http_once(port, region)
        except OSError as e:
            return f"http {region}: sent again, then {e!r}"
    except OSError as e:
        return f"http {region}: {e!r}"


def grpc_infer(url, region):
    client = grpcclient.InferenceServerClient(url)  # a channel, so a connection, of its own
    try:
        inputs = [grpcclient.InferInput("INPUT0", [1, N], "INT32"),
                  grpcclient.InferInput("INPUT1", [1, N], "INT32")]
        inputs[0].set_shared_memory(region, NBYTES, offset=0)
        inputs[1].set_shared_memory(region, NBYTES, offset=NBYTES)
        got = client.infer("simple", inputs).as_numpy("OUTPUT0").reshape(-1).tolist()
        return None if got == SUM else f"grpc {region}: {got}"
    except Exception as e:  # noqa: BLE001: every failure is what the test counts
        return f"grpc {region}: {e}"
    finally:
        client.close()


class Load:
    """Inferences one after another on new connections, HTTP and gRPC, both
    regions, until stopped; failures and the count kept."""

    def __init__(self, port, grpc_url, regions):
        self.failures, self.done = [], 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, args=(port, grpc_url, regions), daemon=True)
        self.thread.start()

    def run(self, port, grpc_url, regions):
        while not self.stopping.is_set():
            for region in regions:
                for failed in (http_infer(port, region), grpc_infer(grpc_url, region)):
                    if failed:
                        self.failures.append(failed)
                    self.done += 1

    def stop(self):
        self.stopping.set()
        self.thread.join(60)
        return self.failures


def outputs_in_region(server, region):
    code, body = server.json("POST", "/v2/models/simple/infer", infer_body(region, True))
    assert code == 200, body


def serving_both(folder, shm_key):
    """The old server with 'sysio' (HTTP) and 'udsio' (the Unix socket),
    inferences running against both: (old, shm handle, socket, mmap, load)."""
    old = start_old(folder)
    handle = system_region(shm_key, old)
    sock, buf = register_region(os.path.join(folder, "uds.sock"), "udsio")
    return old, handle, sock, buf, Load(old.port, old.grpc_url, ["sysio", "udsio"])


def register_again(sock, name):
    """One more region over a connection: whoever serves it answers."""
    fd, _ = filled_region(mc)
    mc.register(sock, name, fd, REGION_BYTES)
    os.close(fd)


def test_take_over_keeps_regions_sockets_and_clients(folder, shm_key):
    old, handle, sock, buf, load = serving_both(folder, shm_key)
    try:
        time.sleep(0.5)
        new = start_new(folder)
        assert (new.port, new.grpc_url) == (old.port, old.grpc_url)
        err = assert_exits_clean(old, by_itself=True)
        assert "serves now; this server stops" in err, err
        done = load.done
        new.wait_until(lambda: load.done > done + 4, what="inferences against the new server")
    finally:
        failures = load.stop()
    assert failures == [], failures
    try:
        assert set(status(new)) == {"sysio", "udsio"}
        outputs_in_region(new, "sysio")
        assert shm.get_contents_as_numpy(handle, np.int32, [N], offset=2 * NBYTES).tolist() == SUM
        outputs_in_region(new, "udsio")
        assert np.frombuffer(buf, np.int32, N, 2 * NBYTES).tolist() == SUM
        # The client's connection came along: it registers with the new
        # server, and its end unregisters every region of its tag there.
        register_again(sock, "udsio2")
        assert {"udsio", "udsio2"} <= set(status(new))
        sock.close()
        new.wait_until(lambda: set(status(new)) == {"sysio"}, what="the connection's regions to go")
        assert new.json("POST", "/v2/systemsharedmemory/region/sysio/unregister")[0] == 200
    finally:
        shm.destroy_shared_memory_region(handle)
        buf.close()
        assert_exits_clean(new)


class KeptClient(threading.Thread):
    """tritonclient's HTTP or gRPC client on one connection, inferences from
    region one after another until stopped: the answers and every failure.
    Its HTTP client sends a request again by itself when the server closed
    the connection unanswered; nothing else is retried."""

    def __init__(self, lib, url, region):
        super().__init__(daemon=True)
        self.lib, self.url, self.region = lib, url, region
        self.ok, self.failures = 0, []
        self.stopping = threading.Event()
        self.start()

    def run(self):
        client = self.lib.InferenceServerClient(self.url)
        try:
            while not self.stopping.is_set():
                inputs = [self.lib.InferInput(f"INPUT{j}", [1, N], "INT32") for j in (0, 1)]
                for j in (0, 1):
                    inputs[j].set_shared_memory(self.region, NBYTES, offset=j * NBYTES)
                try:
                    got = client.infer("simple", inputs).as_numpy("OUTPUT0").reshape(-1).tolist()
                    if got == SUM:
                        self.ok += 1
                    else:
                        self.failures.append(f"{got}")
                except Exception as e:  # noqa: BLE001: every failure is what the test counts
                    self.failures.append(f"{type(e).__name__}: {e}")
        finally:
            client.close()

    def stop(self):
        self.stopping.set()
        self.join(60)
        return self.failures


def test_connections_the_old_server_holds_see_no_failure(folder, shm_key):
    """Clients that keep their connection (four over HTTP, four over gRPC)
    run through three upgrades in a row: the old server serves them
    through its pause (HTTP answers close their connections; gRPC answers
    follow its GOAWAY), so none fails and each moves to the next server."""
    old = start_old(folder)
    handle = system_region(shm_key, old)
    clients = [KeptClient(httpclient, old.url, "sysio") for _ in range(4)] + \
              [KeptClient(grpcclient, old.grpc_url, "sysio") for _ in range(4)]
    try:
        for _ in range(3):
            counts = [c.ok for c in clients]
            old.wait_until(lambda: all(c.ok > n + 4 for c, n in zip(clients, counts)),
                           what="answers from every client")
            new = start_new(folder)
            assert_exits_clean(old, by_itself=True)
            old = new
        counts = [c.ok for c in clients]
        old.wait_until(lambda: all(c.ok > n + 4 for c, n in zip(clients, counts)),
                       what="answers from every client after the last upgrade")
        failures = [f for c in clients for f in c.stop()]
        assert failures == [], failures
        assert set(status(old)) == {"sysio"}
        assert old.json("POST", "/v2/systemsharedmemory/region/sysio/unregister")[0] == 200
        assert_exits_clean(old)
    finally:
        for c in clients:
            c.stop()
        shm.destroy_shared_memory_region(handle)


def test_new_server_failing_half_way_leaves_the_old_one_serving(folder, shm_key):
    old, handle, sock, buf, load = serving_both(folder, shm_key)
    try:
        time.sleep(0.3)
        other = str(old.port + 1 if old.port < 65535 else old.port - 1)
        new = subprocess.run([binary(), "--take-over", os.path.join(folder, "up.sock"), "--port", other,
                              "--allow-client-shm=true"], capture_output=True, text=True, timeout=60)
        time.sleep(0.5)
    finally:
        failures = load.stop()
    assert new.returncode == 1, new.stderr
    assert f"--port {other} is not the running server's port, {old.port}" in new.stderr, new.stderr
    assert failures == [], failures
    assert set(status(old)) == {"sysio", "udsio"}
    outputs_in_region(old, "udsio")
    register_again(sock, "udsio2")  # its connection is served again
    sock.close()
    old.wait_until(lambda: set(status(old)) == {"sysio"}, what="the connection's regions to go")
    assert old.json("POST", "/v2/systemsharedmemory/region/sysio/unregister")[0] == 200
    shm.destroy_shared_memory_region(handle)
    buf.close()
    err = assert_exits_clean(old)
    assert "upgrade: serving again" in err, err


@pytest.mark.parametrize("stale", [False, True], ids=["no-file", "stale-socket"])
def test_take_over_where_nothing_listens_is_a_clear_error(folder, stale):
    path = os.path.join(folder, "none.sock")
    if stale:  # a socket file nobody listens on, as a dead server leaves
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(path)
        s.close()
    run = subprocess.run([binary(), "--take-over", path, "--port", "0"], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 1, run.stderr
    why = "nothing listens there (connection refused)" if stale else "no such socket"
    assert f"error: --take-over {path}: {why}; is a server running with --handover-socket {path}?" \
        in run.stderr, run.stderr
    # --port 0 names no address the old server's clients know: nothing to start on instead
    assert "without a fixed --port this one has no address of its own" in run.stderr, run.stderr
    assert "listening on" not in run.stdout


def answer_as(uid, path):
    """The first line the server answers a peer of uid (a forked child)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: connect as uid, pass the line up, leave
        try:
            os.setuid(uid)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(path)
            os.write(write_end, s.makefile("rb").readline())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as f:
        line = f.read().decode().strip()
    os.waitpid(pid, 0)
    return line


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to connect as another uid")
def test_peer_of_another_uid_is_refused(folder):
    old = start_old(folder)
    path = os.path.join(folder, "up.sock")
    os.chmod(folder, 0o755)
    os.chmod(path, 0o666)  # past the file's mode: the server's own check answers
    assert answer_as(65534, path) == \
        f"refused: uid 65534 may not take over this server, which runs as uid {os.geteuid()}"
    assert old.json("GET", "/v2/health/ready") == (200, {"ready": True})
    err = assert_exits_clean(old)
    assert "upgrade: refused a successor: uid 65534 may not take over" in err, err


def test_regions_without_their_connection_go_after_the_grace(folder):
    old = start_old(folder)
    uds = os.path.join(folder, "uds.sock")
    kept, kept_buf = register_region(uds, "kept")
    lost, lost_buf = register_region(uds, "lost")
    # One slot: the second connection cannot be adopted, and its region stays
    # for the grace (still served), then goes.
    new = start_new(folder, "--uds-max-connections", "1", "--orphan-grace-s", "2")
    assert_exits_clean(old, by_itself=True)
    try:
        assert set(status(new)) == {"kept", "lost"}
        assert lost.recv(1) == b""  # its connection was closed
        outputs_in_region(new, "lost")
        new.wait_until(lambda: set(status(new)) == {"kept"}, timeout=10, what="the orphan to go")
        kept.close()
        new.wait_until(lambda: status(new) == {}, what="the adopted connection's region to go")
    finally:
        lost.close()
        kept_buf.close()
        lost_buf.close()
        err = assert_exits_clean(new)
    assert "its regions are unregistered: no connection came for them" in err, err
