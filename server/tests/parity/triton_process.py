"""Start a real Triton Inference Server (the tritonserver binary that PyPI's
nvidia-pytriton wheel carries) with a model repository written here, and
stop it.

The wheel puts the binary, the Python backend and per-Python-version backend
stubs in its package folder; Triton wants them as one backend directory, so
start() assembles one (links, not copies) in a scratch folder together with
the model repository. The models are the server's `simple` (INT32
[-1,16] INPUT0, INPUT1 -> OUTPUT0 = sum, OUTPUT1 = difference) written as
Python-backend models.
"""
import http.client
import os
import shutil
import subprocess
import sys
import tempfile
import time

import grpc_ports

START_TIMEOUT_S = 120
STOP_TIMEOUT_S = 30

SIMPLE_CONFIG = """\
name: "{name}"
backend: "python"
max_batch_size: 8
input [
  {{ name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] }},
  {{ name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] }}
]
output [
  {{ name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] }},
  {{ name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] }}
]
instance_group [ {{ kind: KIND_CPU count: 1 }} ]
"""

# Element-wise sum and difference, int32 wrapping as the example's kernel does.
SIMPLE_MODEL = """\
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            with np.errstate(over="ignore"):
                out = [pb_utils.Tensor("OUTPUT0", (a + b).astype(np.int32)),
                       pb_utils.Tensor("OUTPUT1", (a - b).astype(np.int32))]
            responses.append(pb_utils.InferenceResponse(output_tensors=out))
        return responses
"""


class CannotStart(RuntimeError):
    """The binary cannot run on this machine at all (a loader error), or
    cannot run Python-backend models with this interpreter."""


def package_dir():
    """The pytriton package folder of this interpreter's environment."""
    import pytriton
    return os.path.dirname(os.path.abspath(pytriton.__file__))


def binary():
    return os.path.join(package_dir(), "tritonserver", "bin", "tritonserver")


def library_path():
    """The folder of the libraries the wheel bundles (auditwheel's .libs)."""
    site = os.path.dirname(package_dir())
    return os.path.join(site, "nvidia_pytriton.libs")


def write_backends(root):
    """A backend directory: backends/python with the Python backend and the
    stub built for this interpreter's version."""
    tri = os.path.join(package_dir(), "tritonserver")
    out = os.path.join(root, "backends", "python")
    os.makedirs(out)
    src = os.path.join(tri, "backends", "python")
    for name in os.listdir(src):
        if name != "__pycache__":
            os.symlink(os.path.join(src, name), os.path.join(out, name))
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    stub = os.path.join(tri, "python_backend_stubs", version, "triton_python_backend_stub")
    if not os.path.exists(stub):
        raise CannotStart(f"the wheel has no Python backend stub for Python {version}")
    os.symlink(stub, os.path.join(out, "triton_python_backend_stub"))
    return os.path.join(root, "backends")


def write_models(root, names=("simple",)):
    repo = os.path.join(root, "models")
    for name in names:
        os.makedirs(os.path.join(repo, name, "1"))
        with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
            f.write(SIMPLE_CONFIG.format(name=name))
        with open(os.path.join(repo, name, "1", "model.py"), "w") as f:
            f.write(SIMPLE_MODEL)
    return repo


class Triton:
    """One tritonserver process on free loopback ports: url (HTTP host:port),
    grpc_url. extra: more tritonserver options."""

    def __init__(self, *extra):
        self.root = tempfile.mkdtemp(prefix="triton_parity_")
        backends = write_backends(self.root)
        repo = write_models(self.root)
        self.port, self.grpc_port, metrics = grpc_ports.free_ports(3)
        env = dict(os.environ)
        env["LD_LIBRARY_PATH"] = ":".join(p for p in (library_path(), env.get("LD_LIBRARY_PATH")) if p)
        # The stub runs models with this interpreter's environment (numpy).
        env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
        self.args = [binary(), f"--model-repository={repo}", f"--backend-directory={backends}",
                     "--http-address=127.0.0.1", f"--http-port={self.port}",
                     "--grpc-address=127.0.0.1", f"--grpc-port={self.grpc_port}",
                     f"--metrics-port={metrics}", "--allow-metrics=false", *extra]
        self.log_path = os.path.join(self.root, "tritonserver.log")
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.args, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        self.url = f"127.0.0.1:{self.port}"
        self.grpc_url = f"127.0.0.1:{self.grpc_port}"
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def log_text(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def _wait_ready(self):
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                text = self.log_text()
                if "error while loading shared libraries" in text or "GLIBC" in text:
                    raise CannotStart(text.strip())
                raise RuntimeError(f"tritonserver exited {self.proc.returncode}:\n{text}")
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                conn.request("GET", "/v2/health/ready")
                if conn.getresponse().status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"tritonserver not ready after {START_TIMEOUT_S} s:\n{self.log_text()}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.root, ignore_errors=True)
        return self.proc.returncode


if __name__ == "__main__":
    # `python triton_process.py --check`: start Triton once and stop it. Exit
    # 0 when it served, 77 (a skip, with the reason) when this machine cannot
    # run it at all, 1 on any other failure.
    try:
        server = Triton()
    except CannotStart as e:
        print(f"tritonserver cannot run here: {e}")
        sys.exit(77)
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    conn.request("GET", "/v2")
    import json
    version = json.loads(conn.getresponse().read()).get("version")
    server.stop()
    print(f"tritonserver {version} starts and serves")
