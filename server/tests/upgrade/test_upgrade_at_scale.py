"""A live upgrade at scale, while clients run `simple` on regions they
registered themselves, over tritonclient's HTTP and gRPC clients (a new
connection per request, and one kept-alive connection) and perf_analyzer.

- 1,000 named POSIX shm regions registered over HTTP and 1,000 sealed
  memfds registered over the Unix socket (8 connections of 125) are handed
  to a new server.
- 1,000 named POSIX shm regions registered under four tenants (--tenants,
  each tenant its default share of --max-regions, each holding the same 250
  names) are handed to a new server. The server refuses --uds beside
  --tenants (a memfd belongs to its connection, not to a tenant), so the
  memfds' owners are their connections, checked by closing each one.

Asserted: no request fails, on a connection the old server had accepted
(kept alive, or made just before the pause) as on a new one: the old server
serves through the pause (HTTP answers close their connections; gRPC
answers wait until the GOAWAY has gone out, server/README.md's "Upgrade and
restart"). An HTTP request the old server closed unanswered after its pause
(no byte of an answer: tritonclient's HTTP client sends it again by itself)
is sent once more and must then succeed; those are counted and printed. Any
other failure (a 503, a cancelled call, a refused connection, an unknown
region, wrong bytes) fails the test. No region is
registered again (the successor's registrations are its restore's); the
successor lists every region with its owner; every region's inputs are
intact and an inference's outputs land in it. The handover's time (the old
server's line, from the successor's connect to its ready) is printed
against its target, never asserted."""
import ctypes
import http.client
import json
import mmap
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from geventhttpclient.response import HTTPConnectionClosed
from tritonclient.utils import InferenceServerException

from grpc_support import start_with_grpc, with_grpc
from server_process import Server, leftover_report
from uds_client import N, NBYTES, REGION_BYTES, load_memfd_client
from uds_fixtures import wait_uds_line

REGIONS = 1000                 # of each kind
UDS_CONNECTIONS = 8            # the memfds' connections, 125 regions each
TENANTS = 4                    # 250 regions each
TARGET_MS = 100                # the handover's target (docs/performance.md)
LOAD_S = 1.0                   # inferences before and after the upgrade, at least
HANDED_OVER = re.compile(r"upgrade: handed over (\d+) regions, (\d+) sockets in ([\d.]+) ms "
                         r"\(the state sent in ([\d.]+) ms\)")
RESTORED = re.compile(r"upgrade: restored (\d+) regions in ([\d.]+) ms")

mc = load_memfd_client()


@pytest.fixture
def folder():
    """A folder of its own for the sockets (short enough for sun_path)."""
    path = tempfile.mkdtemp(prefix="shmreg-scale-")
    yield path
    shutil.rmtree(path)


# ------------------------------------------------------------- regions

libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                      ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]


def map_shared(fd):
    """REGION_BYTES of fd mapped shared, as a writable memoryview. Not
    Python's mmap, which keeps a descriptor per mapping: 2,000 of them would
    put the servers' pipes past select()'s 1024."""
    addr = libc.mmap(None, REGION_BYTES, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, fd, 0)
    if addr in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return memoryview((ctypes.c_ubyte * REGION_BYTES).from_address(addr)).cast("B")


class Region:
    """One region's bytes as its client maps them: INPUT0 = i..i+15, INPUT1 =
    all k, then OUTPUT0 and OUTPUT1, which each inference overwrites."""

    def __init__(self, name, fd, i, k):
        self.name, self.buf = name, map_shared(fd)
        self.in0 = np.arange(i, i + N, dtype=np.int32)
        self.in1 = np.full(N, k, np.int32)
        self.buf[:2 * NBYTES] = self.in0.tobytes() + self.in1.tobytes()

    def clear_outputs(self):
        self.buf[2 * NBYTES:] = bytes(2 * NBYTES)

    def check(self):
        """None when the inputs are intact and the outputs are theirs; else what differs."""
        got = np.frombuffer(self.buf, np.int32)
        want = np.concatenate([self.in0, self.in1, self.in0 + self.in1, self.in0 - self.in1])
        return None if np.array_equal(got, want) else f"{self.name}: {got.tolist()}"

    def unmap(self):
        libc.munmap(ctypes.addressof(self.buf.obj), REGION_BYTES)


def shm_region(key, name, i, k):
    """A POSIX shm object at key, mapped here (the mapping keeps it)."""
    fd = os.open(f"/dev/shm/{key.lstrip('/')}", os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    try:
        os.ftruncate(fd, REGION_BYTES)
        return Region(name, fd, i, k)
    finally:
        os.close(fd)


def memfd_region(name, i, k):
    """(fd, Region) of a sealed memfd; the caller sends and closes fd."""
    fd = mc.create_sealed_memfd(REGION_BYTES, name)
    return fd, Region(name, fd, i, k)


class Http:
    """One kept-alive HTTP/1.1 connection of plain http.client."""

    def __init__(self, port, token=None):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}

    def json(self, method, path, body=None):
        self.conn.request(method, path, None if body is None else json.dumps(body), self.headers)
        resp = self.conn.getresponse()
        data = resp.read()
        return resp.status, json.loads(data) if data else None

    def close(self):
        self.conn.close()


def register_shm(port, regions, keys, token=None):
    """Register each region by its key over one kept-alive connection."""
    client = Http(port, token)
    try:
        for r, key in zip(regions, keys):
            code, body = client.json("POST", f"/v2/systemsharedmemory/region/{r.name}/register",
                                     {"key": key, "byte_size": REGION_BYTES})
            assert code == 200, (r.name, body)
    finally:
        client.close()


def register_memfds(path, names):
    """Each name a sealed memfd registered over a connection of its own
    group: (the connections, [their names], Regions)."""
    per = len(names) // UDS_CONNECTIONS
    socks, groups, regions = [], [], []
    for c in range(UDS_CONNECTIONS):
        sock = mc.connect(path)
        socks.append(sock)
        groups.append(names[c * per:(c + 1) * per])
        for name in groups[-1]:
            fd, r = memfd_region(name, len(regions), 7)
            try:
                mc.register(sock, name, fd, REGION_BYTES)
            finally:
                os.close(fd)
            regions.append(r)
    return socks, groups, regions


def release(clients, regions, keys):
    """Stop the clients, unmap the regions, unlink the objects."""
    for c in clients:
        c.stopping.set()
    for c in clients:
        c.join(60)
    if all(not c.is_alive() for c in clients):  # else a client may still touch one
        for r in regions:
            r.unmap()
    for key in keys:
        if os.path.exists(f"/dev/shm/{key.lstrip('/')}"):
            os.unlink(f"/dev/shm/{key.lstrip('/')}")


def status_names(port, token=None):
    client = Http(port, token)
    try:
        code, regions = client.json("GET", "/v2/systemsharedmemory/status")
    finally:
        client.close()
    assert code == 200, regions
    return sorted(r["name"] for r in regions)


def infer_json(name):
    def place(offset):
        return {"shared_memory_region": name, "shared_memory_byte_size": NBYTES,
                "shared_memory_offset": offset}
    return {"inputs": [{"name": f"INPUT{j}", "shape": [1, N], "datatype": "INT32",
                        "parameters": place(j * NBYTES)} for j in (0, 1)],
            "outputs": [{"name": f"OUTPUT{j}", "parameters": place((2 + j) * NBYTES)} for j in (0, 1)]}


def check_every_region(port, regions, token=None, threads=2):
    """An inference per region, outputs into it, then its bytes read back:
    what differs (empty when every region is exact)."""
    bad = []

    def run(part):
        client = Http(port, token)
        try:
            for r in part:
                r.clear_outputs()
                code, body = client.json("POST", "/v2/models/simple/infer", infer_json(r.name))
                bad.append(f"{r.name}: {code} {body}" if code != 200 else r.check())
        finally:
            client.close()
    workers = [threading.Thread(target=run, args=(regions[t::threads],)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return [b for b in bad if b]


# ------------------------------------------------------------- clients

def infer(client, lib, r, headers):
    """One inference of simple, inputs and outputs in r; raises on failure."""
    inputs = [lib.InferInput(f"INPUT{j}", [1, N], "INT32") for j in (0, 1)]
    outputs = [lib.InferRequestedOutput(f"OUTPUT{j}") for j in (0, 1)]
    for j in (0, 1):
        inputs[j].set_shared_memory(r.name, NBYTES, offset=j * NBYTES)
        outputs[j].set_shared_memory(r.name, NBYTES, offset=(2 + j) * NBYTES)
    r.clear_outputs()
    client.infer("simple", inputs, outputs=outputs, headers=headers)
    wrong = r.check()
    if wrong:
        raise AssertionError(f"outputs: {wrong}")


class Client(threading.Thread):
    """Inferences one after another on its own regions, round and round,
    until stopped. kind: http-new / grpc-new (a connection per request) or
    http-kept / grpc-kept (one connection throughout). Keeps the count of
    answers, the requests sent again and every other failure."""

    def __init__(self, kind, url, regions, token=None):
        super().__init__(daemon=True)
        self.kind, self.url, self.regions = kind, url, regions
        self.headers = {"authorization": f"Bearer {token}"} if token else None  # gRPC: lower case
        self.lib = httpclient if kind.startswith("http") else grpcclient
        self.ok, self.retried, self.failures = 0, [], []
        self.stopping = threading.Event()

    def run(self):
        kept = self.lib.InferenceServerClient(self.url) if self.kind.endswith("kept") else None
        try:
            while not self.stopping.is_set():
                for r in self.regions:
                    if self.stopping.is_set():
                        break
                    self.one(kept, r)
        finally:
            if kept:
                kept.close()

    def attempt(self, kept, r):
        client = kept or self.lib.InferenceServerClient(self.url)
        try:
            infer(client, self.lib, r, self.headers)
        finally:
            if not kept:
                client.close()

    def one(self, kept, r):
        try:
            self.attempt(kept, r)
            self.ok += 1
        except InferenceServerException as e:
            self.failures.append(f"{self.kind} {r.name}: {e}")
        except (HTTPConnectionClosed, ConnectionResetError, BrokenPipeError) as e:
            # No byte of an answer: the server closed the connection before
            # it read the request (one it reads is answered), so one retry.
            self.retried.append(f"{r.name}: {e!r}")
            try:
                self.attempt(kept, r)
                self.ok += 1
            except Exception as again:  # noqa: BLE001: every failure is what the test counts
                self.failures.append(f"{self.kind} {r.name}: retried, then {again!r}")
        except Exception as e:  # noqa: BLE001
            self.failures.append(f"{self.kind} {r.name}: {e!r}")

    def stop(self):
        self.stopping.set()
        self.join(60)
        assert not self.is_alive(), f"{self.kind} did not stop"


def clients_for(server, regions, kinds, token_of=lambda c: None):
    """One Client per kind, started, each on every len(kinds)-th region."""
    clients = []
    for c, kind in enumerate(kinds):
        url = server.url if kind.startswith("http") else server.grpc_url
        clients.append(Client(kind, url, regions[c::len(kinds)], token_of(c)))
    for c in clients:
        c.start()
    return clients


def wait_for_answers(server, clients, more):
    """Until every client has `more` answers beyond its count now, and
    LOAD_S has passed."""
    start = {c: c.ok for c in clients}
    time.sleep(LOAD_S)
    server.wait_until(lambda: all(c.ok >= start[c] + more for c in clients), timeout=30,
                      what="answers from every client")


def assert_served_as_promised(clients, over):
    """No failure (Client.one); over HTTP a request closed unanswered is
    sent again, never over gRPC.
    over: handed_over's; its log goes with a failure."""
    log = "\n".join(l for l in over[-1].splitlines() if l.startswith(("upgrade:", "shutdown:")))
    for c in clients:
        assert c.failures == [], f"{c.failures}\nthe old server's log:\n{log}"
        if c.lib is grpcclient:
            assert c.retried == [], (c.kind, c.retried, log)


def load_line(clients):
    return ", ".join(f"{c.kind} {c.ok} ok" + (f" ({len(c.retried)} sent again)" if c.lib is httpclient else "")
                     for c in clients)


# -------------------------------------------------------- perf_analyzer

def perf_analyzer():
    """(path, None), or (None, why there is none here)."""
    path = os.environ.get("PERF_ANALYZER") or shutil.which("perf_analyzer")
    if not path:
        return None, os.environ.get("PERF_ANALYZER_MISSING",
                                    "no perf_analyzer executable ($PERF_ANALYZER, PATH)")
    probe = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        return None, f"{path} --version: {probe.stderr.strip() or probe.returncode}"
    return path, None


def start_perf_analyzer(path, server, token):
    """perf_analyzer on `simple` over gRPC through system shm, on regions
    it registers, as the tenant of token: it unregisters every region of
    its caller at start and exit, as Triton's does, so beside other clients
    it runs as a tenant of its own. Three windows of 1.5 s, every one
    counted as stable (-s 1000): the pause must not make it measure on."""
    return subprocess.Popen([path, "-m", "simple", "-u", server.grpc_url, "-i", "grpc",
                             "-H", f"authorization:Bearer {token}",
                             "--shared-memory", "system", "--output-shared-memory-size", str(NBYTES),
                             "--concurrency-range", "1", "--measurement-interval", "1500",
                             "--stability-percentage", "1000", "--max-trials", "3"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


# ------------------------------------------------------------- servers

def start_new(folder, *args):
    hand = os.path.join(folder, "up.sock")
    return with_grpc(Server("--take-over", hand, "--handover-socket", hand, *args))


def handed_over(old):
    """The old server ends by itself once taken over: exit 0, nothing left
    mapped; its handover line's (regions, sockets, ms, send ms)."""
    old.proc.wait(timeout=30)
    rc, err = old.stop()
    assert rc == 0, err
    assert leftover_report(err) == (0, 0), err
    match = HANDED_OVER.search(err)
    assert match, err
    return int(match[1]), int(match[2]), float(match[3]), float(match[4]), err


def stop_new(new):
    """Stop the successor cleanly: its restore line's (regions, ms)."""
    rc, err = new.stop()
    assert rc == 0, err
    assert leftover_report(err) == (0, 0), err
    match = RESTORED.search(err)
    assert match, err
    return int(match[1]), float(match[2])


def metric(port, name):
    client = Http(port)
    try:
        client.conn.request("GET", "/metrics")
        text = client.conn.getresponse().read().decode()
    finally:
        client.close()
    match = re.search(rf"^{name} (\d+)", text, re.M)
    assert match, text
    return int(match[1])


def report(capsys, what, over, restored):
    regions, sockets, ms, send_ms, _ = over
    with capsys.disabled():
        print(f"\nlive upgrade handover, {what}: {ms:.1f} ms from the successor's connect to its "
              f"ready ({regions} regions, {sockets} sockets; the state sent in {send_ms:.1f} ms, "
              f"restored in {restored[1]:.1f} ms); target < {TARGET_MS} ms: "
              f"{'met' if ms < TARGET_MS else 'missed'}")


# ---------------------------------------------------------------- tests

def test_upgrade_with_1000_shm_and_1000_memfd_regions(folder, shm_key, capsys):
    uds = os.path.join(folder, "uds.sock")
    old = wait_uds_line(start_with_grpc("--uds", uds, "--handover-socket", os.path.join(folder, "up.sock"),
                                        "--uds-max-regions", str(REGIONS // UDS_CONNECTIONS)))
    keys = [shm_key(f"s{i}") for i in range(REGIONS)]
    shm, socks, groups, memfds, clients = [], [], [], [], []
    new = None
    try:
        for i in range(REGIONS):
            shm.append(shm_region(keys[i], f"s{i:04d}", i, 3))
        setup = time.monotonic()
        register_shm(old.port, shm, keys)
        socks, groups, memfds = register_memfds(uds, [f"m{i:04d}" for i in range(REGIONS)])
        setup = time.monotonic() - setup
        ours = sorted(r.name for r in shm + memfds)
        clients = clients_for(old, shm + memfds, ("http-new", "http-kept", "grpc-new", "grpc-kept"))
        wait_for_answers(old, clients, 5)
        registered = metric(old.port, "shmreg_registrations_total")

        new = start_new(folder)
        over = handed_over(old)
        wait_for_answers(new, clients, 5)
        for c in clients:
            c.stop()
        assert_served_as_promised(clients, over)
        # Every region listed, each registered once, before the upgrade.
        assert status_names(new.port) == ours
        assert over[0] == registered  # every region listed went
        assert metric(new.port, "shmreg_registrations_total") == registered
        assert metric(new.port, "shmreg_registration_refusals_total") == 0
        assert check_every_region(new.port, shm + memfds) == []
        # Each memfd's owner came along: a connection's end unregisters its
        # regions, and only those.
        left = set(ours)
        for sock, names in zip(socks, groups):
            sock.close()
            left -= set(names)
            new.wait_until(lambda: set(status_names(new.port)) == left, timeout=20,
                           what="the connection's regions to go")
        socks = []
        assert Http(new.port).json("POST", "/v2/systemsharedmemory/unregister")[0] == 200
        restored = stop_new(new)
        assert restored[0] == registered
    finally:
        for sock in socks:
            sock.close()
        for s in (old, new):
            if s:
                s.stop()
        release(clients, shm + memfds, keys)
    with capsys.disabled():
        print(f"\nregistered {REGIONS} shm + {REGIONS} memfd regions in {setup:.2f} s; "
              f"{load_line(clients)}")
    report(capsys, f"{REGIONS} + {REGIONS} regions", over, restored)


def tenants_file(folder, n):
    """n tenants, one token each, in a file only its owner reads."""
    tokens = [f"token-{t}-{os.urandom(12).hex()}" for t in range(n)]
    path = os.path.join(folder, "tenants")
    with open(path, "w") as f:
        f.writelines(f"{tok} team-{t}\n" for t, tok in enumerate(tokens))
    os.chmod(path, 0o600)
    return path, tokens


def test_upgrade_keeps_each_tenants_regions(folder, shm_key, capsys):
    path, tokens = tenants_file(folder, TENANTS + 1)  # the last one perf_analyzer's
    per = REGIONS // TENANTS
    old = start_with_grpc("--tenants", path, "--handover-socket", os.path.join(folder, "up.sock"))
    keys = [shm_key(f"t{i}") for i in range(REGIONS)]
    regions, new, clients, pa = [], None, [], None
    try:
        # Every tenant holds the same names, each over objects of its own.
        for i in range(REGIONS):
            regions.append(shm_region(keys[i], f"r{i % per:03d}", i, 3 + i // per))
        by_tenant = [regions[t * per:(t + 1) * per] for t in range(TENANTS)]
        for t in range(TENANTS):
            register_shm(old.port, by_tenant[t], keys[t * per:(t + 1) * per], tokens[t])
        kinds = ("http-new", "http-kept", "grpc-new", "grpc-kept")
        for t, kind in enumerate(kinds):  # tenant t's client
            url = old.url if kind.startswith("http") else old.grpc_url
            clients.append(Client(kind, url, by_tenant[t], tokens[t]))
        for c in clients:
            c.start()
        pa_path, no_pa = perf_analyzer()
        if pa_path:
            pa = start_perf_analyzer(pa_path, old, tokens[TENANTS])
            old.wait_until(lambda: pa.poll() is not None or len(status_names(old.port, tokens[TENANTS])) == 4,
                           timeout=20, what="perf_analyzer's regions")
            assert pa.poll() is None, pa.communicate()[0]
        wait_for_answers(old, clients, 5)

        new = start_new(folder, "--tenants", path)
        over = handed_over(old)
        wait_for_answers(new, clients, 5)
        for c in clients:
            c.stop()
        assert_served_as_promised(clients, over)
        if pa:
            pa_out = pa.communicate(timeout=60)[0]
            assert pa.returncode == 0, pa_out
            assert re.search(r"Successful request count: [1-9]", pa_out), pa_out
            assert status_names(new.port, tokens[TENANTS]) == []  # it unregistered at the successor
        for t in range(TENANTS):
            assert status_names(new.port, tokens[t]) == sorted(r.name for r in by_tenant[t])
            assert check_every_region(new.port, by_tenant[t], tokens[t]) == []
            client = Http(new.port, tokens[t])
            assert client.json("POST", "/v2/systemsharedmemory/unregister")[0] == 200
            client.close()
        restored = stop_new(new)
        assert restored[0] == over[0] == REGIONS + (4 if pa else 0)
    finally:
        for s in (old, new):
            if s:
                s.stop()
        if pa and pa.poll() is None:
            pa.kill()
            pa.communicate()
        release(clients, regions, keys)
    with capsys.disabled():
        print(f"\n{TENANTS} tenants: {load_line(clients)}; perf_analyzer, a tenant of its own: "
              + ("exit 0" if pa else f"not run: {no_pa}"))
    report(capsys, f"{REGIONS} regions of {TENANTS} tenants", over, restored)
    if not pa:
        pytest.skip(f"perf_analyzer's part only (every other assertion passed): {no_pa}")
