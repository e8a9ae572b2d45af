"""Connections and bodies: one client's idle half-open
requests cannot lock others out, a stalled request is closed, request bodies
buffered across all connections are capped, `Expect: 100-continue` over the
limit is refused before the body, and the binary header length is decimal
digits only. Raw sockets: the attacks are malformed or unfinished HTTP.

The C server only (the Python one is uvicorn's to bound)."""
import json
import socket
import time

import pytest

from server_process import under_asan

pytestmark = pytest.mark.servers("c")

MIB = 1 << 20


def connect(server, source="127.0.0.1", timeout=10):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.bind((source, 0))
    s.connect(("127.0.0.1", server.port))
    return s


def post_head(length, path="/v2/models/identity/infer", extra=b""):
    return (f"POST {path} HTTP/1.1\r\nHost: t\r\nContent-Length: {length}\r\n".encode()
            + extra + b"\r\n")


def read_response(s):
    """(status, JSON body or None) of the one response on s."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            raise AssertionError(f"connection closed after {data!r}")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1])
    length = [int(l.split(b":")[1]) for l in head.split(b"\r\n")
              if l.lower().startswith(b"content-length:")]
    while length and len(body) < length[0]:
        body += s.recv(65536)
    return status, (json.loads(body) if body else None)


def closed_by_server(s, within):
    """Whether the server closes s (EOF or reset) within `within` seconds."""
    s.settimeout(within)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def test_idle_half_open_requests_of_one_client_do_not_lock_out_others(start_server):
    """1,100 connections from one address, each a request whose body never
    comes: before the fix libmicrohttpd's connection limit was full of them
    and a new client waited forever. Now past --max-client-connections
    (default 64) that address is refused, and another gets its answer."""
    server = start_server()
    hostile = []
    try:
        for _ in range(1100):
            try:
                s = connect(server, "127.0.0.2", timeout=2)
                s.sendall(post_head(1000) + b"{")
                hostile.append(s)
            except OSError:
                pass  # refused: the point
        status, _ = server.json("GET", "/v2/health/ready")
        assert status == 200
        time.sleep(0.5)
        still_open = sum(not closed_by_server(s, 0.001) for s in hostile)
        assert still_open <= 64, still_open
    finally:
        for s in hostile:
            s.close()


def test_stalled_request_is_closed_after_the_timeout(start_server):
    server = start_server("--request-timeout-s", "1", "--delay-ms", "2500")
    headers = connect(server)
    headers.sendall(b"POST /v2/models/identity/infer HTTP/1.1\r\nHost: t\r\n")  # no end
    body = connect(server)
    body.sendall(post_head(100) + b"{")
    started = time.monotonic()
    assert closed_by_server(headers, 5) and closed_by_server(body, 5)
    assert time.monotonic() - started < 4
    # A request a slow model is running is not a stalled one.
    request = {"inputs": [{"name": n, "datatype": "INT32", "shape": [1, 16], "data": [1] * 16}
                          for n in ("INPUT0", "INPUT1")]}
    assert server.json("POST", "/v2/models/simple_delayed/infer", request)[0] == 200
    headers.close()
    body.close()


def test_bodies_buffered_across_connections_are_capped(start_server):
    """Eight uploads of 64 MiB that never finish: before the fix the server
    held all of them (518 MiB resident). Now it holds --max-buffered-mb
    (128 here) and answers a request that comes meanwhile 503."""
    server = start_server("--max-body-mb", "64", "--max-buffered-mb", "128")
    base = server.memory_mib()
    uploads = []
    try:
        for _ in range(8):
            s = connect(server, timeout=30)
            s.sendall(post_head(64 * MIB) + b" " * (64 * MIB - 1))
            uploads.append(s)
        time.sleep(1)
        grown = server.memory_mib() - base
        if not under_asan():
            assert grown < 128 + 48, f"{grown:.0f} MiB more resident"
        status, body = server.json("POST", "/v2/models/identity/infer", b" " * MIB)
        assert status == 503 and "--max-buffered-mb" in body["error"], body
    finally:
        for s in uploads:
            s.close()
    # The budget comes back with the connections.
    server.wait_until(lambda: server.request("POST", "/v2/models/identity/infer",
                                             b" " * MIB)[0] == 400, what="budget released")


def test_expect_100_continue_over_the_limit_is_refused_before_the_body(start_server):
    server = start_server("--max-body-mb", "1", "--max-buffered-mb", "4")
    for length, status, fragment in ((2 * MIB, 413, "larger than"),
                                     (1 * MIB, None, None)):
        s = connect(server)
        try:
            s.sendall(post_head(length, extra=b"Expect: 100-continue\r\n"))
            if status:
                got, body = read_response(s)
                assert got == status and fragment in body["error"], (got, body)
                continue
            assert s.recv(64).startswith(b"HTTP/1.1 100 Continue\r\n")
            s.sendall(b" " * length)  # within the limit: read, then judged
            got, _ = read_response(s)
            assert got == 400
        finally:
            s.close()


def test_expect_100_continue_over_the_budget_left_is_503(start_server):
    server = start_server("--max-body-mb", "2", "--max-buffered-mb", "3")
    holder = connect(server)
    try:
        holder.sendall(post_head(2 * MIB) + b" " * (2 * MIB - 1))
        time.sleep(0.5)
        s = connect(server)
        s.sendall(post_head(2 * MIB, extra=b"Expect: 100-continue\r\n"))
        got, body = read_response(s)
        assert got == 503 and "--max-buffered-mb" in body["error"], body
        s.close()
    finally:
        holder.close()


@pytest.mark.parametrize("value", ["+{n}", "\x0b{n}", "{n} ", "0x10", "1e2", "-0", "{n}.0"])
def test_binary_header_length_is_decimal_digits_only(start_server, value):
    server = start_server()
    header = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "UINT8", "shape": [4],
                                     "parameters": {"binary_data_size": 4}}]}).encode()
    s = connect(server)
    try:
        # The plain length works; the same number written any other way is 400.
        for field, status in ((str(len(header)), 200), (value.format(n=len(header)), 400)):
            s.sendall(post_head(len(header) + 4, extra=b"Inference-Header-Content-Length: "
                                + field.encode() + b"\r\n") + header + b"abcd")
            got, body = read_response(s)
            assert got == status, (field, body)
        assert "Inference-Header-Content-Length" in body["error"]
    finally:
        s.close()


@pytest.mark.servers("python")
def test_chunked_body_over_the_limit_is_413(start_server):
    # A chunked body has no length to judge before it comes: the Python
    # server answers 413 once what came passes --max-body-mb (the C one
    # answers Triton's 400), and serves a smaller one as usual.
    server = start_server("--max-body-mb", "1")
    for size, status in ((2 * MIB, 413), (MIB // 2, 400)):
        s = connect(server)
        try:
            s.sendall(b"POST /v2/models/identity/infer HTTP/1.1\r\nHost: t\r\n"
                      b"Transfer-Encoding: chunked\r\n\r\n")
            piece = b" " * (64 * 1024)
            for _ in range(size // len(piece)):
                s.sendall(b"%x\r\n" % len(piece) + piece + b"\r\n")
            s.sendall(b"0\r\n\r\n")
            got, body = read_response(s)
            assert got == status, (got, body)
            if status == 413:
                assert "--max-body-mb" in body["error"], body
        finally:
            s.close()
