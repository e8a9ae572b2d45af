"""Hostile and honest clients against one C server, side by side.

Honest clients register their tensors in POSIX shared memory once and then
infer the `simple` model over and over, through the official tritonclient
(HTTP and gRPC), checking every output byte. Around them, hostile clients do
what a hostile client would: truncate their own objects under registered regions,
flood the registry with registrations, start uploads and never finish them,
and open connections that they abandon half-way through a request.

Passes (exit 0) only if every honest request succeeded with the right bytes,
every hostile request got an answer it deserved (never a 5xx, never a dead
server), the server's resident memory stayed under a bound, and after the
run the server exits cleanly with no shared-memory mapping or descriptor
left. Prints the figures docs/reliability.md quotes.

usage: SERVER_BIN=... python server/tests/support/hostile_clients.py --seconds 300
"""
import argparse
import collections
import os
import signal
import socket
import sys
import threading
import time

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_process import leftover_report  # noqa: E402
from grpc_support import start_with_grpc  # noqa: E402

NELEM = 16
NBYTES = NELEM * 4
PAGE = 4096


class Tally:
    """Thread-safe counters: outcome name -> count."""

    def __init__(self):
        self.lock = threading.Lock()
        self.counts = collections.Counter()
        self.failures = []

    def add(self, what, failure=None):
        with self.lock:
            self.counts[what] += 1
            if failure and len(self.failures) < 20:
                self.failures.append(failure)


def honest_client(server, protocol, index, stop, tally):
    """Register four regions once, then infer with fresh inputs until stop,
    checking both outputs; unregister and unlink at the end."""
    mod = httpclient if protocol == "http" else grpcclient
    url = server.url if protocol == "http" else f"127.0.0.1:{server.grpc_port}"
    client = mod.InferenceServerClient(url)
    prefix = f"honest-{protocol}-{index}"
    handles = {n: shm.create_shared_memory_region(f"{prefix}-{n}", f"/{prefix}-{n}-{os.getpid()}",
                                                  NBYTES)
               for n in ("in0", "in1", "out0", "out1")}
    try:
        for name, h in handles.items():
            client.register_system_shared_memory(f"{prefix}-{name}", h._shm_key, NBYTES)
        rng = np.random.default_rng(index)
        while not stop.is_set():
            a = rng.integers(-1000, 1000, size=(1, NELEM), dtype=np.int32)
            b = rng.integers(-1000, 1000, size=(1, NELEM), dtype=np.int32)
            shm.set_shared_memory_region(handles["in0"], [a])
            shm.set_shared_memory_region(handles["in1"], [b])
            inputs = [mod.InferInput("INPUT0", [1, NELEM], "INT32"),
                      mod.InferInput("INPUT1", [1, NELEM], "INT32")]
            inputs[0].set_shared_memory(f"{prefix}-in0", NBYTES)
            inputs[1].set_shared_memory(f"{prefix}-in1", NBYTES)
            outputs = [mod.InferRequestedOutput("OUTPUT0"), mod.InferRequestedOutput("OUTPUT1")]
            outputs[0].set_shared_memory(f"{prefix}-out0", NBYTES)
            outputs[1].set_shared_memory(f"{prefix}-out1", NBYTES)
            try:
                client.infer("simple", inputs, outputs=outputs)
            except Exception as e:  # any failure of an honest request fails the soak
                tally.add("honest failed", f"{protocol} {index}: {e}")
                continue
            got0 = shm.get_contents_as_numpy(handles["out0"], np.int32, [1, NELEM])
            got1 = shm.get_contents_as_numpy(handles["out1"], np.int32, [1, NELEM])
            if np.array_equal(got0, a + b) and np.array_equal(got1, a - b):
                tally.add("honest ok")
            else:
                tally.add("honest wrong bytes", f"{protocol} {index}: wrong output")
    finally:
        for name in handles:
            try:
                client.unregister_system_shared_memory(f"{prefix}-{name}")
            except Exception as e:
                tally.add("honest failed", f"unregister {prefix}-{name}: {e}")
        for h in handles.values():
            shm.destroy_shared_memory_region(h)
        client.close()


def expect_4xx(tally, what, status, body):
    """A hostile request deserves a 4xx (or a 2xx for a harmless one); a 5xx
    or no answer at all is a failure of the server."""
    if status is None or status >= 500:
        tally.add(f"{what}: server error", f"{what}: {status} {body[:200]!r}")
    else:
        tally.add(f"{what}: {status}")


def shm_register_body(key, offset, size):
    return {"key": key, "offset": offset, "byte_size": size}


def truncator(server, index, stop, tally):
    """Register a 4 KiB object, shrink it to 0 under the registration, and
    infer reading from it (and writing into it)."""
    key = f"/hostile-trunc-{index}-{os.getpid()}"
    name = f"trunc-{index}"
    path = "/dev/shm" + key
    while not stop.is_set():
        fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
        try:
            os.ftruncate(fd, PAGE)
            status, data = request(server, "POST", f"/v2/systemsharedmemory/region/{name}/register",
                                   shm_register_body(key, 0, PAGE))
            if status != 200:
                tally.add("truncator register refused", f"register: {status} {data[:200]!r}")
                continue
            os.ftruncate(fd, 0)
            body = {"inputs": [
                {"name": n, "shape": [1, NELEM], "datatype": "INT32",
                 "parameters": {"shared_memory_region": name, "shared_memory_byte_size": NBYTES}}
                for n in ("INPUT0", "INPUT1")],
                "outputs": [{"name": "OUTPUT0", "parameters": {"shared_memory_region": name,
                                                               "shared_memory_byte_size": NBYTES}}]}
            status, data = request(server, "POST", "/v2/models/simple/infer", body)
            expect_4xx(tally, "truncated read", status, data)
            status, data = request(server, "POST", f"/v2/systemsharedmemory/region/{name}/unregister")
            expect_4xx(tally, "truncator unregister", status, data)
        finally:
            os.close(fd)
            os.unlink(path)


def flooder(server, index, stop, tally, burst):
    """Register one object under many names as fast as the server answers,
    then unregister them, again and again."""
    key = f"/hostile-flood-{index}-{os.getpid()}"
    fd = os.open("/dev/shm" + key, os.O_CREAT | os.O_RDWR, 0o600)
    os.ftruncate(fd, PAGE)
    try:
        while not stop.is_set():
            names = []
            for i in range(burst):
                name = f"flood-{index}-{i}"
                status, data = request(server, "POST",
                                       f"/v2/systemsharedmemory/region/{name}/register",
                                       shm_register_body(key, 0, PAGE), FLOODER_ADDR)
                expect_4xx(tally, "flood register", status, data)
                if status == 200:
                    names.append(name)
                if stop.is_set():
                    break
            for name in names:
                status, data = request(server, "POST",
                                       f"/v2/systemsharedmemory/region/{name}/unregister",
                                       source=FLOODER_ADDR)
                expect_4xx(tally, "flood unregister", status, data)
    finally:
        os.close(fd)
        os.unlink("/dev/shm" + key)


def slow_uploader(server, stop, tally, conns, sent_mib):
    """Announce 64 MiB bodies on several connections, send sent_mib of each,
    and go silent; replace each connection the server answers or closes."""
    socks = []
    chunk = b"0" * (sent_mib << 20)
    while not stop.is_set():
        while len(socks) < conns and not stop.is_set():
            try:
                s = connect_from(server, UPLOADER_ADDR)
                s.sendall(b"POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\n"
                          b"Content-Type: application/json\r\nContent-Length: 67108864\r\n\r\n")
                s.sendall(chunk)
            except OSError:  # refused, answered or closed mid-upload: defences
                tally.add("slow upload cut short by the server")
                break
            socks.append(s)
            tally.add("slow upload stalled")
        time.sleep(0.5)
        alive = []
        for s in socks:
            try:
                s.setblocking(False)
                answer = s.recv(4096)
                s.close()
                tally.add("slow upload answered " + (answer[9:12].decode() if answer else "(closed)"))
            except BlockingIOError:
                s.settimeout(5)
                alive.append(s)
            except OSError:
                s.close()
                tally.add("slow upload answered (reset)")
        socks = alive
    for s in socks:
        s.close()


def abandoner(server, stop, tally):
    """Open connections, send half a request line or half the headers, and
    walk away (close) or go silent (keep open until its next pass)."""
    held = []
    while not stop.is_set():
        for part in (b"GET /v2/heal", b"POST /v2/systemsharedmemory/region/x/register HTTP/1.1\r\n"
                     b"Content-Length: 10\r\n"):
            try:
                s = connect_from(server, ABANDONER_ADDR)
                s.sendall(part)
            except OSError:  # refused past the per-address limit: a defence
                tally.add("abandoned connection refused")
                continue
            held.append(s)
        while len(held) > 64:
            held.pop(0).close()
        tally.add("abandoned connections", None)
        time.sleep(0.05)
    for s in held:
        s.close()


# Hostile clients come from addresses of their own (all of 127/8 is
# loopback), as they would from other hosts: the server's per-address
# connection limit is one of the defences under test, and honest clients on
# 127.0.0.1 must not share it with them.
TRUNCATOR_ADDR, FLOODER_ADDR, UPLOADER_ADDR, ABANDONER_ADDR = (
    "127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5")


def request(server, method, path, body=None, source=TRUNCATOR_ADDR):
    """(status, body bytes) from source, or (None, error text) when the
    server did not answer."""
    try:
        status, _, data = server.request(method, path, body, source=source)
        return status, data
    except OSError as e:
        return None, str(e).encode()


def connect_from(server, source):
    return socket.create_connection(("127.0.0.1", server.port), timeout=5,
                                    source_address=(source, 0))


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=300)
    p.add_argument("--honest", type=int, default=2, help="honest clients per protocol")
    p.add_argument("--rss-limit-mib", type=float, default=256,
                   help="fail when the server's RSS grows past this")
    p.add_argument("--server-arg", action="append",
                   default=["--allow-client-shm=true", "--max-body-mb=64", "--max-buffered-mb=128"],
                   help="extra server option (repeatable), e.g. --server-arg=--max-regions=2000")
    return p.parse_args()


def run_soak(args):
    server = start_with_grpc(*args.server_arg)
    # The server logs to a pipe: drain it all along, or a long soak fills
    # the pipe and blocks the server on its own log.
    log = []
    drain = threading.Thread(target=lambda: log.extend(server.proc.stderr), daemon=True)
    drain.start()
    tally, stop = Tally(), threading.Event()
    threads = [threading.Thread(target=honest_client, args=(server, proto, i, stop, tally))
               for proto in ("http", "grpc") for i in range(args.honest)]
    threads += [threading.Thread(target=truncator, args=(server, i, stop, tally)) for i in range(2)]
    threads += [threading.Thread(target=flooder, args=(server, 0, stop, tally, 500))]
    threads += [threading.Thread(target=slow_uploader, args=(server, stop, tally, 8, 24))]
    threads += [threading.Thread(target=abandoner, args=(server, stop, tally))]
    rss0, fds0 = rss_kib(server.pid), fd_count(server.pid)
    rss_max = rss0
    for t in threads:
        t.start()
    deadline = time.monotonic() + args.seconds
    while time.monotonic() < deadline and server.proc.poll() is None:
        rss_max = max(rss_max, rss_kib(server.pid))
        time.sleep(0.5)
    stop.set()
    for t in threads:
        t.join()
    alive = server.proc.poll() is None
    rss_end = rss_kib(server.pid) if alive else 0
    fds_end = fd_count(server.pid) if alive else 0
    if alive:
        server.proc.send_signal(signal.SIGTERM)
    code = server.proc.wait(timeout=60)
    drain.join()
    err = b"".join(log).decode(errors="replace")
    left = leftover_report(err) if alive else (None, None)
    return tally, dict(alive=alive, code=code, rss0=rss0, rss_max=rss_max, rss_end=rss_end,
                       fds0=fds0, fds_end=fds_end, left=left, stderr=err)


def main():
    args = parse_args()
    tally, fig = run_soak(args)
    print(f"soak: {args.seconds:.0f} s, {args.honest} honest clients per protocol")
    for what, n in sorted(tally.counts.items()):
        print(f"  {what}: {n}")
    print(f"  server RSS: start {fig['rss0'] / 1024:.1f} MiB, max {fig['rss_max'] / 1024:.1f} MiB, "
          f"end {fig['rss_end'] / 1024:.1f} MiB")
    print(f"  server descriptors: start {fig['fds0']}, end {fig['fds_end']}")
    print(f"  after exit: mappings and descriptors left {fig['left']}, exit code {fig['code']}")
    problems = list(tally.failures)
    if not fig["alive"]:
        problems.append("the server died during the soak:\n" + fig["stderr"][-2000:])
    if tally.counts["honest ok"] == 0:
        problems.append("no honest request succeeded")
    if any("failed" in k or "wrong" in k or "server error" in k for k in tally.counts):
        problems.append("honest failures or server errors (first ones above)")
    if fig["rss_max"] - fig["rss0"] > args.rss_limit_mib * 1024:
        problems.append(f"server RSS grew by more than {args.rss_limit_mib} MiB")
    if fig["alive"] and (fig["left"] != (0, 0) or fig["code"] != 0):
        problems.append(f"unclean exit: code {fig['code']}, left {fig['left']}")
    for p in problems:
        print("FAIL:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
