"""Start and stop a server, and speak plain HTTP to it.

Two servers take the same options and give the same answers: the C
binary shmreg-server, from $SERVER_BIN (scripts/tests.d/60-server.sh
sets it), and the Python one, python/examples/fastapi_server/server.py,
run by this interpreter (which must have the shmreg package with its
fastapi extra).
Each server listens on a free loopback port (--port 0) and prints it first.
"""
import http.client
import json
import os
import re
import select
import signal
import subprocess
import sys
import time

START_TIMEOUT_S = 10
STOP_TIMEOUT_S = 30


def binary():
    path = os.environ.get("SERVER_BIN")
    if not path or not os.access(path, os.X_OK):
        raise RuntimeError("set SERVER_BIN to the built shmreg-server")
    return path


PYTHON_SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                               "python", "examples", "fastapi_server", "server.py")


def under_asan():
    """Whether the server under test is the ASan build, which keeps freed
    memory in its quarantine: its resident size says little there."""
    return "ASAN_OPTIONS" in os.environ


def server_command(server_kind):
    """The program that starts a server: "c" or "python"."""
    if server_kind == "python":
        return [sys.executable, os.path.normpath(PYTHON_SERVER)]
    if server_kind == "c":
        return [binary()]
    raise ValueError(f"unknown server {server_kind!r}: c or python")


def sibling_binary(name):
    """A program the server's build puts next to $SERVER_BIN."""
    path = os.path.join(os.path.dirname(binary()), name)
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"{name} was not built next to $SERVER_BIN ({binary()})")
    return path


# Both servers refuse client shared memory unless told otherwise, as
# Triton 2.73 does; the tests use it, so every server they start allows it
# unless a test passes its own --allow-client-shm.
ALLOW_SHM = "--allow-client-shm=true"


def unmanaged_env():
    """This environment without a service manager's variables: a test run
    started by systemd must not have every server it starts store its
    regions in that manager (server/tests/crash/ sets its own)."""
    return {k: v for k, v in os.environ.items()
            if k != "NOTIFY_SOCKET" and not k.startswith("LISTEN_")}


class Server:
    """One running server process. command: the program and its leading
    arguments, when it is not the server itself; the server's options
    (address, port, --allow-client-shm=true unless args say otherwise, then
    args) follow them."""

    def __init__(self, *args, command=None):
        allow = [] if any(str(a).startswith("--allow-client-shm") for a in args) else [ALLOW_SHM]
        self.args = [*(command or [binary()]), "--host", "127.0.0.1", "--port", "0", *allow,
                     *args]
        # Unbuffered: its lines are waited for with select on the pipe, and a
        # buffered reader would take the server's next line ("grpc listening
        # on ...") off the pipe with this one, where select no longer sees it.
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     bufsize=0, env=unmanaged_env())
        ready, _, _ = select.select([self.proc.stdout], [], [], START_TIMEOUT_S)
        line = self.proc.stdout.readline().decode() if ready else ""
        match = re.match(r"listening on 127\.0\.0\.1:(\d+)", line)
        if not match:
            self.proc.kill()
            _, err = self.proc.communicate()
            raise RuntimeError(f"server did not start: {line!r} {err.decode()!r}")
        self.port = int(match.group(1))
        self.url = f"127.0.0.1:{self.port}"
        self.stderr = None
        self.early_stderr = b""  # what wait_stderr read before stop

    @property
    def pid(self):
        return self.proc.pid

    def shm_mappings(self, marker):
        """Lines of the server's /proc/PID/maps that map a /dev/shm object
        whose name contains marker."""
        with open(f"/proc/{self.pid}/maps") as maps:
            return [line for line in maps if "/dev/shm/" in line and marker in line]

    def memory_mib(self, field="VmRSS"):
        """A memory figure of the server's /proc/PID/status (VmRSS: resident
        now, VmHWM: the peak), in MiB."""
        with open(f"/proc/{self.pid}/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
        raise AssertionError(f"no {field} in /proc/{self.pid}/status")

    def stop(self, sig=signal.SIGTERM):
        """Signal the server and wait for it; returns (exit code, stderr).
        A second call returns the first call's answer."""
        if self.stderr is not None:
            return self.proc.returncode, self.stderr
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            _, err = self.proc.communicate(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
            raise AssertionError("server did not stop within %d s" % STOP_TIMEOUT_S)
        self.stderr = (self.early_stderr + err).decode()
        return self.proc.returncode, self.stderr

    def wait_stderr(self, words, timeout=15):
        """Read the server's stderr until it holds words (what was read is
        kept for stop's answer); an AssertionError after timeout s."""
        deadline = time.monotonic() + timeout
        while words.encode() not in self.early_stderr:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.proc.stderr], [], [], max(left, 0))
            chunk = os.read(self.proc.stderr.fileno(), 65536) if ready else b""
            if not chunk:
                raise AssertionError(f"no {words!r} on the server's stderr within {timeout} s:\n"
                                     f"{self.early_stderr.decode(errors='replace')}")
            self.early_stderr += chunk

    def request(self, method, path, body=None, headers=None, timeout=30, source=None):
        """(status, headers, body bytes). body: bytes, str, or a JSON value.
        headers: a mapping with case-insensitive names, as HTTP has them
        (uvicorn sends them in lower case). source: the loopback address to
        connect from (any of 127/8), as a client of another host would."""
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
        if isinstance(body, str):
            body = body.encode()
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout,
                                          source_address=(source, 0) if source else None)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            return resp.status, resp.headers, resp.read()
        finally:
            conn.close()

    def json(self, method, path, body=None, headers=None):
        """(status, parsed JSON body or None when empty)."""
        status, _, data = self.request(method, path, body, headers)
        return status, (json.loads(data) if data else None)

    def wait_until(self, predicate, timeout=10, what="condition"):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.01)
        raise AssertionError(f"timed out waiting for {what}")


def leftover_report(stderr):
    """The (mappings, descriptors) the server counted after destroying its registry."""
    match = re.search(r"shm mappings left: (\d+), shm descriptors left: (\d+)", stderr)
    if not match:
        raise AssertionError(f"no leftover report in the server's log:\n{stderr}")
    return int(match.group(1)), int(match.group(2))


def assert_exits_clean(server, by_itself=False):
    """The server ends with 0 (by_itself: once taken over by a live upgrade,
    waited for up to 30 s; else on SIGTERM) and nothing left mapped or open.
    Returns its stderr."""
    if by_itself:
        try:
            server.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
    rc, err = server.stop()
    assert rc == 0, f"server exited {rc}:\n{err}"
    assert leftover_report(err) == (0, 0), err
    return err
