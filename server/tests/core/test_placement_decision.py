"""Which instance of the GPU model a request runs on (src/models/placement.h),
for the cases a CPU machine cannot reach through a request: when every
CUDA tensor of the request lies on one GPU that has instances, the least
busy instance of that GPU, even where another GPU's are less busy; when
they lie on a GPU without instances, or on several GPUs, or when there is
no CUDA tensor, the least busy instance of all. Equally busy instances are
taken round robin from where the caller's count starts. Runs
tests/support/placement_choice.c, built next to $SERVER_BIN. The C server
only."""
import subprocess

import pytest

from server_process import sibling_binary

pytestmark = pytest.mark.servers("c")


def choose(tensors, instances, start=0):
    """(instance index, case) for tensors on these devices (None: not in a
    CUDA region) and instances given as (device, load) in order."""
    args = [",".join("host" if d is None else str(d) for d in tensors),
            ",".join(f"{d}:{load}" for d, load in instances), str(start)]
    out = subprocess.run([sibling_binary("shmreg-server-placement-test"), *args],
                         capture_output=True, text=True, timeout=20, check=True).stdout
    index, case = out.split()
    return int(index), case


# Two GPUs, two instances each; GPU 0's busier than GPU 1's.
TWO_GPUS = [(0, 3), (0, 2), (1, 0), (1, 1)]


def test_all_cuda_tensors_on_a_gpu_run_there_even_when_another_is_less_busy(server_kind):
    assert choose([0, 0], TWO_GPUS) == (1, "tensor_gpu")  # load 2 on GPU 0, not 0 on GPU 1
    assert choose([1, 1], TWO_GPUS) == (2, "tensor_gpu")


def test_a_tensor_in_host_memory_does_not_decide(server_kind):
    assert choose([0, None], TWO_GPUS) == (1, "tensor_gpu")  # CUDA input, system output
    assert choose([None, 0], TWO_GPUS) == (1, "tensor_gpu")  # inline input, CUDA output


def test_tensors_on_a_gpu_without_instances_fall_back_to_the_least_busy(server_kind):
    assert choose([2, 2], TWO_GPUS) == (2, "fallback")
    assert choose([0], [(1, 4), (2, 1), (1, 0)]) == (2, "fallback")


def test_tensors_on_two_gpus_fall_back_to_the_least_busy(server_kind):
    assert choose([0, 1], TWO_GPUS) == (2, "fallback")
    assert choose([1, 0], [(1, 5), (0, 1), (1, 2)]) == (1, "fallback")


def test_no_cuda_tensor_takes_the_least_busy(server_kind):
    assert choose([None, None], TWO_GPUS) == (2, "no_cuda_tensors")
    assert choose([], [(0, 7), (1, 6)]) == (1, "no_cuda_tensors")


@pytest.mark.parametrize("start", range(8))
def test_equally_busy_instances_go_round_robin(server_kind, start):
    """Among equals, the first from start on: consecutive starts take each
    in turn; the busier one and the other GPU's are never taken."""
    instances = [(0, 1), (1, 0), (0, 1), (0, 4), (0, 1)]
    on_gpu0 = [0, 2, 4]  # the equally busy instances of GPU 0, load 1
    expected = next(i for i in [*range(start % 5, 5), *range(start % 5)] if i in on_gpu0)
    assert choose([0, 0], instances, start) == (expected, "tensor_gpu")
    # Everyone idle, no CUDA tensor: instance start mod 5.
    assert choose([None], [(d, 0) for d, _ in instances], start) == (start % 5, "no_cuda_tensors")


def test_the_load_decides_before_the_round_robin(server_kind):
    for start in range(4):
        assert choose([None], [(0, 2), (0, 1), (1, 2), (1, 3)], start) == (1, "no_cuda_tensors")
        assert choose([1], [(0, 0), (1, 5), (1, 4), (1, 6)], start) == (2, "tensor_gpu")


def test_a_large_start_wraps(server_kind):
    assert choose([None], [(0, 0), (0, 0), (0, 0)], 2**32 - 1) == ((2**32 - 1) % 3,
                                                                       "no_cuda_tensors")


def test_arguments_it_cannot_read_are_refused(server_kind):
    for args in (["x", "0:0", "0"], ["0", "", "0"], ["0", "0:-1", "0"], ["0", "0", "0"],
                 ["0", "0:0,1", "0"], ["0", "0:0", "-1"], ["0", "0:0"]):
        done = subprocess.run([sibling_binary("shmreg-server-placement-test"), *args],
                              capture_output=True, text=True, timeout=20)
        assert done.returncode == 2 and "usage" in done.stderr, args
