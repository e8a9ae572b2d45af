"""The server's gRPC side, for the tests: start a server with --grpc-port,
and the messages of the server's own proto (server/proto/
inference.proto, compiled here with protoc) for what tritonclient's proto does
not carry (the status's in_use and pending_unregister).

--grpc-port 0 means "no gRPC", so a test picks a free port itself; a start
that loses the port to another process in between is retried.
"""
import os
import re
import select
import socket
import subprocess
import tempfile

import grpc
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from server_process import START_TIMEOUT_S, Server, leftover_report

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PROTO_DIR = os.path.join(REPO, "server", "proto")
PROTO = "inference.proto"
SERVICE = "inference.GRPCInferenceService"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def with_grpc(server):
    """Read the "grpc listening on" line of a server started with
    --grpc-port; sets server.grpc_port and server.grpc_url."""
    ready, _, _ = select.select([server.proc.stdout], [], [], START_TIMEOUT_S)
    line = server.proc.stdout.readline().decode() if ready else ""
    match = re.match(r"grpc listening on 127\.0\.0\.1:(\d+)", line)
    if not match:
        raise RuntimeError(f"no gRPC listening line: {line!r}")
    server.grpc_port = int(match.group(1))
    server.grpc_url = f"127.0.0.1:{server.grpc_port}"
    return server


def on_a_free_grpc_port(start, *args, attempts=5):
    """start(*args, "--grpc-port", P) for a free port P: what start returns.
    A port taken between free_port and the server's bind (a client's
    connection may get it as its own) is tried again on another: the
    server then exits before it prints any listening line."""
    last = None
    for _ in range(attempts):
        try:
            return start(*args, "--grpc-port", str(free_port()))
        except RuntimeError as e:
            if "Address already in use" not in str(e):
                raise
            last = e
    raise last


def start_with_grpc(*args, attempts=5):
    """A Server(*args) serving gRPC too, on a free port; grpc_url is set."""
    return with_grpc(on_a_free_grpc_port(Server, *args, attempts=attempts))


def assert_clean_stop(server):
    rc, err = server.stop()
    assert rc == 0, f"server exited {rc}:\n{err}"
    assert leftover_report(err) == (0, 0), err


@pytest.fixture
def start_grpc_server():
    """Factory: start_grpc_server(*args) -> Server with grpc_url, stopped
    cleanly afterwards (exit 0, nothing left mapped or open)."""
    started = []

    def start(*args):
        server = start_with_grpc(*args)
        started.append(server)
        return server

    yield start
    for server in started:
        assert_clean_stop(server)


_classes = None


def proto_classes():
    """{message full name: class} of the server's protos (inference.proto
    and what it imports), compiled by protoc."""
    global _classes
    if _classes is None:
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "inference.desc")
            subprocess.run(["protoc", f"--proto_path={PROTO_DIR}", "--include_imports",
                            f"--descriptor_set_out={out}", PROTO], check=True)
            with open(out, "rb") as f:
                fds = descriptor_pb2.FileDescriptorSet.FromString(f.read())
        pool = descriptor_pool.DescriptorPool()
        for fd in fds.file:
            pool.Add(fd)
        files = [pool.FindFileByName(fd.name) for fd in fds.file]
        _classes = {}
        for f in files:
            for m in f.message_types_by_name.values():
                _classes[m.full_name] = message_factory.GetMessageClass(m)
        _classes["__descriptor_set__"] = fds
    return _classes


def call(url, method, request, response_type, timeout=30):
    """One unary call with the server's own message classes:
    (response, None) or (None, grpc.RpcError)."""
    with grpc.insecure_channel(url) as channel:
        stub = channel.unary_unary(f"/{SERVICE}/{method}",
                                   request_serializer=lambda m: m.SerializeToString(),
                                   response_deserializer=response_type.FromString)
        try:
            return stub(request, timeout=timeout), None
        except grpc.RpcError as e:
            return None, e


def region_status(url, kind="System"):
    """{name: RegionStatus} from {System,Cuda}SharedMemoryStatus, with this
    server's in_use and pending_unregister."""
    c = proto_classes()
    req = c[f"inference.{kind}SharedMemoryStatusRequest"]()
    resp, err = call(url, f"{kind}SharedMemoryStatus", req,
                     c[f"inference.{kind}SharedMemoryStatusResponse"])
    if err:
        raise AssertionError(f"{kind}SharedMemoryStatus failed: {err.code()} {err.details()}")
    return dict(resp.regions)
