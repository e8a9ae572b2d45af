"""perf_analyzer -i grpc --shared-memory system against identity, the gRPC
twin of test_perf_analyzer.py: the same counts, the same checks, and the same
skip (with the loader's exact reason) where perf_analyzer cannot execute."""
import os
import sys

from grpc_support import start_grpc_server  # noqa: F401 (a fixture)
from grpc_support import region_status
# Its HTTP twin, in ../http.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "http"))
from test_perf_analyzer import (CONCURRENCY, REQUESTS_PER_LEVEL, SHAPE, TENSOR_BYTES,  # noqa: E402
                                identity_stats, perf_analyzer_path, run_level)


def test_perf_analyzer_grpc_identity_system_shm(start_grpc_server):  # noqa: F811
    pa = perf_analyzer_path()
    server = start_grpc_server("--threads", "4")
    for level, concurrency in enumerate(CONCURRENCY, 1):
        cmd = [pa, "-m", "identity", "-u", server.grpc_url, "-i", "grpc", "--shared-memory",
               "system", "--output-shared-memory-size", str(TENSOR_BYTES), "--shape", SHAPE,
               "--concurrency-range", str(concurrency), "--request-count", str(REQUESTS_PER_LEVEL)]
        rc, out = run_level(cmd, server, level * REQUESTS_PER_LEVEL)
        print(out)
        assert rc == 0, out

    counts = identity_stats(server)
    assert counts["fail"]["count"] == 0
    assert counts["success"]["count"] == len(CONCURRENCY) * REQUESTS_PER_LEVEL
    # perf_analyzer unregisters its regions at exit; nothing may stay in use.
    # A gRPC call releases its regions once its answer is sent (OnDone), so
    # the last one may still be releasing when perf_analyzer has exited: a
    # reference kept for good still fails, after the bound.
    server.wait_until(lambda: all(r.in_use == 0 for r in region_status(server.grpc_url).values()),
                      what="every region's last request to release it")
