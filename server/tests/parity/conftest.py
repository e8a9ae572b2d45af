"""Fixtures of the parity tests: one real Triton (triton_process.Triton) and
one server of server/ (the C binary of $SERVER_BIN, HTTP and gRPC), each
started once for the whole test run and stopped at its end; the example must then
exit 0 with nothing left mapped or open, as in server/tests."""
import os
import sys
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))

from server_process import binary, leftover_report  # noqa: E402
from grpc_support import start_with_grpc  # noqa: E402
from triton_process import Triton  # noqa: E402

# Every shm object of a run starts with this; answers show it as <m>. Of one
# length in every run (the pid padded to pid_max's 7 digits), since a parser's
# message may give the column where it stopped.
MARKER = f"shmreg_parity_{os.getpid():07d}_{uuid.uuid4().hex[:6]}"

# The example's largest request body, in MiB (cases.OVERSIZED is just past it).
MAX_BODY_MB = 1


def server_args():
    """The example's options: a 1 MiB body limit. Client shared memory is
    allowed by server_process.Server, as for every test server (Triton
    2.51 has no switch for it and always allows it)."""
    return ["--max-body-mb", str(MAX_BODY_MB)]


@pytest.fixture(scope="session")
def triton():
    server = Triton()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def ours():
    server = start_with_grpc(*server_args())
    yield server
    rc, err = server.stop()
    assert rc == 0, f"server exited {rc}:\n{err}"
    assert leftover_report(err) == (0, 0), err


@pytest.fixture(scope="session", autouse=True)
def no_shm_objects_left():
    yield
    left = [n for n in os.listdir("/dev/shm") if n.startswith(MARKER)]
    assert left == [], f"shm objects left in /dev/shm: {left}"
