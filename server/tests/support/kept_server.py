"""The server run by fd_keeper.py, the stand-in service manager, for the
tests of crash survival (server/tests/crash/): both outputs read as they
come, the server's pid and port as of its latest start, plain HTTP to it."""
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from server_process import ALLOW_SHM, START_TIMEOUT_S, STOP_TIMEOUT_S, binary, unmanaged_env

KEEPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fd_keeper.py")
NOT_BUILT = "crash survival: not compiled in"


class KeptServer:
    """fd_keeper.py -v KEEPER_ARGS -- SERVER --port 0 ... ARGS; or, with
    command, that program in the server's place."""

    def __init__(self, *args, keeper_args=(), server=None, command=None):
        command = command or [server or binary(), "--host", "127.0.0.1", "--port", "0", ALLOW_SHM,
                              "-v", *args]
        cmd = [sys.executable, KEEPER, "-v", *keeper_args, "--", *command]
        # A process group of its own: a keeper that does not stop is killed with
        # its server, so that no server outlives the test.
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=unmanaged_env(),
                                     process_group=0)
        self.lines = {"out": [], "err": []}
        self.cond = threading.Condition()
        self.readers = [threading.Thread(target=self._read, args=(s, k), daemon=True)
                        for s, k in ((self.proc.stdout, "out"), (self.proc.stderr, "err"))]
        for r in self.readers:
            r.start()
        self.rc = None

    def _read(self, stream, kind):
        for raw in stream:
            with self.cond:
                self.lines[kind].append(raw.decode(errors="replace").rstrip("\n"))
                self.cond.notify_all()

    def wait_line(self, pattern, kind="err", start=0, timeout=START_TIMEOUT_S):
        """(index, match) of the first line from start that matches pattern."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for i in range(start, len(self.lines[kind])):
                    m = regex.search(self.lines[kind][i])
                    if m:
                        return i, m
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None and not self._reading():
                    raise AssertionError(f"no line matching {pattern!r} on {kind}:\n" + self.text(kind))
                self.cond.wait(min(left, 0.1))

    def _reading(self):
        return any(r.is_alive() for r in self.readers)

    def text(self, kind="err"):
        with self.cond:
            return "\n".join(self.lines[kind])

    def started(self, n):
        """Wait for the server's n-th start (1: the first); its pid, and its
        HTTP port. Skips the test where the server has no crash survival."""
        _, m = self.wait_line(r"crash survival: (regions kept|not compiled in)")
        if n == 1 and NOT_BUILT in m.group(0):
            self.stop()
            pytest.skip("the server under test was built without libsystemd (SERVER_WITH_SYSTEMD=OFF)")
        pids = self.all_matches(r"started pid (\d+)", n)
        ports = self.all_matches(r"^listening on 127\.0\.0\.1:(\d+)", n, kind="out")
        self.pid, self.port = int(pids[n - 1]), int(ports[n - 1])
        return self.pid, self.port

    def all_matches(self, pattern, count, kind="err"):
        found, start = [], 0
        while len(found) < count:
            i, m = self.wait_line(pattern, kind, start)
            found.append(m.group(1))
            start = i + 1
        return found

    def json(self, method, path, body=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request(method, path, body=None if body is None else json.dumps(body))
            resp = conn.getresponse()
            data = resp.read()
            return resp.status, json.loads(data) if data else None
        finally:
            conn.close()

    def stop(self):
        """SIGTERM to the keeper, which passes it to the server: its exit code."""
        if self.rc is None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
            try:
                self.rc = self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.rc = self.proc.wait()
                raise AssertionError("the keeper did not stop:\n" + self.text())
            for r in self.readers:
                r.join(5)
        return self.rc
