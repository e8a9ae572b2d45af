#!/usr/bin/env python3
"""A live upgrade's handover time against the regions it carries: for each
count N, N named POSIX shm regions registered over HTTP and N sealed memfds
registered over the Unix socket (8 connections), then ROUNDS upgrades in a
chain, each new server taking over the one before (--take-over), with no
request running. Per count it prints the median, min and max of the old
server's own figures (server/src/upgrade.h's lines):

  handover  from the successor's connect to its "ready": the drain, the
            state's send, the successor's restore and the start of its
            adapters, the time no request is served
  send      the old server sending the state (shmreg_handover_send)
  restore   the successor receiving and restoring it (shmreg_handover_receive)

    SERVER_BIN=.../shmreg-server python3 server/bench/bench_live_upgrade.py \\
      [--counts 0 100 1000 4000] [--rounds 5]

Standard library only. Checks that every round carried every region.
"""
import argparse
import http.client
import importlib.util
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
REGION_BYTES = 256
CONNECTIONS = 8
HANDED_OVER = re.compile(r"upgrade: handed over (\d+) regions, (\d+) sockets in ([\d.]+) ms "
                         r"\(the state sent in ([\d.]+) ms\)")
RESTORED = re.compile(r"upgrade: restored (\d+) regions in ([\d.]+) ms")


def load_memfd_client():
    spec = importlib.util.spec_from_file_location("memfd_client", ROOT / "python/shmreg/memfd_client.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


mc = load_memfd_client()


def server_flags(n):
    """Limits that hold 2n regions, n of them over CONNECTIONS connections."""
    per = max(1, -(-n // CONNECTIONS))
    return ["--allow-client-shm=true", "--max-regions", str(2 * n + 16), "--uds-max-regions", str(per)]


def start(binary, folder, n, take_over):
    """A server (a successor when take_over): (process, HTTP port)."""
    hand = os.path.join(folder, "up.sock")
    args = [binary, "--handover-socket", hand, *server_flags(n)]
    args += ["--take-over", hand] if take_over else \
        ["--host", "127.0.0.1", "--port", "0", "--uds", os.path.join(folder, "uds.sock")]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    match = re.match(r"listening on 127\.0\.0\.1:(\d+)", line)
    if not match:
        proc.kill()
        sys.exit(f"the server did not start: {line!r} {proc.communicate()[1]}")
    proc.stdout.readline()  # "uds listening on PATH"
    return proc, int(match[1])


def register(port, folder, n, marker):
    """n shm objects registered over HTTP, n memfds over CONNECTIONS
    connections (returned: they keep their regions)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    for i in range(n):
        key = f"/{marker}_{i}"
        fd = os.open(f"/dev/shm{key}", os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        os.ftruncate(fd, REGION_BYTES)
        os.close(fd)
        conn.request("POST", f"/v2/systemsharedmemory/region/s{i}/register",
                     json.dumps({"key": key, "byte_size": REGION_BYTES}))
        resp = conn.getresponse()
        if resp.status != 200:
            sys.exit(f"register s{i}: {resp.status} {resp.read()}")
        resp.read()
    conn.close()
    socks, per = [], max(1, -(-n // CONNECTIONS))
    for i in range(n):
        if i % per == 0:
            socks.append(mc.connect(os.path.join(folder, "uds.sock")))
        fd = mc.create_sealed_memfd(REGION_BYTES, f"m{i}")
        mc.register(socks[-1], f"m{i}", fd, REGION_BYTES)
        os.close(fd)
    return socks


def figures(binary, n, rounds):
    """[(handover ms, send ms, restore ms)] of rounds upgrades carrying n + n regions."""
    folder = tempfile.mkdtemp(prefix="shmreg-bench-up-")
    marker = f"shmreg_bench_up_{os.getpid()}"
    old, port = start(binary, folder, n, False)
    socks, over_ms, restore_ms = register(port, folder, n, marker), [], []
    try:
        for r in range(rounds + 1):  # after the upgrades, a stop of the final successor
            new = start(binary, folder, n, True)[0] if r < rounds else None
            if not new:
                old.terminate()
            _, err = old.communicate(timeout=60)
            over, restored = HANDED_OVER.search(err), RESTORED.search(err)
            if (new and (old.returncode != 0 or not over or int(over[1]) != 2 * n)) or \
                    (r > 0 and (not restored or int(restored[1]) != 2 * n)):
                sys.exit(f"round {r} failed (exit {old.returncode}):\n{err}")
            if new:
                over_ms.append((float(over[3]), float(over[4])))
            if r > 0:
                restore_ms.append(float(restored[2]))
            old = new
    finally:
        if old and old.poll() is None:
            old.kill()
        for s in socks:
            s.close()
        for i in range(n):
            os.unlink(f"/dev/shm/{marker}_{i}")
        for name in os.listdir(folder):
            os.unlink(os.path.join(folder, name))
        os.rmdir(folder)
    return [(o, send, rest) for (o, send), rest in zip(over_ms, restore_ms)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--counts", type=int, nargs="+", default=[0, 100, 1000, 4000],
                    help="regions of each kind (default 0 100 1000 4000)")
    ap.add_argument("--rounds", type=int, default=5, help="upgrades per count (default 5)")
    args = ap.parse_args()
    binary = os.environ.get("SERVER_BIN")
    if not binary or not os.access(binary, os.X_OK):
        sys.exit("set SERVER_BIN to the built shmreg-server")
    print(f"# {args.rounds} upgrades per count, no request running; ms: median (min-max)")
    print("| regions (shm + memfd) | handover | state sent | restored |")
    print("| --- | --- | --- | --- |")
    for n in args.counts:
        rows = figures(binary, n, args.rounds)
        cells = []
        for col in zip(*rows):
            cells.append(f"{statistics.median(col):.1f} ({min(col):.1f}-{max(col):.1f})")
        print(f"| {n:,} + {n:,} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
