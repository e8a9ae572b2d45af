#!/usr/bin/env python3
"""The server's own cost per request, against the transport floors measured
in the same run: the bare gRPC and HTTP servers of bench/baselines (the same
gRPC, proto and libmicrohttpd, a fixed answer, nothing of ours).

For each of five targets (the server over gRPC and over HTTP, each floor,
and the gRPC floor served through gRPC's callback API) and the tiny
`simple` model (two INT32 [1,16] inputs, inline):

- concurrency 1: one client sending requests back to back; the p50 latency;
- concurrency N: N requests in flight from one asyncio client; the calls
  per second and the server's CPU per call, from utime+stime of
  /proc/PID/stat over the measured window divided by the calls completed.

Then the ratios the server aims at, each marked met or missed: server p50
over bare p50 at most 1.25 (gRPC and HTTP), server CPU per inference over
bare CPU per call at most 1.5. Both sides of every ratio are measured by
the same client (tritonclient's, per protocol) in the same run; a floor
whose figure is zero (no CPU tick over the window) makes its ratio "not
measured", never met or missed. The gRPC floors answer `simple`'s
metadata and config as the server does, which the run checks, so that the
request is the same on both sides. The gRPC floor serves as the server does
(completion queues, the server's count of serving threads); the callback
floor is printed beside it, over it, for the choice of gRPC's API (no
target). It prints figures and judges nothing: the
exit status is non-zero only when a request failed, a server did not start
or did not stop cleanly, or a floor described `simple` otherwise than the
server.

    python server/bench/bench_request_cost.py --server build/.../shmreg-server \\
        [--floors DIR] [--seconds 5] [--concurrency 100] [--repeat 1] \\
        [--thread-table] [--csv FILE]

--floors defaults to the server binary's folder (the build with
-DSERVER_BUILD_BENCH=ON puts shmreg-bare-grpc and shmreg-bare-http
there). --thread-table adds the server's CPU by thread name at concurrency
N (from /proc/PID/task/*/stat). Needs tritonclient[http,grpc] and numpy.
"""
from __future__ import annotations

import argparse
import asyncio
import csv
import os
import re
import select
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections import defaultdict

import numpy as np

TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")
START_TIMEOUT_S = 10
P50_TARGET, CPU_TARGET = 1.25, 1.5
MODEL = "simple"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def threads_cpu_s(pid: int) -> dict[str, float]:
    """CPU seconds of process pid by thread name (threads of one name summed,
    digits at a name's end read N)."""
    out: dict[str, float] = defaultdict(float)
    task = f"/proc/{pid}/task"
    for tid in os.listdir(task):
        try:
            with open(f"{task}/{tid}/stat") as f:
                text = f.read()
        except OSError:
            continue  # the thread ended meanwhile
        name = text[text.index("(") + 1:text.rindex(")")]
        fields = text.rsplit(")", 1)[1].split()
        out[re.sub(r"[0-9]+$", "N", name)] += (int(fields[11]) + int(fields[12])) * TICK_S
    return out


class Server:
    """A started server process and its HTTP and gRPC addresses (either may
    be None: each floor speaks one protocol)."""

    def __init__(self, name: str, argv: list[str], want: tuple[str, ...]):
        self.name = name
        # Unbuffered: the lines are waited for with select on the pipe, and a
        # buffered reader would take a line the server printed with the first
        # ("grpc listening on ...") off the pipe, where select no longer sees it.
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     bufsize=0)
        self.urls: dict[str, str] = {}
        deadline = time.monotonic() + START_TIMEOUT_S
        while len(self.urls) < len(want) and time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if not ready:
                continue
            line = self.proc.stdout.readline().decode()
            if not line:
                break
            match = re.match(r"(grpc )?listening on (127\.0\.0\.1:\d+)", line)
            if match:
                self.urls["grpc" if match.group(1) else "http"] = match.group(2)
        if set(self.urls) != set(want):
            self.proc.kill()
            _, err = self.proc.communicate()
            raise RuntimeError(f"{name} did not start (got {self.urls}): {err.decode()[-2000:]}")

    def cpu_s(self) -> float:
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * TICK_S  # utime, stime

    def threads_cpu_s(self) -> dict[str, float]:
        return threads_cpu_s(self.proc.pid)

    def stop(self) -> str:
        """SIGTERM and wait; the stderr. Raises when it exits non-zero."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            _, err = self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            raise RuntimeError(f"{self.name} did not stop within 30 s")
        err = err.decode()
        if self.proc.returncode != 0:
            raise RuntimeError(f"{self.name} exited {self.proc.returncode}: {err[-2000:]}")
        return err


def inputs(module):
    """The simple model's two inputs, inline (JSON for HTTP: a client that
    sends binary tensors is measured elsewhere)."""
    data = np.arange(16, dtype=np.int32).reshape(1, 16)
    made = []
    for name in ("INPUT0", "INPUT1"):
        i = module.InferInput(name, [1, 16], "INT32")
        if module.__name__.endswith("http"):
            i.set_data_from_numpy(data, binary_data=False)
        else:
            i.set_data_from_numpy(data)
        made.append(i)
    return made


def latency_p50_us(protocol: str, url: str, seconds: float, warmup: float) -> tuple[float, int]:
    """Concurrency 1: (p50 in µs, requests measured)."""
    if protocol == "grpc":
        import tritonclient.grpc as client_module
    else:
        import tritonclient.http as client_module
    client = client_module.InferenceServerClient(url)
    ins = inputs(client_module)
    outs = [client_module.InferRequestedOutput(n) for n in ("OUTPUT0", "OUTPUT1")]
    if protocol == "http":
        outs = [client_module.InferRequestedOutput(n, binary_data=False)
                for n in ("OUTPUT0", "OUTPUT1")]
    latencies = []
    try:
        start = time.monotonic()
        while (now := time.monotonic()) < start + warmup + seconds:
            result = client.infer(MODEL, ins, outputs=outs)
            if now >= start + warmup:
                latencies.append(time.monotonic() - now)
        if result.as_numpy("OUTPUT0").shape != (1, 16):
            raise RuntimeError(f"{url}: OUTPUT0 has the wrong shape")
    finally:
        client.close()
    return statistics.median(latencies) * 1e6, len(latencies)


def descriptions(url: str) -> tuple[str, str]:
    """`simple`'s ModelMetadata and ModelConfig over gRPC, as text."""
    import tritonclient.grpc as client_module
    client = client_module.InferenceServerClient(url)
    try:
        return str(client.get_model_metadata(MODEL)), str(client.get_model_config(MODEL))
    finally:
        client.close()


def ratio_line(what: str, ours: float, bare: float, target: float) -> str:
    """One target's line: the ratio and met or missed, or "not measured"
    when the floor's figure is not positive (nothing to divide by)."""
    if bare <= 0:
        return (f"{what}: server / bare = not measured (the floor's figure is {bare:g}) "
                f"(target <= {target})")
    ratio = ours / bare
    return (f"{what}: server / bare = {ratio:.2f} (target <= {target}): "
            f"{'met' if ratio <= target else 'missed'}")


async def load(protocol: str, url: str, concurrency: int, seconds: float, warmup: float,
               server: Server, want_threads: bool) -> dict:
    """Concurrency N from one event loop: calls/s and the server's CPU per
    call over the measured window (after warmup)."""
    if protocol == "grpc":
        import tritonclient.grpc as sync_module
        import tritonclient.grpc.aio as client_module
        client = client_module.InferenceServerClient(url)
    else:
        import tritonclient.http as sync_module
        import tritonclient.http.aio as client_module
        client = client_module.InferenceServerClient(url, conn_limit=concurrency)
    ins = inputs(sync_module)
    window = {"calls": 0, "open": False}
    stop_at = time.monotonic() + warmup + seconds

    async def one_client():
        while time.monotonic() < stop_at:
            await client.infer(MODEL, ins)
            if window["open"]:
                window["calls"] += 1

    tasks = [asyncio.create_task(one_client()) for _ in range(concurrency)]
    try:
        await asyncio.sleep(warmup)
        cpu0, threads0, t0 = server.cpu_s(), want_threads and server.threads_cpu_s(), time.monotonic()
        window["open"] = True
        await asyncio.sleep(max(0.0, stop_at - time.monotonic()))
        window["open"] = False
        cpu1, threads1, t1 = server.cpu_s(), want_threads and server.threads_cpu_s(), time.monotonic()
        await asyncio.gather(*tasks)
    finally:
        for t in tasks:
            t.cancel()
        await client.close()
    calls = window["calls"]
    if calls == 0:
        raise RuntimeError(f"{url}: no call completed at concurrency {concurrency}")
    result = {"calls_per_s": calls / (t1 - t0), "cpu_us_per_call": (cpu1 - cpu0) / calls * 1e6,
              "cpu_cores": (cpu1 - cpu0) / (t1 - t0), "calls": calls}
    if want_threads:
        result["threads"] = {name: (threads1.get(name, 0.0) - threads0.get(name, 0.0)) / (t1 - t0)
                             for name in set(threads0) | set(threads1)}
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", default=os.environ.get("SERVER_BIN"),
                    help="the shmreg-server binary (default $SERVER_BIN)")
    ap.add_argument("--floors", help="folder of shmreg-bare-grpc and shmreg-bare-http "
                    "(default: the server's folder)")
    ap.add_argument("--seconds", type=float, default=5.0, help="measured window per cell")
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--concurrency", type=int, default=100, help="N of the CPU cells")
    ap.add_argument("--repeat", type=int, default=1, help="rounds (each cell's median is kept)")
    ap.add_argument("--thread-table", action="store_true",
                    help="the server's CPU by thread at concurrency N")
    ap.add_argument("--csv", help="write the rows here too")
    args = ap.parse_args()
    if not args.server or not os.access(args.server, os.X_OK):
        ap.error("--server (or $SERVER_BIN) must name the built shmreg-server")
    floors = args.floors or os.path.dirname(os.path.abspath(args.server))

    grpc_port = free_port()
    # The HTTP client holds one connection per request in flight, all from
    # 127.0.0.1: the server's per-address bound (64 by default) must let them in.
    connections = str(max(64, args.concurrency + 8))
    targets = [  # (name, protocol, argv, the addresses it prints)
        ("bare", "grpc", [os.path.join(floors, "shmreg-bare-grpc"), str(free_port())], ("grpc",)),
        ("bare-callback", "grpc", [os.path.join(floors, "shmreg-bare-grpc"), "--callback",
                                   str(free_port())], ("grpc",)),
        ("server", "grpc", [args.server, "--host", "127.0.0.1", "--port", "0",
                            "--grpc-port", str(grpc_port)], ("http", "grpc")),
        ("bare", "http", [os.path.join(floors, "shmreg-bare-http"), "0"], ("http",)),
        ("server", "http", [args.server, "--host", "127.0.0.1", "--port", "0",
                            "--max-client-connections", connections], ("http",)),
    ]
    rounds: dict[tuple[str, str], list[dict]] = defaultdict(list)
    described: dict[str, tuple[str, str]] = {}  # gRPC target: simple's metadata and config
    for _ in range(args.repeat):
        for name, protocol, argv, want in targets:
            server = Server(f"{name} ({protocol})", argv, want)
            try:
                url = server.urls[protocol]
                if protocol == "grpc" and name not in described:
                    described[name] = descriptions(url)
                p50, n1 = latency_p50_us(protocol, url, args.seconds, args.warmup)
                row = asyncio.run(load(protocol, url, args.concurrency, args.seconds, args.warmup,
                                       server, args.thread_table))
                row.update(p50_us=p50, requests_c1=n1)
            finally:
                server.stop()
            rounds[name, protocol].append(row)

    for name, told in described.items():
        if told != described["server"]:
            raise RuntimeError(f"{name} (grpc) describes `{MODEL}` otherwise than the server: "
                               f"{told} against {described['server']}")

    def median(rows, key):
        return statistics.median(r[key] for r in rows)

    def spread(rows, key):
        values = [r[key] for r in rows]
        return f" ({min(values):.0f}-{max(values):.0f})" if len(values) > 1 else ""

    print(f"the `{MODEL}` model, inline INT32 [1,16] inputs; {os.cpu_count()} CPUs; "
          f"{args.seconds:g} s per cell, {args.repeat} round(s): medians, (min-max) across rounds\n")
    print(f"| server | protocol | p50 at c=1 (µs) | calls/s at c={args.concurrency} "
          f"| CPU per call at c={args.concurrency} (µs) |")
    print("| --- | --- | ---: | ---: | ---: |")
    table = []
    for (name, protocol), rows in rounds.items():
        fig = {k: median(rows, k) for k in ("p50_us", "calls_per_s", "cpu_us_per_call")}
        table.append({"server": name, "protocol": protocol, "concurrency": args.concurrency,
                      "rounds": len(rows), **fig})
        print(f"| {name} | {protocol} | {fig['p50_us']:.0f}{spread(rows, 'p50_us')} "
              f"| {fig['calls_per_s']:.0f}{spread(rows, 'calls_per_s')} "
              f"| {fig['cpu_us_per_call']:.0f}{spread(rows, 'cpu_us_per_call')} |")
    print()
    figures = {(r["server"], r["protocol"]): r for r in table}
    for protocol in ("grpc", "http"):
        ours, bare = figures["server", protocol], figures["bare", protocol]
        for what, key, target in (("p50 at c=1", "p50_us", P50_TARGET),
                                  (f"CPU per call at c={args.concurrency}", "cpu_us_per_call",
                                   CPU_TARGET)):
            print(ratio_line(f"{protocol} {what}", ours[key], bare[key], target))
    callback, queue = figures["bare-callback", "grpc"], figures["bare", "grpc"]

    def over(key):
        return "not measured" if queue[key] <= 0 else f"{callback[key] / queue[key]:.2f}"
    print(f"grpc floors, callback API / completion queue: p50 at c=1 {over('p50_us')}, "
          f"CPU per call at c={args.concurrency} {over('cpu_us_per_call')}")
    if args.thread_table:
        for (name, protocol), rows in rounds.items():
            cores = defaultdict(list)
            for r in rows:
                for thread, c in r["threads"].items():
                    cores[thread].append(c)
            print(f"\n{name} ({protocol}) at c={args.concurrency}: CPU by thread name "
                  "(cores; digits at a name's end read N)\n")
            print("| thread | cores |")
            print("| --- | ---: |")
            for thread, c in sorted(cores.items(), key=lambda kv: -statistics.median(kv[1])):
                if statistics.median(c) >= 0.005:
                    print(f"| {thread} | {statistics.median(c):.2f} |")
            print(f"| all | {median(rows, 'cpu_cores'):.2f} |")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(table[0]))
            w.writeheader()
            w.writerows(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
