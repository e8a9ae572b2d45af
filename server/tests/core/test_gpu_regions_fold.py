"""The fold behind /metrics' shmreg_cuda_regions and
shmreg_cuda_region_bytes (src/common/gpu_regions.h): one entry per GPU
UUID, in the UUIDs' order, with the regions and bytes of that GPU summed;
regions without a UUID, and UUIDs a label could not carry as they are,
left out. A CPU machine has no CUDA region to show on the page, so the
fold is run on given entries by tests/support/gpu_regions_fold.c, built
next to $SERVER_BIN. The C server only."""
import subprocess

import pytest

from server_process import sibling_binary

pytestmark = pytest.mark.servers("c")

GPU0 = "GPU-5b3e1c2a-0f4d-4e6b-9a8c-1d2e3f405162"
GPU1 = "GPU-0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
MIG = "MIG-7c8d9e0f-1a2b-4c3d-9e4f-5a6b7c8d9e0f"


def fold(*regions):
    """[(uuid, regions, bytes)] the fold leaves from regions given as
    (uuid or None, bytes)."""
    args = [f"{uuid or ''}={nbytes}" for uuid, nbytes in regions]
    out = subprocess.run([sibling_binary("shmreg-server-gpu-regions-test"), *args],
                         capture_output=True, text=True, timeout=20, check=True).stdout
    return [(u, int(r), int(b)) for u, r, b in (line.split() for line in out.splitlines())]


def test_regions_of_one_gpu_become_one_entry(server_kind):
    assert fold((GPU0, 4096), (GPU0, 1 << 20), (GPU0, 1)) == [(GPU0, 3, 4096 + (1 << 20) + 1)]


def test_each_gpu_gets_its_own_entry_in_uuid_order(server_kind):
    assert fold((GPU0, 100), (MIG, 7), (GPU1, 20), (GPU0, 5), (GPU1, 1)) == [
        (GPU1, 2, 21), (GPU0, 2, 105), (MIG, 1, 7)]


def test_regions_without_a_uuid_are_not_counted(server_kind):
    assert fold((None, 4096), (GPU1, 64), (None, 8)) == [(GPU1, 1, 64)]
    assert fold((None, 4096)) == []
    assert fold() == []


def test_a_uuid_a_label_could_not_carry_is_left_out(server_kind):
    for odd in ('GPU-"x', "GPU-a}b", "GPU-a b", "GPU-a\\b", "GPU-a=b"):
        assert fold((odd, 9), (GPU0, 1)) == [(GPU0, 1, 1)], odd


def test_large_byte_counts_add_without_loss(server_kind):
    big = 1 << 62
    assert fold((GPU0, big), (GPU0, big), (GPU0, big - 1)) == [(GPU0, 3, 3 * big - 1)]


def test_arguments_it_cannot_read_are_refused(server_kind):
    for args in (["GPU-a"], ["GPU-a="], ["GPU-a=x"], ["GPU-a=-1"], ["GPU-a=1x"]):
        done = subprocess.run([sibling_binary("shmreg-server-gpu-regions-test"), *args],
                              capture_output=True, text=True, timeout=20)
        assert done.returncode == 2 and "usage" in done.stderr, args
