#!/usr/bin/env python3
"""The identity model through the C server with an FP16 3x384x640 image
image (1,474,560 bytes in and out): inputs and outputs in remote regions
(the remote_memory extension, UCX) against inline binary tensor data over
HTTP, at concurrency 1 and 16. Reports infer/s and the server's resident
memory (VmRSS at the end of each run, VmHWM the peak since start).

Each concurrency level is that many client processes, each with its own
connection and, for remote regions, its own UCX client and input and output
regions (remote.connect, then remote.allocate: memory the library owns).
Both modes run against one server, over tcp on the loopback device
(--remote-tcp-device lo, and tcp_device="lo" in each client); all its
clients are one tenant, whose connection and copy limits are raised past
the highest concurrency, and its worker threads too: remote copies may hold
all of them but one (docs/remote.md), so the threads are one more than the
clients, which each have one request in flight.

    SERVER_BIN=.../shmreg-server SHMREG_LIBRARY=.../libshmreg.so.1 \\
      python server/bench/bench_remote_memory.py [--seconds S] [--concurrency 1 16]

Needs numpy. Checks that every request succeeded and the bytes came back.
"""
import argparse
import http.client
import importlib.util
import json
import multiprocessing as mp
import os
import pathlib
import queue
import re
import subprocess
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHAPE = [3, 384, 640]
NBYTES = 2 * 3 * 384 * 640


def load_remote():
    spec = importlib.util.spec_from_file_location("shmreg_remote", ROOT / "python/shmreg/remote.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def shm_request(tag):
    return json.dumps({
        "inputs": [{"name": "INPUT0", "datatype": "FP16", "shape": SHAPE,
                    "parameters": {"shared_memory_region": f"in{tag}",
                                   "shared_memory_byte_size": NBYTES}}],
        "outputs": [{"name": "OUTPUT0", "parameters": {"shared_memory_region": f"out{tag}",
                                                       "shared_memory_byte_size": NBYTES}}]}).encode()


def binary_request(data):
    header = json.dumps({
        "inputs": [{"name": "INPUT0", "datatype": "FP16", "shape": SHAPE,
                    "parameters": {"binary_data_size": NBYTES}}],
        "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]}).encode()
    return header + data, {"Inference-Header-Content-Length": str(len(header)),
                           "Content-Type": "application/octet-stream"}


def client(port, mode, seconds, tag, out):
    x = np.random.default_rng(abs(hash(tag)) % 1000).standard_normal(SHAPE).astype(np.float16)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    windows = []
    if mode == "remote":
        remote = load_remote()
        remote.connect(f"127.0.0.1:{port}", tcp_device="lo")
        wx, wy = remote.allocate(NBYTES), remote.allocate(NBYTES)
        windows = [wx, wy]
        np.frombuffer(wx.memory, np.uint8)[:] = x.view(np.uint8).ravel()
        remote.register(f"127.0.0.1:{port}", f"in{tag}", wx)
        remote.register(f"127.0.0.1:{port}", f"out{tag}", wy)
        body, headers = shm_request(tag), {"Content-Type": "application/json"}
    else:
        body, headers = binary_request(x.tobytes())
    done, deadline, checked = 0, time.monotonic() + seconds, False
    while time.monotonic() < deadline:
        conn.request("POST", "/v2/models/identity/infer", body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        if resp.status != 200:
            out.put(("error", f"{mode}: {resp.status} {data[:200]!r}"))
            return
        if not checked:  # the bytes came back, once per client
            got = (bytes(windows[1].memory) if mode == "remote" else data[-NBYTES:])
            if got != x.tobytes():
                out.put(("error", f"{mode}: the output differs from the input"))
                return
            checked = True
        done += 1
    if mode == "remote":
        remote.unregister(f"127.0.0.1:{port}", f"in{tag}")
        remote.unregister(f"127.0.0.1:{port}", f"out{tag}")
        for w in windows:
            w.close()
        remote.disconnect()  # its place among the tenant's connections comes back
    out.put(("done", done))


def memory_mib(pid, field):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def measure(server, port, mode, concurrency, seconds):
    out = mp.Queue()
    procs = [mp.Process(target=client, args=(port, mode, seconds, f"{mode[0]}{concurrency}{i}", out))
             for i in range(concurrency)]
    start = time.monotonic()
    for p in procs:
        p.start()
    results = []
    for _ in procs:
        try:
            results.append(out.get(timeout=seconds + 120))
        except queue.Empty:
            raise SystemExit(f"{mode}: a client process ended without a result") from None
    for p in procs:
        p.join()
    elapsed = time.monotonic() - start
    errors = [r[1] for r in results if r[0] == "error"]
    if errors:
        raise SystemExit("\n".join(errors))
    return sum(r[1] for r in results) / seconds, memory_mib(server.pid, "VmRSS"), elapsed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    args = ap.parse_args()
    server = subprocess.Popen([os.environ["SERVER_BIN"], "--host", "127.0.0.1", "--port", "0",
                               "--allow-client-shm=true", "--remote-tcp-device", "lo",
                               "--threads", str(max(16, max(args.concurrency) + 1)),
                               "--remote-max-connections", str(4 * max(args.concurrency)),
                               "--remote-max-copies", str(2 * max(args.concurrency))],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    line = server.stdout.readline().decode()
    port = int(re.match(r"listening on 127\.0\.0\.1:(\d+)", line).group(1))
    rows = []
    try:
        for c in args.concurrency:
            for mode in ("remote", "binary"):
                rate, rss, _ = measure(server, port, mode, c, args.seconds)
                rows.append((mode, c, rate, rss))
                print(f"{mode:7s} concurrency {c:3d}: {rate:9.1f} infer/s, server VmRSS {rss:7.1f} MiB",
                      flush=True)
        hwm = memory_mib(server.pid, "VmHWM")
    finally:
        server.terminate()
        server.wait()
    print(f"\ntcp on lo, {args.seconds:g} s per row, server peak VmHWM {hwm:.1f} MiB\n")
    print("| path | concurrency | infer/s | server VmRSS after (MiB) |")
    print("| --- | --- | --- | --- |")
    for mode, c, rate, rss in rows:
        name = "remote regions (UCX)" if mode == "remote" else "binary data in the HTTP body"
        print(f"| {name} | {c} | {rate:,.0f} | {rss:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
