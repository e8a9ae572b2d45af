"""How many status-of-all calls per second the C server answers over HTTP
with many regions registered (500 regions, as Triton is compared with). A bench that
prints figures, not a test.

    python3 server/bench/status_http.py BINARY [--regions 500] [--seconds 5]
        [--clients 1] [--server-arg=--allow-client-shm=true ...]

BINARY is a built shmreg-server. It is started on a free loopback port,
the regions are registered as windows of one shm object, then each client
(one keep-alive connection each, in its own process, so that Python's lock
does not serialise them) sends GET v2/systemsharedmemory/status for the given
time and reads the whole body without parsing it. Prints one line per run:
regions, clients, calls/s, mean ms per call, and the body size.
"""
import argparse
import http.client
import multiprocessing
import os
import re
import select
import subprocess
import sys
import time
from multiprocessing import shared_memory


def start(binary, extra):
    proc = subprocess.Popen([binary, "--host", "127.0.0.1", "--port", "0", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    ready, _, _ = select.select([proc.stdout], [], [], 10)
    line = proc.stdout.readline().decode() if ready else ""
    match = re.match(r"listening on 127\.0\.0\.1:(\d+)", line)
    if not match:
        proc.kill()
        sys.exit(f"the server did not start: {line!r}")
    return proc, int(match.group(1))


def register(port, regions, key):
    conn = http.client.HTTPConnection("127.0.0.1", port)
    for i in range(regions):
        body = f'{{"key":"{key}","offset":{i * 64},"byte_size":64}}'
        conn.request("POST", f"/v2/systemsharedmemory/region/bench_{i}/register", body)
        resp = conn.getresponse()
        data = resp.read()
        if resp.status != 200:
            sys.exit(f"register bench_{i}: {resp.status} {data!r}")
    conn.close()


def client(port, seconds, out):
    conn = http.client.HTTPConnection("127.0.0.1", port)
    calls, size, deadline = 0, 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        conn.request("GET", "/v2/systemsharedmemory/status")
        resp = conn.getresponse()
        size = len(resp.read())
        if resp.status != 200:
            sys.exit(f"status: {resp.status}")
        calls += 1
    conn.close()
    out.put((calls, size))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("binary")
    p.add_argument("--regions", type=int, default=500)
    p.add_argument("--seconds", type=float, default=5)
    p.add_argument("--clients", type=int, default=1)
    p.add_argument("--server-arg", action="append", default=[],
                   help="an option for the server, e.g. --server-arg=--allow-client-shm=true")
    a = p.parse_args()
    shm = shared_memory.SharedMemory(create=True, size=max(64 * a.regions, 4096))
    proc, port = start(a.binary, a.server_arg)
    try:
        register(port, a.regions, "/" + shm.name.lstrip("/"))
        out = multiprocessing.Queue()
        workers = [multiprocessing.Process(target=client, args=(port, a.seconds, out))
                   for _ in range(a.clients)]
        t0 = time.monotonic()
        for w in workers:
            w.start()
        results = [out.get() for _ in workers]
        for w in workers:
            w.join()
        elapsed = time.monotonic() - t0
        calls = sum(c for c, _ in results)
        print(f"regions {a.regions}  clients {a.clients}  {calls / elapsed:8.0f} calls/s  "
              f"{1e3 * elapsed * a.clients / max(calls, 1):.3f} ms/call  body {results[0][1]} bytes")
    finally:
        proc.terminate()
        proc.wait()
        shm.close()
        shm.unlink()


if __name__ == "__main__":
    main()
