#!/usr/bin/env python3
"""The server's CPU per call of gRPC's ModelMetadata, ModelConfig and
ModelStatistics (every model's), for one or more server binaries measured
in turns on the same machine: each round starts every binary, sends CALLS
calls of each kind from one synchronous client, and reads the server's
utime+stime from /proc/PID/stat before and after each batch of calls. The
binaries alternate round by round, so that a noisy machine weighs on each
alike; the table gives each one's median and range over the rounds.

It also checks that every binary answers each call with the same bytes
(the serialized protobuf; no inference runs, so the statistics are all 0)
and exits non-zero when they differ or a server fails.

    python server/bench/bench_model_descriptions.py [LABEL=]BIN [[LABEL=]BIN...] \\
        [--calls 5000] [--rounds 5]

LABEL names a binary in the table (default: its path).

Needs tritonclient[grpc] (its generated stubs).
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time

import grpc
from tritonclient.grpc import service_pb2, service_pb2_grpc

TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")
MODEL = "simple"
CALLS = {
    "ModelMetadata": lambda s: s.ModelMetadata(service_pb2.ModelMetadataRequest(name=MODEL)),
    "ModelConfig": lambda s: s.ModelConfig(service_pb2.ModelConfigRequest(name=MODEL)),
    "ModelStatistics": lambda s: s.ModelStatistics(service_pb2.ModelStatisticsRequest()),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * TICK_S  # utime, stime


def one_round(binary: str, calls: int) -> tuple[dict[str, float], dict[str, bytes]]:
    """CPU µs per call of each kind, and each kind's answer."""
    port, grpc_port = free_port(), free_port()
    proc = subprocess.Popen([binary, "--port", str(port), "--grpc-port", str(grpc_port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        channel = grpc.insecure_channel(f"127.0.0.1:{grpc_port}")
        grpc.channel_ready_future(channel).result(timeout=10)
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        per_call, answers = {}, {}
        for kind, call in CALLS.items():
            for _ in range(200):  # warm-up
                call(stub)
            before = cpu_s(proc.pid)
            for _ in range(calls):
                answer = call(stub)
            per_call[kind] = (cpu_s(proc.pid) - before) / calls * 1e6
            answers[kind] = answer.SerializeToString(deterministic=True)
        channel.close()
        return per_call, answers
    finally:
        proc.terminate()
        if proc.wait(timeout=40) != 0:
            raise SystemExit(f"{binary} exited with {proc.returncode}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binaries", nargs="+")
    ap.add_argument("--calls", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    paths = dict(b.split("=", 1) if "=" in b else (b, b) for b in args.binaries)
    args.binaries = list(paths)
    figures = {b: {k: [] for k in CALLS} for b in args.binaries}
    answers = {}
    for r in range(args.rounds):
        for b in args.binaries:
            per_call, got = one_round(paths[b], args.calls)
            for k, v in per_call.items():
                figures[b][k].append(v)
            answers[b] = got
            print(f"round {r + 1} {b}: " + ", ".join(f"{k} {v:.1f}" for k, v in per_call.items()),
                  file=sys.stderr)
    print("| binary | " + " | ".join(f"{k}: CPU µs per call, median (range)" for k in CALLS) + " |")
    print("| --- |" + " ---: |" * len(CALLS))
    for b in args.binaries:
        cells = [f"{statistics.median(v):.1f} ({min(v):.1f}-{max(v):.1f})"
                 for v in figures[b].values()]
        print(f"| {b} | " + " | ".join(cells) + " |")
    first = answers[args.binaries[0]]
    differ = [(b, k) for b in args.binaries[1:] for k in CALLS if answers[b][k] != first[k]]
    for b, k in differ:
        print(f"{b} answers {k} with other bytes than {args.binaries[0]}", file=sys.stderr)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
