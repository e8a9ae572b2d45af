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
import time

import pytest

# the seed benchmark's image: FP16 3x384x640 = 1474560 bytes in and out.
SHAPE = "INPUT0:3,384,640"
TENSOR_BYTES = 3 * 384 * 640 * 2
REQUESTS_PER_LEVEL = 100
CONCURRENCY = (1, 4, 16)  # --request-count takes one level per run
# How long perf_analyzer may take to exit once the server has answered every
# request of its level (run_level says why there is such a bound).
EXIT_GRACE_S = 20


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


def identity_stats(server):
    """The identity model's inference_stats now (success, fail, ...)."""
    status, stats = server.json("GET", "/v2/models/identity/stats")
    assert status == 200, stats
    return stats["model_stats"][0]["inference_stats"]


def clean_up_after(server):
    """What perf_analyzer does at exit: unregister its system regions and
    unlink their objects."""
    status, regions = server.json("GET", "/v2/systemsharedmemory/status")
    assert status == 200, regions
    assert server.json("POST", "/v2/systemsharedmemory/unregister", b"")[0] == 200
    for r in regions:
        try:
            os.unlink("/dev/shm/" + r["key"].lstrip("/"))
        except FileNotFoundError:
            pass


def run_level(cmd, server, expect_answered, timeout=300):
    """Run one --request-count level of perf_analyzer; (exit code, output).

    perf_analyzer 2.48 in this mode can lose count of one answer and then wait
    for it for ever with nothing outstanding: seen under load on the 2-core
    machine, with the server's count at every request of the level, every
    answer's bytes read into perf_analyzer's sockets, and its main thread
    alone, polling in InferenceProfiler::Measure. The server is what is under
    test, so once it has answered the whole level and perf_analyzer has not
    exited EXIT_GRACE_S later, perf_analyzer is stopped, its regions are
    cleaned up as it would have done, and the level counts as run. An answer
    the server never gave still fails: its count stays short, and the run
    times out."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + timeout
    all_answered_at = None
    while True:
        try:
            out, _ = proc.communicate(timeout=0.5)
            return proc.returncode, out
        except subprocess.TimeoutExpired:
            pass
        now = time.monotonic()
        if all_answered_at is None and \
                identity_stats(server)["success"]["count"] >= expect_answered:
            all_answered_at = now
        stuck = all_answered_at is not None and now - all_answered_at > EXIT_GRACE_S
        if stuck or now > deadline:
            proc.kill()
            out, _ = proc.communicate()
            if not stuck:
                return proc.returncode, out + f"\n(killed after {timeout} s)"
            clean_up_after(server)
            return 0, out + (f"\n(perf_analyzer stopped {EXIT_GRACE_S} s after the server had "
                             "answered every request of the level: its own lost count)")


@pytest.mark.servers("c")
def test_perf_analyzer_identity_system_shm(start_server):
    pa = perf_analyzer_path()
    server = start_server("--threads", "4")
    for level, concurrency in enumerate(CONCURRENCY, 1):
        cmd = [pa, "-m", "identity", "-u", server.url, "-i", "http", "--shared-memory", "system",
               "--output-shared-memory-size", str(TENSOR_BYTES), "--shape", SHAPE,
               "--concurrency-range", str(concurrency), "--request-count", str(REQUESTS_PER_LEVEL)]
        rc, out = run_level(cmd, server, level * REQUESTS_PER_LEVEL)
        print(out)
        assert rc == 0, out

    counts = identity_stats(server)
    assert counts["fail"]["count"] == 0
    assert counts["success"]["count"] == len(CONCURRENCY) * REQUESTS_PER_LEVEL
    # perf_analyzer unregisters its regions at exit; nothing may stay in use.
    status, regions = server.json("GET", "/v2/systemsharedmemory/status")
    assert status == 200 and all(r["in_use"] == 0 for r in regions)
