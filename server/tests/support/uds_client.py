"""A client of the server's --uds socket, run as its own process by
test_uds_memfd.py (standard library only, like python/shmreg/memfd_client.py,
which it loads by path: no compiled extension is needed).

    uds_client.py hold SOCKET NAME
        make a sealed memfd holding INPUT0 and INPUT1 of `simple`, register it
        as NAME, print "ready", then wait until killed.
    uds_client.py infer SOCKET NAME HTTP_PORT SHM_MARKER
        the same, then infer `simple` over HTTP with inputs and outputs in
        the region, check the outputs' bytes in the memfd, check that
        /dev/shm has no file named SHM_MARKER (this process has its own),
        print "ok", exit 0.
"""
import http.client
import importlib.util
import json
import mmap
import os
import signal
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MEMFD_CLIENT = os.path.join(HERE, "..", "..", "..", "python", "shmreg", "memfd_client.py")

N = 16
NBYTES = 4 * N
IN0 = list(range(N))
IN1 = [3] * N
REGION_BYTES = 4 * NBYTES  # INPUT0, INPUT1, OUTPUT0, OUTPUT1


def load_memfd_client():
    spec = importlib.util.spec_from_file_location("memfd_client", os.path.normpath(MEMFD_CLIENT))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def filled_region(mc):
    fd = mc.create_sealed_memfd(REGION_BYTES, "uds_client")
    buf = mmap.mmap(fd, REGION_BYTES)
    buf[0:NBYTES] = struct.pack(f"{N}i", *IN0)
    buf[NBYTES:2 * NBYTES] = struct.pack(f"{N}i", *IN1)
    return fd, buf


def register_region(path, name):
    """(socket, memfd mmap) of a region holding simple's inputs, registered
    as name over the socket at path."""
    mc = load_memfd_client()
    fd, buf = filled_region(mc)
    sock = mc.connect(path)
    mc.register(sock, name, fd, REGION_BYTES)
    os.close(fd)
    return sock, buf


def infer_body(name, outputs_in_region=True):
    def place(offset):
        return {"shared_memory_region": name, "shared_memory_byte_size": NBYTES,
                "shared_memory_offset": offset}
    body = {"inputs": [{"name": "INPUT0", "shape": [1, N], "datatype": "INT32", "parameters": place(0)},
                       {"name": "INPUT1", "shape": [1, N], "datatype": "INT32",
                        "parameters": place(NBYTES)}]}
    if outputs_in_region:
        body["outputs"] = [{"name": "OUTPUT0", "parameters": place(2 * NBYTES)},
                           {"name": "OUTPUT1", "parameters": place(3 * NBYTES)}]
    return body


def main(argv):
    mode, path, name = argv[1:4]
    mc = load_memfd_client()
    fd, buf = filled_region(mc)
    sock = mc.connect(path)
    mc.register(sock, name, fd, REGION_BYTES)
    os.close(fd)  # the server holds its own mapping
    if mode == "hold":
        print("ready", flush=True)
        signal.pause()
        return 0
    port, marker = int(argv[4]), argv[5]
    assert not os.path.exists(f"/dev/shm/{marker}"), "this client shares the server's /dev/shm"
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("POST", "/v2/models/simple/infer", json.dumps(infer_body(name)))
    resp = conn.getresponse()
    answer = resp.read()
    assert resp.status == 200, (resp.status, answer)
    got_sum = list(struct.unpack(f"{N}i", buf[2 * NBYTES:3 * NBYTES]))
    got_diff = list(struct.unpack(f"{N}i", buf[3 * NBYTES:4 * NBYTES]))
    assert got_sum == [a + b for a, b in zip(IN0, IN1)], got_sum
    assert got_diff == [a - b for a, b in zip(IN0, IN1)], got_diff
    print("ok", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
