"""--drain-s is honoured. With slow requests queued
behind one worker, SIGTERM lets them run for the drain time, then answers
the ones still waiting 503 (gRPC: UNAVAILABLE) and cuts the running one
short, instead of running them all: the server exits within about the drain
time, every region reference released (the fixtures check the server's
leftover report and, in the ASan build, that nothing leaked)."""
import http.client
import json
import signal
import threading
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

from grpc_support import start_grpc_server  # noqa: F401 (a fixture)

pytestmark = pytest.mark.servers("c")

QUEUED = 8
NBYTES = 64
REFUSED = {"http": "503", "grpc": "StatusCode.UNAVAILABLE"}


def slow_request(mod, url, region, outcomes):
    """simple_delayed with its inputs and outputs in region; records 200 or
    the error's status."""
    client = mod.InferenceServerClient(url, network_timeout=60) if mod is httpclient \
        else mod.InferenceServerClient(url)
    try:
        inputs = [mod.InferInput("INPUT0", [1, 16], "INT32"),
                  mod.InferInput("INPUT1", [1, 16], "INT32")]
        inputs[0].set_shared_memory(region, NBYTES, offset=0)
        inputs[1].set_shared_memory(region, NBYTES, offset=NBYTES)
        outputs = [mod.InferRequestedOutput("OUTPUT0")]
        outputs[0].set_shared_memory(region, NBYTES, offset=2 * NBYTES)
        client.infer("simple_delayed", inputs, outputs=outputs)
        outcomes.append("200")
    except InferenceServerException as e:
        outcomes.append(str(e.status()))
    except Exception as e:  # a connection the server dropped: reported by the test
        outcomes.append(repr(e))
    finally:
        client.close()


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_sigterm_stops_queued_requests_after_the_drain_time(start_grpc_server, shm_key,
                                                            protocol):
    server = start_grpc_server("--delay-ms", "1000", "--threads", "1", "--drain-s", "1")
    mod, url = (httpclient, server.url) if protocol == "http" else (grpcclient, server.grpc_url)
    handle = shm.create_shared_memory_region("slow", shm_key("slow"), 3 * NBYTES)
    try:
        shm.set_shared_memory_region(handle, [np.arange(16, dtype=np.int32)] * 2)
        assert server.json("POST", "/v2/systemsharedmemory/region/slow/register",
                           {"key": handle._shm_key, "byte_size": 3 * NBYTES})[0] == 200
        outcomes = []
        clients = [threading.Thread(target=slow_request, args=(mod, url, "slow", outcomes))
                   for _ in range(QUEUED)]
        for t in clients:
            t.start()
        # The one worker runs the first request (3 references); the rest wait.
        server.wait_until(lambda: server.json("GET", "/v2/systemsharedmemory/status")[1][0]
                          ["in_use"] == 3, what="a request running")
        time.sleep(0.3)  # every request queued
        started = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        server.proc.wait(timeout=30)
        took = time.monotonic() - started
        for t in clients:
            t.join(30)
        # Drain 1 s, plus up to 1 s for the refusals to go out.
        assert took < 3.0, f"exited {took:.1f} s after SIGTERM ({QUEUED} x 1 s queued)"
        assert len(outcomes) == QUEUED
        assert set(outcomes) <= {"200", REFUSED[protocol]}, outcomes
        assert outcomes.count(REFUSED[protocol]) >= QUEUED - 2, outcomes
    finally:
        shm.destroy_shared_memory_region(handle)



def test_draining_server_is_live_and_not_ready(start_grpc_server):
    """After SIGTERM the server takes no new connection; on one kept alive,
    while a request runs out its drain, v2/health/ready answers Triton's
    not-ready status (400) with {"ready": false}, so that a balancer stops
    sending requests; live stays 200 {"live": true}; every other request
    is refused with 503."""
    server = start_grpc_server("--delay-ms", "3000", "--threads", "1", "--drain-s", "10")
    kept = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)

    def get(path):
        kept.request("GET", path)
        resp = kept.getresponse()
        data = resp.read()
        return resp.status, json.loads(data) if data else None

    body = {"inputs": [{"name": n, "datatype": "INT32", "shape": [1, 16], "data": [1] * 16}
                       for n in ("INPUT0", "INPUT1")]}
    running = threading.Thread(target=server.json,
                               args=("POST", "/v2/models/simple_delayed/infer", body))
    try:
        assert get("/v2/health/ready") == (200, {"ready": True})
        running.start()
        time.sleep(0.5)  # the request is on the worker
        server.proc.send_signal(signal.SIGTERM)
        server.wait_until(lambda: get("/v2/health/ready")[0] != 200, what="the drain to start")
        assert get("/v2/health/ready") == (400, {"ready": False})
        assert get("/v2/health/live") == (200, {"live": True})
        assert get("/v2")[0] == 503
    finally:
        running.join(30)
        kept.close()
