"""Which instance of the GPU model a request runs on (src/models/placement.h),
for the cases a CPU machine cannot reach through a request: when every
CUDA tensor of the request lies on one GPU that has instances, the least
busy instance of that GPU, even where another GPU's are less busy, unless
every instance of that GPU is full (as many requests as it has run slots)
and another GPU's instance has a free slot: then the least busy of those
(spilled). When they lie on a GPU without instances, or on several GPUs,
or when there is no CUDA tensor, the least busy instance of all. Equally
busy instances are taken round robin from where the caller's count starts.
Runs tests/support/placement_choice.c, built next to $SERVER_BIN. The C
server only."""
import subprocess

import pytest

from server_process import sibling_binary

pytestmark = pytest.mark.servers("c")


# The run slots of each instance, as the server has them
# (SLOTS_PER_INSTANCE in src/models/gpu_instance_cuda.h).
SLOTS = 12


def choose(tensors, instances, start=0, slots=SLOTS):
    """(instance index, case) for tensors on these devices (None: not in a
    CUDA region) and instances given as (device, load) in order, each with
    slots run slots."""
    args = [",".join("host" if d is None else str(d) for d in tensors),
            ",".join(f"{d}:{load}" for d, load in instances), str(start), str(slots)]
    out = subprocess.run([sibling_binary("shmreg-server-placement-test"), *args],
                         capture_output=True, text=True, timeout=20, check=True).stdout
    index, case = out.split()
    return int(index), case


# Two GPUs, two instances each; GPU 0's busier than GPU 1's.
TWO_GPUS = [(0, 3), (0, 2), (1, 0), (1, 1)]


def test_all_cuda_tensors_on_a_gpu_run_there_even_when_another_is_less_busy(server_kind):
    assert choose([0, 0], TWO_GPUS) == (1, "tensor_gpu")  # load 2 on GPU 0, not 0 on GPU 1
    assert choose([1, 1], TWO_GPUS) == (2, "tensor_gpu")


def test_a_full_gpu_spills_to_the_least_busy_instance_with_a_free_slot(server_kind):
    """Every instance of GPU 0 has all its slots taken or waited for; the
    least busy instance of the others takes the request, wherever it lies."""
    assert choose([0, 0], [(0, 12), (0, 15), (1, 11), (1, 3), (2, 7)]) == (3, "spilled")
    assert choose([0, None], [(1, 5), (0, 13), (0, 12), (1, 2)]) == (3, "spilled")
    assert choose([1], [(0, 0), (1, 12), (2, 4)]) == (0, "spilled")


def test_a_full_gpu_keeps_the_request_when_every_other_is_full_too(server_kind):
    """No slot free anywhere: a wait either way, and the one on GPU 0 needs
    no peer copy; the least busy instance of GPU 0, however busy."""
    assert choose([0, 0], [(0, 14), (0, 12), (1, 12), (1, 13)]) == (1, "tensor_gpu")
    assert choose([0], [(0, 30), (1, 12)]) == (0, "tensor_gpu")


def test_one_free_slot_on_the_gpu_keeps_the_request_there(server_kind):
    """One instance of GPU 0 below its slots, the others full: it runs there,
    though GPU 1 sits idle."""
    assert choose([0, 0], [(0, 12), (0, 11), (0, 20), (1, 0), (1, 0)]) == (1, "tensor_gpu")


def test_full_means_as_many_as_the_slots(server_kind):
    """Load slots - 1 leaves a slot free; load slots is full: the boundary,
    for the server's slots and another count."""
    for slots in (SLOTS, 1, 3):
        assert choose([0], [(0, slots - 1), (1, 0)], slots=slots) == (0, "tensor_gpu")
        assert choose([0], [(0, slots), (1, 0)], slots=slots) == (1, "spilled")
        assert choose([0], [(0, slots), (1, slots - 1)], slots=slots) == (1, "spilled")
        assert choose([0], [(0, slots), (1, slots)], slots=slots) == (0, "tensor_gpu")


def test_no_slots_never_spills(server_kind):
    """With no slots every instance counts as full, so nothing is free."""
    assert choose([0], [(0, 5), (1, 0)], slots=0) == (0, "tensor_gpu")


@pytest.mark.parametrize("start", range(4))
def test_equally_busy_instances_with_a_free_slot_take_the_spill_in_turn(server_kind, start):
    instances = [(0, 12), (1, 4), (2, 4), (1, 9)]
    expected = next(i for i in [*range(start, 4), *range(start)] if i in (1, 2))
    assert choose([0], instances, start) == (expected, "spilled")


def test_only_a_single_gpu_request_spills(server_kind):
    """Fallback and no_cuda_tensors take the least busy of all already."""
    full = [(0, 12), (0, 12), (1, 12), (1, 12)]
    assert choose([0, 1], full) == (0, "fallback")
    assert choose([None], full) == (0, "no_cuda_tensors")
    assert choose([3], [(0, 12), (1, 2)]) == (1, "fallback")


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
    for args in (["x", "0:0", "0", "12"], ["0", "", "0", "12"], ["0", "0:-1", "0", "12"],
                 ["0", "0", "0", "12"], ["0", "0:0,1", "0", "12"], ["0", "0:0", "-1", "12"],
                 ["0", "0:0", "0", "-1"], ["0", "0:0", "0", "x"], ["0", "0:0", "0"]):
        done = subprocess.run([sibling_binary("shmreg-server-placement-test"), *args],
                              capture_output=True, text=True, timeout=20)
        assert done.returncode == 2 and "usage" in done.stderr, args
