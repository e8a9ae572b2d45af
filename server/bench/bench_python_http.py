#!/usr/bin/env python3
"""The identity model through the Python server (python/examples/fastapi_server)
with the benchmark detector's FP16 3x384x640 image (1474560 bytes in and out): inputs and
outputs in system shared memory against inline binary tensor data, at a few
concurrencies, over HTTP with the official tritonclient.

perf_analyzer is the reference tool (server/bench/perf_table.sh) but its
wheels need glibc 2.38; this is the same measure in Python: each concurrency
level is that many client processes (not threads: the client's own GIL would
be measured), each sending requests back to back on its own connection and,
for shared memory, its own registered input and output regions.

    python server/bench/bench_python_http.py [--seconds S] [--concurrency 1 16]

Needs the installed package with its fastapi extra, uvicorn and
tritonclient[http]. Starts the server itself (--threads 16), checks that no
request failed and no region is left in use, and that the server shuts down
with nothing mapped. Prints a Markdown table and the shm/inline ratios.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import re
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
import uuid

import numpy as np

SHAPE = (3, 384, 640)
NBYTES = int(np.prod(SHAPE)) * 2
SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python",
                      "examples", "fastapi_server", "server.py")


def client(url: str, mode: str, seconds: float, warmup: float, tag: str, out: mp.Queue) -> None:
    """One client: requests back to back; puts (latencies in s of the
    measured window) on out."""
    import tritonclient.http as httpclient
    import tritonclient.utils.shared_memory as shm

    c = httpclient.InferenceServerClient(url, network_timeout=120)
    data = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float16)
    inp = httpclient.InferInput("INPUT0", list(SHAPE), "FP16")
    want = httpclient.InferRequestedOutput("OUTPUT0", binary_data=True)
    handles, names = [], []
    if mode == "system":
        for name in ("in", "out"):
            region = f"bench_{tag}_{name}"
            handles.append(shm.create_shared_memory_region(region, f"/{region}", NBYTES))
            c.register_system_shared_memory(region, f"/{region}", NBYTES)
            names.append(region)
        shm.set_shared_memory_region(handles[0], [data])
        inp.set_shared_memory(f"bench_{tag}_in", NBYTES)
        want.set_shared_memory(f"bench_{tag}_out", NBYTES)
    else:
        inp.set_data_from_numpy(data, binary_data=True)
    latencies = []
    try:
        start = time.monotonic()
        while (now := time.monotonic()) < start + warmup + seconds:
            result = c.infer("identity", [inp], outputs=[want])
            if now >= start + warmup:
                latencies.append(time.monotonic() - now)
        if mode == "system":
            got = shm.get_contents_as_numpy(handles[1], np.float16, SHAPE)
        else:
            got = result.as_numpy("OUTPUT0")
        assert np.array_equal(got, data), "identity returned other bytes"
    finally:
        for name in names:
            c.unregister_system_shared_memory(name)
        for h in handles:
            shm.destroy_shared_memory_region(h)
        c.close()
    out.put(latencies)


def measure(url: str, mode: str, concurrency: int, seconds: float, warmup: float) -> dict:
    out: mp.Queue = mp.Queue()
    tag = uuid.uuid4().hex[:8]
    procs = [mp.Process(target=client, args=(url, mode, seconds, warmup, f"{tag}_{i}", out))
             for i in range(concurrency)]
    for p in procs:
        p.start()
    latencies = [x for _ in procs for x in out.get(timeout=seconds + warmup + 300)]
    for p in procs:
        p.join()
        assert p.exitcode == 0, f"a {mode} client failed"
    latencies.sort()
    return {"infer_s": len(latencies) / seconds, "p50_ms": statistics.median(latencies) * 1e3,
            "p99_ms": latencies[int(0.99 * (len(latencies) - 1))] * 1e3, "n": len(latencies)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0, help="measured window per level")
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    ap.add_argument("--threads", type=int, default=16, help="the server's --threads")
    args = ap.parse_args()

    server = subprocess.Popen([sys.executable, os.path.normpath(SERVER), "--port", "0",
                               "--threads", str(args.threads)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = server.stdout.readline()
    match = re.match(r"listening on ([0-9.]+:\d+)", line)
    if not match:
        server.kill()
        print(line, server.communicate()[1], file=sys.stderr)
        return 1
    url = match.group(1)
    results = {}
    try:
        for mode in ("system", "inline"):
            for c in args.concurrency:
                results[mode, c] = measure(url, mode, c, args.seconds, args.warmup)
        get = lambda path: json.load(urllib.request.urlopen(f"http://{url}{path}"))
        stats = get("/v2/models/identity/stats")["model_stats"][0]["inference_stats"]
        regions = get("/v2/systemsharedmemory/status")
    finally:
        server.send_signal(signal.SIGTERM)
        _, err = server.communicate(timeout=60)

    print(f"identity, FP16 {'x'.join(map(str, SHAPE))} ({NBYTES} bytes) in and out, "
          f"Python server (--threads {args.threads}), {os.cpu_count()} CPUs, "
          f"{args.seconds:g} s per level\n")
    print("| path | concurrency | throughput (infer/s) | p50 latency (ms) | p99 latency (ms) |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for (mode, c), r in results.items():
        label = "system shm" if mode == "system" else "inline binary"
        print(f"| {label} | {c} | {r['infer_s']:.1f} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} |")
    print()
    for c in args.concurrency:
        ratio = results["system", c]["infer_s"] / results["inline", c]["infer_s"]
        print(f"concurrency {c}: shm / inline = {ratio:.1f}x")
    leftover = re.search(r"shm mappings left: (\d+), shm descriptors left: (\d+)", err)
    print(f"server: {stats['success']['count']} succeeded, {stats['fail']['count']} failed; "
          f"regions left: {len(regions)}; at exit: {leftover.group(0) if leftover else err}")
    print("load average at the end (1, 5, 15 min): %.1f %.1f %.1f" % os.getloadavg())
    ok = (stats["fail"]["count"] == 0 and not regions and server.returncode == 0
          and leftover and leftover.groups() == ("0", "0"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
