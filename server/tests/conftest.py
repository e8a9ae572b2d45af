"""Fixtures: frontends started per test module or per test, always stopped
with SIGTERM and checked for a clean shutdown (exit 0, nothing left mapped or
open), and a unique prefix for the /dev/shm objects the tests create.

Every test that starts a frontend through `server` or `start_frontend` runs
once per frontend: "c" (server) and "python"
(examples/python-frontend). `--frontend c` (or python) picks one; a test
marked `@pytest.mark.frontends("c")` runs against those only."""
import os
import sys
import uuid

import pytest

# The helpers every folder's tests import (server_process.py, grpc_support.py, ...).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "support"))
from server_process import Frontend, frontend_command, leftover_report  # noqa: E402

# Every shm object a test creates starts with this, so that the check at the
# end finds ours only (other suites may share /dev/shm).
SHM_MARKER = f"shmreg_fe_{os.getpid()}_{uuid.uuid4().hex[:6]}"


FRONTENDS = ("c", "python")


def pytest_addoption(parser):
    parser.addoption("--frontend", action="append", choices=FRONTENDS,
                     help="run against this frontend only (repeatable; default: all)")


def pytest_configure(config):
    config.addinivalue_line("markers", "frontends(*names): only these frontends can run it")


def pytest_generate_tests(metafunc):
    if "frontend" not in metafunc.fixturenames:
        return
    wanted = metafunc.config.getoption("frontend") or FRONTENDS
    marker = metafunc.definition.get_closest_marker("frontends")
    able = marker.args if marker else FRONTENDS
    params = [f if f in able else pytest.param(f, marks=pytest.mark.skip(
                  reason=f"needs the {' or '.join(able)} frontend")) for f in wanted]
    metafunc.parametrize("frontend", params, scope="module")


def assert_clean_stop(server):
    rc, err = server.stop()
    assert rc == 0, f"frontend exited {rc}:\n{err}"
    assert leftover_report(err) == (0, 0), err


@pytest.fixture
def start_frontend(frontend):
    """Factory: start_frontend(*args) -> Frontend, stopped cleanly afterwards."""
    started = []

    def start(*args):
        server = Frontend(*args, command=frontend_command(frontend))
        started.append(server)
        return server

    yield start
    for server in started:
        assert_clean_stop(server)


@pytest.fixture(scope="module")
def server(frontend):
    """A frontend with the default (defer) policy, shared by a module."""
    s = Frontend("--delay-ms", "1500", "--threads", "4", command=frontend_command(frontend))
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
