"""The GPU model 'yolo' on a GPU machine: its output against a CPU reference.

server/src/models/model_yolo.h defines what the model computes;
server/tests/support/yolo_reference.py computes the same in numpy, float32 products
and sums in the kernel's order and one rounding to float16 at the end, so the
comparison is bit for bit. Inputs and outputs go through every path of
gpu_instances.h: a pinned system region, a system region registered unpinned
(--pin never), a CUDA region (registered with a CuPy cudaIpcMemHandle, as in
test_cuda_infer.py), inline binary data, and mixes of them; then statistics,
concurrency, a second GPU where there is one, and tritonclient where it can
be imported.

$SERVER_BIN names the binary (server/tests/gpu/run.sh sets it). Without
CuPy or a visible device every test is skipped.
"""
import base64
import contextlib
import itertools
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from multiprocessing import shared_memory

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "support"))
sys.path.insert(0, HERE)
from server_process import Server, leftover_report  # noqa: E402
from prometheus_text import scrape  # noqa: E402
from yolo_reference import ROWS, anchors, random_images, reference  # noqa: E402
# Skips this module too where CuPy or a device is missing.
from test_cuda_infer import call, cp, nothing_in_use, ok, shm_params  # noqa: E402

PREFIX = f"feyolo_{os.getpid()}_{uuid.uuid4().hex[:6]}"
UNIQUE = itertools.count()  # region names never repeat, even after a failed test
WINDOW = 4  # --yolo-window of most servers here: a fast reference
SEED_SHAPE = (3, 384, 640)  # the seed benchmark's image: 5040 anchors


# -------------------------------------------------------------- servers ---

def device_count():
    return cp.cuda.runtime.getDeviceCount()


def start(*args):
    return Server("--threads", "8", "--yolo-window", str(WINDOW), *args)


def stop(server):
    """Stop server, check it exited cleanly with nothing left; its stderr."""
    rc, err = server.stop()
    assert rc == 0, f"server exited {rc}:\n{err}"
    assert leftover_report(err) == (0, 0), err
    return err


def startup_line(err):
    """The GPU model's start-up line in a server's stderr."""
    (line,) = [line for line in err.splitlines() if line.startswith("gpu model 'yolo': ")]
    return line


def yolo_stats(server):
    """The model's entry of /v2/models/yolo/stats."""
    (entry,) = ok(server, "GET", "v2/models/yolo/stats")["model_stats"]
    return entry


@pytest.fixture(scope="module")
def server():
    s = start()
    yield s
    stop(s)


class Regions:
    """System and CUDA regions registered with one server, removed after the
    test (unregistered first, then unlinked or freed)."""

    def __init__(self, server):
        self.server, self.system, self.cuda = server, [], []

    def system_region(self, suffix, nbytes):
        name = f"{PREFIX}_{suffix}{next(UNIQUE)}"
        mem = shared_memory.SharedMemory(name=name, create=True, size=nbytes)
        self.system.append((name, mem))
        ok(self.server, "POST", f"v2/systemsharedmemory/region/{name}/register",
           {"key": "/" + name, "offset": 0, "byte_size": nbytes})
        return name, mem

    def cuda_region(self, suffix, nbytes, device=0):
        name = f"{PREFIX}_{suffix}{next(UNIQUE)}"
        with cp.cuda.Device(device):
            mem = cp.cuda.memory.Memory(nbytes)  # its own cudaMalloc: the handle's base
            handle = bytes(cp.cuda.runtime.ipcGetMemHandle(mem.ptr))
        self.cuda.append((name, mem))
        ok(self.server, "POST", f"v2/cudasharedmemory/region/{name}/register",
           {"raw_handle": {"b64": base64.b64encode(handle).decode()}, "device_id": device,
            "byte_size": nbytes})
        return name, mem

    def close(self):
        try:
            for name, _ in self.system:
                ok(self.server, "POST", f"v2/systemsharedmemory/region/{name}/unregister")
        finally:  # the shm objects go whatever happened
            for _, mem in self.system:
                mem.close()
                mem.unlink()
            self.system.clear()
        if self.cuda:
            for d in range(device_count()):
                cp.cuda.Device(d).synchronize()
            for name, _ in self.cuda:
                ok(self.server, "POST", f"v2/cudasharedmemory/region/{name}/unregister")
            # Freed (by dropping them) only once the server holds none.
            self.server.wait_until(lambda: nothing_in_use(self.server, "cuda"),
                                   what="cuda released")
            self.cuda.clear()


@pytest.fixture
def regions(server):
    r = Regions(server)
    yield r
    r.close()


def device_array(mem, shape, dtype=np.float16):
    return cp.ndarray(shape, dtype=dtype, memptr=cp.cuda.memory.MemoryPointer(mem, 0))


def infer_binary(server, images, inputs_params=None, output_params=None):
    """POST an inference with the image inline (binary) unless inputs_params
    place it in a region; the output binary unless output_params place it.
    Returns (status, JSON header, binary output bytes or None)."""
    shape = list(images.shape)
    if inputs_params is None:
        blob = images.tobytes()
        inp = {"name": "images", "datatype": "FP16", "shape": shape,
               "parameters": {"binary_data_size": len(blob)}}
    else:
        blob = b""
        inp = {"name": "images", "datatype": "FP16", "shape": shape, "parameters": inputs_params}
    out = {"name": "output0", "parameters": output_params or {"binary_data": True}}
    header = json.dumps({"inputs": [inp], "outputs": [out]}).encode()
    req = urllib.request.Request(
        f"http://127.0.0.1:{server.port}/v2/models/yolo/infer", data=header + blob, method="POST",
        headers={"Inference-Header-Content-Length": str(len(header)),
                 "Content-Type": "application/octet-stream"})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            raw, hlen = resp.read(), resp.headers.get("Inference-Header-Content-Length")
            status = resp.status
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read()), None
    if hlen is None:
        return status, json.loads(raw), None
    return status, json.loads(raw[:int(hlen)]), raw[int(hlen):]


def as_output(raw, h, w):
    return np.frombuffer(raw, dtype=np.float16).reshape(ROWS, anchors(h, w))


def system_round_trip(server, regions, seed):
    """The seed's image through an input and an output system region of
    regions: the output must match the reference bit for bit."""
    images = random_images(SEED_SHAPE, seed)
    out_bytes = ROWS * 5040 * 2
    name_in, mem_in = regions.system_region("in", images.nbytes)
    name_out, mem_out = regions.system_region("out", out_bytes)
    mem_in.buf[:images.nbytes] = images.tobytes()
    status, header, _ = infer_binary(server, images, shm_params(name_in, images.nbytes),
                                     shm_params(name_out, out_bytes))
    assert status == 200, header
    got = np.frombuffer(bytes(mem_out.buf[:out_bytes]), dtype=np.float16)
    np.testing.assert_array_equal(got.reshape(ROWS, 5040), reference(images, WINDOW))


def run_clients(client, n):
    """client(0) .. client(n - 1) at once, each on a thread of its own; back
    when all are done."""
    threads = [threading.Thread(target=client, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def released(server):
    server.wait_until(lambda: nothing_in_use(server, "cuda") and nothing_in_use(server, "system"),
                      what="every region released")


# ---------------------------------------------------------------- tests ---

def test_ready_and_config(server):
    assert call(server, "GET", "v2/models/yolo/ready") == (200, None)
    config = ok(server, "GET", "v2/models/yolo/config")
    group = config["instance_group"][0]
    assert group["kind"] == "KIND_GPU" and group["count"] == 2  # --instances-per-gpu default
    assert group["gpus"] == list(range(device_count()))
    assert config["parameters"]["window"]["string_value"] == str(WINDOW)


def test_inline_in_inline_out_seed_shape(server):
    images = random_images(SEED_SHAPE, 2)
    status, header, raw = infer_binary(server, images)
    assert status == 200, header
    assert header["outputs"][0]["shape"] == [ROWS, 5040]
    np.testing.assert_array_equal(as_output(raw, 384, 640), reference(images, WINDOW))


def test_pinned_system_in_and_out(server, regions):
    images = random_images(SEED_SHAPE, 3)
    out_bytes = ROWS * 5040 * 2
    name_in, mem_in = regions.system_region("in", images.nbytes)
    name_out, mem_out = regions.system_region("out", out_bytes + 64)
    mem_in.buf[:images.nbytes] = images.tobytes()
    mem_out.buf[:] = b"\xee" * len(mem_out.buf)
    status, header, raw = infer_binary(server, images, shm_params(name_in, images.nbytes),
                                       shm_params(name_out, out_bytes, 64))
    assert status == 200 and raw is None, header
    got = np.frombuffer(bytes(mem_out.buf[64:64 + out_bytes]), dtype=np.float16)
    np.testing.assert_array_equal(got.reshape(ROWS, 5040), reference(images, WINDOW))
    assert bytes(mem_out.buf[:64]) == b"\xee" * 64  # only the output's bytes are written
    released(server)


def test_cuda_in_and_out(server, regions):
    images = random_images(SEED_SHAPE, 4)
    out_bytes = ROWS * 5040 * 2
    name_in, mem_in = regions.cuda_region("in", images.nbytes)
    name_out, mem_out = regions.cuda_region("out", out_bytes)
    device_array(mem_in, images.shape)[...] = cp.asarray(images)
    device_array(mem_out, (ROWS, 5040))[...] = 7
    cp.cuda.Device(0).synchronize()  # the server reads through its own stream
    status, header, raw = infer_binary(server, images, shm_params(name_in, images.nbytes),
                                       shm_params(name_out, out_bytes))
    assert status == 200 and raw is None, header
    got = cp.asnumpy(device_array(mem_out, (ROWS, 5040)))
    np.testing.assert_array_equal(got, reference(images, WINDOW))
    released(server)


def cuda_bytes(mem, nbytes):
    return cp.asnumpy(cp.ndarray((nbytes,), dtype=np.uint8,
                                 memptr=cp.cuda.memory.MemoryPointer(mem, 0))).tobytes()


def put_cuda_bytes(mem, offset, data):
    view = cp.ndarray((len(data),), dtype=np.uint8,
                      memptr=cp.cuda.memory.MemoryPointer(mem, offset))
    view[...] = cp.asarray(np.frombuffer(data, dtype=np.uint8))


def kernel_in_place(server):
    """/metrics' count of CUDA tensors the kernel read, and wrote, in place."""
    _, page = scrape(server)
    return [page.value("shmreg_gpu_kernel_in_place_total", direction=d)
            for d in ("input", "output")]


@pytest.mark.parametrize("layout", ["aligned", "odd offsets", "output over input"])
def test_cuda_regions_exact_at_any_offset_and_overlap(server, regions, layout):
    """The kernel reads and writes a CUDA region on its device in place
    where it can ("aligned": no copy), and through its own buffers where
    it cannot: an odd offset (FP16 elements are two bytes) or an output that
    overlaps its input in one region (the kernel would read what it wrote).
    Either way the output is exact, no byte around it changes, and /metrics
    counts the operands the kernel used in place."""
    images = random_images(SEED_SHAPE, 40 + len(layout))
    out_bytes, pad = ROWS * 5040 * 2, 64
    size = images.nbytes + out_bytes + 2 * pad
    name_in, mem_in = regions.cuda_region("in", size)
    if layout == "output over input":
        name_out, mem_out, in_at, out_at = name_in, mem_in, pad, pad + 2
    else:
        name_out, mem_out = regions.cuda_region("out", size)
        in_at, out_at = (pad, pad) if layout == "aligned" else (pad + 3, pad + 1)
    fill = bytes(range(256)) * (size // 256 + 1)
    put_cuda_bytes(mem_out, 0, fill[:size])
    put_cuda_bytes(mem_in, in_at, images.tobytes())
    cp.cuda.Device(0).synchronize()
    before = cuda_bytes(mem_out, size)
    in_place0 = kernel_in_place(server)
    status, header, raw = infer_binary(server, images, shm_params(name_in, images.nbytes, in_at),
                                       shm_params(name_out, out_bytes, out_at))
    assert status == 200 and raw is None, header
    in_place = [now - then for now, then in zip(kernel_in_place(server), in_place0)]
    assert in_place == ([1, 1] if layout == "aligned" else [0, 0]), in_place
    after = cuda_bytes(mem_out, size)
    got = np.frombuffer(after[out_at:out_at + out_bytes], dtype=np.float16)
    np.testing.assert_array_equal(got.reshape(ROWS, 5040), reference(images, WINDOW))
    assert after[:out_at] == before[:out_at]
    assert after[out_at + out_bytes:] == before[out_at + out_bytes:]
    released(server)


@pytest.mark.parametrize("placing", ["system->cuda", "cuda->inline", "inline->system",
                                     "inline->cuda", "cuda->system"])
def test_mixed_paths(server, regions, placing):
    h, w = 96, 160
    images = random_images((3, h, w), sum(map(ord, placing)))
    out_bytes = ROWS * anchors(h, w) * 2
    src, dst = placing.split("->")
    in_params = out_params = None
    if src == "system":
        name, mem = regions.system_region("in", images.nbytes)
        mem.buf[:images.nbytes] = images.tobytes()
        in_params = shm_params(name, images.nbytes)
    elif src == "cuda":
        name, mem = regions.cuda_region("in", images.nbytes)
        device_array(mem, images.shape)[...] = cp.asarray(images)
        cp.cuda.Device(0).synchronize()
        in_params = shm_params(name, images.nbytes)
    if dst == "system":
        out_name, out_mem = regions.system_region("out", out_bytes)
        out_params = shm_params(out_name, out_bytes)
    elif dst == "cuda":
        out_name, out_mem = regions.cuda_region("out", out_bytes)
        out_params = shm_params(out_name, out_bytes)
    status, header, raw = infer_binary(server, images, in_params, out_params)
    assert status == 200, header
    if dst == "inline":
        got = as_output(raw, h, w)
    elif dst == "system":
        got = np.frombuffer(bytes(out_mem.buf[:out_bytes]), dtype=np.float16)
    else:
        got = cp.asnumpy(device_array(out_mem, (ROWS, anchors(h, w))))
    np.testing.assert_array_equal(got.reshape(ROWS, -1), reference(images, WINDOW))
    released(server)


def placed(server):
    """{placement: requests} of shmreg_gpu_requests_placed_total now."""
    _, page = scrape(server)
    return {p: page.value("shmreg_gpu_requests_placed_total", placement=p)
            for p in ("tensor_gpu", "spilled", "fallback", "no_cuda_tensors")}


def placed_since(server, before):
    return {p: n - before[p] for p, n in placed(server).items()}


def test_requests_run_on_the_gpu_of_their_cuda_tensors(server, regions):
    """CUDA input and output on GPU 0: each request counted as placed on
    its tensors' GPU; a system input and output, or inline data: counted as
    having no CUDA tensor. None falls back."""
    h, w = 96, 160
    images = random_images((3, h, w), 11)
    out_bytes = ROWS * anchors(h, w) * 2
    expected = reference(images, WINDOW)
    cuda_in, mem_in = regions.cuda_region("in", images.nbytes)
    cuda_out, mem_out = regions.cuda_region("out", out_bytes)
    device_array(mem_in, images.shape)[...] = cp.asarray(images)
    cp.cuda.Device(0).synchronize()
    before = placed(server)
    for _ in range(5):
        status, header, _ = infer_binary(server, images, shm_params(cuda_in, images.nbytes),
                                         shm_params(cuda_out, out_bytes))
        assert status == 200, header
    np.testing.assert_array_equal(cp.asnumpy(device_array(mem_out, (ROWS, anchors(h, w)))),
                                  expected)
    assert placed_since(server, before) == {"tensor_gpu": 5, "spilled": 0, "fallback": 0,
                                            "no_cuda_tensors": 0}

    sys_in, sys_mem_in = regions.system_region("in", images.nbytes)
    sys_out, _ = regions.system_region("out", out_bytes)
    sys_mem_in.buf[:images.nbytes] = images.tobytes()
    before = placed(server)
    for _ in range(3):
        status, header, _ = infer_binary(server, images, shm_params(sys_in, images.nbytes),
                                         shm_params(sys_out, out_bytes))
        assert status == 200, header
    assert infer_binary(server, images)[0] == 200
    assert placed_since(server, before) == {"tensor_gpu": 0, "spilled": 0, "fallback": 0,
                                            "no_cuda_tensors": 4}
    released(server)


def gpu_uuid(device):
    """The UUID nvidia-smi gives CUDA's device `device`, matched by PCI bus
    id (nvidia-smi numbers the GPUs in its own order); None where it says
    nothing."""
    if not shutil.which("nvidia-smi"):
        return None
    out = subprocess.run(["nvidia-smi", "--query-gpu=pci.bus_id,uuid", "--format=csv,noheader"],
                         capture_output=True, text=True, timeout=60)

    def bus(text):  # "00000000:19:00.0" (nvidia-smi) and "0000:19:00.0" (CUDA) alike
        domain, rest = text.strip().lower().split(":", 1)
        return int(domain, 16), rest

    want = bus(cp.cuda.Device(device).pci_bus_id)
    for line in out.stdout.splitlines() if out.returncode == 0 else ():
        bus_id, _, gpu = line.partition(",")
        if bus(bus_id) == want and gpu.strip().startswith(("GPU-", "MIG-")):
            return gpu.strip()
    return None


def cuda_regions_per_gpu(server):
    """{device_uuid: (regions, bytes)} of /metrics' per-GPU families now."""
    _, page = scrape(server)
    return {dict(labels)["device_uuid"]: (n, page.value("shmreg_cuda_region_bytes", **dict(labels)))
            for (name, labels), n in page.samples.items() if name == "shmreg_cuda_regions"}


def test_metrics_count_cuda_regions_by_gpu_uuid(server):
    """A CUDA region on GPU 0 shows on /metrics under GPU 0's UUID, with its
    bytes; a system region beside it does not; unregistered, it leaves."""
    gpu = gpu_uuid(0)
    if gpu is None:
        pytest.skip("nvidia-smi does not give GPU 0's UUID")
    r = Regions(server)
    try:
        assert cuda_regions_per_gpu(server) == {}
        r.system_region("sys", 4096)
        r.cuda_region("by_uuid", 1 << 20)
        assert cuda_regions_per_gpu(server) == {gpu: (1, 1 << 20)}
    finally:
        r.close()
    assert cuda_regions_per_gpu(server) == {}


def test_statistics_move(server):
    before = yolo_stats(server)
    images = random_images((3, 64, 64), 5)
    for _ in range(3):
        assert infer_binary(server, images)[0] == 200
    after = yolo_stats(server)
    assert after["inference_count"] - before["inference_count"] == 3
    assert after["execution_count"] - before["execution_count"] == 3
    for phase in ("success", "queue", "compute_input", "compute_infer", "compute_output"):
        got, was = after["inference_stats"][phase], before["inference_stats"][phase]
        assert got["count"] - was["count"] == 3, phase
    for phase in ("success", "compute_input", "compute_infer", "compute_output"):
        got, was = after["inference_stats"][phase], before["inference_stats"][phase]
        assert got["ns"] > was["ns"], phase
    # The phases are parts of the request.
    s = after["inference_stats"]
    parts = sum(s[p]["ns"] for p in ("queue", "compute_input", "compute_infer", "compute_output"))
    assert parts <= s["success"]["ns"]


def test_bad_shapes_are_400(server):
    for shape in ((3, 100, 64), (3, 64, 0), (1, 64, 64)):
        images = np.zeros(shape, dtype=np.float16)
        status, body, _ = infer_binary(server, images)
        assert status == 400, (shape, body)
    status, body, _ = infer_binary(server, np.zeros((3, 100, 64), dtype=np.float16))
    assert "multiples of 32" in body["error"], body


def test_concurrent_requests_each_get_their_own_output(server):
    """More requests in flight than instances: every answer matches its input."""
    shape = (3, 128, 192)
    images = [random_images(shape, 100 + i) for i in range(6)]
    expected = [reference(im, WINDOW) for im in images]
    failures = []

    def client(k):
        for n in range(8):
            i = (k + n) % len(images)
            status, header, raw = infer_binary(server, images[i])
            if status != 200 or not np.array_equal(as_output(raw, 128, 192), expected[i]):
                failures.append((k, n, status, header))

    run_clients(client, 12)
    assert failures == []


@pytest.mark.parametrize("copy_batch", [1, 4])
def test_runs_waiting_for_one_instance_share_batches_of_copies(copy_batch):
    """One instance, a kernel of several ms (the seed's image at window 64)
    and eight clients at once, each with its own pinned input and output
    region and one of two images: while two batches are on the stream the runs that come wait,
    and go together, up to --copy-batch a batch, each answer in its own
    region; with --copy-batch 1 every run goes alone."""
    s = start("--instances-per-gpu", "1", "--yolo-window", "64", "--copy-batch", str(copy_batch))
    r = Regions(s)
    try:
        images = [random_images(SEED_SHAPE, 300 + i) for i in range(2)]
        expected = [reference(im, 64) for im in images]
        out_bytes = ROWS * 5040 * 2
        places = [(r.system_region("in", images[0].nbytes), r.system_region("out", out_bytes))
                  for _ in range(8)]
        failures = []

        for k, ((_, mem_in), _) in enumerate(places):  # light clients: the runs pile up
            mem_in.buf[:images[k % 2].nbytes] = images[k % 2].tobytes()

        def client(k):
            (name_in, _), (name_out, mem_out) = places[k]
            for n in range(4):
                mem_out.buf[:out_bytes] = bytes(out_bytes)
                status, header, _ = infer_binary(s, images[k % 2],
                                                 shm_params(name_in, images[k % 2].nbytes),
                                                 shm_params(name_out, out_bytes))
                got = np.frombuffer(mem_out.buf[:out_bytes], dtype=np.float16)
                if status != 200 or not np.array_equal(got.reshape(ROWS, 5040), expected[k % 2]):
                    failures.append((k, n, status, header))
                del got  # no export of the buffer may outlive the region's close

        run_clients(client, 8)
        assert failures == []
        _, page = scrape(s)
        batches = page.value("shmreg_gpu_copy_batches_total")
        runs = page.value("shmreg_gpu_copy_batch_runs_total")
        assert runs == 32
        if copy_batch == 1:
            assert batches == 32
        else:
            assert 32 / copy_batch <= batches < 32, batches
        assert page.value("shmreg_tensor_path_total", path="dma_in_place", direction="input") == 32
    finally:
        try:
            r.close()
        finally:
            stop(s)


def test_a_large_request_leaves_no_device_memory_held():
    """A run slot frees buffers over 16 MiB after their run: three requests
    of a 4096 x 4096 image (96 MiB in, 55 MiB out) one after another leave
    the device's free memory where a small one left it."""
    s = start("--instances-per-gpu", "1")
    try:
        assert infer_binary(s, random_images((3, 64, 64), 1))[0] == 200  # the slot's events
        free_before = cp.cuda.runtime.memGetInfo()[0]
        big = random_images((3, 4096, 4096), 2)
        for _ in range(3):
            status, header, raw = infer_binary(s, big)
            assert status == 200, header
            assert len(raw) == ROWS * anchors(4096, 4096) * 2
        free_after = cp.cuda.runtime.memGetInfo()[0]
        assert free_before - free_after < 16 << 20, (free_before, free_after)
    finally:
        stop(s)


def test_pin_never_stages_system_regions():
    """--pin never: the regions stay pageable and go through the staging
    buffers; the output is the same."""
    s = start("--pin", "never", "--instances-per-gpu", "1")
    r = Regions(s)
    try:
        system_round_trip(s, r, 6)
    finally:
        r.close()
        stop(s)


@pytest.mark.parametrize("instances, environ, said", [
    (6, None, "12 streams a device on 32 hardware queues"),
    (4, None, "8 streams a device on 8 hardware queues"),
    (3, "4", "6 streams a device on CUDA_DEVICE_MAX_CONNECTIONS=4 hardware queues "
             "(set in the environment), some shared"),
])
def test_streams_and_hardware_queues(monkeypatch, instances, environ, said):
    """Each instance has two streams; past CUDA's default of 8 hardware
    queues the server asks for 32 before its first CUDA call, so that no
    two streams wait for each other's work. A value the user set is kept,
    and the start-up line says what each case got; the model answers in
    each."""
    if environ is None:
        monkeypatch.delenv("CUDA_DEVICE_MAX_CONNECTIONS", raising=False)
    else:
        monkeypatch.setenv("CUDA_DEVICE_MAX_CONNECTIONS", environ)
    s = start("--instances-per-gpu", str(instances))
    r = Regions(s)
    try:
        system_round_trip(s, r, 7)
    finally:
        r.close()
        err = stop(s)
    line = startup_line(err)
    assert line.endswith(f"window {WINDOW}; {said}; phases timed on one run in 32; copies of up "
                         "to 4 runs in a batch"), line


def test_phases_timed_on_one_run_in_n_count_on_every_run():
    """--time-phases-every 4: the runs between two timed ones count the
    last timed run's device phases, so every inference adds to each phase,
    and each of the three runs that follow a timed one on the instance adds
    the timed run's compute_infer (device time only), or less where that
    run's phases would not fit in its own span, from queuing to waking, and
    are scaled down (seen on the H200: 23,816 ns after a timed 23,968)."""
    s = start("--instances-per-gpu", "1", "--time-phases-every", "4")
    try:
        def stats():
            return yolo_stats(s)["inference_stats"]
        images = random_images((3, 64, 64), 11)
        for _ in range(8):  # past the first timed runs; the ninth run is timed
            assert infer_binary(s, images)[0] == 200
        added = []
        for _ in range(4):
            before = stats()
            assert infer_binary(s, images)[0] == 200
            after = stats()
            for phase in ("compute_input", "compute_infer", "compute_output"):
                assert after[phase]["count"] - before[phase]["count"] == 1, phase
                assert after[phase]["ns"] > before[phase]["ns"], phase
            added.append(after["compute_infer"]["ns"] - before["compute_infer"]["ns"])
        assert all(0 < a <= added[0] for a in added[1:]), added
        totals = stats()
        parts = sum(totals[p]["ns"] for p in ("queue", "compute_input", "compute_infer",
                                              "compute_output"))
        assert parts <= totals["success"]["ns"]
    finally:
        err = stop(s)
    line = startup_line(err)
    assert line.endswith("phases timed on one run in 4; copies of up to 4 runs in a batch"), line


def test_default_window_on_a_small_image():
    """The server's default --yolo-window (the benchmark's): windows wider
    than the strides' cells, clamped at the borders."""
    s = Server("--threads", "2")
    try:
        window = int(ok(s, "GET", "v2/models/yolo/config")["parameters"]["window"]["string_value"])
        images = random_images((3, 64, 96), 7)
        status, header, raw = infer_binary(s, images)
        assert status == 200, header
        np.testing.assert_array_equal(as_output(raw, 64, 96), reference(images, window))
    finally:
        stop(s)


@pytest.mark.skipif(device_count() < 2, reason="one CUDA device: no second GPU to place on")
def test_two_gpus_and_a_region_on_the_second():
    s = start("--gpus", "0,1", "--instances-per-gpu", "1")
    r = Regions(s)
    try:
        config = ok(s, "GET", "v2/models/yolo/config")
        assert config["instance_group"][0]["gpus"] == [0, 1]
        images = random_images((3, 96, 128), 8)
        out_bytes = ROWS * anchors(96, 128) * 2
        name_in, mem_in = r.cuda_region("in1", images.nbytes, device=1)
        name_out, mem_out = r.cuda_region("out0", out_bytes, device=0)
        with cp.cuda.Device(1):
            device_array(mem_in, images.shape)[...] = cp.asarray(images)
            cp.cuda.Device(1).synchronize()
        expected = reference(images, WINDOW)
        # Input on device 1, output on device 0: no one device holds both,
        # so each request falls back to the least busy instance, and one of
        # its copies crosses between the devices (peer where there is P2P).
        before = placed(s)
        for _ in range(4):
            status, header, _ = infer_binary(s, images, shm_params(name_in, images.nbytes),
                                             shm_params(name_out, out_bytes))
            assert status == 200, header
            got = cp.asnumpy(device_array(mem_out, (ROWS, anchors(96, 128))))
            np.testing.assert_array_equal(got, expected)
        assert placed_since(s, before) == {"tensor_gpu": 0, "spilled": 0, "fallback": 4,
                                           "no_cuda_tensors": 0}
        # Both on device 1, with clients at once so that device 0's instance
        # is the less busy one: every request still runs on device 1, since
        # four clients never fill its instance's twelve run slots (a request
        # spills to device 0 only then, which no fixed number of clients
        # makes certain, so spilling is left to the rule's own test).
        name_out1, mem_out1 = r.cuda_region("out1", out_bytes, device=1)
        before = placed(s)
        failures = []

        def client(k):
            for _ in range(3):
                status, header, _ = infer_binary(s, images, shm_params(name_in, images.nbytes),
                                                 shm_params(name_out1, out_bytes))
                if status != 200:
                    failures.append((k, status, header))

        run_clients(client, 4)
        assert failures == []
        with cp.cuda.Device(1):
            got = cp.asnumpy(device_array(mem_out1, (ROWS, anchors(96, 128))))
        np.testing.assert_array_equal(got, expected)
        assert placed_since(s, before) == {"tensor_gpu": 12, "spilled": 0, "fallback": 0,
                                           "no_cuda_tensors": 0}
    finally:
        r.close()
        stop(s)


def test_tritonclient_system_shared_memory(server):
    httpclient = pytest.importorskip("tritonclient.http")
    shm = pytest.importorskip("tritonclient.utils.shared_memory")
    images = random_images(SEED_SHAPE, 9)
    out_bytes = ROWS * 5040 * 2
    client = httpclient.InferenceServerClient(f"127.0.0.1:{server.port}")
    handles = []
    try:
        for name, size in (("tc_in", images.nbytes), ("tc_out", out_bytes)):
            handles.append(shm.create_shared_memory_region(f"{PREFIX}_{name}",
                                                           f"/{PREFIX}_{name}", size))
            client.register_system_shared_memory(f"{PREFIX}_{name}", f"/{PREFIX}_{name}", size)
        shm.set_shared_memory_region(handles[0], [images])
        inp = httpclient.InferInput("images", list(images.shape), "FP16")
        inp.set_shared_memory(f"{PREFIX}_tc_in", images.nbytes)
        out = httpclient.InferRequestedOutput("output0", binary_data=True)
        out.set_shared_memory(f"{PREFIX}_tc_out", out_bytes)
        client.infer("yolo", [inp], outputs=[out])
        got = shm.get_contents_as_numpy(handles[1], np.float16, [ROWS, 5040])
        np.testing.assert_array_equal(got, reference(images, WINDOW))
        # And inline through the same client.
        inp = httpclient.InferInput("images", list(images.shape), "FP16")
        inp.set_data_from_numpy(images, binary_data=True)
        result = client.infer("yolo", [inp],
                              outputs=[httpclient.InferRequestedOutput("output0", binary_data=True)])
        np.testing.assert_array_equal(result.as_numpy("output0"), reference(images, WINDOW))
    finally:
        client.unregister_system_shared_memory()
        for handle in handles:
            shm.destroy_shared_memory_region(handle)
        client.close()


def test_grpc_system_and_cuda_shared_memory():
    """The model over gRPC (the seed's -i Grpc): a pinned system input with a
    CUDA output, then a CUDA input with a system output, both checked against
    the reference, and nothing left registered."""
    grpcclient = pytest.importorskip("tritonclient.grpc")
    tshm = pytest.importorskip("tritonclient.utils.shared_memory")
    from grpc_support import start_with_grpc  # noqa: E402
    server = start_with_grpc("--threads", "8", "--yolo-window", str(WINDOW))
    client = grpcclient.InferenceServerClient(server.grpc_url)
    images = random_images(SEED_SHAPE, 11)
    out_bytes = ROWS * 5040 * 2
    want = reference(images, WINDOW)
    sys_handles, cuda_mems = [], []
    try:
        def system(suffix, size):
            name = f"{PREFIX}_g{suffix}{next(UNIQUE)}"
            sys_handles.append(tshm.create_shared_memory_region(name, "/" + name, size))
            client.register_system_shared_memory(name, "/" + name, size)
            return name, sys_handles[-1]

        def cuda(suffix, size):
            name = f"{PREFIX}_g{suffix}{next(UNIQUE)}"
            mem = cp.cuda.memory.Memory(size)
            cuda_mems.append(mem)
            handle = bytes(cp.cuda.runtime.ipcGetMemHandle(mem.ptr))
            client.register_cuda_shared_memory(name, base64.b64encode(handle), 0, size)
            return name, mem

        def infer(in_name, out_name):
            inp = grpcclient.InferInput("images", list(images.shape), "FP16")
            inp.set_shared_memory(in_name, images.nbytes)
            out = grpcclient.InferRequestedOutput("output0")
            out.set_shared_memory(out_name, out_bytes)
            client.infer("yolo", [inp], outputs=[out])

        in_sys, in_handle = system("in", images.nbytes)
        tshm.set_shared_memory_region(in_handle, [images])
        out_cuda, out_mem = cuda("out", out_bytes)
        infer(in_sys, out_cuda)
        np.testing.assert_array_equal(device_array(out_mem, (ROWS, 5040)).get(), want)

        in_cuda, in_mem = cuda("in", images.nbytes)
        device_array(in_mem, images.shape)[...] = cp.asarray(images)
        cp.cuda.Device(0).synchronize()
        out_sys, out_handle = system("out", out_bytes)
        infer(in_cuda, out_sys)
        np.testing.assert_array_equal(
            tshm.get_contents_as_numpy(out_handle, np.float16, [ROWS, 5040]), want)
    finally:
        client.unregister_system_shared_memory()
        client.unregister_cuda_shared_memory()
        for handle in sys_handles:
            tshm.destroy_shared_memory_region(handle)
        client.close()
        stop(server)
        cuda_mems.clear()


class GrpcRegions:
    """Pinned system and CUDA regions registered over gRPC with tritonclient,
    and inferences on them; close() unregisters and frees them."""

    def __init__(self, server):
        self.grpc = pytest.importorskip("tritonclient.grpc")
        self.tshm = pytest.importorskip("tritonclient.utils.shared_memory")
        self.client = self.grpc.InferenceServerClient(server.grpc_url)
        self.handles, self.mems = [], []

    def system(self, suffix, size):
        name = f"{PREFIX}_t{suffix}{next(UNIQUE)}"
        self.handles.append(self.tshm.create_shared_memory_region(name, "/" + name, size))
        self.client.register_system_shared_memory(name, "/" + name, size)
        return name, self.handles[-1]

    def cuda(self, suffix, size):
        name = f"{PREFIX}_t{suffix}{next(UNIQUE)}"
        mem = cp.cuda.memory.Memory(size)
        self.mems.append(mem)
        handle = bytes(cp.cuda.runtime.ipcGetMemHandle(mem.ptr))
        self.client.register_cuda_shared_memory(name, base64.b64encode(handle), 0, size)
        return name, mem

    def infer(self, client, shape, in_name, out_name, out_bytes):
        inp = self.grpc.InferInput("images", list(shape), "FP16")
        inp.set_shared_memory(in_name, int(np.prod(shape)) * 2)
        out = self.grpc.InferRequestedOutput("output0")
        out.set_shared_memory(out_name, out_bytes)
        client.infer("yolo", [inp], outputs=[out])

    def close(self):
        try:
            self.client.unregister_system_shared_memory()
            self.client.unregister_cuda_shared_memory()
        finally:
            for handle in self.handles:
                self.tshm.destroy_shared_memory_region(handle)
            self.client.close()


def inline_requests(server):
    _, page = scrape(server)
    return page.value("shmreg_inline_requests_total")


def sixteen_clients(server, client, failures, window):
    """client(0) .. client(15) at once, four runs each, which report what
    went wrong in failures: none may, and the 64 runs are counted by the GPU
    model's copy batches, which at window 64 (milliseconds a run) they
    share, having waited for the stream together. The metrics after."""
    _, page = scrape(server)
    batches0 = page.value("shmreg_gpu_copy_batches_total")
    runs0 = page.value("shmreg_gpu_copy_batch_runs_total")
    run_clients(client, 16)
    assert failures == []
    _, page = scrape(server)
    assert page.value("shmreg_gpu_copy_batch_runs_total") - runs0 == 64
    batches = page.value("shmreg_gpu_copy_batches_total") - batches0
    if window == 64:
        assert batches < 64, batches
    return page


@pytest.mark.parametrize("window", [1, 64])
def test_grpc_runs_are_handed_to_the_device_from_grpc_threads(window):
    """Over gRPC, a run whose tensors the device reaches where they lie is
    handed to the instance by the gRPC thread that received it, with no
    worker in between: at window 1 (a short run) one client's requests run
    on that thread and the rest wait for the instance's finishing thread; at
    window 64 (milliseconds) every run does, and sixteen clients' runs share
    batches, four more of them at a time than the instance has run slots
    (twelve), so that some wait for a slot with no thread of their own.
    Every answer matches the reference, each call counts as inline, and
    nothing is left in use."""
    from grpc_support import start_with_grpc  # noqa: E402
    s = start_with_grpc("--threads", "4", "--instances-per-gpu", "1", "--yolo-window",
                        str(window), "--copy-batch", "4")
    r = GrpcRegions(s)
    try:
        images = [random_images(SEED_SHAPE, 500 + i) for i in range(2)]
        expected = [reference(im, window) for im in images]
        out_bytes = ROWS * 5040 * 2
        places = []
        for k in range(8):  # pinned system in, CUDA out; then CUDA in, system out
            if k % 2 == 0:
                (name_in, handle), out = r.system("in", images[0].nbytes), r.cuda("out", out_bytes)
                r.tshm.set_shared_memory_region(handle, [images[k % 2]])
            else:
                (name_in, mem), out = r.cuda("in", images[0].nbytes), r.system("out", out_bytes)
                device_array(mem, SEED_SHAPE)[...] = cp.asarray(images[k % 2])
            places.append((name_in, out))
        cp.cuda.Device(0).synchronize()

        def got(k):
            name, out = places[k][1]
            if k % 2 == 0:
                return device_array(out, (ROWS, 5040)).get()
            return r.tshm.get_contents_as_numpy(out, np.float16, [ROWS, 5040])

        before = inline_requests(s)
        for k in (0, 1, 0, 1):  # one client: a lone run each time
            r.infer(r.client, SEED_SHAPE, places[k][0], places[k][1][0], out_bytes)
            np.testing.assert_array_equal(got(k), expected[k % 2])
        assert inline_requests(s) - before == 4

        failures = []

        def client(k):  # two clients share each place: same image, same answer
            own = r.grpc.InferenceServerClient(s.grpc_url)
            k %= len(places)
            try:
                for n in range(4):
                    r.infer(own, SEED_SHAPE, places[k][0], places[k][1][0], out_bytes)
                    if not np.array_equal(got(k), expected[k % 2]):
                        failures.append((k, n))
            except Exception as e:  # noqa: BLE001 - reported below with the others
                failures.append((k, repr(e)))
            finally:
                own.close()

        page = sixteen_clients(s, client, failures, window)
        assert page.value("shmreg_inline_requests_total") - before == 4 + 64
    finally:
        try:
            r.close()
        finally:
            stop(s)


def test_a_full_instance_refuses_past_max_queue():
    """With every run slot of the one instance held and --max-queue 2
    requests waiting for one, a gRPC call more is refused at once with
    RESOURCE_EXHAUSTED and Triton's words for a full queue, an HTTP request
    more with 429 and the same words, never waiting on the transport's
    thread; every call let in is answered exactly, the server serves on
    afterwards, and nothing is left in use."""
    from grpc_support import start_with_grpc  # noqa: E402
    from tritonclient.utils import InferenceServerException  # noqa: E402
    s = start_with_grpc("--threads", "4", "--instances-per-gpu", "1", "--yolo-window", "64",
                        "--max-queue", "2")
    r = GrpcRegions(s)
    try:
        images = random_images(SEED_SHAPE, 910)
        expected = reference(images, 64)
        out_bytes = ROWS * 5040 * 2
        (name_in, mem_in), (name_out, mem_out) = (r.cuda("in", images.nbytes),
                                                  r.cuda("out", out_bytes))
        device_array(mem_in, SEED_SHAPE)[...] = cp.asarray(images)
        cp.cuda.Device(0).synchronize()
        inp = r.grpc.InferInput("images", list(SEED_SHAPE), "FP16")
        inp.set_shared_memory(name_in, images.nbytes)
        out = r.grpc.InferRequestedOutput("output0")
        out.set_shared_memory(name_out, out_bytes)
        calls = 48  # 12 slots + 2 waiting are let in at most while all are held
        answers, done = [], threading.Semaphore(0)

        def answered(result, error):
            answers.append(error)
            done.release()

        for _ in range(calls):
            r.client.async_infer("yolo", [inp], answered, outputs=[out])
        for _ in range(calls):
            assert done.acquire(timeout=60), "a call was never answered"
        refused = [e for e in answers if e is not None]
        # The first 14 find a slot or a place in the queue; runs take
        # milliseconds, the calls come within a few.
        assert refused and calls - len(refused) >= 14, len(refused)
        for e in refused:
            assert isinstance(e, InferenceServerException), e
            assert e.status() == "StatusCode.RESOURCE_EXHAUSTED", e
            assert "Exceeds maximum queue size" in e.message() and "--max-queue 2" in e.message(), e
        np.testing.assert_array_equal(device_array(mem_out, (ROWS, 5040)).get(), expected)
        device_array(mem_out, (ROWS, 5040))[...] = 0
        cp.cuda.Device(0).synchronize()
        r.infer(r.client, SEED_SHAPE, name_in, name_out, out_bytes)  # alone: let in
        np.testing.assert_array_equal(device_array(mem_out, (ROWS, 5040)).get(), expected)
        stats = yolo_stats(s)
        assert stats["inference_stats"]["fail"]["count"] == len(refused), stats

        # Over HTTP the same: 429 with the same words, the rest exact.
        statuses = []

        def http_client(k):
            status, header, _ = infer_binary(s, images, shm_params(name_in, images.nbytes),
                                             shm_params(name_out, out_bytes))
            statuses.append((status, header))

        run_clients(http_client, calls)
        refused_http = [h for status, h in statuses if status != 200]
        assert refused_http and calls - len(refused_http) >= 14, len(refused_http)
        for status, header in statuses:
            assert status in (200, 429), (status, header)
            assert status == 200 or "Exceeds maximum queue size" in header["error"], header
        np.testing.assert_array_equal(device_array(mem_out, (ROWS, 5040)).get(), expected)
        stats = yolo_stats(s)
        assert stats["inference_stats"]["fail"]["count"] == len(refused) + len(refused_http)
    finally:
        try:
            r.close()
        finally:
            stop(s)


def test_sigterm_under_gpu_load_drains_cleanly():
    """SIGTERM while eight gRPC and eight HTTP clients keep the one instance
    busy with runs of milliseconds in CUDA regions, handed to the device
    from the transports' threads: the server drains them and exits 0 with
    nothing left mapped or held; each client's calls were answered exactly
    until it met the drain's refusal (503, UNAVAILABLE; CANCELLED for a
    call caught by Shutdown itself) or the closed port, and none waits for
    an answer that never comes."""
    from grpc_support import start_with_grpc  # noqa: E402
    from tritonclient.utils import InferenceServerException  # noqa: E402
    s = start_with_grpc("--threads", "4", "--instances-per-gpu", "1", "--yolo-window", "64")
    r = GrpcRegions(s)
    images = random_images(SEED_SHAPE, 920)
    expected = reference(images, 64)
    out_bytes = ROWS * 5040 * 2
    (name_in, mem_in), (name_out, mem_out) = r.cuda("in", images.nbytes), r.cuda("out", out_bytes)
    device_array(mem_in, SEED_SHAPE)[...] = cp.asarray(images)
    cp.cuda.Device(0).synchronize()
    outcomes, answered = [], threading.Semaphore(0)

    def grpc_client(k):
        own = r.grpc.InferenceServerClient(s.grpc_url)
        try:
            while True:
                r.infer(own, SEED_SHAPE, name_in, name_out, out_bytes)
                answered.release()
        except InferenceServerException as e:
            outcomes.append(("grpc", str(e.status())))
        finally:
            own.close()

    def http_client(k):
        while True:
            try:
                status, header, _ = infer_binary(s, images, shm_params(name_in, images.nbytes),
                                                 shm_params(name_out, out_bytes))
            except (urllib.error.URLError, ConnectionError) as e:
                outcomes.append(("http", "closed: " + type(e).__name__))
                return
            if status != 200:
                outcomes.append(("http", status))
                return
            answered.release()

    threads = [threading.Thread(target=grpc_client, args=(k,)) for k in range(8)]
    threads += [threading.Thread(target=http_client, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    try:
        for _ in range(64):  # the load is on before the signal
            assert answered.acquire(timeout=30), "no answer under load"
    finally:
        err = stop(s)  # SIGTERM: exit 0, nothing left mapped or held
        r.client.close()
        for t in threads:
            t.join(30)
    assert not any(t.is_alive() for t in threads), "a client waits for an answer"
    assert len(outcomes) == 16, outcomes
    # A gRPC call on the wire at the very instant of the server's Shutdown
    # may be cancelled rather than refused: it never ran, and a plain stop
    # (unlike a live upgrade) promises no more than that.
    refusals = (503, "StatusCode.UNAVAILABLE", "StatusCode.CANCELLED")
    for protocol, outcome in outcomes:
        assert outcome in refusals or str(outcome).startswith("closed"), \
            (protocol, outcome, err[-2000:])
    np.testing.assert_array_equal(device_array(mem_out, (ROWS, 5040)).get(), expected)


@contextlib.contextmanager
def closed_after(server, regions):
    """Close regions, then stop server (which must exit cleanly), whatever
    the block did."""
    try:
        yield
    finally:
        try:
            regions.close()
        finally:
            stop(server)


def leave_mid_request(server, body):
    """POST body to the yolo model on a connection of its own and reset
    that connection a few milliseconds later, before the answer: a client
    that dies while its run is on the device."""
    head = (f"POST /v2/models/yolo/infer HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(head + body)
        time.sleep(0.005)
        # SO_LINGER 0: the close sends a reset, the harshest way to leave.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def test_clients_that_leave_mid_run_leave_nothing_behind():
    """Eight HTTP clients that reset their connection and eight gRPC
    clients whose deadline passes while their runs (milliseconds each, in
    CUDA regions) wait for or sit on the one instance: the runs end on the
    device with nobody to answer, the server counts them, stays up, answers
    the next request exactly, holds no region and exits cleanly."""
    from grpc_support import start_with_grpc  # noqa: E402
    import grpc  # noqa: E402
    from tritonclient.utils import InferenceServerException  # noqa: E402
    s = start_with_grpc("--threads", "4", "--instances-per-gpu", "1", "--yolo-window", "64")
    r = GrpcRegions(s)
    with closed_after(s, r):
        images = random_images(SEED_SHAPE, 930)
        out_bytes = ROWS * 5040 * 2
        (name_in, mem_in), (name_out, mem_out) = r.cuda("in", images.nbytes), r.cuda("out", out_bytes)
        device_array(mem_in, SEED_SHAPE)[...] = cp.asarray(images)
        cp.cuda.Device(0).synchronize()
        body = json.dumps({
            "inputs": [{"name": "images", "datatype": "FP16", "shape": list(SEED_SHAPE),
                        "parameters": shm_params(name_in, images.nbytes)}],
            "outputs": [{"name": "output0", "parameters": shm_params(name_out, out_bytes)}],
        }).encode()
        inline0 = inline_requests(s)
        unexpected = []

        def http_leaver(k):
            for _ in range(4):
                leave_mid_request(s, body)

        def grpc_leaver(k):
            own = r.grpc.InferenceServerClient(s.grpc_url)
            inp = r.grpc.InferInput("images", list(SEED_SHAPE), "FP16")
            inp.set_shared_memory(name_in, images.nbytes)
            out = r.grpc.InferRequestedOutput("output0")
            out.set_shared_memory(name_out, out_bytes)
            try:
                for _ in range(4):
                    try:
                        own.infer("yolo", [inp], outputs=[out], client_timeout=0.002)
                    except InferenceServerException as e:
                        if e.status() != str(grpc.StatusCode.DEADLINE_EXCEEDED):
                            unexpected.append(str(e))
            finally:
                own.close()

        threads = [threading.Thread(target=http_leaver, args=(k,)) for k in range(8)]
        threads += [threading.Thread(target=grpc_leaver, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not any(t.is_alive() for t in threads)
        assert unexpected == []
        # The abandoned runs were handed to the device, not dropped at the door.
        s.wait_until(lambda: inline_requests(s) > inline0, what="an abandoned run counted")
        released(s)
        device_array(mem_out, (ROWS, 5040))[...] = 0
        cp.cuda.Device(0).synchronize()
        r.infer(r.client, SEED_SHAPE, name_in, name_out, out_bytes)
        np.testing.assert_array_equal(device_array(mem_out, (ROWS, 5040)).get(),
                                      reference(images, 64))
        released(s)


def test_grpc_runs_needing_a_cpu_copy_go_to_a_worker():
    """A system region registered unpinned (--pin never) needs a CPU copy
    through the staging buffer: the gRPC thread acquires the regions, sees
    that, releases them and queues the call to a worker, which answers as
    it always did; nothing stays in use and no call counts as inline."""
    from grpc_support import start_with_grpc  # noqa: E402
    s = start_with_grpc("--threads", "4", "--yolo-window", str(WINDOW), "--pin", "never")
    r = GrpcRegions(s)
    try:
        images = random_images(SEED_SHAPE, 77)
        out_bytes = ROWS * 5040 * 2
        (name_in, handle), (name_out, out_handle) = (r.system("in", images.nbytes),
                                                    r.system("out", out_bytes))
        r.tshm.set_shared_memory_region(handle, [images])
        before = inline_requests(s)
        for _ in range(3):
            r.infer(r.client, SEED_SHAPE, name_in, name_out, out_bytes)
            np.testing.assert_array_equal(
                r.tshm.get_contents_as_numpy(out_handle, np.float16, [ROWS, 5040]),
                reference(images, WINDOW))
        assert inline_requests(s) == before
        _, page = scrape(s)
        assert page.value("shmreg_tensor_path_total", path="staged_copy", direction="input") == 3
        released(s)
    finally:
        try:
            r.close()
        finally:
            stop(s)


def queued_requests(server):
    _, page = scrape(server)
    return page.value("shmreg_queued_requests_total")


@pytest.mark.parametrize("window", [1, 64])
def test_http_runs_are_handed_to_the_device_from_the_http_thread(window):
    """The HTTP counterpart of the gRPC test above: a run whose tensors the
    device reaches where they lie (a pinned system region, a CUDA region, in
    either direction) is handed to the instance by the HTTP thread, its
    connection suspended until the run's end answers it, with no worker in
    between: at window 1 one client's runs are made on the HTTP thread
    itself (the connection resumed from the callback that suspended it), at
    window 64 and with sixteen clients the instance's finishing thread
    answers them. Every output matches the reference byte for byte, each
    request counts as inline and none as queued, a request refused before
    its run (an output window too small) gets the worker's 400, and nothing
    is left in use."""
    s = Server("--threads", "4", "--instances-per-gpu", "1", "--yolo-window", str(window),
               "--copy-batch", "4")
    r = Regions(s)
    try:
        images = [random_images(SEED_SHAPE, 600 + i) for i in range(2)]
        expected = [reference(im, window) for im in images]
        out_bytes = ROWS * 5040 * 2

        def place(k):  # pinned system in, CUDA out; then CUDA in, system out
            if k % 2:
                name_in, mem_in = r.cuda_region("in", images[1].nbytes)
                device_array(mem_in, SEED_SHAPE)[...] = cp.asarray(images[1])
                return name_in, r.system_region("out", out_bytes)
            name_in, mem_in = r.system_region("in", images[0].nbytes)
            mem_in.buf[:images[0].nbytes] = images[0].tobytes()
            return name_in, r.cuda_region("out", out_bytes)

        places = [place(k) for k in range(8)]
        cp.cuda.Device(0).synchronize()

        def clear(k):
            _, mem_out = places[k][1]
            if k % 2 == 0:
                device_array(mem_out, (ROWS, 5040))[...] = 7
                cp.cuda.Device(0).synchronize()
            else:
                mem_out.buf[:out_bytes] = bytes(out_bytes)

        def got(k):
            _, mem_out = places[k][1]
            if k % 2 == 0:
                return device_array(mem_out, (ROWS, 5040)).get()
            return np.frombuffer(bytes(mem_out.buf[:out_bytes]),
                                 dtype=np.float16).reshape(ROWS, 5040)

        def infer(k, out_size=out_bytes):
            return infer_binary(s, images[k % 2], shm_params(places[k][0], images[0].nbytes),
                                shm_params(places[k][1][0], out_size))

        inline0, queued0 = inline_requests(s), queued_requests(s)
        for k in (0, 1, 0, 1):  # one client: a lone run each time
            clear(k)
            status, header, raw = infer(k)
            assert status == 200 and raw is None, header
            assert header["outputs"] == [{"name": "output0", "datatype": "FP16",
                                          "shape": [ROWS, 5040]}], header
            np.testing.assert_array_equal(got(k), expected[k % 2])
        assert inline_requests(s) - inline0 == 4
        assert queued_requests(s) == queued0

        # Refused before its run, as a worker refuses it; the regions it
        # acquired go with its answer.
        status, header, _ = infer(0, out_bytes - 2)
        assert status == 400 and "should be at least" in header["error"], header
        released(s)

        failures = []

        def client(k):  # two clients share each place: same image, same answer
            k %= len(places)
            try:
                for n in range(4):
                    status, header, _ = infer(k)
                    if status != 200 or not np.array_equal(got(k), expected[k % 2]):
                        failures.append((k, n, status, header))
            except Exception as e:  # noqa: BLE001 - reported below with the others
                failures.append((k, repr(e)))

        page = sixteen_clients(s, client, failures, window)
        released(s)
        assert page.value("shmreg_inline_requests_total") - inline0 == 4 + 1 + 64
        assert page.value("shmreg_queued_requests_total") == queued0
    finally:
        try:
            r.close()
        finally:
            stop(s)


def test_http_runs_needing_a_cpu_copy_go_to_a_worker():
    """Over HTTP, a system region registered unpinned (--pin never) needs a
    CPU copy through the staging buffer: the HTTP thread acquires the
    regions, sees that, releases them and queues the request to a worker,
    which runs it from the JSON header already parsed and answers as it
    always did; nothing stays in use and no request counts as inline."""
    s = Server("--threads", "4", "--yolo-window", str(WINDOW), "--pin", "never")
    r = Regions(s)
    try:
        inline0, queued0 = inline_requests(s), queued_requests(s)
        for seed in (78, 79, 80):
            system_round_trip(s, r, seed)
        released(s)
        _, page = scrape(s)
        assert page.value("shmreg_tensor_path_total", path="staged_copy", direction="input") == 3
        assert page.value("shmreg_queued_requests_total") - queued0 == 3
        assert page.value("shmreg_inline_requests_total") == inline0
    finally:
        try:
            r.close()
        finally:
            stop(s)
