#!/usr/bin/env python3
"""The light GPU model's cost per request, against floors measured in the
same run: the server's GPU model 'yolo' (FP16 input [3,384,640] and
[3,640,640]) through system and CUDA shared memory, beside the bare gRPC
server of bench/baselines and the link's own time for the same bytes.

Measured, in one run, every client figure by perf_analyzer over gRPC:

- bare gRPC: the floor of bench_request_cost.py (shmreg-bare-grpc, a fixed
  answer; it describes `simple` as the server does, so perf_analyzer -m
  simple sends it the server's request): p50 at concurrency 1, and at
  concurrency --concurrency the calls/s and its CPU per call
  (/proc/PID/stat over perf_analyzer's run over the calls the floor counted
  in its statistics, as the server's CPU per inference is taken). The
  floor serves as the server does (completion queues); the same floor
  through gRPC's callback API (shmreg-bare-grpc --callback) is measured
  beside it, for the choice of gRPC's API (no target). A floor
  perf_analyzer cannot measure is "not measured" with the reason: no other
  client stands in for it;
- the link: one inference's tensors copied up, then down, on one stream
  between page-locked host memory and the device (pcie_bandwidth.py
  --transfer, its own process), median of 50, per shape;
- the server (seed_benchmark.py's start_server and measure: perf_analyzer
  -m yolo -b 1 --shared-memory system|cuda -i grpc; the server with
  --yolo-window 1 unless --window says otherwise) per shape: p50 at
  concurrency 1, the model's compute (compute_infer of
  v2/models/yolo/stats over the pass, as perf_analyzer reports it), and at
  --concurrency the infer/s and the server's CPU per inference; and for
  each cell (both concurrencies) the request's time by step from the same
  statistics over the pass (queue, compute_input, compute_infer,
  compute_output, and the rest of the request time as answer/other, µs per
  inference) beside the server's CPU by thread name.

Then the targets, each printed as a ratio and met or missed, or "not
measured" with the reason when a figure it needs is missing (never met or
missed):

- CUDA p50 at c=1 / (bare gRPC p50 + the model's compute) <= 1.25;
- (system p50 - CUDA p50) at c=1 / the tensors' transfer time <= 1.1, i.e.
  system p50 <= CUDA p50 + 1.1 x transfer;
- server CPU per inference / bare gRPC CPU per call at c=N <= 1.5, for
  system and for CUDA.

Judges nothing: exit 0 when every cell was measured (the floors
included), 1 when one failed, 77 (skip) without a GPU. --floors-only
measures the two floors alone, which needs no GPU (exit 0 or 1 alike).

    SERVER_BIN=build/server-gpu/app/shmreg-server \\
        python3 server/bench/gpu/light_model_cost.py [--interval-ms 1000] [--floors-only]

Needs what seed_benchmark.py needs (perf_analyzer, CuPy, tritonclient[grpc]
and NumPy: its header lists the wheels), and shmreg-bare-grpc beside the
server (-DSERVER_BUILD_BENCH=ON). Writes $OUT/light-model.md (OUT defaults
to build/gpu-out) and each perf_analyzer's log under $OUT/seed-benchmark/.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]
import seed_benchmark as sb  # noqa: E402
from bench_request_cost import threads_cpu_s  # noqa: E402

SHAPES = ("3,384,640", "3,640,640")
KINDS = ("system", "cuda")
P50_TARGET, SYSTEM_TARGET, CPU_TARGET = 1.25, 1.1, 1.5
SKIP = 77


def floor_missing(bare, key, name="bare gRPC"):
    """Why the floor's figure key is missing, or "" when it is there."""
    if bare.get("error"):
        return f"{name} not measured with perf_analyzer: {bare['error']}"
    if not bare.get(key) or bare[key] <= 0:
        return f"{name} {key} missing"
    return ""


def verdicts(fig, concurrency):
    """The target lines from the figures: [(what, ratio or None, target,
    why it is None)]. fig: {"bare": {"p50_us", "cpu_us_per_call"} or
    {"error"}, "transfer_us": {shape: us}, (kind, shape, c): perf_analyzer
    row ({"p50_us", "infer_us", "cpu_us_per_infer", ...}), a row with an
    "error" counting as missing}."""
    def get(kind, shape, c, key):
        row = fig.get((kind, shape, c))
        if row is None:
            return None, f"{kind} {shape} c={c} not run"
        if row.get("error"):
            return None, f"{kind} {shape} c={c} failed"
        if row.get(key) is None:
            return None, f"{kind} {shape} c={c} {key} missing"
        return row[key], ""

    def line(what, parts, target, combine):
        why = "; ".join(dict.fromkeys(w for _, w in parts if w))  # each reason once
        if why:
            return what, None, target, why
        r = combine(*(v for v, _ in parts))
        return (what, None, target, "a denominator not positive") if r is None \
            else (what, r, target, "")

    def over(num, den):
        return None if den <= 0 else num / den

    bare = fig.get("bare") or {"error": "not run"}
    bare_p50 = (bare.get("p50_us"), floor_missing(bare, "p50_us"))
    bare_cpu = (bare.get("cpu_us_per_call"), floor_missing(bare, "cpu_us_per_call"))
    out = []
    for shape in SHAPES:
        cuda_p50 = get("cuda", shape, 1, "p50_us")
        out.append(line(f"{shape} CUDA p50 at c=1 / (bare gRPC p50 + compute)",
                        [cuda_p50, bare_p50, get("cuda", shape, 1, "infer_us")], P50_TARGET,
                        lambda p50, floor, compute: over(p50, floor + compute)))
        transfer = (fig.get("transfer_us") or {}).get(shape)
        out.append(line(f"{shape} (system p50 - CUDA p50) at c=1 / transfer",
                        [get("system", shape, 1, "p50_us"), cuda_p50,
                         (transfer, "" if transfer else f"transfer {shape} not measured")],
                        SYSTEM_TARGET, lambda system, cuda, t: over(system - cuda, t)))
        for kind in KINDS:
            out.append(line(f"{shape} {kind} CPU per inference at c={concurrency} / bare gRPC "
                            "CPU per call",
                            [get(kind, shape, concurrency, "cpu_us_per_infer"), bare_cpu],
                            CPU_TARGET, over))
    return out


def verdict_line(what, r, target, why=""):
    if r is None:
        return f"{what}: not measured ({why or 'a figure is missing'}) (target <= {target})"
    return f"{what}: {r:.2f} (target <= {target}): {'met' if r <= target else 'missed'}"


def floors_line(fig, concurrency):
    """The callback floor over the completion-queue one: no target, a
    figure for the choice of gRPC's API."""
    cb, cq = fig.get("bare_callback") or {"error": "not run"}, fig.get("bare") or {"error": "not run"}

    def ratio(key):
        why = floor_missing(cq, key) or floor_missing(cb, key, "bare gRPC, callback API")
        return f"not measured ({why})" if why else f"{cb[key] / cq[key]:.2f}"
    return (f"grpc floors, callback API / completion queue: "
            f"p50 at c=1 {ratio('p50_us')}, CPU per call at c={concurrency} "
            f"{ratio('cpu_us_per_call')}")


def short_error(text, width=100):
    """A failed cell's reason on one line: what failed (before the first
    colon of the first line) and the last line of what it printed."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return "failed"
    if len(lines) == 1:
        return lines[0][:width]
    return f"{lines[0].split(':', 1)[0]}: {lines[-1]}"[:width]


def fmt(v, digits=0):
    return "?" if v is None else f"{v:,.{digits}f}"


def table(fig, concurrency, floors_only=False):
    """The Markdown table of the figures."""
    lines = ["| shape | what | p50 at c=1 (µs) | compute infer (µs) | transfer (µs) "
             f"| infer/s at c={concurrency} | CPU per inference at c={concurrency} (µs) |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for key, what in (("bare", "bare gRPC"), ("bare_callback", "bare gRPC, callback API")):
        bare = fig.get(key) or {"error": "not run"}
        if bare.get("error"):
            lines.append(f"| - | {what} (perf_analyzer) | not measured: "
                         f"{short_error(bare['error'], 80)} | | | | |")
            continue
        lines.append(f"| - | {what} (perf_analyzer) | {fmt(bare.get('p50_us'))} "
                     f"| - | - | {fmt(bare.get('calls_per_s'))} "
                     f"| {fmt(bare.get('cpu_us_per_call'), 1)} |")
    for shape in () if floors_only else SHAPES:
        transfer = (fig.get("transfer_us") or {}).get(shape)
        for kind in KINDS:
            one = fig.get((kind, shape, 1)) or {}
            top = fig.get((kind, shape, concurrency)) or {}
            if one.get("error") or top.get("error"):
                why = short_error(one.get("error") or top.get("error"), 80)
                lines.append(f"| {shape} | {kind} (perf_analyzer) | failed: {why} | | | | |")
                continue
            lines.append(f"| {shape} | {kind} (perf_analyzer) | {fmt(one.get('p50_us'))} "
                         f"| {fmt(one.get('infer_us'))} "
                         f"| {fmt(transfer, 1) if kind == 'system' else '-'} "
                         f"| {fmt(top.get('infer_s'))} | {fmt(top.get('cpu_us_per_infer'), 1)} |")
    return "\n".join(lines)


STEP_NAMES = (("queue", "queue"), ("compute_input", "compute input"),
              ("compute_infer", "compute infer"), ("compute_output", "compute output"),
              ("answer_other", "answer/other"), ("request", "request"))


def cells(fig, concurrency):
    """The server's cells that ran, in the tables' order: (kind, shape, c)."""
    return [(kind, shape, c) for shape in SHAPES for kind in KINDS for c in (1, concurrency)
            if (kind, shape, c) in fig]


def step_table(fig, concurrency):
    """The request's time by step in the server, per cell: the model's
    statistics over the pass (v2/models/yolo/stats), µs per inference, with
    the server's CPU per inference of the same pass beside them."""
    shown = cells(fig, concurrency)
    if not shown:
        return ""
    lines = ["The request in the server by step (v2/models/yolo/stats over each pass, µs per "
             "inference; answer/other: the request time beyond the four steps)", "",
             "| shape | path | c | " + " | ".join(name for _, name in STEP_NAMES)
             + " | CPU per inference (µs) |",
             "| --- | --- | ---: |" + " ---: |" * (len(STEP_NAMES) + 1)]
    for kind, shape, c in shown:
        row = fig[kind, shape, c]
        steps = row.get("steps_us") or {}
        lines.append(f"| {shape} | {kind} | {c} | "
                     + " | ".join(fmt(steps.get(key), 1) for key, _ in STEP_NAMES)
                     + f" | {fmt(row.get('cpu_us_per_infer'), 1)} |")
    return "\n".join(lines)


def thread_table(fig, concurrency):
    """The server's CPU by thread name (cores over each perf_analyzer run,
    start and warm-up included), one column per cell."""
    shown = [cell for cell in cells(fig, concurrency) if ("threads", *cell) in fig]
    if not shown:
        return ""
    names = {name for cell in shown for name in fig["threads", *cell]}

    def cores(name, cell):
        return fig["threads", *cell].get(name, 0.0)
    listed = sorted((n for n in names if max(cores(n, c) for c in shown) >= 0.01),
                    key=lambda n: -max(cores(n, c) for c in shown))
    lines = ["The server's CPU by thread name (cores; digits at a name's end read N)", "",
             "| thread | " + " | ".join(f"{shape} {kind} c={c}" for kind, shape, c in shown) + " |",
             "| --- |" + " ---: |" * len(shown)]
    for name in listed + ["all"]:
        row = [sum(fig["threads", *c].values()) if name == "all" else cores(name, c)
               for c in shown]
        lines.append(f"| {name} | " + " | ".join(f"{v:.2f}" for v in row) + " |")
    return "\n".join(lines)


def perf_analyzer_env():
    """The environment perf_analyzer runs in: libcudart.so, which it dlopens
    for CUDA shared memory, on its library path."""
    env = dict(os.environ)
    cudart = sb.cudart_dir()
    if cudart:
        env["LD_LIBRARY_PATH"] = cudart + (":" + env["LD_LIBRARY_PATH"]
                                           if env.get("LD_LIBRARY_PATH") else "")
    return env


def calls_counted(url):
    """The ModelInfer calls the bare server has answered (its statistics'
    success count of `simple`)."""
    import tritonclient.grpc as grpcclient
    client = grpcclient.InferenceServerClient(url)
    try:
        (entry,) = client.get_inference_statistics("simple").model_stats
        return entry.inference_stats.success.count
    finally:
        client.close()


def perf_analyzer_floor(pa, env, server, concurrency, interval_ms):
    """perf_analyzer -m simple against the bare server at concurrency:
    ({"p50_us", "calls_per_s", "cpu_us_per_call"}, "") or (None, why). Its
    CPU per call is its CPU over perf_analyzer's whole run over the calls it
    counted in that run, as the server's CPU per inference is taken."""
    import csv

    path = os.path.join(sb.RUN_DIR, f"{server.name.split()[0]}-grpc-c{concurrency}.csv")
    cmd = [pa, "-m", "simple", "-b", "1", "-i", "grpc", "-u", server.urls["grpc"],
           "--concurrency-range", str(concurrency), "--measurement-interval", str(interval_ms),
           "--max-trials", "3", "--stability-percentage", "999", "-f", path]
    try:
        calls0, cpu0 = calls_counted(server.urls["grpc"]), server.cpu_s()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
        cpu1, calls1 = server.cpu_s(), calls_counted(server.urls["grpc"])
    except subprocess.TimeoutExpired:
        return None, "perf_analyzer: timed out"
    except Exception as e:  # the statistics call: the floor is not measured, and says why
        return None, short_error(f"ModelStatistics: {e}")
    with open(os.path.join(sb.RUN_DIR, f"{server.name.split()[0]}-grpc-c{concurrency}.log"),
              "w") as f:
        f.write(" ".join(cmd) + "\n\n" + proc.stdout + proc.stderr)
    if proc.returncode != 0 or not os.path.exists(path):
        printed = proc.stdout + proc.stderr
        return None, short_error(f"perf_analyzer exit {proc.returncode}:\n{printed}")
    with open(path) as f:
        row = next(csv.DictReader(f))
    calls = calls1 - calls0
    if calls <= 0:
        return None, "the floor counted no call"
    return {"p50_us": float(row["p50 latency"]), "calls_per_s": float(row["Inferences/Second"]),
            "cpu_us_per_call": (cpu1 - cpu0) / calls * 1e6}, ""


def measure_bare(floors, pa, env, args, callback=False):
    """The bare gRPC floor (callback: served through gRPC's callback API)
    with perf_analyzer, the client of the server's cells: its figures, or
    {"error": why} when perf_analyzer could not measure it."""
    import bench_request_cost as brc
    serving = ["--callback"] if callback else []
    name = "bare-callback (grpc)" if callback else "bare (grpc)"
    server = brc.Server(name, [os.path.join(floors, "shmreg-bare-grpc"), *serving,
                               str(brc.free_port())], ("grpc",))
    try:
        one, why = perf_analyzer_floor(pa, env, server, 1, args.interval_ms)
        top, why = perf_analyzer_floor(pa, env, server, args.concurrency, args.interval_ms) \
            if one else (None, why)
    finally:
        server.stop()
    if not (one and top):
        return {"error": f"c={1 if not one else args.concurrency}: {why}"}
    return {"p50_us": one["p50_us"], "calls_per_s": top["calls_per_s"],
            "cpu_us_per_call": top["cpu_us_per_call"]}


def measure_transfer(shape, repeats):
    in_bytes, out_bytes = sb.tensor_bytes(shape)
    got = sb.script_json("pcie_bandwidth.py", ["--transfer", "--input-bytes", str(in_bytes),
                                               "--output-bytes", str(out_bytes),
                                               "--repeats", str(repeats)], "error")
    return got


def measure_server(pa, env, concurrency, interval_ms, window, fig):
    """Every perf_analyzer cell of the server, one server for all of them."""
    server = sb.start_server([0], "auto", window)
    try:
        sb.log(f"--- server {server.args_text}")
        fig["server_args"] = re.sub(r" --grpc-port \d+", "", server.args_text)
        for c in (1, concurrency):
            for shape in SHAPES:
                for kind in KINDS:
                    row = {"gpus": 1, "window": window, "concurrency": c, "shape": shape,
                           "run": "cuda" if kind == "cuda" else "system_pinned", "error": ""}
                    before, t0 = threads_cpu_s(server.pid), time.monotonic()
                    sb.measure(row, server, pa, env, interval_ms)
                    spent, elapsed = threads_cpu_s(server.pid), time.monotonic() - t0
                    fig["threads", kind, shape, c] = {
                        name: (cpu - before.get(name, 0.0)) / elapsed for name, cpu in spent.items()}
                    sb.log(f"    {shape} {kind} c={c}: {row['error'] or json.dumps(row)}")
                    fig[kind, shape, c] = row
    finally:
        server.stop()


def floors_errors(fig):
    return [f"{name}: {fig[key]['error']}" for key, name in
            (("bare", "bare gRPC"), ("bare_callback", "bare gRPC, callback API"))
            if fig.get(key, {}).get("error")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", default=os.environ.get("SERVER_BIN"),
                    help="the shmreg-server binary, built with CUDA (default $SERVER_BIN)")
    ap.add_argument("--floors", help="folder of shmreg-bare-grpc (default: the server's folder)")
    ap.add_argument("--interval-ms", type=int, default=1000,
                    help="perf_analyzer's measurement interval (three of them per cell)")
    ap.add_argument("--concurrency", type=int, default=100, help="N of the CPU cells")
    ap.add_argument("--repeats", type=int, default=50, help="timed copies per transfer figure")
    ap.add_argument("--window", default="1",
                    help="the server's --yolo-window: 1 (default) makes the model's compute a few "
                         "microseconds, so the server's own cost shows; 'default' is the model's own")
    ap.add_argument("--floors-only", action="store_true",
                    help="measure the two gRPC floors alone (no GPU needed)")
    args = ap.parse_args()
    if not args.floors_only and sb.device_count() == 0:
        print("light_model_cost: skipped: no GPU visible (nvidia-smi lists none, or "
              "CUDA_VISIBLE_DEVICES is empty); the light model runs on a GPU only")
        return SKIP
    if not args.server or not os.access(args.server, os.X_OK):
        ap.error("--server (or $SERVER_BIN) must name the built shmreg-server")
    os.environ["SERVER_BIN"] = os.path.abspath(args.server)
    floors = args.floors or os.path.dirname(os.path.abspath(args.server))
    if not os.access(os.path.join(floors, "shmreg-bare-grpc"), os.X_OK):
        ap.error(f"no shmreg-bare-grpc in {floors}: build the server with -DSERVER_BUILD_BENCH=ON")

    pa = sb.perf_analyzer()  # exits with the reason when there is none
    fig = {"transfer_us": {}}
    errors = []
    for shape in () if args.floors_only else SHAPES:  # before any server: each alone
        got = measure_transfer(shape, args.repeats)
        sb.log(f"--- transfer {shape}: {json.dumps(got)}")
        if "error" in got:
            errors.append(f"transfer {shape}: {got['error']}")
        else:
            fig["transfer_us"][shape] = got["transfer_us"]
    env = perf_analyzer_env()
    os.makedirs(sb.RUN_DIR, exist_ok=True)
    fig["bare"] = measure_bare(floors, pa, env, args)
    sb.log(f"--- bare gRPC: {json.dumps(fig['bare'])}")
    fig["bare_callback"] = measure_bare(floors, pa, env, args, callback=True)
    sb.log(f"--- bare gRPC, callback API: {json.dumps(fig['bare_callback'])}")
    errors += floors_errors(fig)
    if not args.floors_only:
        measure_server(pa, env, args.concurrency, args.interval_ms, args.window, fig)
    errors += [f"{key[0]} {key[1]} c={key[2]}: {short_error(row['error'])}"
               for key, row in fig.items()
               if isinstance(key, tuple) and len(key) == 3 and row.get("error")]

    if args.floors_only:
        text = [f"The gRPC floors alone; {os.cpu_count()} CPUs; perf_analyzer -m simple -b 1 "
                f"-i grpc, {args.interval_ms} ms windows.", "", table(fig, args.concurrency, True),
                ""]
    else:
        text = [f"The light model 'yolo' (FP16, window {args.window}), server "
                f"{fig.get('server_args', '?')}; {os.cpu_count()} CPUs; perf_analyzer -b 1 -i grpc "
                f"for the server and the floors alike, {args.interval_ms} ms windows.", "",
                table(fig, args.concurrency), "", step_table(fig, args.concurrency), "",
                thread_table(fig, args.concurrency), ""]
        text += [verdict_line(*v) for v in verdicts(fig, args.concurrency)]
    text.append(floors_line(fig, args.concurrency))
    out = sb.OUT
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "light-model.md"), "w") as f:
        f.write("\n".join(text) + "\n")
    print("\n".join(text))
    summary = "failed: " + "; ".join(errors) if errors else "every cell measured"
    print(f"=== light_model_cost summary: {summary}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
