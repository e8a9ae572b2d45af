"""Which path a shared-memory tensor takes (src/core/tensor_paths.c), for
every case, including those of the GPU model that a CPU machine cannot
reach through a request: a system region goes by DMA where it lies only
when it is pinned and the model runs on a GPU; unpinned, a GPU model gets
the one-copy staged path; a model on the CPU always copies (guarded for a
system region, through the device for a CUDA one). And the counters add
tensors and bytes per path and direction, and nothing for a tensor that is
not in shared memory. Runs tests/support/tensor_path_table.c, built next to
$SERVER_BIN. The C server only."""
import subprocess

import pytest

from server_process import sibling_binary

pytestmark = pytest.mark.servers("c")

EXPECTED = {
    # (model on the GPU, kind, pinned): path
    ("0", "system", "0"): "cpu_copy",
    ("0", "system", "1"): "cpu_copy",  # a CPU model reads through the guarded copy even so
    ("0", "cuda", "0"): "device_copy",
    ("1", "system", "0"): "staged_copy",
    ("1", "system", "1"): "dma_in_place",
    ("1", "cuda", "0"): "dma_in_place",
    ("0", "remote", "0"): "remote_copy",  # another host's memory: the library's get or put
    ("1", "remote", "0"): "remote_copy",
}


def table():
    out = subprocess.run([sibling_binary("shmreg-server-path-table")], capture_output=True,
                         text=True, timeout=20, check=True).stdout
    lines = [line.split() for line in out.splitlines()]
    decisions = {tuple(f[:3]): f[3] for f in lines if f[0] != "total"}
    totals = {(f[1], f[2]): (int(f[3]), int(f[4])) for f in lines if f[0] == "total"}
    return decisions, totals


def test_every_case_takes_its_path(server_kind):
    decisions, _ = table()
    assert decisions == EXPECTED


def test_counters_add_tensors_and_bytes_per_path_and_direction(server_kind):
    _, totals = table()
    assert totals.pop(("staged_copy", "input")) == (2, 2 * 1474560)
    assert totals.pop(("dma_in_place", "output")) == (1, 846720)
    assert set(totals.values()) == {(0, 0)}  # every other path, and the uncounted tensor
    assert len(totals) == 8
