"""The worker pool counts threads at work, not threads waiting for a GPU run
(src/common/worker_pool.h): a waiting item lets the next one start on a
spare thread, without a wait n bounds the items at work, and the spares
bound how many may wait, with threads that poll for work before they sleep
(--spin-us) as without, where a polling thread takes the next item itself.
Runs tests/support/worker_pool_waits.c, built next to
$SERVER_BIN. The C server only."""
import subprocess

import pytest

from server_process import sibling_binary

pytestmark = pytest.mark.servers("c")


def test_waits_do_not_count_against_the_workers(server_kind):
    run = subprocess.run([sibling_binary("shmreg-server-worker-pool-test")],
                         capture_output=True, text=True, timeout=60)
    lines = run.stdout.splitlines()
    assert [line for line in lines if not line.startswith("ok ")] == [], run.stdout + run.stderr
    assert len(lines) == 9, run.stdout
    assert run.returncode == 0
