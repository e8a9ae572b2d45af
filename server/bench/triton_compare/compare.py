#!/usr/bin/env python3
"""The shared-memory endpoints of a real Triton (tritonserver 2.51 from PyPI's
nvidia-pytriton wheel) and of the server (server/), measured in one run on one
machine with the same client:

- register + unregister of one system region, cycles/s;
- status of all regions with --regions registered, calls/s;
- status of one region with --regions registered, calls/s;

each over HTTP (one kept-alive connection) and gRPC (one channel), one
request at a time, for --seconds each, best of --repeat. The two servers
take turns within each cell (Triton, example, example, Triton, ...), so that
a machine whose load changes during the run weighs on both alike rather
than on whichever was measured last. Beside the rates, each server's CPU
time per call (its process's user + system time from /proc over all of a
cell's rounds): what the server itself spends, which depends far less than
a rate on what else the machine runs. The client reads each answer whole
but does not parse it, so that it costs both servers the same. Prints a
Markdown table (docs/performance.md, "Triton's shared-memory endpoints").
Run it through server/bench/triton_compare/run.sh, which builds the server
and the venv; or directly:

    build/triton-parity/venv/bin/python server/bench/triton_compare/compare.py \\
        --server build/server-ci/app/shmreg-server
"""
import argparse
import http.client
import os
import platform
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path[:0] = [os.path.join(REPO, "server", "tests", "parity"), os.path.join(REPO, "server", "tests", "support")]

import grpc  # noqa: E402
from tritonclient.grpc import service_pb2 as pb  # noqa: E402

from grpc_support import start_with_grpc  # noqa: E402
from triton_process import Triton  # noqa: E402

SERVICE = "inference.GRPCInferenceService"
PAGE = os.sysconf("SC_PAGE_SIZE")


class Http:
    def __init__(self, url):
        host, port = url.rsplit(":", 1)
        self.conn = http.client.HTTPConnection(host, int(port), timeout=30)

    def call(self, method, path, body=None):
        self.conn.request(method, path, body=body,
                          headers={"Content-Type": "application/json"} if body else {})
        resp = self.conn.getresponse()
        data = resp.read()
        if resp.status != 200:
            raise RuntimeError(f"{method} {path}: {resp.status} {data[:200]!r}")
        return data

    def register(self, name, key):
        self.call("POST", f"/v2/systemsharedmemory/region/{name}/register",
                  f'{{"key": "{key}", "offset": 0, "byte_size": {PAGE}}}'.encode())

    def unregister(self, name):
        self.call("POST", f"/v2/systemsharedmemory/region/{name}/unregister")

    def status(self, name=None):
        return self.call("GET", f"/v2/systemsharedmemory/region/{name}/status" if name
                         else "/v2/systemsharedmemory/status")

    def close(self):
        self.conn.close()


class Grpc:
    def __init__(self, url):
        self.channel = grpc.insecure_channel(url)
        raw = lambda b: b  # noqa: E731 (the answer's bytes, unparsed)
        self.stubs = {m: self.channel.unary_unary(f"/{SERVICE}/{m}",
                                                  request_serializer=lambda r: r.SerializeToString(),
                                                  response_deserializer=raw)
                      for m in ("SystemSharedMemoryRegister", "SystemSharedMemoryUnregister",
                                "SystemSharedMemoryStatus")}

    def register(self, name, key):
        self.stubs["SystemSharedMemoryRegister"](pb.SystemSharedMemoryRegisterRequest(
            name=name, key=key, offset=0, byte_size=PAGE), timeout=30)

    def unregister(self, name):
        self.stubs["SystemSharedMemoryUnregister"](
            pb.SystemSharedMemoryUnregisterRequest(name=name), timeout=30)

    def status(self, name=None):
        return self.stubs["SystemSharedMemoryStatus"](
            pb.SystemSharedMemoryStatusRequest(name=name or ""), timeout=30)

    def close(self):
        self.channel.close()


def rate(fn, seconds):
    """(calls of fn, seconds they took), for about `seconds`."""
    n, start = 0, time.perf_counter()
    deadline = start + seconds
    while True:
        for _ in range(16):
            fn()
        n += 16
        now = time.perf_counter()
        if now >= deadline:
            return n, now - start


def cpu_seconds(pid):
    """User + system time of process pid so far (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def make_objects(prefix, count):
    keys = []
    for i in range(count):
        key = f"/{prefix}_{i}"
        fd = os.open(f"/dev/shm{key}", os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        os.ftruncate(fd, PAGE)
        os.close(fd)
        keys.append(key)
    return keys


class Cell:
    """One operation against one server: the best rate of its rounds and
    the server's CPU time over all of them."""

    def __init__(self):
        self.best = 0.0
        self.calls = 0
        self.cpu = 0.0

    def round(self, fn, pid, seconds):
        before = cpu_seconds(pid)
        n, took = rate(fn, seconds)
        self.cpu += cpu_seconds(pid) - before
        self.calls += n
        self.best = max(self.best, n / took)

    def cpu_us(self):
        return self.cpu / self.calls * 1e6


def take_turns(ops, targets, seconds, repeat, cells):
    """Each op's rounds, the servers taking turns: round i runs them in
    order when i is even, reversed when odd, so that neither is always the
    one measured just after the other. targets: {label: (pid, client)};
    ops: {name: function of a client}."""
    for op, fn in ops.items():
        for i in range(repeat):
            order = list(targets) if i % 2 == 0 else list(reversed(targets))
            for label in order:
                pid, client = targets[label]
                cells.setdefault((label, op), Cell()).round(lambda: fn(client), pid, seconds)


def measure(targets, keys, regions, seconds, repeat):
    """{(label, operation): Cell} for every server over one protocol."""
    cells = {}
    cycle_key = keys[-1]  # not among the status regions

    def cycle(client):
        client.register("cycle", cycle_key)
        client.unregister("cycle")
    take_turns({"register+unregister": cycle}, targets, seconds, repeat, cells)
    for _, client in targets.values():
        for i in range(regions):
            client.register(f"r{i:04d}", keys[i])
        body = client.status()
        if b"r0000" not in body or f"r{regions - 1:04d}".encode() not in body:
            raise RuntimeError("status of all does not list the registered regions")
    one = f"r{regions // 2:04d}"
    take_turns({f"status, all {regions}": lambda c: c.status(),
                "status, one": lambda c: c.status(one)}, targets, seconds, repeat, cells)
    for _, client in targets.values():
        for i in range(regions):
            client.unregister(f"r{i:04d}")
    return cells


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", default=os.environ.get("SERVER_BIN"),
                    help="the shmreg-server binary (default: $SERVER_BIN)")
    ap.add_argument("--regions", type=int, default=500)
    ap.add_argument("--seconds", type=float, default=2.0, help="per measurement")
    ap.add_argument("--repeat", type=int, default=3, help="measurements per cell; the best is kept")
    args = ap.parse_args()
    if not args.server:
        ap.error("--server or $SERVER_BIN is needed")
    os.environ["SERVER_BIN"] = os.path.abspath(args.server)

    prefix = f"shmreg_tcmp_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    keys = make_objects(prefix, args.regions + 1)
    servers = {}
    results = {}
    try:
        servers["Triton 2.51"] = Triton()
        servers["example"] = start_with_grpc()
        for proto, cls, url in (("HTTP", Http, "url"), ("gRPC", Grpc, "grpc_url")):
            targets = {label: (server.proc.pid, cls(getattr(server, url)))
                       for label, server in servers.items()}
            try:
                for (label, op), cell in measure(targets, keys, args.regions, args.seconds,
                                                 args.repeat).items():
                    results[label, proto, op] = cell
            finally:
                for _, client in targets.values():
                    client.close()
    finally:
        for label, server in servers.items():
            server.stop()
        for key in keys:
            os.unlink(f"/dev/shm{key}")

    print(f"machine: {platform.node()}, {os.cpu_count()} CPUs, {platform.platform()}; "
          f"load average {os.getloadavg()[0]:.1f} at the end; "
          f"{args.regions} regions, best of {args.repeat} x {args.seconds:g} s, the servers "
          f"taking turns, one client, one request at a time\n")
    print("| operation | protocol | Triton 2.51, calls/s | example, calls/s | example / Triton "
          "| Triton, CPU us/call | example, CPU us/call |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    ops = list(dict.fromkeys(op for _, _, op in results))
    for op in ops:
        for proto in ("HTTP", "gRPC"):
            t, e = results["Triton 2.51", proto, op], results["example", proto, op]
            print(f"| {op} | {proto} | {t.best:,.0f} | {e.best:,.0f} | {e.best / t.best:.2f} "
                  f"| {t.cpu_us():.1f} | {e.cpu_us():.1f} |")


if __name__ == "__main__":
    main()
