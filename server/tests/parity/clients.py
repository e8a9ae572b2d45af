"""The same request, sent over HTTP or gRPC, answered as one line of text.

An answer is what a client can tell apart: over HTTP the status code and the
error message (or the JSON body of a success, keys sorted); over gRPC the
status code's name and its details (or the response as JSON). Two servers
answer alike when their lines are equal. Fields that only one server adds on
purpose (expected_differences.toml, `extension_fields`) are left out of
success bodies; the per-run marker in shm keys reads `<m>`.
"""
import base64
import http.client
import json

import grpc
from google.protobuf import json_format
from tritonclient.grpc import service_pb2 as pb

SERVICE = "inference.GRPCInferenceService"
U64 = 1 << 64


class Client:
    """Base: what both protocols offer. target: a server with url and grpc_url;
    marker: the text that makes this run's shm keys unique; ignored: field
    names dropped from success bodies."""

    def __init__(self, target, marker, ignored=()):
        self.target = target
        self.marker = marker
        self.ignored = set(ignored)

    def normalize(self, text):
        return text.replace(self.marker, "<m>")

    def strip(self, value):
        """value without the ignored fields, at any depth."""
        if isinstance(value, dict):
            return {k: self.strip(v) for k, v in value.items() if k not in self.ignored}
        if isinstance(value, list):
            return [self.strip(v) for v in value]
        return value


class HttpClient(Client):
    protocol = "http"

    def request(self, method, path, body=None, timeout=60):
        """One request, answered as a line; body: bytes, or a JSON value
        (serialised as Python does, so integers of any size travel as written)."""
        return self.answer(*self.raw(method, path, body, timeout))

    def raw(self, method, path, body=None, timeout=60):
        """(status, body bytes) of one request."""
        if body is not None and not isinstance(body, bytes):
            body = json.dumps(body).encode()
        host, port = self.target.url.rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
        try:
            conn.request(method, path, body=body,
                         headers={"Content-Type": "application/json"} if body is not None else {})
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    def answer(self, status, data):
        try:
            value = json.loads(data) if data else None
        except ValueError:
            return self.normalize(f"{status} (not JSON) {data[:200]!r}")
        if isinstance(value, dict) and set(value) == {"error"}:
            return self.normalize(f"{status} {value['error']}")
        if value is None:
            return str(status)
        if isinstance(value, list) and all(isinstance(v, dict) and "name" in v for v in value):
            value = sorted(value, key=lambda v: v["name"])  # order: cases.status_all_in_name_order
        return self.normalize(f"{status} {json.dumps(self.strip(value), sort_keys=True)}")

    # --- system shared memory
    def register_system(self, name, key, offset, byte_size):
        return self.request("POST", f"/v2/systemsharedmemory/region/{name}/register",
                            {"key": key, "offset": offset, "byte_size": byte_size})

    @staticmethod
    def path(kind, name, verb):
        """The route of `verb` (status, unregister) for one region or all."""
        return (f"/v2/{kind}sharedmemory/region/{name}/{verb}" if name
                else f"/v2/{kind}sharedmemory/{verb}")

    def status_system(self, name=None):
        return self.request("GET", self.path("system", name, "status"))

    def unregister_system(self, name=None):
        return self.request("POST", self.path("system", name, "unregister"))

    # --- CUDA shared memory
    def register_cuda(self, name, raw_handle, device_id, byte_size):
        """raw_handle: bytes (sent as base64), or a str sent as the b64 text itself."""
        b64 = raw_handle if isinstance(raw_handle, str) else base64.b64encode(raw_handle).decode()
        return self.request("POST", f"/v2/cudasharedmemory/region/{name}/register",
                            {"raw_handle": {"b64": b64}, "device_id": device_id, "byte_size": byte_size})

    def status_cuda(self, name=None):
        return self.request("GET", self.path("cuda", name, "status"))

    def unregister_cuda(self, name=None):
        return self.request("POST", self.path("cuda", name, "unregister"))

    # --- inference
    def infer(self, model, inputs, outputs, request_id=None):
        """inputs: [(name, shape, datatype, window)], outputs: [(name, window)];
        window: {"region", "offset", "byte_size"} (any of them) or None;
        request_id: the request's "id", when given."""
        def params(w):
            keys = {"region": "shared_memory_region", "offset": "shared_memory_offset",
                    "byte_size": "shared_memory_byte_size"}
            return {keys[k]: v for k, v in w.items()}
        body = {"inputs": [{"name": n, "shape": s, "datatype": d, "parameters": params(w)}
                           for n, s, d, w in inputs],
                "outputs": [{"name": n, "parameters": params(w)} for n, w in outputs]}
        if request_id is not None:
            body["id"] = request_id
        return self.request("POST", f"/v2/models/{model}/infer", body)


class GrpcClient(Client):
    protocol = "grpc"

    def call(self, method, request, response_type, timeout=60):
        with grpc.insecure_channel(self.target.grpc_url) as channel:
            stub = channel.unary_unary(f"/{SERVICE}/{method}",
                                       request_serializer=lambda m: m.SerializeToString(),
                                       response_deserializer=response_type.FromString)
            try:
                resp = stub(request, timeout=timeout)
            except grpc.RpcError as e:
                return self.normalize(f"{e.code().name} {e.details()}")
        value = json_format.MessageToDict(resp, preserving_proto_field_name=True)
        return self.normalize(f"OK {json.dumps(self.strip(value), sort_keys=True)}" if value else "OK")

    # --- system shared memory
    def register_system(self, name, key, offset, byte_size):
        return self.call("SystemSharedMemoryRegister",
                         pb.SystemSharedMemoryRegisterRequest(name=name, key=key, offset=offset,
                                                              byte_size=byte_size),
                         pb.SystemSharedMemoryRegisterResponse)

    def status_system(self, name=None):
        return self.call("SystemSharedMemoryStatus", pb.SystemSharedMemoryStatusRequest(name=name or ""),
                         pb.SystemSharedMemoryStatusResponse)

    def unregister_system(self, name=None):
        return self.call("SystemSharedMemoryUnregister",
                         pb.SystemSharedMemoryUnregisterRequest(name=name or ""),
                         pb.SystemSharedMemoryUnregisterResponse)

    # --- CUDA shared memory
    def register_cuda(self, name, raw_handle, device_id, byte_size):
        if isinstance(raw_handle, str):  # gRPC carries bytes: no base64 to get wrong
            raw_handle = raw_handle.encode()
        return self.call("CudaSharedMemoryRegister",
                         pb.CudaSharedMemoryRegisterRequest(name=name, raw_handle=raw_handle,
                                                            device_id=device_id, byte_size=byte_size),
                         pb.CudaSharedMemoryRegisterResponse)

    def status_cuda(self, name=None):
        return self.call("CudaSharedMemoryStatus", pb.CudaSharedMemoryStatusRequest(name=name or ""),
                         pb.CudaSharedMemoryStatusResponse)

    def unregister_cuda(self, name=None):
        return self.call("CudaSharedMemoryUnregister", pb.CudaSharedMemoryUnregisterRequest(name=name or ""),
                         pb.CudaSharedMemoryUnregisterResponse)

    # --- inference
    @staticmethod
    def set_window(params, w):
        """Triton's gRPC parameters: the region a string_param, offset and
        byte size int64_params carrying the unsigned value's bits."""
        if "region" in w:
            params["shared_memory_region"].string_param = w["region"]
        for k, key in (("offset", "shared_memory_offset"), ("byte_size", "shared_memory_byte_size")):
            if k in w:
                v = w[k]
                params[key].int64_param = v - U64 if v >= 1 << 63 else v

    def infer(self, model, inputs, outputs, request_id=None):
        req = pb.ModelInferRequest(model_name=model, id=request_id or "")
        for n, s, d, w in inputs:
            t = req.inputs.add(name=n, datatype=d, shape=s)
            self.set_window(t.parameters, w)
        for n, w in outputs:
            self.set_window(req.outputs.add(name=n).parameters, w)
        return self.call("ModelInfer", req, pb.ModelInferResponse)

    def infer_contents(self, model, inputs, outputs, raw=()):
        """inputs: [(name, shape, datatype, {typed contents field: values})],
        as Triton's explicit-content clients send them; outputs: names;
        raw: raw_input_contents sent beside them."""
        req = pb.ModelInferRequest(model_name=model, raw_input_contents=list(raw))
        for n, s, d, contents in inputs:
            t = req.inputs.add(name=n, datatype=d, shape=s)
            for field, values in contents.items():
                getattr(t.contents, field).extend(values)
        for n in outputs:
            req.outputs.add(name=n)
        return self.call("ModelInfer", req, pb.ModelInferResponse)


CLIENTS = {"http": HttpClient, "grpc": GrpcClient}
