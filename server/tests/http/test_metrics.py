"""The C server's GET /metrics (Prometheus text 0.0.4)
and its --reclaim and --cache-bytes flags. Each test reads the page with a
strict parser (prometheus_text.py) and checks that the figures move as the
registry's state does: a region registered, a slow request holding it, the
unregister draining through the reclaim thread (or inline), a cache hit.

The C server only, but for the first test: the Python server serves the
registry's families too (shmreg.kserve.metrics_router)."""
import subprocess
import threading
import time
from multiprocessing import shared_memory

import numpy as np
import pytest

from server_process import binary
from prometheus_text import scrape

pytestmark = pytest.mark.servers("c")

NBYTES = 64  # one [1, 16] INT32 tensor
SYS = "/v2/systemsharedmemory"
MODELS = ("simple", "simple_delayed", "identity", "yolo")

# Every field of shmreg_stats, under its metric name and type.
REGISTRY_METRICS = {
    "shmreg_regions": "gauge",
    "shmreg_pending_regions": "gauge",
    "shmreg_detached_regions": "gauge",
    "shmreg_references": "gauge",
    "shmreg_mapped_regions": "gauge",
    "shmreg_mapped_bytes": "gauge",
    "shmreg_pinned_bytes": "gauge",
    "shmreg_registrations_total": "counter",
    "shmreg_registration_refusals_total": "counter",
    "shmreg_reclaim_waiting_bytes": "gauge",
    "shmreg_cached_bytes": "gauge",
    "shmreg_cached_mappings": "gauge",
    "shmreg_cache_hits_total": "counter",
    "shmreg_cache_misses_total": "counter",
    "shmreg_cache_evictions_total": "counter",
}

# The ways a shared-memory tensor travels (src/core/tensor_paths.h), each
# counted per direction in two counter families: tensors and bytes.
PATHS = ("dma_in_place", "staged_copy", "cpu_copy", "device_copy", "remote_copy")
PATH_FAMILIES = ("shmreg_tensor_path_total", "shmreg_tensor_path_bytes_total")
# The GPU model's batches of copies and the runs in them
# (src/models/gpu_instances.h), one sample each.
BATCH_FAMILIES = ("shmreg_gpu_copy_batches_total", "shmreg_gpu_copy_batch_runs_total")
# The GPU model's requests by where they ran (src/models/placement.h).
PLACED_FAMILY = "shmreg_gpu_requests_placed_total"
PLACEMENTS = ("tensor_gpu", "spilled", "fallback", "no_cuda_tensors")
# The CUDA tensors the GPU model's kernel used where they lie, per direction.
IN_PLACE_FAMILY = "shmreg_gpu_kernel_in_place_total"
# The CUDA regions and their bytes per GPU, labelled device_uuid: a sample
# per GPU that holds one, none on a machine without CUDA regions.
CUDA_FAMILIES = ("shmreg_cuda_regions", "shmreg_cuda_region_bytes")
# The inference requests' wait for a worker thread, HTTP and gRPC together.
QUEUE_FAMILIES = ("shmreg_queued_requests_total", "shmreg_request_queue_seconds_total",
                  "shmreg_inline_requests_total")

# Triton's per-model metrics, each with the /v2/models/stats figure it is:
# (path in the model's statistics, divisor from nanoseconds to microseconds).
MODEL_METRICS = {
    "nv_inference_request_success": (("inference_stats", "success", "count"), 1),
    "nv_inference_request_failure": (("inference_stats", "fail", "count"), 1),
    "nv_inference_count": (("inference_count",), 1),
    "nv_inference_exec_count": (("execution_count",), 1),
    "nv_inference_request_duration_us": (("inference_stats", "success", "ns"), 1000),
    "nv_inference_queue_duration_us": (("inference_stats", "queue", "ns"), 1000),
    "nv_inference_compute_input_duration_us": (("inference_stats", "compute_input", "ns"), 1000),
    "nv_inference_compute_infer_duration_us": (("inference_stats", "compute_infer", "ns"), 1000),
    "nv_inference_compute_output_duration_us": (("inference_stats", "compute_output", "ns"),
                                                1000),
}


def registry(server):
    """{metric name: value} of the shmreg_ metrics now."""
    _, metrics = scrape(server)
    return {name: metrics.value(name) for name in REGISTRY_METRICS}


@pytest.fixture
def shm(shm_key):
    """make(suffix, size) -> key of a new shm object of size bytes, zeros
    (the inputs of infer_from), every page touched; unlinked afterwards."""
    created = []

    def make(suffix, size=4 * NBYTES):
        mem = shared_memory.SharedMemory(name=shm_key(suffix).lstrip("/"), create=True, size=size)
        created.append(mem)
        mem.buf[:] = bytes(size)
        return "/" + mem.name.lstrip("/")

    yield make
    for mem in created:
        mem.close()
        mem.unlink()


def register(server, name, key, size):
    return server.json("POST", f"{SYS}/region/{name}/register", {"key": key, "byte_size": size})


def unregister(server, name):
    assert server.json("POST", f"{SYS}/region/{name}/unregister") == (200, None)


def infer_from(server, model, region):
    """model (simple or simple_delayed) on INPUT0, INPUT1 at offsets 0 and 64 of region."""
    def shm_input(name, offset):
        return {"name": name, "datatype": "INT32", "shape": [1, 16],
                "parameters": {"shared_memory_region": region, "shared_memory_offset": offset,
                               "shared_memory_byte_size": NBYTES}}
    body = {"inputs": [shm_input("INPUT0", 0), shm_input("INPUT1", NBYTES)]}
    return server.json("POST", f"/v2/models/{model}/infer", body)


def wait_for(server, what, predicate, timeout=10):
    """Scrape until predicate(registry values) holds; the last values."""
    seen = {}

    def check():
        seen.update(registry(server))
        return predicate(seen)
    server.wait_until(check, timeout=timeout, what=f"{what} (last: {seen})")
    return seen


# ---------------------------------------------------------------- the page


def test_metrics_page_is_prometheus_text_with_every_stats_field(start_server):
    server = start_server()
    content_type, metrics = scrape(server)
    assert content_type.startswith("text/plain; version=0.0.4")
    for name, kind in REGISTRY_METRICS.items():
        assert metrics.type[name] == kind, name
        assert metrics.help[name], name
        assert metrics.value(name) == 0, name
    for name in PATH_FAMILIES:
        assert metrics.type[name] == "counter" and metrics.help[name], name
        for path in PATHS:
            for direction in ("input", "output"):
                assert metrics.value(name, path=path, direction=direction) == 0
    for name in (*BATCH_FAMILIES, *QUEUE_FAMILIES):
        assert metrics.type[name] == "counter" and metrics.help[name], name
        assert metrics.value(name) == 0, name
    assert metrics.type[PLACED_FAMILY] == "counter" and metrics.help[PLACED_FAMILY]
    placed = {labels: v for (name, labels), v in metrics.samples.items() if name == PLACED_FAMILY}
    assert placed == {(("placement", p),): 0 for p in PLACEMENTS}
    assert metrics.type[IN_PLACE_FAMILY] == "counter" and metrics.help[IN_PLACE_FAMILY]
    in_place = {labels: v for (name, labels), v in metrics.samples.items()
                if name == IN_PLACE_FAMILY}
    assert in_place == {(("direction", d),): 0 for d in ("input", "output")}
    for name in CUDA_FAMILIES:
        assert metrics.type[name] == "gauge" and metrics.help[name], name
    assert cuda_samples(metrics) == {}
    shmreg_names = [n for n in metrics.type if n.startswith("shmreg_")]
    assert sorted(shmreg_names) == sorted([*REGISTRY_METRICS, *CUDA_FAMILIES, *PATH_FAMILIES,
                                           *BATCH_FAMILIES, PLACED_FAMILY, IN_PLACE_FAMILY,
                                           *QUEUE_FAMILIES])
    for name in shmreg_names:  # Prometheus's naming: only counters end in _total
        assert name.endswith("_total") == (metrics.type[name] == "counter"), name
    for name in MODEL_METRICS:
        assert metrics.type[name] == "counter", name
        for model in MODELS:
            assert metrics.value(name, model=model, version="1") == 0, (name, model)


def test_model_metrics_are_the_statistics_extension_figures(start_server, shm):
    server = start_server("--delay-ms", "20")
    key = shm("io")
    assert register(server, "io", key, 4 * NBYTES)[0] == 200
    for model in ("simple", "simple", "simple_delayed"):
        assert infer_from(server, model, "io")[0] == 200
    assert server.json("POST", "/v2/models/simple/infer", {"inputs": []})[0] == 400
    unregister(server, "io")
    _, metrics = scrape(server)
    status, stats = server.json("GET", "/v2/models/stats")
    assert status == 200
    by_model = {s["name"]: s for s in stats["model_stats"]}
    assert metrics.value("nv_inference_request_success", model="simple", version="1") == 2
    assert metrics.value("nv_inference_request_failure", model="simple", version="1") == 1
    assert metrics.value("nv_inference_request_duration_us", model="simple_delayed",
                         version="1") >= 20000  # it slept --delay-ms 20
    for name, (path, divisor) in MODEL_METRICS.items():
        for model in MODELS:
            figure = by_model[model]
            for key in path:
                figure = figure[key]
            assert metrics.value(name, model=model, version="1") == figure // divisor, (name, model)


@pytest.mark.parametrize("spin", [[], ["--spin-us", "1000"]], ids=["sleeping-workers", "polling-workers"])
def test_queue_counters_count_each_inference_and_its_wait_for_a_thread(start_server, spin):
    """Every inference, over HTTP and over gRPC, either passes through the
    worker threads' queue once or runs on the thread that received it, and
    is counted by one of the two, whether the workers sleep at once or poll
    for the next request first (--spin-us): `simple_delayed` (a model that may be
    slow) queues, the count moving by one per request and the wait by a
    positive time that cannot exceed the requests' own time; `simple` (short,
    CPU only) runs where it arrived and moves only the inline count.
    Requests that need no model (status, /metrics itself) do neither."""
    import tritonclient.grpc as grpcclient
    from grpc_support import on_a_free_grpc_port, with_grpc

    server = with_grpc(on_a_free_grpc_port(start_server, "--threads", "1", "--delay-ms", "1", *spin))
    body = {"inputs": [{"name": n, "datatype": "INT32", "shape": [1, 16], "data": list(range(16))}
                       for n in ("INPUT0", "INPUT1")]}
    client = grpcclient.InferenceServerClient(server.grpc_url)
    inputs = []
    for name in ("INPUT0", "INPUT1"):
        inputs.append(grpcclient.InferInput(name, [1, 16], "INT32"))
        inputs[-1].set_data_from_numpy(np.arange(16, dtype=np.int32).reshape(1, 16))
    start = time.monotonic()
    for model in ("simple_delayed", "simple_delayed", "simple_delayed", "simple", "simple"):
        assert server.json("POST", f"/v2/models/{model}/infer", body)[0] == 200
        client.infer(model, inputs)
    elapsed = time.monotonic() - start
    client.close()
    server.json("GET", "/v2/health/ready")
    _, first = scrape(server)
    _, second = scrape(server)
    for metrics in (first, second):
        assert metrics.value("shmreg_queued_requests_total") == 6
        assert 0 < metrics.value("shmreg_request_queue_seconds_total") < elapsed
        assert metrics.value("shmreg_inline_requests_total") == 4


def test_a_short_request_that_names_a_region_or_is_large_goes_to_the_workers(start_server, shm):
    """`simple` runs on the thread that received it only while it is short
    in every way: one that names a shared-memory region (whose copy may wait
    on a device or the network) or whose body passes 16 KiB is run by a
    worker, from the start. Where a request runs changes neither its answer
    nor the model's statistics: each request counts once."""
    server = start_server()
    assert register(server, "r", shm("r"), 4 * NBYTES)[0] == 200
    status, answer = infer_from(server, "simple", "r")
    assert status == 200 and answer["outputs"][0]["data"] == [0] * 16
    body = {"id": "x" * (16 * 1024), "inputs": [
        {"name": n, "datatype": "INT32", "shape": [1, 16], "data": list(range(16))}
        for n in ("INPUT0", "INPUT1")]}
    status, answer = server.json("POST", "/v2/models/simple/infer", body)
    assert status == 200 and answer["outputs"][0]["data"] == list(range(0, 32, 2))
    body["id"] = "short"
    assert server.json("POST", "/v2/models/simple/infer", body)[0] == 200
    _, metrics = scrape(server)
    assert metrics.value("shmreg_queued_requests_total") == 2
    assert metrics.value("shmreg_inline_requests_total") == 1
    assert metrics.value("nv_inference_request_success", model="simple", version="1") == 3
    assert metrics.value("shmreg_tensor_path_total", path="cpu_copy", direction="input") == 2


def cuda_samples(metrics):
    """{(name, labels): value} of the CUDA regions' families."""
    return {key: v for key, v in metrics.samples.items() if key[0] in CUDA_FAMILIES}


def test_system_regions_are_not_counted_per_gpu(start_server, shm):
    """A system region has no GPU: registered, it moves shmreg_regions and
    leaves the per-GPU families without a sample."""
    server = start_server()
    assert register(server, "sys", shm("sys"), 4 * NBYTES)[0] == 200
    _, metrics = scrape(server)
    assert metrics.value("shmreg_regions") == 1
    for name in CUDA_FAMILIES:
        assert metrics.type[name] == "gauge", name
    assert cuda_samples(metrics) == {}
    unregister(server, "sys")


def test_metrics_page_stays_the_same_size_whatever_is_registered(start_server, shm):
    """Bounded output: the page has one line per metric (and per model), not
    per region or per client."""
    server = start_server()
    before = server.request("GET", "/metrics")[2]
    for i in range(32):
        assert register(server, f"r{i}", shm(f"r{i}"), 4 * NBYTES)[0] == 200
    after = server.request("GET", "/metrics")[2]
    assert after.count(b"\n") == before.count(b"\n")
    assert len(after) < 16384
    assert registry(server)["shmreg_regions"] == 32
    for i in range(32):
        unregister(server, f"r{i}")


# ------------------------------------------------ the figures as regions live


@pytest.mark.parametrize("reclaim", ["background", "inline"])
def test_register_infer_unregister_move_the_gauges(start_server, shm, reclaim):
    """register: regions and mapped bytes up; a slow request: references held,
    then none; unregistered while in use: pending until the request ends,
    then nothing mapped and nothing waiting for reclaim."""
    size = 1 << 20
    server = start_server("--reclaim", reclaim, "--delay-ms", "1500")
    key = shm("slow", size)
    assert register(server, "slow", key, size)[0] == 200
    now = registry(server)
    assert (now["shmreg_regions"], now["shmreg_mapped_regions"]) == (1, 1)
    assert now["shmreg_mapped_bytes"] >= size
    assert now["shmreg_registrations_total"] == 1 and now["shmreg_references"] == 0

    answers = []
    request = threading.Thread(target=lambda: answers.append(
        infer_from(server, "simple_delayed", "slow")))
    request.start()
    try:
        wait_for(server, "the slow request's references",
                 lambda m: m["shmreg_references"] >= 1)
        unregister(server, "slow")  # defer: the region waits for the request
        now = registry(server)
        assert now["shmreg_pending_regions"] == 1 and now["shmreg_mapped_bytes"] >= size
    finally:
        request.join()
    assert answers[0][0] == 200, answers
    # The region leaves the count when the reclaim thread retires it; its
    # bytes count until the unmapping is done, a moment later, and the
    # reclaim thread's waiting bytes drop just after that (reclaim.c runs a
    # teardown, then takes its bytes off): wait for all three.
    drained = wait_for(server, "the region unmapped",
                       lambda m: m["shmreg_mapped_regions"] == 0
                       and m["shmreg_mapped_bytes"] == 0
                       and m["shmreg_reclaim_waiting_bytes"] == 0)
    assert drained["shmreg_references"] == 0
    assert drained["shmreg_regions"] == drained["shmreg_pending_regions"] == 0
    assert drained["shmreg_registrations_total"] == 1


def test_refused_registrations_are_counted(start_server, shm, shm_key):
    server = start_server()
    assert register(server, "none", shm_key("absent"), NBYTES)[0] == 500  # no such object
    assert register(server, "past", shm("small", NBYTES), 2 * NBYTES)[0] == 400  # past its end
    now = registry(server)
    assert now["shmreg_registration_refusals_total"] == 2
    assert now["shmreg_registrations_total"] == now["shmreg_regions"] == 0


# -------------------------------------------- the path each tensor took


def paths(server):
    """{(path, direction): (tensors, bytes)} now."""
    _, metrics = scrape(server)
    return {(p, d): tuple(metrics.value(f, path=p, direction=d) for f in PATH_FAMILIES)
            for p in PATHS for d in ("input", "output")}


def identity_in_shm(server, region, nbytes, out_size=None):
    """identity on an FP16 [1, nbytes/2] input at offset 0 of region, its
    output into the same region just after it (out_size bytes, default the
    output's size)."""
    elems = nbytes // 2
    body = {"inputs": [{"name": "INPUT0", "datatype": "FP16", "shape": [1, elems],
                        "parameters": {"shared_memory_region": region,
                                       "shared_memory_byte_size": nbytes}}],
            "outputs": [{"name": "OUTPUT0",
                         "parameters": {"shared_memory_region": region,
                                        "shared_memory_offset": nbytes,
                                        "shared_memory_byte_size": out_size or nbytes}}]}
    return server.json("POST", "/v2/models/identity/infer", body)


def test_a_model_on_the_cpu_takes_the_cpu_copy_path_once_per_tensor(start_server, shm):
    """identity runs on the CPU: its system-region input and output each
    cross by one guarded copy (cpu_copy), counted with their bytes; the
    GPU paths stay at zero on every build, and with -v each inference logs
    the path of each tensor."""
    server = start_server("-v")
    nbytes = 2 * NBYTES
    key = shm("cpu", 2 * nbytes)
    assert register(server, "cpu", key, 2 * nbytes)[0] == 200
    for _ in range(3):
        assert identity_in_shm(server, "cpu", nbytes)[0] == 200
    now = paths(server)
    assert now[("cpu_copy", "input")] == (3, 3 * nbytes)
    assert now[("cpu_copy", "output")] == (3, 3 * nbytes)
    for path in ("dma_in_place", "staged_copy", "device_copy", "remote_copy"):
        for direction in ("input", "output"):
            assert now[(path, direction)] == (0, 0), (path, direction)
    unregister(server, "cpu")
    _, err = server.stop()
    logged = [line for line in err.splitlines() if "tensor paths:" in line]
    assert len(logged) == 3, err[-2000:]
    assert logged[0] == (f"infer 'identity' tensor paths: input 'INPUT0' cpu_copy {nbytes} bytes; "
                         f"output 'OUTPUT0' cpu_copy {nbytes} bytes")


def test_only_successful_inferences_count_their_paths(start_server, shm):
    """A request refused after its input was acquired (its output window is
    too small) moves no counter; tensors outside shared memory are not
    counted either."""
    server = start_server()
    nbytes = 2 * NBYTES
    assert register(server, "r", shm("refused", 2 * nbytes), 2 * nbytes)[0] == 200
    status, _ = identity_in_shm(server, "r", nbytes, out_size=nbytes // 2)
    assert status == 400
    body = {"inputs": [{"name": n, "datatype": "INT32", "shape": [1, 16], "data": list(range(16))}
                       for n in ("INPUT0", "INPUT1")]}
    assert server.json("POST", "/v2/models/simple/infer", body)[0] == 200
    assert set(paths(server).values()) == {(0, 0)}
    unregister(server, "r")


def test_the_gpu_model_without_a_device_counts_no_path(start_server, shm):
    """On a machine without a GPU (the CPU CI), yolo is refused before any
    region is acquired: nothing is counted as staged or in place."""
    server = start_server("--gpus", "none")
    nbytes = 3 * 32 * 32 * 2
    assert register(server, "y", shm("yolo", nbytes), nbytes)[0] == 200
    body = {"inputs": [{"name": "images", "datatype": "FP16", "shape": [3, 32, 32],
                        "parameters": {"shared_memory_region": "y",
                                       "shared_memory_byte_size": nbytes}}]}
    assert server.json("POST", "/v2/models/yolo/infer", body)[0] == 400
    assert set(paths(server).values()) == {(0, 0)}
    _, metrics = scrape(server)
    assert [metrics.value(name) for name in BATCH_FAMILIES] == [0, 0]
    assert [metrics.value(PLACED_FAMILY, placement=p) for p in PLACEMENTS] == [0, 0, 0, 0]
    assert [metrics.value(IN_PLACE_FAMILY, direction=d) for d in ("input", "output")] == [0, 0]
    unregister(server, "y")


# ------------------------------------------------------------ the cache flag


def test_cache_keeps_the_mapping_and_a_second_registration_hits_it(start_server, shm):
    size = 1 << 20
    server = start_server("--cache-bytes", str(4 * size))
    key = shm("cached", size)
    assert register(server, "a", key, size)[0] == 200
    now = registry(server)
    assert (now["shmreg_cache_misses_total"], now["shmreg_cache_hits_total"]) == (1, 0)
    unregister(server, "a")
    cached = wait_for(server, "the mapping cached", lambda m: m["shmreg_cached_mappings"] == 1)
    assert cached["shmreg_cached_bytes"] >= size
    assert cached["shmreg_mapped_bytes"] == cached["shmreg_cached_bytes"]
    assert cached["shmreg_regions"] == 0

    assert register(server, "a", key, size)[0] == 200  # the same key again
    hit = registry(server)
    assert hit["shmreg_cache_hits_total"] == cached["shmreg_cache_hits_total"] + 1
    assert hit["shmreg_cache_misses_total"] == cached["shmreg_cache_misses_total"]
    assert hit["shmreg_cached_bytes"] == 0 and hit["shmreg_regions"] == 1
    assert infer_from(server, "simple", "a")[0] == 200
    unregister(server, "a")


def test_without_cache_bytes_nothing_is_cached(start_server, shm):
    server = start_server()
    key = shm("uncached")
    for _ in range(2):
        assert register(server, "a", key, 4 * NBYTES)[0] == 200
        unregister(server, "a")
    now = wait_for(server, "nothing mapped", lambda m: m["shmreg_mapped_regions"] == 0)
    assert now["shmreg_cache_hits_total"] == now["shmreg_cached_bytes"] == 0
    assert now["shmreg_mapped_bytes"] == 0 and now["shmreg_registrations_total"] == 2


def test_cache_bytes_bounds_what_stays_cached(start_server, shm):
    """A mapping larger than --cache-bytes is unmapped, not kept."""
    size = 1 << 20
    server = start_server("--cache-bytes", str(size // 2))
    assert register(server, "big", shm("big", size), size)[0] == 200
    unregister(server, "big")
    now = wait_for(server, "nothing mapped", lambda m: m["shmreg_mapped_regions"] == 0)
    assert now["shmreg_cached_bytes"] == now["shmreg_mapped_bytes"] == 0


# ----------------------------------------------------------------- the flags


@pytest.mark.parametrize("args, message", [
    (("--reclaim", "lazy"), "--reclaim wants background or inline, got 'lazy'"),
    (("--reclaim", ""), "--reclaim wants background or inline, got ''"),
    (("--cache-bytes", "-1"), "--cache-bytes wants an integer"),
    (("--cache-bytes", "1GiB"), "--cache-bytes wants an integer"),
    (("--cache-bytes", ""), "--cache-bytes wants an integer"),
    (("--cache-bytes", "18446744073709551616"), "--cache-bytes wants an integer"),
])
def test_bad_flag_values_are_refused_at_start(args, message):
    proc = subprocess.run([binary(), "--port", "0", *args], capture_output=True, text=True,
                          timeout=20)
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert message in proc.stderr


@pytest.mark.servers("c", "python")
def test_registry_families_on_every_server(server_kind, start_server, shm_key):
    server = start_server("--allow-client-shm", "true")
    mem = shared_memory.SharedMemory(name=shm_key("m").lstrip("/"), create=True, size=4096)
    try:
        status, _ = server.json("POST", f"{SYS}/region/m/register",
                                {"key": "/" + mem.name, "byte_size": 4096})
        assert status == 200
        content_type, page = scrape(server)
        assert content_type.startswith("text/plain")
        for name, kind in REGISTRY_METRICS.items():
            assert page.type[name] == kind and page.help[name], name
        # The tensor paths are the C server's (its GPU model has several); the
        # Python example's model runs in the process and has one.
        expected = [*REGISTRY_METRICS,
                    *((*CUDA_FAMILIES, *PATH_FAMILIES, *BATCH_FAMILIES, PLACED_FAMILY,
                       IN_PLACE_FAMILY, *QUEUE_FAMILIES)
                      if server_kind == "c" else ())]
        assert sorted(n for n in page.type if n.startswith("shmreg_")) == sorted(expected)
        assert page.value("shmreg_regions") == 1
        assert page.value("shmreg_mapped_bytes") == 4096
        assert page.value("shmreg_registrations_total") == 1
        assert server.json("POST", f"{SYS}/unregister")[0] == 200
    finally:
        mem.close()
        mem.unlink()
