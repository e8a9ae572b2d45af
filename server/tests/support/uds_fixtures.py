"""Fixtures and checks shared by the tests of the server's --uds socket
(server/tests/uds/): a socket path, a server listening on it, and what the
server holds (regions by HTTP status, its open descriptors)."""
import os
import re
import shutil
import tempfile
import threading
import time

import pytest

from server_process import START_TIMEOUT_S


@pytest.fixture
def sock_path():
    """A socket path short enough for sun_path, in a folder of its own."""
    folder = tempfile.mkdtemp(prefix="shmreg-uds-")
    yield os.path.join(folder, "fe.sock")
    shutil.rmtree(folder)


def wait_uds_line(server):
    """Read the "uds listening on PATH" line (after "listening on" and, with
    --grpc-port, "grpc listening on"). Not with select: the line may already
    sit in the pipe reader's buffer, read along with the one before."""
    got = []
    reader = threading.Thread(target=lambda: got.append(server.proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(START_TIMEOUT_S)
    line = got[0].decode() if got else ""
    assert re.match(r"uds listening on ", line), f"no uds listening line: {line!r}"
    return server


@pytest.fixture
def uds_server(start_server, sock_path):
    """Factory: uds_server(*args) -> a server listening on sock_path."""
    def start(*args):
        server = wait_uds_line(start_server("--uds", sock_path, *args))
        server.sock_path = sock_path
        return server
    return start


def status(server, kind="system"):
    """The server's regions of kind ("system" or "cuda") by name."""
    code, regions = server.json("GET", f"/v2/{kind}sharedmemory/status")
    assert code == 200, regions
    return {r["name"]: r for r in regions}


def open_fds(server):
    return len(os.listdir(f"/proc/{server.pid}/fd"))


def settled_open_fds(server):
    """open_fds once it holds still for a moment: the server closes its side
    of an HTTP connection (a status check's) a little after the client."""
    last = open_fds(server)
    for _ in range(40):
        time.sleep(0.05)
        now = open_fds(server)
        if now == last:
            return now
        last = now
    return last
