#!/usr/bin/env python3
"""The starting benchmark: system against CUDA shared memory with the server's
GPU model 'yolo', against the limit of the host<->device link.

Runs the seed's own perf_analyzer command,

    perf_analyzer -m yolo -b 1 --shared-memory system|cuda \\
        --output-shared-memory-size 846720 --shape images:3,384,640 -i grpc

at each concurrency of BENCH_CONCURRENCY (default 1,8,32,100; the tables
are at 100, the seed's), for

    system_pinned    system shared memory, the server's default --pin auto
    system_unpinned  system shared memory, --pin never
    cuda             CUDA shared memory

with the model's default window (the kernel sets the pace) and with
--yolo-window 1 (the tensor's trip sets it). Before the servers start it
measures the link's pinned bandwidth (pcie_bandwidth.py: 1 GiB
cudaMemcpyAsync, median of 7; H2D, D2H, both at once) and adds a
"pcie_limit" row: the inferences a second the link allows for 1,474,560
bytes in and 846,720 out. It also runs copies_at_size.py --server-order for
a "chain_limit" row: the inferences a second that copies of those sizes
reach in the server's order (up, kernel, down on each instance's stream),
one cudaMemcpyAsync each, from a registered POSIX shm object, with no
server running; the copies' fixed costs and the kernel between them put
it below pcie_limit, and the server, which copies the runs waiting for one
instance as one batch (--copy-batch), can pass it (copies_batched.cu
measures batches).

For every row it prints, beside perf_analyzer's infer/s, latency and the
server's compute input / infer / output: the server's CPU per inference
(/proc/PID/stat over the run, divided by the requests the model's statistics
counted), which path each tensor took (the deltas of /metrics'
shmreg_tensor_path_total over the run: dma_in_place, staged_copy, cpu_copy),
how many requests' copies crossed the link in one batch (runs over batches
of shmreg_gpu_copy_batch_runs_total and shmreg_gpu_copy_batches_total) and
shmreg_pinned_bytes read from /metrics in the middle of the run. Each
pass is perf_analyzer --measurement-interval BENCH_INTERVAL_MS, --max-trials
3 with --stability-percentage 999 (three windows, no retry). A row is one
pass, except at the highest concurrency (the seed's, which the issue's
targets read): BENCH_PASSES passes there, system and CUDA taking turns in
the same server so that a machine that slows down mid-run slows both, and
the row is the pass of median infer/s (every pass's infer/s beside it).

Writes $OUT/seed-benchmark.csv (one line per row; plot_seed_benchmark.py
draws it), $OUT/seed-benchmark.md (the tables and the issue's ratios) and
each perf_analyzer's log and CSV under $OUT/seed-benchmark/ (OUT defaults to
build/gpu-out).

Environment: SERVER_BIN (the built server, required), PERF_ANALYZER (the
binary; default: perf_analyzer on PATH, or under /tmp/site),
BENCH_QUICK=1 (concurrency 1 and 100 only, 1 s windows: the run fits beside
the builds and tests in one run of tests/cuda/run.sh), BENCH_CONCURRENCY ("1,8,32,100"),
BENCH_WINDOWS ("default,1": the model's window and --yolo-window 1),
BENCH_PINS ("auto,never": the servers started, --pin auto for the
system_pinned and cuda rows, --pin never for system_unpinned),
BENCH_GPUS ("1"; "1,2" adds 2-GPU rows where two are visible),
BENCH_INSTANCES (--instances-per-gpu, default 6), BENCH_THREADS (worker
threads per GPU, default 12), BENCH_COPY_BATCH (--copy-batch, default the
server's), BENCH_SERVER_ARGS (more of the server's flags, e.g. "--spin-us
200"), BENCH_INTERVAL_MS (default 1500), BENCH_PASSES (passes at the
highest concurrency, default 3).

What the GPU machine needs (it has no network; Python 3.12, NumPy, CuPy,
pytest). perf_analyzer 2.60.0 is a standalone binary in its own wheel with no
Python dependencies; it needs glibc >= 2.38 (Ubuntu 24.04 has 2.39) and, for
--shared-memory cuda, dlopens an unversioned "libcudart.so" (found below in
the CUDA toolkit and put on LD_LIBRARY_PATH). tritonclient's HTTP client
(used by test_gpu_model.py when importable) needs the rest. Download here,
on any machine with pip (NumPy is left out: the GPU machine has its own):

    pip download --no-deps --only-binary=:all: --python-version 3.12 \\
      --platform manylinux_2_38_x86_64 --platform manylinux_2_28_x86_64 \\
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \\
      --platform manylinux1_x86_64 -d .whl \\
      perf-analyzer==2.60.0 tritonclient==2.73.0 geventhttpclient==2.6.1 \\
      gevent==26.9.0 greenlet==3.3.2 zope.event==6.2 zope.interface==8.7 \\
      brotli==1.2.1 certifi==2026.10.19.post1 urllib3==2.8.0 \\
      python-rapidjson==1.25 ml-dtypes==0.5.4 \\
      grpcio==1.85.3 protobuf==6.33.6 packaging==26.4 typing-extensions==4.16.0

(the last four only serve tritonclient.grpc); on the GPU machine
scripts/lib/carry.sh (install_carried_wheels) installs them with
`python3 -m pip install --no-index --no-deps --target /tmp/site .whl/*.whl`.
"""
import csv
import glob
import json
import os
import re
import select
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "tests", "support"))
from server_process import START_TIMEOUT_S, Server  # noqa: E402
from prometheus_text import scrape  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
OUT = os.environ.get("OUT", os.path.join(ROOT, "build", "gpu-out"))
RUN_DIR = os.path.join(OUT, "seed-benchmark")
SEED_SHAPE = "3,384,640"


def tensor_bytes(shape):
    """(input, output) bytes of one 'yolo' inference of FP16 input shape
    "3,H,W": its output is [84, anchors], an anchor per cell at strides 8,
    16 and 32 (server/src/models/model_yolo.c)."""
    c, h, w = (int(x) for x in shape.split(","))
    anchors = sum((h // s) * (w // s) for s in (8, 16, 32))
    return c * h * w * 2, 84 * anchors * 2


def model_args(shape):
    """perf_analyzer's arguments for one 'yolo' request of input shape."""
    return ["-m", "yolo", "-b", "1", "--output-shared-memory-size", str(tensor_bytes(shape)[1]),
            "--shape", f"images:{shape}"]


INPUT_BYTES, OUTPUT_BYTES = tensor_bytes(SEED_SHAPE)  # FP16 [3,384,640] in, [84,5040] out
SEED_ARGS = model_args(SEED_SHAPE)
PIN_NEVER_BEFORE = 10994  # --pin never's infer/s at window 1 before the system-region paths' rework
PATHS = ("dma_in_place", "staged_copy", "cpu_copy", "device_copy", "remote_copy")
# What each row is, and the server's --pin for it.
RUNS = (("system_pinned", "system", "auto"), ("cuda", "cuda", "auto"),
        ("system_unpinned", "system", "never"))
# The rows that are limits measured in the run, not servers: their names
# in the table, and the keys of their infer/s and of their error in
# link_limit()'s answer.
LIMITS = {"pcie_limit": ("PCIe limit", "limit_infer_s", "error"),
          "mix_limit": ("the link moving both tensors at once", "mix_infer_s", "error"),
          "chain_limit": ("copies one by one in the server's order, alone",
                          "chain_infer_s", "chain_error")}
CSV_FIELDS = ["gpus", "window", "run", "concurrency", "infer_s", "p50_us", "p99_us",
              "queue_us", "input_us", "infer_us", "output_us", "cpu_cores",
              "cpu_us_per_infer", "requests", "pinned_bytes_mid", "paths", "passes_infer_s",
              "error"]


def log(*args):
    print(*args, flush=True)


def perf_analyzer():
    candidates = [os.environ.get("PERF_ANALYZER"), shutil.which("perf_analyzer"),
                  "/tmp/site/perf_analyzer/bin/perf_analyzer"]
    for path in candidates:
        if path and os.path.isfile(path):
            if not os.access(path, os.X_OK):
                os.chmod(path, 0o755)
            return path
    sys.exit("seed_benchmark: no perf_analyzer (set PERF_ANALYZER, or install the wheel into "
             "/tmp/site: see this script's header)")


def cudart_dir():
    """A directory holding an unversioned libcudart.so, which perf_analyzer
    dlopens for --shared-memory cuda; a symlink is made under $OUT when only
    a versioned one is found."""
    roots = [os.environ.get("CUDA_HOME", ""), "/usr/local/cuda"] + sorted(
        glob.glob("/usr/local/cuda-*"), reverse=True)
    for root in filter(None, roots):
        for sub in ("lib64", "targets/x86_64-linux/lib", "lib"):
            if os.path.exists(os.path.join(root, sub, "libcudart.so")):
                return os.path.join(root, sub)
    versioned = []
    try:
        ldconfig = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
        versioned += re.findall(r"=> (\S*libcudart\.so(?:\.\d+)*)$", ldconfig, re.M)
    except OSError:
        pass
    for root in filter(None, roots):
        versioned += glob.glob(os.path.join(root, "lib64", "libcudart.so.*"))
    versioned += glob.glob("/usr/lib/python3*/**/nvidia/cuda_runtime/lib/libcudart.so.*",
                           recursive=True)
    versioned += glob.glob("/usr/local/lib/python3*/**/nvidia/cuda_runtime/lib/libcudart.so.*",
                           recursive=True)
    for path in versioned:
        if path.endswith("libcudart.so"):
            return os.path.dirname(path)
    if versioned:
        link_dir = os.path.join(OUT, "cudart")
        os.makedirs(link_dir, exist_ok=True)
        link = os.path.join(link_dir, "libcudart.so")
        if os.path.lexists(link):
            os.unlink(link)
        os.symlink(versioned[0], link)
        return link_dir
    return None


def device_count():
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([d for d in visible.split(",") if d.strip()])
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout
        return len([line for line in out.splitlines() if line.startswith("GPU ")])
    except OSError:
        return 0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # utime and stime: fields 14 and 15 of proc(5), 12 and 13 after the name
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def get_json(server, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/{path}", timeout=10) as r:
        return json.loads(r.read())


def start_server(gpus, pin, window):
    instances = int(os.environ.get("BENCH_INSTANCES", "6"))
    threads = int(os.environ.get("BENCH_THREADS", "12")) * len(gpus)
    args = ["--gpus", ",".join(map(str, gpus)), "--instances-per-gpu", str(instances),
            "--threads", str(threads), "--pin", pin]
    if window != "default":
        args += ["--yolo-window", window]
    if os.environ.get("BENCH_COPY_BATCH"):
        args += ["--copy-batch", os.environ["BENCH_COPY_BATCH"]]
    args += os.environ.get("BENCH_SERVER_ARGS", "").split()
    # gRPC on a free port, taken once its "grpc listening on" line is read
    # (perf_analyzer must not connect before); a start that lost the port to
    # another process in between is retried.
    line = ""
    for _ in range(5):
        grpc_args = args + ["--grpc-port", str(free_port())]
        server = Server(*grpc_args)
        ready, _, _ = select.select([server.proc.stdout], [], [], START_TIMEOUT_S)
        line = server.proc.stdout.readline().decode() if ready else ""
        match = re.match(r"grpc listening on 127\.0\.0\.1:(\d+)", line)
        if match:
            server.grpc_port = int(match.group(1))
            server.args_text = " ".join(grpc_args)
            return server
        server.stop()
    sys.exit(f"seed_benchmark: the server did not serve gRPC: {line!r}")


def stats_totals(server):
    (entry,) = get_json(server, "v2/models/yolo/stats")["model_stats"]
    s = entry["inference_stats"]
    return {k: (s[k]["count"], s[k]["ns"]) for k in
            ("success", "queue", "compute_input", "compute_infer", "compute_output")}


STEPS = ("queue", "compute_input", "compute_infer", "compute_output")


def step_times(before, after):
    """The model's request time by step over a pass, in µs per inference,
    from two stats_totals(): each of STEPS (its ns over its count), and
    "answer_other", the rest of the request time (success's ns over its
    count: from the request read to its answer made) beyond them; None
    where the pass counted nothing."""
    def per(key):
        count = after[key][0] - before[key][0]
        return (after[key][1] - before[key][1]) / count / 1e3 if count > 0 else None

    steps = {k: per(k) for k in STEPS}
    request = per("success")
    steps["request"] = request
    steps["answer_other"] = None if request is None or None in (steps[k] for k in STEPS) \
        else request - sum(steps[k] for k in STEPS)
    return steps


BATCH_COUNTERS = ("shmreg_gpu_copy_batches_total", "shmreg_gpu_copy_batch_runs_total")


def path_totals(server):
    """{(path, direction): tensors} of /metrics now, and the GPU model's
    batches of copies and runs in them under their counters' names."""
    _, metrics = scrape(server)
    totals = {(p, d): metrics.value("shmreg_tensor_path_total", path=p, direction=d)
              for p in PATHS for d in ("input", "output")}
    totals.update({name: metrics.value(name) for name in BATCH_COUNTERS})
    return totals


def pinned_bytes(server):
    _, metrics = scrape(server)
    return metrics.value("shmreg_pinned_bytes")


def paths_text(before, after):
    """'input dma_in_place 1234; output staged_copy 1234; 3.52 runs a batch
    of copies': the paths taken over the run, the untaken ones left out, and
    how many requests' copies crossed the link together."""
    parts = [f"{d} {p} {int(after[(p, d)] - before[(p, d)])}"
             for d in ("input", "output") for p in PATHS if after[(p, d)] > before[(p, d)]]
    batches, runs = (after.get(k, 0) - before.get(k, 0) for k in BATCH_COUNTERS)
    if batches:
        parts.append(f"{runs / batches:.2f} runs a batch of copies")
    return "; ".join(parts) or "none"


def measure(row, server, pa, env, interval_ms):
    """One perf_analyzer pass at row["concurrency"], of input shape
    row["shape"] when the row has one (else the seed's); fills row."""
    tag = f"{row['gpus']}gpu-w{row['window']}-{row['run']}-c{row['concurrency']}"
    shape = row.get("shape", SEED_SHAPE)
    if shape != SEED_SHAPE:
        tag += "-" + shape.replace(",", "x")
    csv_path = os.path.join(RUN_DIR, f"{tag}.csv")
    shm = "cuda" if row["run"] == "cuda" else "system"
    cmd = [pa, *model_args(shape), "--shared-memory", shm, "--concurrency-range",
           str(row["concurrency"]), "-i", "grpc", "-u", f"127.0.0.1:{server.grpc_port}",
           "--measurement-interval", str(interval_ms), "--max-trials", "3",
           "--stability-percentage", "999", "-f", csv_path]
    paths0, stats0 = path_totals(server), stats_totals(server)
    cpu0, t0 = cpu_seconds(server.pid), time.monotonic()
    mid = {}

    def read_mid_run():
        # perf_analyzer registers its regions, warms up, then measures three
        # windows: halfway through the second one its regions are in use.
        time.sleep(interval_ms * 1.5 / 1000 + 0.5)
        try:
            mid["pinned"] = pinned_bytes(server)
        except OSError as e:
            mid["error"] = str(e)

    reader = threading.Thread(target=read_mid_run)
    log_path = os.path.join(RUN_DIR, f"{tag}.log")
    with open(log_path, "w") as out:
        out.write(" ".join(cmd) + "\n\n")
        out.flush()
        reader.start()
        try:
            rc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=env,
                                timeout=60).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
        reader.join()
    cpu1, t1 = cpu_seconds(server.pid), time.monotonic()
    paths1, stats1 = path_totals(server), stats_totals(server)
    n = stats1["success"][0] - stats0["success"][0]
    row["requests"] = n
    row["steps_us"] = step_times(stats0, stats1)
    row["cpu_cores"] = round((cpu1 - cpu0) / (t1 - t0), 3)
    row["cpu_us_per_infer"] = round((cpu1 - cpu0) / n * 1e6, 1) if n else None
    row["paths"] = paths_text(paths0, paths1)
    row["pinned_bytes_mid"] = mid.get("pinned")
    if rc != 0 or not os.path.exists(csv_path):
        with open(log_path) as f:
            tail = f.read()[-1500:]
        row["error"] = f"perf_analyzer exit {rc}: {tail.strip()}"
        return
    with open(csv_path) as f:
        pa_row = list(csv.DictReader(f))[0]
    row.update({
        "infer_s": float(pa_row["Inferences/Second"]),
        "p50_us": float(pa_row.get("p50 latency", "nan")),
        "p99_us": float(pa_row.get("p99 latency", "nan")),
        "queue_us": float(pa_row.get("Server Queue", "nan")),
        "input_us": float(pa_row.get("Server Compute Input", "nan")),
        "infer_us": float(pa_row.get("Server Compute Infer", "nan")),
        "output_us": float(pa_row.get("Server Compute Output", "nan")),
    })


def script_json(script, args, error_key):
    """The last line of HERE/script's output, as JSON, run in a process of
    its own (so that its CUDA context is gone before the servers start);
    {error_key: why} when it fails or prints no JSON."""
    cmd = [sys.executable, os.path.join(HERE, script), *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (subprocess.TimeoutExpired, ValueError, IndexError) as e:
        return {error_key: f"{script}: {e}"}


def link_limit():
    """pcie_bandwidth.py's figures, or {"error": ...}, with
    copies_at_size.py --server-order's {"chain_infer_s": N} (what the link
    gives copies of the seed's sizes in the server's order, up, kernel and
    down on each instance's stream, with nothing else running) or
    {"chain_error": ...}."""
    link = script_json("pcie_bandwidth.py", ["--input-bytes", str(INPUT_BYTES),
                                             "--output-bytes", str(OUTPUT_BYTES)], "error")
    link.update(script_json("copies_at_size.py", ["--server-order"], "chain_error"))
    return link


def fmt(v, digits=0):
    if v is None or v == "" or (isinstance(v, float) and v != v):
        return "?"
    if isinstance(v, str):
        return v
    return f"{v:,.{digits}f}"


def main():
    os.makedirs(RUN_DIR, exist_ok=True)
    quick = os.environ.get("BENCH_QUICK") == "1"
    concurrencies = [int(c) for c in os.environ.get(
        "BENCH_CONCURRENCY", "1,100" if quick else "1,8,32,100").split(",")]
    windows = os.environ.get("BENCH_WINDOWS", "default,1").split(",")
    pins = os.environ.get("BENCH_PINS", "auto,never").split(",")
    interval_ms = int(os.environ.get("BENCH_INTERVAL_MS", "1000" if quick else "1500"))
    passes = int(os.environ.get("BENCH_PASSES", "3"))
    pa = perf_analyzer()
    env = dict(os.environ)
    cudart = cudart_dir()
    if cudart:
        env["LD_LIBRARY_PATH"] = cudart + (":" + env["LD_LIBRARY_PATH"]
                                           if env.get("LD_LIBRARY_PATH") else "")
    n_gpus = device_count()
    wanted = [int(g) for g in os.environ.get("BENCH_GPUS", "1").split(",")]
    log(f"seed_benchmark: perf_analyzer {pa}; {n_gpus} GPU(s) visible; concurrency "
        f"{concurrencies}; windows {windows}; {interval_ms} ms windows; libcudart.so for "
        f"perf_analyzer: {cudart or 'NOT FOUND (cuda rows will fail)'}")

    link = link_limit()
    log(f"--- link: {json.dumps(link)}")
    rows = limit_rows(link, concurrencies)
    for g in wanted:
        if g > n_gpus:
            log(f"seed_benchmark: {g} GPU(s) wanted, {n_gpus} visible: rows left out")
            continue
        for window in windows:
            for pin in pins:
                server = start_server(list(range(g)), pin, window)
                try:
                    config = get_json(server, "v2/models/yolo/config")
                    shown = config["parameters"]["window"]["string_value"]
                    log(f"--- server {server.args_text}: yolo window {shown}")
                    runs = [run for run, _, run_pin in RUNS if run_pin == pin]
                    for row in measure_runs(server, runs, g, window, concurrencies, pa, env,
                                            interval_ms, passes):
                        rows.append(row)
                        write_outputs(rows, link)  # a run cut short keeps its rows
                finally:
                    rc, err = server.stop()
                    with open(os.path.join(RUN_DIR, "servers.log"), "a") as f:
                        f.write(f"=== {server.args_text}: exit {rc}\n{err}\n")
    table = write_outputs(rows, link)
    log("")
    log(table)
    measured = [r for r in rows if r["run"] not in LIMITS]
    failed = [f"{r['run']}/w{r['window']}/c{r['concurrency']}" for r in measured if r["error"]]
    log(f"=== seed_benchmark summary: {len(measured) - len(failed)} of {len(measured)} rows "
        f"measured" + (f"; failed: {', '.join(failed)}" if failed else "")
        + (f"; link: {link['error']}" if "error" in link else ""))
    return 1 if failed or not measured or "error" in link else 0


def median_pass(passes):
    """The row of a run's passes: the pass of median infer/s (of an even
    number, the slower middle one), with every pass's infer/s in
    passes_infer_s (text) and pass_figures (numbers, None for a failed
    pass); a failed pass, if any failed."""
    failed = [p for p in passes if p["error"]]
    # Of an even number of passes, the slower of the two middle ones: a
    # target is never read off the faster half.
    row = dict(failed[0] if failed else
               sorted(passes, key=lambda p: p["infer_s"])[(len(passes) - 1) // 2])
    row["pass_figures"] = [None if p["error"] else p["infer_s"] for p in passes]
    if len(passes) > 1:
        row["passes_infer_s"] = " / ".join(
            "failed" if f is None else f"{f:.0f}" for f in row["pass_figures"])
    return row


def measure_runs(server, runs, g, window, concurrencies, pa, env, interval_ms, passes):
    """The rows of one server: each of runs at each concurrency, taking
    turns for `passes` passes at the highest; yields each row once made."""
    for c in concurrencies:
        made = {run: [] for run in runs}
        for _ in range(passes if c == max(concurrencies) else 1):
            for run in runs:
                row = {"gpus": g, "window": window, "run": run, "concurrency": c, "error": ""}
                measure(row, server, pa, env, interval_ms)
                log(f"    {run} c={c}: {row['error'] or json.dumps(row)}")
                made[run].append(row)
        for run in runs:
            yield median_pass(made[run])


def limit_rows(link, concurrencies):
    """The limits' rows, one per limit and concurrency: lines across the plot."""
    return [{"gpus": 1, "window": "-", "run": run, "concurrency": c,
             "infer_s": link.get(infer_key), "error": link.get(error_key, "")}
            for c in concurrencies for run, (_, infer_key, error_key) in LIMITS.items()]


def write_outputs(rows, link):
    """$OUT/seed-benchmark.csv and .md from the rows so far; the Markdown.
    Sorts rows: the limits, then by GPUs, window, run and concurrency."""
    run_order = [run for run, _, _ in RUNS]
    rows.sort(key=lambda r: (r["run"] not in LIMITS, r["gpus"], r["window"] != "default",
                             run_order.index(r["run"]) if r["run"] in run_order else 0,
                             r["concurrency"]))
    with open(os.path.join(OUT, "seed-benchmark.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: r.get(k, "") for k in CSV_FIELDS})
    lines = [f"perf_analyzer {' '.join(SEED_ARGS)} --shared-memory S -i grpc "
             "--concurrency-range C; server --instances-per-gpu "
             f"{os.environ.get('BENCH_INSTANCES', '6')}, "
             f"{os.environ.get('BENCH_THREADS', '12')} threads per GPU", ""]
    if "error" in link:
        lines += [f"Link: not measured ({link['error']})", ""]
    else:
        lines += [f"Link ({link.get('device')}, 1 GiB cudaMemcpyAsync, median of "
                  f"{link.get('repeats')}): pinned H2D {link['h2d_gbs']} GB/s, D2H "
                  f"{link['d2h_gbs']} GB/s, both at once {link['both_gbs']} GB/s: "
                  f"PCIe limit {fmt(link.get('limit_infer_s'))} infer/s for "
                  f"{INPUT_BYTES:,} B in + {OUTPUT_BYTES:,} B out"
                  + (f"; both directions at once in those proportions: "
                     f"{fmt(link['mix_infer_s'])} infer/s" if "mix_infer_s" in link else "")
                  + (f"; a POSIX shm object pinned with cudaHostRegister, as the server pins "
                     f"a client's region: H2D {link['reg_h2d_gbs']} GB/s, D2H "
                     f"{link['reg_d2h_gbs']} GB/s" if "reg_h2d_gbs" in link else ""), ""]
    lines += ["| GPUs | window | run | concurrency | infer/s | each pass | p50 (us) | p99 (us) "
              "| queue (us) "
              "| compute input (us) | compute infer (us) | compute output (us) "
              "| server CPU (cores) | CPU per inference (us) | pinned bytes mid-run "
              "| tensor paths over the run |",
              "| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
              "| ---: | ---: | ---: | ---: | --- |"]
    for r in rows:
        if r["run"] in LIMITS and r["concurrency"] != max(x["concurrency"] for x in rows):
            continue  # each limit once, not per concurrency
        if r["run"] in LIMITS:
            lines.append(f"| 1 | - | {LIMITS[r['run']][0]} | - | {fmt(r.get('infer_s'), 1)} "
                         f"| - | - | - | - | - | - | - | - | - | - | {r.get('error') or '-'} |")
            continue
        if r.get("error"):
            lines.append(f"| {r['gpus']} | {r['window']} | {r['run']} | {r['concurrency']} | "
                         f"failed: {r['error'].splitlines()[0][:80]} | {r.get('passes_infer_s', '')} "
                         f"| | | | | | "
                         f"| {fmt(r.get('cpu_cores'), 2)} | | | {r.get('paths', '')} |")
            continue
        lines.append(
            f"| {r['gpus']} | {r['window']} | {r['run']} | {r['concurrency']} "
            f"| {fmt(r.get('infer_s'), 1)} | {r.get('passes_infer_s') or '-'} "
            f"| {fmt(r.get('p50_us'))} | {fmt(r.get('p99_us'))} "
            f"| {fmt(r.get('queue_us'))} | {fmt(r.get('input_us'))} | {fmt(r.get('infer_us'))} "
            f"| {fmt(r.get('output_us'))} | {fmt(r.get('cpu_cores'), 2)} "
            f"| {fmt(r.get('cpu_us_per_infer'), 1)} | {fmt(r.get('pinned_bytes_mid'))} "
            f"| {r.get('paths', '')} |")

    top = max((r["concurrency"] for r in rows), default=100)

    def at(run, window, key="infer_s"):
        for r in rows:
            if (r["run"], r["window"], r["concurrency"], r["gpus"]) == (run, window, top, 1) \
                    and not r.get("error"):
                return r.get(key)
        return None

    def quotient(a, b):
        return a / b if a and b else None

    def ratio(q):
        # three digits: a miss such as 0.7475 must not print as 0.75
        return f"{q:.3f}" if q is not None else "n/a"

    def pass_ratios(a, b):
        """a's infer/s over b's, pass by pass (they took turns); a pass that
        failed on either side is left out."""
        of_a, of_b = (at(run, "1", "pass_figures") or [] for run in (a, b))
        return " / ".join(ratio(quotient(x, y)) for x, y in zip(of_a, of_b)
                          if x and y) or "n/a"

    def verdict(value, at_least=None, at_most=None):
        """Whether the exact value meets its bound: "met", "missed", or "n/a"."""
        if value is None:
            return "n/a"
        met = value >= at_least if at_least is not None else value <= at_most
        return "met" if met else "missed"

    sys_cuda = quotient(at("system_pinned", "1"), at("cuda", "1"))
    sys_limit = quotient(at("system_pinned", "1"), link.get("limit_infer_s"))
    # The system path crosses the link and the CUDA path does not: past the
    # PCIe limit's rate, CUDA outruns any system path.
    sys_cuda_bound = quotient(link.get("limit_infer_s"), at("cuda", "1"))
    cpu = quotient(at("system_pinned", "1", "cpu_us_per_infer"),
                   at("cuda", "1", "cpu_us_per_infer"))
    pinned = at("system_pinned", "1", "pinned_bytes_mid")
    never = at("system_unpinned", "1")
    default = quotient(at("system_pinned", "default"), at("cuda", "default"))
    lines += ["", f"| measure (system-region data paths), 1 GPU, concurrency {top} | value | target | |",
              "| --- | --- | --- | --- |",
              f"| window 1: system (default flags) ÷ CUDA infer/s "
              f"| {ratio(sys_cuda)} | ≥ 0.80 | {verdict(sys_cuda, 0.80)} |",
              f"| window 1: system ÷ CUDA, pass by pass "
              f"| {pass_ratios('system_pinned', 'cuda')} | (context) | |",
              f"| window 1: the most system ÷ CUDA can be (PCIe limit ÷ CUDA infer/s) "
              f"| {ratio(sys_cuda_bound)} | (context) | |",
              f"| window 1: system (default flags) ÷ PCIe limit "
              f"| {ratio(sys_limit)} | ≥ 0.75 | {verdict(sys_limit, 0.75)} |",
              f"| window 1: system (default flags) ÷ the link moving both tensors at once "
              f"| {ratio(quotient(at('system_pinned', '1'), link.get('mix_infer_s')))} "
              f"| (context) | |",
              f"| window 1: system (default flags) ÷ copies one by one in the server's order, "
              f"alone "
              f"| {ratio(quotient(at('system_pinned', '1'), link.get('chain_infer_s')))} "
              f"| (context) | |",
              f"| window 1: server CPU per inference, system ÷ CUDA "
              f"| {ratio(cpu)} | ≤ 1.3 | {verdict(cpu, at_most=1.3)} |",
              f"| window 1: shmreg_pinned_bytes mid-run, default flags "
              f"| {fmt(pinned)} | both regions (≥ {INPUT_BYTES + OUTPUT_BYTES:,}) "
              f"| {verdict(pinned, INPUT_BYTES + OUTPUT_BYTES)} |",
              f"| window 1: --pin never infer/s ({PIN_NEVER_BEFORE:,} before the rework) "
              f"| {fmt(never, 1)} | ≥ 2x | {verdict(never, 2 * PIN_NEVER_BEFORE)} |",
              f"| default window: system ÷ CUDA infer/s "
              f"| {ratio(default)} | ≥ 0.95 | {verdict(default, 0.95)} |"]
    table = "\n".join(lines)
    with open(os.path.join(OUT, "seed-benchmark.md"), "w") as f:
        f.write(table + "\n")
    return table


if __name__ == "__main__":
    sys.exit(main())
