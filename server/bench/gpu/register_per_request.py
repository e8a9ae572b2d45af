#!/usr/bin/env python3
"""The registration cache's server row: a tritonclient-style client that
registers, infers and unregisters per request, on one pinned 16 MiB region,
against the server with the registration cache off and on (target:
>= 5x infer/s with the cache on).

The server is started twice, `--pin always --cache-bytes 0`, then
`--pin always --cache-bytes 1073741824`; each run loops for --seconds:
register the region (the same shm key every time), infer `simple` with its
inputs and outputs in the region, unregister. Pinning needs a CUDA device: a
first registration under --pin always that is refused (no GPU, or a build
without CUDA) makes both runs use --pin never, and the output says so.
The shm object is created once and every page written, as a client that
fills its tensors does (and as --pin always requires: it refuses holes).

The client is tritonclient.http where it is importable; elsewhere (the GPU
machine's python3, unless server/tests/gpu/run.sh put the carried
wheels on PYTHONPATH) the same three requests in plain HTTP (http.client,
one kept-alive connection), and the output names which. Prints a Markdown
table (infer/s, each run's /metrics cache hits and misses) and the ratio;
writes it to $OUT/register-per-request.md (default build/gpu-out).

Usage: SERVER_BIN=build/.../shmreg-server python3 register_per_request.py
         [--seconds 10] [--size-mib 16] [--cache-bytes 1073741824]
Exit 0 when both runs completed every request; the ratio is reported, not
enforced (on a CPU machine an unpinned register costs too little to gain 5x).
"""
import argparse
import http.client
import json
import os
import sys
import time
from multiprocessing import shared_memory

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "tests", "support"))
from server_process import Server  # noqa: E402
from prometheus_text import scrape  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
OUT = os.environ.get("OUT", os.path.join(ROOT, "build", "gpu-out"))
NAME = "per_request"
NBYTES = 64  # one [1, 16] INT32 tensor: INPUT0, INPUT1, OUTPUT0, OUTPUT1 back to back


class TritonClient:
    """The loop as tritonclient.http writes it."""
    label = "tritonclient.http"

    def __init__(self, url):
        import tritonclient.http as httpclient
        self.client = httpclient.InferenceServerClient(url)
        self.inputs = [httpclient.InferInput(n, [1, 16], "INT32") for n in ("INPUT0", "INPUT1")]
        self.outputs = [httpclient.InferRequestedOutput(n) for n in ("OUTPUT0", "OUTPUT1")]
        for i, t in enumerate(self.inputs + self.outputs):
            t.set_shared_memory(NAME, NBYTES, offset=i * NBYTES)

    def cycle(self, key, size):
        self.client.register_system_shared_memory(NAME, key, size)
        self.client.infer("simple", self.inputs, outputs=self.outputs)
        self.client.unregister_system_shared_memory(NAME)

    def close(self):
        self.client.close()


class PlainClient:
    """The same three requests over http.client, for a python without tritonclient."""
    label = "plain HTTP: no tritonclient here"

    def __init__(self, url):
        host, port = url.split(":")
        self.conn = http.client.HTTPConnection(host, int(port), timeout=30)
        shm = [{"name": n, "parameters": {"shared_memory_region": NAME,
                                          "shared_memory_offset": i * NBYTES,
                                          "shared_memory_byte_size": NBYTES}}
               for i, n in enumerate(("INPUT0", "INPUT1", "OUTPUT0", "OUTPUT1"))]
        for t in shm[:2]:
            t.update(datatype="INT32", shape=[1, 16])
        self.infer_body = json.dumps({"inputs": shm[:2], "outputs": shm[2:]})

    def post(self, path, body):
        self.conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        resp = self.conn.getresponse()
        data = resp.read()
        if resp.status != 200:
            raise RuntimeError(f"{path}: {resp.status} {data[:300]!r}")

    def cycle(self, key, size):
        base = f"/v2/systemsharedmemory/region/{NAME}"
        self.post(f"{base}/register", json.dumps({"key": key, "byte_size": size}))
        self.post("/v2/models/simple/infer", self.infer_body)
        self.post(f"{base}/unregister", "")

    def close(self):
        self.conn.close()


def make_client(url):
    try:
        return TritonClient(url)
    except ImportError:
        return PlainClient(url)


def pinning_works(key, size):
    """Whether a server with --pin always can register the region."""
    server = Server("--pin", "always")
    try:
        status, body = server.json("POST", f"/v2/systemsharedmemory/region/{NAME}/register",
                                   {"key": key, "byte_size": size})
        if status == 200:
            server.json("POST", f"/v2/systemsharedmemory/region/{NAME}/unregister")
        return status == 200, body
    finally:
        server.stop()


def run(pin, cache_bytes, key, size, seconds):
    """One server, one client loop: (infer/s, cycles, the page's figures)."""
    server = Server("--pin", pin, "--cache-bytes", str(cache_bytes))
    client = make_client(server.url)
    try:
        client.cycle(key, size)  # warm-up: connection, first mapping (a miss)
        cycles, start = 0, time.monotonic()
        while time.monotonic() - start < seconds:
            client.cycle(key, size)
            cycles += 1
        elapsed = time.monotonic() - start
        _, metrics = scrape(server)
    finally:
        client.close()
        rc, err = server.stop()
    if rc != 0:
        raise RuntimeError(f"server exited {rc}: {err[-2000:]}")
    figures = {n: int(metrics.value(f"shmreg_{n}")) for n in
               ("cache_hits_total", "cache_misses_total", "registrations_total")}
    return cycles / elapsed, cycles, figures, client.label


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10, help="per run (default 10)")
    parser.add_argument("--size-mib", type=int, default=16)
    parser.add_argument("--cache-bytes", type=int, default=1 << 30)
    args = parser.parse_args()
    size = args.size_mib << 20
    os.makedirs(OUT, exist_ok=True)
    mem = shared_memory.SharedMemory(name=f"shmreg_bench_rpr_{os.getpid()}", create=True,
                                     size=size)
    key = "/" + mem.name.lstrip("/")
    try:
        mem.buf[:] = bytes(size)  # every page populated
        pinned, why = pinning_works(key, size)
        pin = "always" if pinned else "never"
        rows = [(cache, *run(pin, cache, key, size, args.seconds))
                for cache in (0, args.cache_bytes)]
    finally:
        mem.close()
        mem.unlink()
    lines = [f"register, infer `simple`, unregister per request, {args.size_mib} MiB region, "
             f"--pin {pin}, one client ({rows[0][4]}), {args.seconds:g} s per run"]
    if not pinned:
        lines.append(f"(--pin always was refused here, so both runs are unpinned: {why})")
    lines += ["", "| --cache-bytes | infer/s | cycles | cache hits | cache misses | registrations |",
             "| ---: | ---: | ---: | ---: | ---: | ---: |"]
    for cache, rate, cycles, figures, _ in rows:
        lines.append(f"| {cache} | {rate:.0f} | {cycles} | {figures['cache_hits_total']} | "
                     f"{figures['cache_misses_total']} | {figures['registrations_total']} |")
    ratio = rows[1][1] / rows[0][1]
    target = "target >= 5x pinned" + ("" if pinned else "; unpinned, a register costs microseconds")
    lines += ["", f"cache on / cache off: {ratio:.2f}x ({target})"]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    with open(os.path.join(OUT, "register-per-request.md"), "w") as out:
        out.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
