"""perf_analyzer (PyPI perf-analyzer) against identity through system shared
memory over HTTP, for a fixed count of requests at a few concurrencies.

It must finish with zero failed requests, and afterwards the server must
show no region in use. Where perf_analyzer cannot execute on this machine the
test is skipped with the exact reason (the loader's message); nothing is faked.
"""
import os
import platform
import shutil
import subprocess

import pytest

# seed 003's image: FP16 3x384x640 = 1474560 bytes in and out.
SHAPE = "INPUT0:3,384,640"
TENSOR_BYTES = 3 * 384 * 640 * 2
REQUESTS_PER_LEVEL = 100
CONCURRENCY = (1, 4, 16)  # --request-count takes one level per run


def perf_analyzer_path():
    """$PERF_ANALYZER, else perf_analyzer on PATH; skip (saying why) if absent
    or if it cannot execute here."""
    path = os.environ.get("PERF_ANALYZER") or shutil.which("perf_analyzer")
    if not path:
        pytest.skip(os.environ.get("PERF_ANALYZER_MISSING",
                                   "no perf_analyzer executable (PyPI perf-analyzer not installed)"))
    probe = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
    loader_error = [l for l in probe.stderr.splitlines() if "not found (required by" in l]
    if loader_error:
        pytest.skip(f"perf_analyzer cannot execute on this machine ({platform.libc_ver()[0]} "
                    f"{platform.libc_ver()[1]}): {loader_error[0].strip()}")
    return path


@pytest.mark.frontends("c")
def test_perf_analyzer_identity_system_shm(start_frontend):
    pa = perf_analyzer_path()
    server = start_frontend("--threads", "4")
    for concurrency in CONCURRENCY:
        cmd = [pa, "-m", "identity", "-u", server.url, "-i", "http", "--shared-memory", "system",
               "--output-shared-memory-size", str(TENSOR_BYTES), "--shape", SHAPE,
               "--concurrency-range", str(concurrency), "--request-count", str(REQUESTS_PER_LEVEL)]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        print(run.stdout)
        assert run.returncode == 0, run.stdout + run.stderr

    status, stats = server.json("GET", "/v2/models/identity/stats")
    assert status == 200
    counts = stats["model_stats"][0]["inference_stats"]
    assert counts["fail"]["count"] == 0
    assert counts["success"]["count"] == len(CONCURRENCY) * REQUESTS_PER_LEVEL
    # perf_analyzer unregisters its regions at exit; nothing may stay in use.
    status, regions = server.json("GET", "/v2/systemsharedmemory/status")
    assert status == 200 and all(r["in_use"] == 0 for r in regions)
