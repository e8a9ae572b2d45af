"""Fixtures: servers started per test module or per test, always stopped
with SIGTERM and checked for a clean shutdown (exit 0, nothing left mapped or
open), and a unique prefix for the /dev/shm objects the tests create.

Every test that starts a server through `server` or `start_server` runs
once per server: "c" (shmreg-server) and "python"
(python/examples/fastapi_server). `--server c` (or python) picks one; a test
marked `@pytest.mark.servers("c")` runs against those only."""
import os
import sys
import uuid

import pytest

# The helpers every folder's tests import (server_process.py, grpc_support.py, ...).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "support"))
from server_process import Server, server_command, leftover_report  # noqa: E402

# Every shm object a test creates starts with this, so that the check at the
# end finds ours only (other suites may share /dev/shm).
SHM_MARKER = f"shmreg_fe_{os.getpid()}_{uuid.uuid4().hex[:6]}"


SERVERS = ("c", "python")


def pytest_addoption(parser):
    parser.addoption("--server", action="append", choices=SERVERS,
                     help="run against this server only (repeatable; default: all)")


def pytest_configure(config):
    config.addinivalue_line("markers", "servers(*names): only these servers can run it")


def pytest_generate_tests(metafunc):
    if "server_kind" not in metafunc.fixturenames:
        return
    wanted = metafunc.config.getoption("server") or SERVERS
    marker = metafunc.definition.get_closest_marker("servers")
    able = marker.args if marker else SERVERS
    params = [f if f in able else pytest.param(f, marks=pytest.mark.skip(
                  reason=f"needs the {' or '.join(able)} server")) for f in wanted]
    metafunc.parametrize("server_kind", params, scope="module")


def assert_clean_stop(server):
    rc, err = server.stop()
    assert rc == 0, f"server exited {rc}:\n{err}"
    assert leftover_report(err) == (0, 0), err


@pytest.fixture
def start_server(server_kind):
    """Factory: start_server(*args) -> Server, stopped cleanly afterwards."""
    started = []

    def start(*args):
        server = Server(*args, command=server_command(server_kind))
        started.append(server)
        return server

    yield start
    for server in started:
        assert_clean_stop(server)


@pytest.fixture(scope="module")
def server(server_kind):
    """A server with the default (defer) policy, shared by a module."""
    s = Server("--delay-ms", "1500", "--threads", "4", command=server_command(server_kind))
    yield s
    assert_clean_stop(s)


@pytest.fixture
def shm_key():
    """A factory of unique shm keys: shm_key("in0") -> "/<marker>_in0"."""
    return lambda suffix: f"/{SHM_MARKER}_{suffix}"


@pytest.fixture(scope="session", autouse=True)
def no_shm_objects_left():
    yield
    left = [name for name in os.listdir("/dev/shm") if name.startswith(SHM_MARKER)]
    assert left == [], f"shm objects left in /dev/shm: {left}"
