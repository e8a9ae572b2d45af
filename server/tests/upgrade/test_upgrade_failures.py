"""A live upgrade that fails at each step leaves one server serving
(server/src/upgrade.h lists the steps): the old one, when the new one dies
or the state is refused; the new one, when the old one dies. The old server
is the real one; what the other side does at each step is played by this
test, either as a fake successor on the old server's --handover-socket or
as a relay between the real new server and the real old one, which passes
every message both ways with its descriptors and cuts in at the step. After
each: within a bounded time a server answers /v2/health/ready on the port
with the regions it has listed, and every server that ends ends clean."""
import os
import select
import signal
import socket
import subprocess
import threading
import time

import pytest

from grpc_support import with_grpc
from server_process import Server, assert_exits_clean, binary
from test_live_upgrade import (folder, outputs_in_region,  # noqa: F401 (folder: a fixture)
                               start_old, system_region)
from uds_client import register_region
from uds_fixtures import status, wait_uds_line

import tritonclient.utils.shared_memory as shm

READY_WITHIN_S = 15
MAX_FDS = 253  # the kernel's SCM_MAX_FD: the most one message carries


def ready_within(port, seconds=READY_WITHIN_S):
    """Wait until a server answers /v2/health/ready on port with 200."""
    probe = Server.__new__(Server)
    probe.port = port
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if probe.json("GET", "/v2/health/ready")[0] == 200:
                return probe
        except OSError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"nothing answered ready on port {port} within {seconds} s")


def old_with_regions(folder, shm_key):
    """The old server with 'sysio' (HTTP) and 'udsio' (the Unix socket):
    (server, shm handle, the client's socket, its mapping)."""
    old = start_old(folder)
    handle = system_region(shm_key, old)
    sock, buf = register_region(os.path.join(folder, "uds.sock"), "udsio")
    return old, handle, sock, buf


def serves_both(server):
    """Both regions listed, and inference writes into the memfd one."""
    assert set(status(server)) == {"sysio", "udsio"}
    outputs_in_region(server, "udsio")


def kill_hard(server):
    """kill -9, and reap it: its sockets and its --uds file are left as a
    crash leaves them."""
    server.proc.send_signal(signal.SIGKILL)
    rc, _ = server.stop()
    assert rc == -signal.SIGKILL


def read_line(sock):
    line = b""
    while not line.endswith(b"\n"):
        b = sock.recv(1)  # one byte at a time: the frames after it carry descriptors
        if not b:
            break
        line += b
    return line


def recv_message(sock):
    """One message with its descriptors: a message that carries some is
    never read together with the next."""
    return socket.recv_fds(sock, 1 << 16, MAX_FDS)[:2]


def close_all(fds):
    for fd in fds:
        os.close(fd)


# ------------------------------------------------- a fake successor

def fake_successor(path, step):
    """Connect to the old server's --handover-socket as its successor and
    go as far as step: "connect" (then end), "ok" (its first answer read),
    "hello" (the state's first message read), "wrong-word" (the whole state
    read, answered "Z" instead of "R"). Returns what the old server sent
    last ("X" for the word that it serves again) or b""."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.settimeout(30)
    last = b""
    try:
        if step == "connect":
            return last
        assert read_line(s) == b"ok\n"
        if step == "ok":
            return last
        data, fds = recv_message(s)
        close_all(fds)
        if step == "hello":
            return last
        while True:  # the rest of the state, until the old server waits for "R"
            ready, _, _ = select.select([s], [], [], 1.0)
            if not ready:
                break
            data, fds = recv_message(s)
            close_all(fds)
        s.sendall(b"Z")
        return s.recv(16)
    finally:
        s.close()


@pytest.mark.parametrize("step", ["connect", "ok", "hello", "wrong-word"])
def test_successor_dying_at_each_step_leaves_the_old_one_serving(folder, shm_key, step):
    old, handle, sock, buf = old_with_regions(folder, shm_key)
    try:
        last = fake_successor(os.path.join(folder, "up.sock"), step)
        if step == "wrong-word":
            assert last == b"X", last  # it serves again, and says so before it closes
        # A successor gone at once is seen only once the old server has
        # stopped accepting: until it says so, a ready answer is from before.
        old.wait_stderr("upgrade: serving again")
        serves_both(ready_within(old.port))
        assert old.proc.poll() is None
    finally:
        sock.close()
        shm.destroy_shared_memory_region(handle)
        buf.close()
    err = assert_exits_clean(old)
    assert "upgrade: serving again" in err, err


# ------------------------------------------------------------ a relay

class Relay:
    """A --take-over socket of its own, for the new server; the old
    server's --handover-socket on the other side. Everything passes as the
    two would send it, until a step of the test's choosing."""

    def __init__(self, folder):
        self.path = os.path.join(folder, "relay.sock")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.path)
        self.listener.listen(1)
        self.listener.settimeout(30)
        self.old_path = os.path.join(folder, "up.sock")
        self.new = self.old = None

    def connect(self):
        """The new server connects; the relay connects to the old one and
        passes its first answer."""
        self.new, _ = self.listener.accept()
        self.old = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.old.connect(self.old_path)
        self.old.settimeout(30)
        line = read_line(self.old)
        assert line == b"ok\n", line
        self.new.sendall(line)

    def pass_message(self, cut=None):
        """One of the old server's messages to the new one. cut="bytes":
        only its first half, with its descriptors; cut="fds": its bytes
        without them."""
        data, fds = recv_message(self.old)
        try:
            if cut == "bytes":
                data = data[:len(data) // 2]
            socket.send_fds(self.new, [data], [] if cut == "fds" else fds)
        finally:
            close_all(fds)

    def pass_state(self):
        """The old server's messages until the new one speaks: its word."""
        while True:
            ready, _, _ = select.select([self.old, self.new], [], [], 30)
            assert ready, "neither server spoke for 30 s"
            if self.new in ready:
                return self.new.recv(1)
            self.pass_message()

    def close_new(self):
        if self.new:
            self.new.close()
            self.new = None

    def close_old(self):
        if self.old:
            self.old.close()
            self.old = None

    def close(self):
        self.close_new()
        self.close_old()
        self.listener.close()


def new_server(relay, *flags):
    """The real new server, taking over through the relay, with the old
    one's ports and --uds given (for its fallback)."""
    return Server("--take-over", relay.path, "--handover-socket", relay.old_path, *flags)


def old_ones_flags(old, folder):
    return ("--port", str(old.port), "--grpc-port", str(old.grpc_port), "--uds",
            os.path.join(folder, "uds.sock"))


def old_dies_at(relay, old, step):
    """Play the relay up to step, then kill the old server and end the new
    one's connection as its death would."""
    relay.connect()
    if step == "mid-send":
        relay.pass_message()
        relay.pass_message(cut="bytes")
    elif step in ("after-send", "after-ready"):
        word = relay.pass_state()
        assert word == b"R", word
        if step == "after-ready":  # the old one reads "R", and dies before "A" reaches the new one
            relay.old.sendall(word)
            assert relay.old.recv(1) == b"A"
    kill_hard(old)
    # What the old server sent and the relay did not pass was never sent,
    # as far as the new server can tell: its descriptors (the listening
    # sockets among them) go with the relay's end.
    relay.close_old()
    relay.close_new()


@pytest.mark.parametrize("step", ["after-ok", "mid-send", "after-send", "after-ready"])
def test_old_server_dying_at_each_step_leaves_the_new_one_serving(folder, shm_key, step):
    old, handle, sock, buf = old_with_regions(folder, shm_key)
    relay = Relay(folder)
    flags = old_ones_flags(old, folder)
    player = threading.Thread(target=old_dies_at, args=(relay, old, step), daemon=True)
    player.start()
    new = None
    try:
        new = wait_uds_line(with_grpc(new_server(relay, *flags)))
        player.join(30)
        assert new.port == old.port
        ready_within(new.port)
        if step in ("after-ok", "mid-send"):
            # Nothing came whole: this one binds the old one's ports, with
            # no region; the clients register theirs again.
            assert status(new) == {}
            sock.close()
            sock, buf2 = register_region(os.path.join(folder, "uds.sock"), "udsio")
            buf.close()
            buf = buf2
            assert set(status(new)) == {"udsio"}
        else:
            serves_both(new)
            outputs_in_region(new, "sysio")
    finally:
        relay.close()
        sock.close()
        shm.destroy_shared_memory_region(handle)
        buf.close()
        err = assert_exits_clean(new) if new else ""
    if step in ("after-ok", "mid-send"):
        assert "the running server is gone before it handed over" in err, err
    else:
        assert "ended the connection without a word" in err, err
    assert "warning: no --handover-socket" not in err, err  # the dead one's file was replaced


def test_old_server_dead_before_the_take_over_starts_on_the_flags(folder, shm_key):
    old, handle, sock, buf = old_with_regions(folder, shm_key)
    flags = old_ones_flags(old, folder)
    kill_hard(old)
    sock.close()
    buf.close()
    shm.destroy_shared_memory_region(handle)
    hand = os.path.join(folder, "up.sock")  # left by the dead server, as its --uds file
    new = wait_uds_line(with_grpc(Server("--take-over", hand, "--handover-socket", hand, *flags)))
    assert new.port == old.port
    ready_within(new.port)
    assert status(new) == {}
    err = assert_exits_clean(new)
    assert "nothing listens there (connection refused)" in err, err
    assert "this one starts on its own flags" in err, err


def run_new(relay, flags, play):
    """The new server through the relay, played by play(relay) on a thread:
    (exit code, stderr, stdout), the server having ended by itself."""
    player = threading.Thread(target=play, args=(relay,), daemon=True)
    player.start()
    new = subprocess.run([binary(), "--take-over", relay.path, "--host", "127.0.0.1",
                          "--allow-client-shm=true", *flags], capture_output=True, text=True, timeout=120)
    player.join(30)
    return new.returncode, new.stderr, new.stdout


def cut_mid_send(relay):
    """The connection cut part way, the old server alive."""
    relay.connect()
    relay.pass_message()
    relay.pass_message(cut="bytes")
    relay.close_new()


def descriptors_dropped(relay):
    """A message of the state without its descriptors."""
    relay.connect()
    relay.pass_message()
    relay.pass_message(cut="fds")
    relay.new.recv(1)  # the new server's end: it refused the state


def old_resumes_after_ready(relay):
    """The old server is answered something else than "R": it serves again
    and says so, which passes to the new one."""
    relay.connect()
    assert relay.pass_state() == b"R"
    relay.old.sendall(b"Z")
    word = relay.old.recv(1)
    assert word == b"X", word
    relay.new.sendall(word)
    relay.new.recv(1)


@pytest.mark.parametrize("play, says", [
    (cut_mid_send, "cannot start on this server's own flags either"),
    (descriptors_dropped, "receiving the state"),
    (old_resumes_after_ready, "the running server serves again"),
], ids=["connection-cut", "descriptors-dropped", "old-resumes"])
def test_old_server_alive_keeps_serving_and_the_new_one_stops(folder, shm_key, play, says):
    old, handle, sock, buf = old_with_regions(folder, shm_key)
    relay = Relay(folder)
    try:
        rc, err, out = run_new(relay, old_ones_flags(old, folder), play)
        relay.close()  # the old server reads the end, if it still waits
        assert rc == 1, err
        assert says in err, err
        serves_both(ready_within(old.port))
    finally:
        relay.close()
        sock.close()
        shm.destroy_shared_memory_region(handle)
        buf.close()
    err_old = assert_exits_clean(old)
    assert "upgrade: serving again" in err_old, err_old
