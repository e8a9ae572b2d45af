"""The GPU model 'yolo' where it cannot run (CI: no GPU, maybe no CUDA build).

It is listed with the seed benchmark's tensors, its readiness is 400 with the reason,
and an inference is refused with the same clear message before anything is
parsed or acquired; the server keeps serving. Over gRPC, ModelReady answers
false and ModelInfer fails with UNAVAILABLE and the same message. Where a GPU
is usable (the model is ready) this module is skipped:
server/tests/gpu/test_gpu_model.py covers that case.

The C server only: the Python server has no GPU model.
"""
import json
import subprocess

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from server_process import binary
from grpc_support import call, proto_classes, start_grpc_server  # noqa: F401 (a fixture)

pytestmark = pytest.mark.servers("c")

UNAVAILABLE = "model 'yolo' is not available: "
# The reasons gpu_instances_*.c give: no CUDA in the build, no device, or
# the instances were turned off.
REASONS = ("built without CUDA", "no CUDA device is usable", "--gpus none")


@pytest.fixture(scope="module", autouse=True)
def skip_where_ready(server):
    if server.request("GET", "/v2/models/yolo/ready")[0] == 200:
        pytest.skip("the GPU model is ready here: server/tests/gpu/test_gpu_model.py covers it")


def assert_unavailable(status_body):
    status, body = status_body
    assert status == 400, body
    assert body["error"].startswith(UNAVAILABLE), body
    assert any(reason in body["error"] for reason in REASONS), body


def test_listed_with_the_seeds_tensors(server):
    status, meta = server.json("GET", "/v2/models/yolo")
    assert status == 200
    assert meta["inputs"] == [{"name": "images", "datatype": "FP16", "shape": [3, -1, -1]}]
    assert meta["outputs"] == [{"name": "output0", "datatype": "FP16", "shape": [84, -1]}]
    status, config = server.json("GET", "/v2/models/yolo/config")
    assert status == 200 and config["max_batch_size"] == 0
    assert config["instance_group"][0]["kind"] == "KIND_GPU"
    assert config["instance_group"][0]["count"] == 0
    assert int(config["parameters"]["window"]["string_value"]) >= 1


def test_not_ready_with_the_reason(server):
    assert_unavailable(server.json("GET", "/v2/models/yolo/ready"))
    assert_unavailable(server.json("GET", "/v2/models/yolo/versions/1/ready"))
    # The server itself and the other models are ready.
    assert server.request("GET", "/v2/health/ready")[0] == 200
    assert server.request("GET", "/v2/models/identity/ready")[0] == 200


def test_inference_is_refused_with_the_reason(server):
    image = bytes(3 * 32 * 64 * 2)
    header = (b'{"inputs":[{"name":"images","datatype":"FP16","shape":[3,32,64],'
              b'"parameters":{"binary_data_size":%d}}]}' % len(image))
    status, _, body = server.request(
        "POST", "/v2/models/yolo/infer", header + image,
        {"Inference-Header-Content-Length": str(len(header))})
    assert_unavailable((status, json.loads(body)))
    # Refused first, whatever else is wrong with the request.
    assert_unavailable(server.json("POST", "/v2/models/yolo/infer", {"inputs": "nonsense"}))
    status, stats = server.json("GET", "/v2/models/yolo/stats")
    (entry,) = stats["model_stats"]
    assert entry["inference_count"] == 0
    assert entry["inference_stats"]["fail"]["count"] == 2
    assert server.request("GET", "/v2/health/live")[0] == 200


def test_gpu_options_are_checked(start_server):
    # Bad values are refused at start-up (exit 2, before listening) ...
    for args in (["--gpus", "0,x"], ["--gpus", ""], ["--instances-per-gpu", "0"],
                 ["--pin", "sometimes"], ["--yolo-window", "0"], ["--time-phases-every", "0"],
                 ["--time-phases-every", "x"], ["--copy-batch", "0"], ["--copy-batch", "13"],
                 ["--spin-us", "1001"], ["--spin-us", "x"], ["--max-queue", "0"],
                 ["--max-queue", "65537"]):
        proc = subprocess.run([binary(), "--port", "0", *args], capture_output=True, timeout=10)
        assert proc.returncode == 2, (args, proc.stderr)
        assert b"error: --" in proc.stderr, (args, proc.stderr)
    # ... good ones start; --gpus none turns the model off with a reason.
    server = start_server("--gpus", "none", "--pin", "never", "--instances-per-gpu", "3",
                            "--yolo-window", "4", "--time-phases-every", "1", "--copy-batch", "12",
                          "--spin-us", "1000", "--max-queue", "1")
    status, body = server.json("GET", "/v2/models/yolo/ready")
    assert status == 400 and body["error"].startswith(UNAVAILABLE), body
    assert any(reason in body["error"] for reason in REASONS), body


def test_grpc_not_ready_and_inference_refused(start_grpc_server):
    # --gpus none: unavailable on any machine, GPU or not.
    server = start_grpc_server("--gpus", "none")
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        assert not client.is_model_ready("yolo")
        assert not client.is_model_ready("yolo", "1")
        assert client.is_model_ready("identity")
        assert client.is_server_ready()
        # Metadata and config are still answered, as over HTTP.
        assert client.get_model_metadata("yolo", as_json=True)["name"] == "yolo"

        images = grpcclient.InferInput("images", [3, 32, 64], "FP16")
        images.set_data_from_numpy(np.zeros((3, 32, 64), dtype=np.float16))
        with pytest.raises(InferenceServerException) as e:
            client.infer("yolo", [images])
        assert e.value.status() == "StatusCode.UNAVAILABLE", e.value.message()
        assert e.value.message().startswith(UNAVAILABLE), e.value.message()
        assert any(reason in e.value.message() for reason in REASONS), e.value.message()

        # Refused first, whatever else is wrong with the request (no inputs).
        c = proto_classes()
        _, err = call(server.grpc_url, "ModelInfer",
                      c["inference.ModelInferRequest"](model_name="yolo"),
                      c["inference.ModelInferResponse"])
        assert err is not None and err.code().name == "UNAVAILABLE", err
        assert err.details().startswith(UNAVAILABLE), err.details()

        (entry,) = client.get_inference_statistics("yolo", as_json=True)["model_stats"]
        assert int(entry.get("inference_count", 0)) == 0
        assert int(entry["inference_stats"]["fail"]["count"]) == 2
        assert client.is_server_live()
    finally:
        client.close()
