"""One remote client process for the tests (test_remote_memory.py): it loads
python/shmreg/remote.py (argv[1]) and runs the commands it reads on stdin,
one JSON object a line, answering each with one JSON line on stdout:
{"ok": true, ...} or {"ok": false, "code": ..., "message": ...}.

A process of its own, started by exec: UCX must not run in a fork of a
process where it already runs, and each client connects once, as one
tenant. Commands (op and its fields):
  connect url token       remote.connect
  join address secret     shmreg_remote_client_connect with an invitation
                          the test fetched itself (the listener's address,
                          the secret in base64)
  export nbytes seed      remote.export of nbytes of random bytes (seed) or
                          zeros (seed null) -> window, descriptor (base64)
  allocate nbytes seed    remote.allocate, filled the same way
  read window             -> b64: the window's bytes now
  close window            remote.Window.close
  disconnect              remote.disconnect
"""
import base64
import importlib.util
import itertools
import json
import os
import sys

import numpy as np

# The answers go to the original stdout alone: UCX writes its log lines to
# file descriptor 1, which from here on is stderr.
answers = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)

spec = importlib.util.spec_from_file_location("shmreg_remote", sys.argv[1])
remote = importlib.util.module_from_spec(spec)
spec.loader.exec_module(remote)

windows = {}
window_ids = itertools.count()


def fill(memory, seed):
    if seed is not None:
        memory[:] = np.random.default_rng(seed).integers(0, 256, len(memory), dtype=np.uint8)


def join(address, secret):
    """remote.connect's second half, with an invitation given."""
    lib = remote._library()
    client = remote._create_client(lib, tcp_device="lo")  # the server is on this host
    rc = lib.shmreg_remote_client_connect(client, address.encode(), base64.b64decode(secret))
    if rc != 0:
        error = remote.RemoteError(lib.shmreg_err_name(rc).decode(), lib.shmreg_last_error().decode())
        lib.shmreg_remote_client_destroy(client)
        raise error
    remote._client = client


def run(cmd):
    op = cmd["op"]
    if op == "connect":
        remote.connect(cmd["url"], cmd.get("token"), tcp_device="lo")
    elif op == "join":
        join(cmd["address"], cmd["secret"])
    elif op in ("export", "allocate"):
        if op == "export":
            array = np.zeros(cmd["nbytes"], dtype=np.uint8)
            fill(array, cmd.get("seed"))
            w = remote.export(array)
            w.array = array
        else:
            w = remote.allocate(cmd["nbytes"])
            w.array = np.frombuffer(w.memory, np.uint8)
            fill(w.array, cmd.get("seed"))
        key = next(window_ids)
        windows[key] = w
        return {"window": key, "descriptor": base64.b64encode(w.descriptor).decode()}
    elif op == "read":
        return {"b64": base64.b64encode(windows[cmd["window"]].array.tobytes()).decode()}
    elif op == "close":
        w = windows.pop(cmd["window"])
        del w.array
        w.close()
    elif op == "disconnect":
        remote.disconnect()
    else:
        raise ValueError(f"unknown op {op!r}")
    return {}


for line in sys.stdin:
    try:
        answer = {"ok": True, **run(json.loads(line))}
    except remote.RemoteError as e:
        answer = {"ok": False, "code": e.code, "message": e.message}
    print(json.dumps(answer), file=answers, flush=True)
