#!/usr/bin/env python3
"""Live upgrades in a row while clients that wait for each answer run
`simple`: what each kind of client saw. Twelve clients by default (--clients
per kind): tritonclient gRPC clients on one channel each (grpc-kept), on a
new channel per call (grpc-new), and HTTP clients on one kept-alive
connection each (http-kept, Python's http.client, which opens a new
connection when an answer says Connection: close). Prints the answers per
kind, the HTTP requests closed unanswered (sent again, as HTTP clients do)
and every failure by its words.

    SERVER_BIN=.../shmreg-server python3 server/bench/upgrade_under_load.py \\
      [--upgrades 10] [--clients 4]

Needs numpy and tritonclient[grpc]; run from anywhere.
"""
import argparse
import collections
import http.client
import json
import os
import pathlib
import sys
import tempfile
import threading
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "support"))
import numpy as np  # noqa: E402
import tritonclient.grpc as grpcclient  # noqa: E402

from grpc_support import start_with_grpc, with_grpc  # noqa: E402
from server_process import Server  # noqa: E402
from uds_fixtures import wait_uds_line  # noqa: E402

DATA = np.arange(16, dtype=np.int32).reshape(1, 16)
BODY = json.dumps({"inputs": [{"name": f"INPUT{j}", "shape": [1, 16], "datatype": "INT32",
                               "data": DATA.ravel().tolist()} for j in (0, 1)]})


class Tally:
    def __init__(self):
        self.answers, self.failures, self.resent = collections.Counter(), collections.Counter(), 0
        self.lock = threading.Lock()

    def failed(self, kind, why):
        with self.lock:
            self.failures[f"{kind}: {str(why)[:100]}"] += 1


def grpc_inputs():
    inputs = [grpcclient.InferInput(f"INPUT{j}", [1, 16], "INT32") for j in (0, 1)]
    for i in inputs:
        i.set_data_from_numpy(DATA)
    return inputs


def grpc_client(url, tally, stop, kept):
    client = grpcclient.InferenceServerClient(url) if kept else None
    kind = "grpc-kept" if kept else "grpc-new"
    while not stop.is_set():
        c = client or grpcclient.InferenceServerClient(url)
        try:
            c.infer("simple", grpc_inputs())
            tally.answers[kind] += 1
        except Exception as e:  # noqa: BLE001: every failure is counted
            tally.failed(kind, e)
        if not kept:
            c.close()


def http_client(port, tally, stop):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    while not stop.is_set():
        try:
            conn.request("POST", "/v2/models/simple/infer", BODY, {"Content-Type": "application/json"})
            answer = conn.getresponse()
            body = answer.read()
            if answer.status == 200:
                tally.answers["http-kept"] += 1
            else:
                tally.failed("http-kept", f"{answer.status} {body[:80]!r}")
            if (answer.getheader("Connection") or "").lower() != "close":
                continue
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            tally.resent += 1  # no byte of an answer: sent again on a new connection
        except Exception as e:  # noqa: BLE001
            tally.failed("http-kept", repr(e))
        conn.close()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--upgrades", type=int, default=10)
    ap.add_argument("--clients", type=int, default=4, help="clients of each kind")
    args = ap.parse_args()
    folder = tempfile.mkdtemp(prefix="shmreg-ul-")
    hand = os.path.join(folder, "up.sock")
    server = wait_uds_line(start_with_grpc("--uds", os.path.join(folder, "uds.sock"), "--handover-socket", hand))
    tally, stop = Tally(), threading.Event()
    work = [(grpc_client, (server.grpc_url, tally, stop, True)), (grpc_client, (server.grpc_url, tally, stop, False)),
            (http_client, (server.port, tally, stop))]
    threads = [threading.Thread(target=f, args=a, daemon=True) for f, a in work for _ in range(args.clients)]
    for t in threads:
        t.start()
    time.sleep(1)
    for n in range(args.upgrades):
        new = wait_uds_line(with_grpc(Server("--take-over", hand, "--handover-socket", hand)))
        server.proc.wait(timeout=30)
        rc, err = server.stop()
        line = next((l for l in err.splitlines() if l.startswith("upgrade: handed over")), "no handover line")
        print(f"upgrade {n + 1}: old server exit {rc}; {line}", flush=True)
        server = new
        time.sleep(0.5)
    stop.set()
    for t in threads:
        t.join(30)
    server.stop()
    print(f"answers: {dict(tally.answers)}; HTTP requests closed unanswered and sent again: {tally.resent}")
    print(f"failures: {dict(tally.failures) or 'none'}")


if __name__ == "__main__":
    main()
