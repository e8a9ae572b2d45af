"""Bounds that a hostile client found open on one protocol or another
(the same bounds on every protocol), each checked where it was open: a request that got
through (or got a 500) on the server before the fix is refused, in words,
and the server keeps serving.

- --max-buffered-mb bounds gRPC ModelInfer messages waiting for a worker,
  together with HTTP's bodies: past it, RESOURCE_EXHAUSTED;
- --max-client-connections bounds the connections of one address to the
  gRPC port too, and --request-timeout-s closes an idle gRPC connection;
- a bearer token (or a restricted header's value) followed by a NUL and
  junk is not the token: a NUL in any header value gets 400 naming the
  header (so does a header folded over lines, on the C server), and
  ordinary headers (empty, blank-padded, many, bare-LF line ends, a block
  read in many parts) still pass;
  over gRPC (raw HTTP/2 frames, since grpcio will not send a NUL) the token
  with a NUL and junk gets no answer message, the exact token does;
- a UINT8 input of shape [2^63 - 1, 2] overflows: 400, over HTTP and gRPC;
- under --tenants, /metrics wants a token and shows the caller's tenant its
  own figures only (no registry totals, no cache counters that would tell
  whether another tenant has a key mapped), and a refusal by a registry-wide
  limit quotes no other tenant's usage.
"""
import http.client
import json
import socket
import threading
import time
from multiprocessing import shared_memory

import grpc
import numpy as np
import pytest

from grpc_support import call, proto_classes, start_grpc_server  # noqa: F401 (a fixture)
from prometheus_text import parse

TOKEN = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdefghij"
STATUS = "/v2/systemsharedmemory/status"
HUGE_SHAPE = [2**63 - 1, 2]  # 2^64 - 2 UINT8 elements: past every int64 byte size


def tenants_file(tmp_path):
    path = tmp_path / "tenants"
    path.write_text(f"{TOKEN} alice\n{BOB} bob\n")
    path.chmod(0o600)
    return str(path)


def infer_request(model, inputs):
    """A ModelInferRequest of the server's own classes; inputs: (name,
    datatype, shape, raw bytes)."""
    req = proto_classes()["inference.ModelInferRequest"]()
    req.model_name = model
    for name, datatype, shape, raw in inputs:
        t = req.inputs.add()
        t.name, t.datatype = name, datatype
        t.shape.extend(shape)
        req.raw_input_contents.append(raw)
    return req


def model_infer(url, req, timeout=60):
    return call(url, "ModelInfer", req, proto_classes()["inference.ModelInferResponse"], timeout)


def simple_request(model="simple"):
    raw = np.arange(16, dtype=np.int32).tobytes()
    return infer_request(model, [("INPUT0", "INT32", [1, 16], raw),
                                 ("INPUT1", "INT32", [1, 16], raw)])


# ------------------------------------------------------ --max-buffered-mb


@pytest.mark.servers("c")
def test_grpc_messages_waiting_are_bounded_by_max_buffered(start_grpc_server):
    # One worker, busy for 3 s with simple_delayed; meanwhile six ModelInfer
    # messages of 3 MiB each (under --max-body-mb 4) arrive: 18 MiB waiting
    # against --max-buffered-mb 8. Two fit; the others are refused at once.
    server = start_grpc_server("--threads", "1", "--delay-ms", "3000", "--max-body-mb", "4",
                                 "--max-buffered-mb", "8")
    slow = threading.Thread(target=model_infer, args=(server.grpc_url,
                                                      simple_request("simple_delayed")))
    slow.start()
    time.sleep(0.5)  # the worker has taken it
    big = infer_request("identity", [("INPUT0", "UINT8", [1, 3 << 20], bytes(3 << 20))])
    answers = [None] * 6

    def send(i):
        _, err = model_infer(server.grpc_url, big)
        answers[i] = err
    senders = [threading.Thread(target=send, args=(i,)) for i in range(6)]
    for t in senders:
        t.start()
    for t in senders + [slow]:
        t.join()
    refused = [e for e in answers if e is not None]
    assert len(refused) >= 3, f"{6 - len(refused)} of 6 calls of 3 MiB were held against 8 MiB"
    for e in refused:
        assert e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, (e.code(), e.details())
        assert "--max-buffered-mb" in e.details(), e.details()
    assert answers.count(None) >= 1, "nothing fitted the budget"
    # Every refused or answered call gave its bytes back: a new one fits.
    _, err = model_infer(server.grpc_url, big)
    assert err is None, err.details()


# ------------------------------------------- connections to the gRPC port

HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


def connect(port, source="127.0.0.1"):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    return s


def closed_by_server(s, within):
    """Whether the server closes s (EOF or reset) within `within` seconds;
    what it sends first (gRPC's SETTINGS, a GOAWAY) is read past."""
    deadline = time.monotonic() + within
    try:
        while (left := deadline - time.monotonic()) > 0:
            s.settimeout(left)
            if s.recv(65536) == b"":
                return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        pass
    return False


@pytest.mark.servers("c")
def test_grpc_connections_of_one_address_are_bounded(start_grpc_server):
    server = start_grpc_server("--max-client-connections", "4")
    held = [connect(server.grpc_port, "127.0.0.2") for _ in range(10)]
    try:
        closed = [closed_by_server(s, 1.0) for s in held]
        assert closed.count(False) == 4, closed
        # Another address is served meanwhile.
        _, err = model_infer(server.grpc_url, simple_request())
        assert err is None, err.details()
        # Once the four go, their address may connect again.
        for s, c in zip(held, closed):
            if not c:
                s.close()
        def kept_again():
            held.append(connect(server.grpc_port, "127.0.0.2"))
            return not closed_by_server(held[-1], 0.3)
        server.wait_until(kept_again, timeout=10, what="a new connection from 127.0.0.2 kept")
    finally:
        for s in held:
            s.close()


@pytest.mark.servers("c")
@pytest.mark.parametrize("sends", [b"", HTTP2_PREFACE], ids=["nothing", "preface"])
def test_idle_grpc_connection_is_closed_after_request_timeout(start_grpc_server, sends):
    server = start_grpc_server("--request-timeout-s", "2")
    s = connect(server.grpc_port)
    try:
        s.sendall(sends)
        assert not closed_by_server(s, 1.0)
        assert closed_by_server(s, 5.0), "an idle connection was kept past --request-timeout-s"
    finally:
        s.close()
    _, err = model_infer(server.grpc_url, simple_request())
    assert err is None, err.details()


# ------------------------------------------------------------- NUL in a header

# libmicrohttpd 0.9.75 (Debian 12's) hands a header value over cut at its
# first NUL, so a token followed by a NUL and junk would read as the bare
# token. The C server checks the header block libmicrohttpd parsed in place
# (server/src/http/header_block.c) and answers 400 naming the header, before
# the body; uvicorn's parser refuses a NUL itself, with a 400 of its own
# words. A header folded over lines (obs-fold) is refused the same way by
# the C server; uvicorn merges it, as RFC 9112 also allows.

HEALTH = b"GET /v2/health/ready HTTP/1.1"


def request_bytes(*fields, eol=b"\r\n", first=HEALTH):
    """A request without a body, its lines ended by eol."""
    return eol.join([first, b"Host: 127.0.0.1", *fields]) + eol + eol


def raw_request(port, data, piece=None):
    """(status, body) of a request sent as exactly these bytes, on a
    connection of its own: the order of its headers and its line ends are
    the test's, not an HTTP client's. piece: send it that many bytes at a
    time, a moment apart, so that the server reads it in many parts."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for at in range(0, len(data), piece or len(data)):
            s.sendall(data[at:at + (piece or len(data))])
            if piece:
                time.sleep(0.001)
        resp = http.client.HTTPResponse(s)
        resp.begin()
        return resp.status, resp.read()


def assert_refused_naming(status, body, header):
    assert status == 400, (header, status, body)
    message = json.loads(body)["error"]
    assert f"header '{header}'" in message and "NUL" in message, message


def assert_still_serves(server, headers=None, path="/v2/health/ready"):
    status, _, body = server.request("GET", path, headers=headers)
    assert status == 200, (status, body)


@pytest.mark.servers("c")
def test_bearer_token_followed_by_nul_is_refused(start_server, tmp_path):
    server = start_server("--tenants", tenants_file(tmp_path))
    alice = {"Authorization": f"Bearer {TOKEN}"}
    assert server.request("GET", STATUS, headers=alice)[0] == 200
    for junk in ("\0junk", "\0", "\0 " + TOKEN):
        status, _, body = server.request("GET", STATUS,
                                         headers={"Authorization": f"Bearer {TOKEN}{junk}"})
        assert_refused_naming(status, body, "Authorization")
        assert_still_serves(server, alice, STATUS)


@pytest.mark.servers("c")
def test_restricted_header_followed_by_nul_is_refused(start_server):
    server = start_server("--http-restricted-api", "shared-memory:admin-key=open-sesame")
    assert server.request("GET", STATUS, headers={"admin-key": "open-sesame"})[0] == 200
    status, _, body = server.request("GET", STATUS, headers={"admin-key": "open-sesame\0junk"})
    assert_refused_naming(status, body, "admin-key")
    assert_still_serves(server, {"admin-key": "open-sesame"}, STATUS)


NUL_PLACES = {
    "middle": [b"X-Before: 1", b"X-Nul: a\0junk", b"X-After: 2"],
    "last": [b"X-Before: 1", b"X-Nul: a\0junk"],
    "first-byte": [b"X-Nul: \0junk", b"X-After: 2"],
    "before-the-colon-blanks": [b"X-Nul:\0 junk"],
}


@pytest.mark.parametrize("eol", [b"\r\n", b"\n"], ids=["crlf", "lf"])
def test_nul_in_a_header_is_400_wherever_it_stands(start_server, server_kind, eol):
    server = start_server()
    for place, fields in NUL_PLACES.items():
        status, body = raw_request(server.port, request_bytes(*fields, eol=eol))
        if server_kind == "c":
            assert_refused_naming(status, body, "X-Nul")
        else:
            assert status == 400, (place, status, body)
        assert_still_serves(server)


@pytest.mark.servers("c")
@pytest.mark.parametrize("eol", [b"\r\n", b"\n"], ids=["crlf", "lf"])
def test_folded_header_is_400(start_server, eol):
    server = start_server()
    for fields in ([b"X-Folded: first", b"  continued", b"X-After: 2"],
                   [b"X-Before: 1", b"X-Folded: first", b"\tcontinued"]):
        status, body = raw_request(server.port, request_bytes(*fields, eol=eol))
        assert status == 400, (fields, status, body)
        # libmicrohttpd 0.9.75 merges the continuation into the name it hands over.
        message = json.loads(body)["error"]
        assert "header 'X-Folded" in message and "folded over lines" in message, message
        assert_still_serves(server)


ORDINARY = {
    "empty values": [b"X-Empty:", b"X-Blank: ", b"X-Blanks:\t \t"],
    "trailing blanks": [b"X-Trailing: value   ", b"X-Tab: value\t", b"X-Last: v "],
    "leading blanks": [b"X-Lead:      value", b"X-Lead-Tab:\t\tvalue"],
    "many headers": [b"X-H%d: v%d" % (i, i) for i in range(200)],
    "colons in values": [b"X-Url: http://a:1/b", b"X-Time: 12:00:00"],
}


@pytest.mark.parametrize("eol", [b"\r\n", b"\n"], ids=["crlf", "lf"])
def test_ordinary_headers_are_served(start_server, eol):
    server = start_server()
    for what, fields in ORDINARY.items():
        status, body = raw_request(server.port, request_bytes(*fields, eol=eol))
        assert status == 200, (what, status, body)
    # Line ends mixed: the last header's CRLF, then a bare LF.
    status, body = raw_request(server.port, HEALTH + b"\r\nHost: 127.0.0.1\r\nX-A: 1\r\n\n")
    assert status == 200, (status, body)


@pytest.mark.servers("c")
def test_headers_read_in_many_parts_are_checked_alike(start_server):
    # libmicrohttpd parses each line as it arrives and grows its read buffer
    # as the block does; the check sees the same layout whatever the parts.
    server = start_server()
    many = [b"X-H%d: %s" % (i, b"v" * (i % 40)) for i in range(120)]
    status, body = raw_request(server.port, request_bytes(*many), piece=7)
    assert status == 200, (status, body)
    nul = many[:60] + [b"X-Nul: a\0junk"] + many[60:]
    status, body = raw_request(server.port, request_bytes(*nul), piece=7)
    assert_refused_naming(status, body, "X-Nul")
    assert_still_serves(server)


# The same over gRPC: grpcio will not send a NUL in metadata, so the call
# is written as raw HTTP/2 frames (HPACK literals, no Huffman). The service
# reads metadata with its length, so the value is never the token; whether
# gRPC's parser refuses it first or the service answers UNAUTHENTICATED, no
# answer message (DATA) comes back, while the exact token gets one.
def hpack_literal(name, value):
    """A header field as an HPACK literal without indexing, lengths < 127."""
    assert len(name) < 127 and len(value) < 127
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value


def h2_frame(kind, flags, stream, payload):
    return (len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big")
            + payload)


def grpc_status_call_answers(port, authorization):
    """Whether a raw SystemSharedMemoryStatus call with this authorization
    value gets an answer message (a DATA frame on its stream) before the
    stream ends."""
    fields = [(b":method", b"POST"), (b":scheme", b"http"),
              (b":path", b"/inference.GRPCInferenceService/SystemSharedMemoryStatus"),
              (b":authority", b"127.0.0.1"), (b"content-type", b"application/grpc"),
              (b"te", b"trailers"), (b"authorization", authorization)]
    headers = b"".join(hpack_literal(n, v) for n, v in fields)
    empty_message = b"\x00\x00\x00\x00\x00"  # uncompressed, 0 bytes
    s = connect(port)
    try:
        s.sendall(HTTP2_PREFACE + h2_frame(1, 0x4, 1, headers) + h2_frame(0, 0x1, 1, empty_message))
        s.settimeout(10)
        data = b""
        while True:
            while len(data) < 9 or len(data) < 9 + int.from_bytes(data[:3], "big"):
                chunk = s.recv(65536)
                if not chunk:
                    return False  # the connection closed: refused
                data += chunk
            length, kind, flags = int.from_bytes(data[:3], "big"), data[3], data[4]
            stream = int.from_bytes(data[5:9], "big") & 0x7FFFFFFF
            data = data[9 + length:]
            if kind == 4 and not flags & 0x1:  # the server's SETTINGS: acknowledged
                s.sendall(h2_frame(4, 0x1, 0, b""))
            elif kind == 0 and stream == 1 and length:
                return True
            elif (kind == 1 and stream == 1 and flags & 0x1) or (kind == 3 and stream == 1) \
                    or kind == 7:
                return False  # trailers only, RST_STREAM or GOAWAY
    finally:
        s.close()


@pytest.mark.servers("c")
def test_grpc_bearer_token_followed_by_nul_is_not_the_token(start_grpc_server, tmp_path):
    server = start_grpc_server("--tenants", tenants_file(tmp_path))
    token = f"Bearer {TOKEN}".encode()
    assert grpc_status_call_answers(server.grpc_port, token)
    for junk in (b"\0junk", b"\0", b"\0 " + TOKEN.encode()):
        assert not grpc_status_call_answers(server.grpc_port, token + junk), junk
    assert grpc_status_call_answers(server.grpc_port, token)  # still serving


# ---------------------------------------------------------- overflowing shape


def test_overflowing_shape_is_400_over_http(start_server):
    server = start_server()
    body = {"inputs": [{"name": "INPUT0", "datatype": "UINT8", "shape": HUGE_SHAPE,
                        "data": [1, 2]}]}
    status, reply = server.json("POST", "/v2/models/identity/infer", body)
    assert status == 400, (status, reply)
    # A shape that fits size_t but is far larger than its data: still 400,
    # found before anything is allocated.
    body["inputs"][0]["shape"] = [1 << 40, 1]
    status, reply = server.json("POST", "/v2/models/identity/infer", body)
    assert status == 400, (status, reply)
    assert server.json("GET", "/v2/health/ready")[0] == 200


@pytest.mark.servers("c")
def test_overflowing_shape_is_invalid_argument_over_grpc(start_grpc_server):
    server = start_grpc_server()
    _, err = model_infer(server.grpc_url,
                         infer_request("identity", [("INPUT0", "UINT8", HUGE_SHAPE, b"\1\2")]))
    assert err is not None and err.code() == grpc.StatusCode.INVALID_ARGUMENT, err
    _, err = model_infer(server.grpc_url, simple_request())
    assert err is None, err.details()


# ------------------------------------------------------- tenants and figures


def bearer(token):
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def shm(shm_key):
    """make(suffix, size) -> key of a new shm object; unlinked afterwards."""
    made = []

    def make(suffix, size):
        key = shm_key(suffix)
        made.append(shared_memory.SharedMemory(name=key.lstrip("/"), create=True, size=size))
        return key
    yield make
    for mem in made:
        mem.close()
        mem.unlink()


def register(server, token, name, key, size):
    return server.json("POST", f"/v2/systemsharedmemory/region/{name}/register",
                       {"key": key, "offset": 0, "byte_size": size}, bearer(token))


def metrics_of(server, token):
    status, _, body = server.request("GET", "/metrics", headers=bearer(token))
    assert status == 200, body
    return {name: v for (name, _), v in parse(body.decode()).samples.items()}


@pytest.mark.servers("c")
def test_metrics_under_tenants_want_a_token_and_show_only_the_tenants_own(start_server,
                                                                          tmp_path, shm):
    server = start_server("--tenants", tenants_file(tmp_path), "--cache-bytes", str(1 << 20))
    status, _, body = server.request("GET", "/metrics")
    assert status == 401, body
    assert server.request("GET", "/metrics", headers=bearer("not-a-known-token-at-all"))[0] == 401
    key = shm("metrics_bob", 8192)
    assert register(server, BOB, "b", key, 8192)[0] == 200
    bobs, alices = metrics_of(server, BOB), metrics_of(server, TOKEN)
    assert (bobs["shmreg_tenant_regions"], bobs["shmreg_tenant_region_bytes"]) == (1, 8192)
    assert (alices["shmreg_tenant_regions"], alices["shmreg_tenant_region_bytes"]) == (0, 0)
    # Bob unregisters: his mapping stays in the cache. Alice registers the
    # same key: a cache hit, which no figure she can read may show.
    assert server.json("POST", "/v2/systemsharedmemory/region/b/unregister", None,
                       bearer(BOB))[0] == 200
    assert register(server, TOKEN, "a", key, 8192)[0] == 200
    alices = metrics_of(server, TOKEN)
    registry_wide = [n for n in alices if n.startswith("shmreg_") and
                     not n.startswith("shmreg_tenant_")]
    assert registry_wide == [], registry_wide
    assert alices["shmreg_tenant_regions"] == 1
    assert "nv_inference_request_success" in alices  # the models' figures stay


@pytest.mark.servers("c")
def test_metrics_without_tenants_are_the_registrys(start_server):
    server = start_server()
    status, _, body = server.request("GET", "/metrics")
    assert status == 200
    names = {name for name, _ in parse(body.decode()).samples}
    assert {"shmreg_regions", "shmreg_cache_hits_total"} <= names
    assert not any(n.startswith("shmreg_tenant_") for n in names)


@pytest.mark.servers("c")
def test_limit_refusal_quotes_no_other_tenants_usage(start_grpc_server, tmp_path, shm):
    # Bob holds 300 KiB; Alice asks for 900 KiB of a 1 MiB limit: refused,
    # by her share or by the registry's limit, in words that do not quote
    # what Bob holds (main once answered "... (795648 in use)").
    server = start_grpc_server("--tenants", tenants_file(tmp_path), "--max-mapped-bytes",
                                 str(1 << 20))
    bobs, alices = 300 * 1024, 900 * 1024
    assert register(server, BOB, "b", shm("quota_bob", bobs), bobs)[0] == 200
    status, reply = register(server, TOKEN, "a", shm("quota_alice", alices), alices)
    assert status == 429, reply
    assert str(bobs) not in reply["error"], reply
    c = proto_classes()
    req = c["inference.SystemSharedMemoryRegisterRequest"](
        name="a", key=shm("quota_alice_grpc", alices), offset=0, byte_size=alices)
    with grpc.insecure_channel(server.grpc_url) as channel:
        stub = channel.unary_unary("/inference.GRPCInferenceService/SystemSharedMemoryRegister",
                                   request_serializer=lambda m: m.SerializeToString(),
                                   response_deserializer=c[
                                       "inference.SystemSharedMemoryRegisterResponse"].FromString)
        with pytest.raises(grpc.RpcError) as e:
            stub(req, metadata=(("authorization", f"Bearer {TOKEN}"),), timeout=30)
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e.value.details()
    assert str(bobs) not in e.value.details(), e.value.details()
