#!/usr/bin/env python3
"""Seed 003's benchmark against the example frontend's GPU model (issue 14).

Runs the seed's own perf_analyzer command,

    perf_analyzer -m yolo -b 1 --shared-memory system|cuda \\
        --output-shared-memory-size 846720 --shape images:3,384,640 \\
        --concurrency-range 100 -i Grpc

against server serving the built-in model 'yolo'
(src/models/model_yolo.h), for system shared memory (pinned: --pin auto), CUDA
shared memory, and system shared memory with pinning off (--pin never), on
one GPU and, where two are visible, on two. gRPC is used when the frontend
offers --grpc-port (it has since the gRPC service was merged), on the port
the frontend prints; otherwise HTTP (-i http), and the output
says which. Prints one Markdown table: infer/s, p50/p99 latency, the server's
queue / compute input / infer / output (from perf_analyzer, which reads the
frontend's statistics extension), and the frontend's CPU use (from
/proc/PID/stat before and after each run); then the issue's ratios. Logs,
perf_analyzer's CSV files and the table go to $OUT (default build/gpu-out).

Environment: FRONTEND_BIN (the built frontend, required), PERF_ANALYZER (the
binary; default: perf_analyzer on PATH, or under /tmp/site), BENCH_GPUS
("1,2": which rows), BENCH_INSTANCES (--instances-per-gpu, default 6),
BENCH_THREADS (worker threads per GPU, default 12), BENCH_WINDOW
(--yolo-window, default: the frontend's), BENCH_INTERVAL_MS (perf_analyzer's
measurement interval, default 2500).

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

(the last four only serve tritonclient.grpc), and on the GPU machine
server/tests/gpu/issue14.sh installs them with
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
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "tests"))
from frontend_process import START_TIMEOUT_S, Frontend  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
OUT = os.environ.get("OUT", os.path.join(ROOT, "build", "gpu-out"))
SEED_ARGS = ["-m", "yolo", "-b", "1", "--output-shared-memory-size", "846720",
             "--shape", "images:3,384,640", "--concurrency-range", "100"]


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
    sys.exit("bench_seed: no perf_analyzer (set PERF_ANALYZER, or install the wheel into "
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


class Run:
    def __init__(self, label, gpus, shm, pin):
        self.label, self.gpus, self.shm, self.pin = label, gpus, shm, pin
        self.result = {}
        self.error = None


def start_frontend(gpus, pin, grpc):
    instances = int(os.environ.get("BENCH_INSTANCES", "6"))
    threads = int(os.environ.get("BENCH_THREADS", "12")) * len(gpus)
    args = ["--gpus", ",".join(map(str, gpus)), "--instances-per-gpu", str(instances),
            "--threads", str(threads), "--pin", pin]
    if os.environ.get("BENCH_WINDOW"):
        args += ["--yolo-window", os.environ["BENCH_WINDOW"]]
    if not grpc:
        server = Frontend(*args)
        server.grpc_port = None
        server.args_text = " ".join(args)
        return server
    # gRPC on a free port, taken once its "grpc listening on" line is read
    # (perf_analyzer must not connect before); a start that lost the port to
    # another process in between is retried.
    for _ in range(5):
        grpc_args = args + ["--grpc-port", str(free_port())]
        server = Frontend(*grpc_args)
        ready, _, _ = select.select([server.proc.stdout], [], [], START_TIMEOUT_S)
        line = server.proc.stdout.readline().decode() if ready else ""
        match = re.match(r"grpc listening on 127\.0\.0\.1:(\d+)", line)
        if match:
            server.grpc_port = int(match.group(1))
            server.args_text = " ".join(grpc_args)
            return server
        server.stop()
    sys.exit(f"bench_seed: the frontend did not serve gRPC: {line!r}")


def stats_totals(server):
    (entry,) = get_json(server, "v2/models/yolo/stats")["model_stats"]
    s = entry["inference_stats"]
    return {k: (s[k]["count"], s[k]["ns"]) for k in
            ("success", "queue", "compute_input", "compute_infer", "compute_output")}


def measure(run, server, pa, env, grpc, interval_ms):
    url_port = server.grpc_port if grpc else server.port
    csv_path = os.path.join(OUT, f"bench-{run.label}.csv")
    cmd = [pa, *SEED_ARGS, "--shared-memory", run.shm, "-i", "grpc" if grpc else "http",
           "-u", f"127.0.0.1:{url_port}", "--measurement-interval", str(interval_ms),
           "--max-trials", "5", "--stability-percentage", "20", "-f", csv_path]
    stats0 = stats_totals(server)
    cpu0, t0 = cpu_seconds(server.pid), time.monotonic()
    with open(os.path.join(OUT, f"bench-{run.label}.log"), "w") as out:
        out.write(" ".join(cmd) + "\n\n")
        out.flush()
        try:
            proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, timeout=60)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    cpu1, t1 = cpu_seconds(server.pid), time.monotonic()
    stats1 = stats_totals(server)
    run.result["cpu_cores"] = (cpu1 - cpu0) / (t1 - t0)
    # The server's own averages over the whole run (warm-up included), per
    # request, as a cross-check of perf_analyzer's columns.
    n = stats1["success"][0] - stats0["success"][0]
    for k in stats0:
        run.result["stats_" + k] = ((stats1[k][1] - stats0[k][1]) / 1000 / n) if n else None
    run.result["requests"] = n
    if rc != 0 or not os.path.exists(csv_path):
        with open(os.path.join(OUT, f"bench-{run.label}.log")) as f:
            tail = f.read()[-1500:]
        run.error = f"perf_analyzer exit {rc}: {tail.strip()}"
        return
    with open(csv_path) as f:
        rows = list(csv.DictReader(f))
    row = rows[0]
    run.result.update({
        "infer_s": float(row["Inferences/Second"]),
        "p50_us": float(row.get("p50 latency", "nan")),
        "p99_us": float(row.get("p99 latency", "nan")),
        "queue_us": float(row.get("Server Queue", "nan")),
        "input_us": float(row.get("Server Compute Input", "nan")),
        "infer_us": float(row.get("Server Compute Infer", "nan")),
        "output_us": float(row.get("Server Compute Output", "nan")),
    })


def fmt(v, digits=0):
    if v is None or (isinstance(v, float) and v != v):
        return "?"
    return f"{v:,.{digits}f}"


def main():
    os.makedirs(OUT, exist_ok=True)
    pa = perf_analyzer()
    env = dict(os.environ)
    cudart = cudart_dir()
    if cudart:
        env["LD_LIBRARY_PATH"] = cudart + (":" + env["LD_LIBRARY_PATH"]
                                           if env.get("LD_LIBRARY_PATH") else "")
    help_text = subprocess.run([os.environ["FRONTEND_BIN"], "--help"], capture_output=True,
                               text=True).stdout
    grpc = "--grpc-port" in help_text
    n_gpus = device_count()
    wanted = [int(g) for g in os.environ.get("BENCH_GPUS", "1,2").split(",")]
    interval_ms = int(os.environ.get("BENCH_INTERVAL_MS", "2500"))
    log(f"bench_seed: perf_analyzer {pa}; protocol {'gRPC' if grpc else 'HTTP'}"
        f"{'' if grpc else ' (this frontend has no --grpc-port yet)'}; {n_gpus} GPU(s) visible; "
        f"libcudart.so for perf_analyzer: {cudart or 'NOT FOUND (cuda rows will fail)'}")

    plan = []  # (gpus, pin, [shm kinds])
    for g in wanted:
        if g > n_gpus:
            log(f"bench_seed: {g} GPU(s) wanted, {n_gpus} visible: rows left out")
            continue
        gpus = list(range(g))
        plan.append((gpus, "auto", ["system", "cuda"]))
        plan.append((gpus, "never", ["system"]))
    runs = []
    for gpus, pin, kinds in plan:
        server = start_frontend(gpus, pin, grpc)
        try:
            config = get_json(server, "v2/models/yolo/config")
            log(f"--- frontend {server.args_text}: yolo window "
                f"{config['parameters']['window']['string_value']}, instances "
                f"{config['instance_group']}")
            ready = urllib.request.urlopen(
                f"http://127.0.0.1:{server.port}/v2/models/yolo/ready", timeout=10).status
            assert ready == 200, "the GPU model is not ready"
            for shm in kinds:
                label = f"{len(gpus)}gpu-{shm}-{'pinned' if pin == 'auto' else 'unpinned'}"
                if shm == "cuda":
                    label = f"{len(gpus)}gpu-cuda"
                run = Run(label, gpus, shm, pin)
                log(f"--- {label}")
                measure(run, server, pa, env, grpc, interval_ms)
                log(f"    {run.error or json.dumps(run.result)}")
                runs.append(run)
                write_table(runs, grpc)  # so far: a run cut short still leaves its rows
        finally:
            rc, err = server.stop()
            with open(os.path.join(OUT, "bench-frontend.log"), "a") as f:
                f.write(f"=== {server.args_text}: exit {rc}\n{err}\n")

    table = write_table(runs, grpc)
    log("")
    log(table)
    failed = [r.label for r in runs if r.error]
    log(f"=== bench_seed summary: {len(runs) - len(failed)} of {len(runs)} runs measured"
        + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed or not runs else 0


def write_table(runs, grpc):
    """The Markdown tables of the runs so far, into $OUT/bench-seed.md."""
    lines = [
        f"perf_analyzer {' '.join(SEED_ARGS)} --shared-memory S -i "
        f"{'grpc' if grpc else 'http'}; concurrency 100",
        "",
        "| run | GPUs | shared memory | pinned | infer/s | p50 (us) | p99 (us) | queue (us) "
        "| compute input (us) | compute infer (us) | compute output (us) | frontend CPU (cores) |",
        "| --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in runs:
        x = r.result
        pinned = "-" if r.shm == "cuda" else ("yes" if r.pin == "auto" else "no (--pin never)")
        if r.error:
            lines.append(f"| {r.label} | {len(r.gpus)} | {r.shm} | {pinned} | failed: "
                         f"{r.error.splitlines()[0][:80]} | | | | | | | {fmt(x.get('cpu_cores'), 2)} |")
            continue
        lines.append(
            f"| {r.label} | {len(r.gpus)} | {r.shm} | {pinned} | {fmt(x['infer_s'], 1)} "
            f"| {fmt(x['p50_us'])} | {fmt(x['p99_us'])} | {fmt(x['queue_us'])} "
            f"| {fmt(x['input_us'])} | {fmt(x['infer_us'])} | {fmt(x['output_us'])} "
            f"| {fmt(x['cpu_cores'], 2)} |")
    lines += ["", "The server's own statistics over each whole run (warm-up included), "
              "microseconds per request:", "",
              "| run | requests | request | queue | compute input | compute infer | compute output |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in runs:
        x = r.result
        lines.append(f"| {r.label} | {x.get('requests', '?')} | {fmt(x.get('stats_success'), 1)} "
                     f"| {fmt(x.get('stats_queue'), 1)} | {fmt(x.get('stats_compute_input'), 1)} "
                     f"| {fmt(x.get('stats_compute_infer'), 1)} "
                     f"| {fmt(x.get('stats_compute_output'), 1)} |")

    by = {r.label: r.result for r in runs if not r.error}

    def ratio(a, b, key="infer_s"):
        if a in by and b in by and by[b].get(key):
            return f"{by[a][key] / by[b][key]:.2f}"
        return "n/a"

    lines += ["", "| measure (issue 14) | value | target |", "| --- | --- | --- |",
              f"| system ÷ CUDA infer/s, 1 GPU | {ratio('1gpu-system-pinned', '1gpu-cuda')} | ≥ 0.95 |",
              f"| same, --pin never | {ratio('1gpu-system-unpinned', '1gpu-cuda')} | reported |",
              f"| compute input, system pinned ÷ CUDA, 1 GPU | "
              f"{ratio('1gpu-system-pinned', '1gpu-cuda', 'input_us')} | ≤ 2 |",
              f"| system infer/s, 2 GPUs ÷ 1 GPU | "
              f"{ratio('2gpu-system-pinned', '1gpu-system-pinned')} | ≥ 1.8 |"]
    table = "\n".join(lines)
    with open(os.path.join(OUT, "bench-seed.md"), "w") as f:
        f.write(table + "\n")
    return table


if __name__ == "__main__":
    sys.exit(main())
