"""shmreg's Python example frontend: a KServe v2 HTTP server (FastAPI +
uvicorn) with Triton's shared-memory extension from shmreg.kserve, serving
the C example's built-in models (models.py) with the same options, answers
and shutdown report, so that server/tests runs against both.

    python python/examples/fastapi_server/server.py --port 8000 [--busy-policy defer|detach|refuse]

Start-up: registry, then the HTTP server; print "listening on HOST:PORT".
Shutdown: SIGINT or SIGTERM -> stop accepting, let in-flight requests finish
(their responses release their region references), unregister every region,
then count what is still mapped from /dev/shm and print it.
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import signal
import socket
import sys
import time

import anyio
import shmreg
import uvicorn
from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException

from shmreg.kserve import (InferError, RequestRegions, decode_request, encode_response,
                           error_response, header_length, metrics_router, place_outputs,
                           request_regions, shared_memory_router)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from models import builtin_models  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    def bounded(lo, hi):
        def parse(text):
            if not text.isdigit() or not lo <= int(text) <= hi:
                raise argparse.ArgumentTypeError(f"wants an integer in [{lo}, {hi}], got '{text}'")
            return int(text)
        return parse

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="127.0.0.1", help="address to listen on")
    p.add_argument("--port", type=bounded(0, 65535), default=8000, help="0 = any free port")
    p.add_argument("--busy-policy", choices=("defer", "detach", "refuse"), default="defer",
                   help="what unregister does to a region in use")
    p.add_argument("--reserved-key-prefix", action="append", default=[],
                   help="refuse shm keys starting with this (repeatable)")
    p.add_argument("--threads", type=bounded(1, 256), default=4, help="inference threads")
    p.add_argument("--delay-ms", type=bounded(0, 600000), default=1000,
                   help="sleep of the simple_delayed model")
    p.add_argument("--max-body-mb", type=bounded(1, 4096), default=256,
                   help="largest request body in MiB")
    p.add_argument("--drain-s", type=bounded(0, 3600), default=30,
                   help="shutdown waits this long for in-flight requests")
    p.add_argument("--allow-client-shm", choices=("true", "false"), default="false",
                   help="let clients register and unregister shared memory, as Triton "
                        "2.73's flag (default false, as there)")
    p.add_argument("--allow-uid", action="append", default=[], metavar="UID|any",
                   help="map only shm objects this uid owns (repeatable; default: the "
                        "server's own uid; any: every owner)")
    p.add_argument("--max-regions", type=bounded(0, 2**63), default=4096,
                   help="regions registered at once, 0 = no limit")
    p.add_argument("--max-mapped-bytes", type=bounded(0, 2**63), default=1 << 40,
                   help="bytes mapped for all regions, 0 = no limit (default 1 TiB)")
    p.add_argument("-v", "--verbose", action="store_true", help="one log line per request")
    opts = p.parse_args(argv)
    if any(not prefix for prefix in opts.reserved_key_prefix):
        p.error("--reserved-key-prefix must not be empty")
    if not all(u == "any" or u.isdigit() for u in opts.allow_uid):
        p.error("--allow-uid wants a uid or 'any'")
    return opts


def owners(opts: argparse.Namespace):
    """The registry's allow-list: None (the server's own uid), 'any', or the uids named."""
    if "any" in opts.allow_uid:
        return "any"
    return [int(u) for u in opts.allow_uid] or None


# ------------------------------------------------------------------ the app


def create_app(registry, opts) -> FastAPI:
    models = builtin_models()
    # The bound on a body is also the bound on a tensor copied out of shared
    # memory and on a response, as in the C server.
    max_body = opts.max_body_mb << 20
    limiter = anyio.CapacityLimiter(opts.threads)
    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)
    # Triton's shared-memory extension: the whole of it is this line.
    app.include_router(shared_memory_router(registry,
                                            allow_client_shm=opts.allow_client_shm == "true",
                                            max_body_bytes=max_body))
    # GET /metrics: the registry's counters under the C server's names.
    app.include_router(metrics_router(registry))

    @app.exception_handler(HTTPException)
    async def http_error(request, exc):  # unknown route 404, wrong method 405
        return error_response(exc.status_code, str(exc.detail))

    @app.exception_handler(RequestValidationError)
    async def validation_error(request, exc):
        return error_response(400, str(exc))

    def find(name: str, version: str | None):
        if version not in (None, "", "1") or name not in models:
            suffix = f" version {version}" if version is not None else ""
            raise InferError(404, f"Request for unknown model: '{name}'{suffix} is not found")
        return models[name]

    @app.get("/v2/health/live")
    @app.get("/v2/health/ready")
    def health():
        return Response(status_code=200)

    @app.get("/v2")
    def server_metadata():
        return {"name": "shmreg-python-frontend", "version": shmreg.__version__,
                "extensions": ["binary_tensor_data", "statistics", "system_shared_memory",
                               "cuda_shared_memory"]}

    @app.get("/v2/models/stats")
    def all_stats():
        return {"model_stats": [m.stats_json() for m in models.values()]}

    def model_route(tail: str, answer):
        def handler(model: str, version: str | None = None):
            try:
                return answer(find(model, version))
            except InferError as e:
                return e.response()
        app.add_api_route(f"/v2/models/{{model}}{tail}", handler, methods=["GET"])
        app.add_api_route(f"/v2/models/{{model}}/versions/{{version}}{tail}", handler,
                          methods=["GET"])

    model_route("", lambda m: m.metadata())
    model_route("/ready", lambda m: Response(status_code=200))
    model_route("/config", lambda m: m.config())
    model_route("/stats", lambda m: {"model_stats": [m.stats_json()]})

    def run_inference(m, body: bytes, header_length, regions: RequestRegions):
        """On a worker thread. Returns a response, never raises, so that no
        traceback keeps a view of a region alive past the request."""
        try:
            request = decode_request(body, header_length, m.name, regions,
                                     max_copy_bytes=max_body)
            ordered = m.bind_inputs(request.inputs)
            slots = place_outputs(request, m.name, m.describe_outputs(ordered), regions,
                                  max_response_bytes=max_body)
            by_name = {s.tensor.name: s.array for s in slots}
            m.run(ordered, [by_name.get(s.name) for s in m.outputs], opts.delay_ms / 1000)
            return encode_response(m.name, request, slots)
        except InferError as e:
            return e.response()

    async def infer(request: Request, model: str, version: str | None = None,
                    regions: RequestRegions = Depends(request_regions(registry))):
        started = time.monotonic_ns()
        try:
            m = find(model, version)
        except InferError as e:
            return e.response()
        try:
            length = header_length(request.headers)
        except InferError as e:
            response = e.response()
        else:
            body = await request.body()
            # A slow model never holds up status, register or unregister: they
            # run on the event loop and FastAPI's pool, inferences here.
            response = await anyio.to_thread.run_sync(run_inference, m, body, length, regions,
                                                      limiter=limiter)
        m.record(response.status_code == 200, time.monotonic_ns() - started)
        return response  # the dependency releases the regions once it is sent

    app.add_api_route("/v2/models/{model}/infer", infer, methods=["POST"])
    app.add_api_route("/v2/models/{model}/versions/{version}/infer", infer, methods=["POST"])
    return app


class LimitBody:
    """A body over --max-body-mb: 400 when its Content-Length says so, in the
    words and with the status Triton gives a request past its
    --http-max-input-size; 413 for a chunked body (no length) once what has
    arrived passes the limit. Either way the rest is read, so that the client
    sees the answer instead of a reset connection. A chunked body within the
    limit is passed on as it came."""

    def __init__(self, app, max_body: int):
        self.app, self.max_body = app, max_body

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope["headers"])
        length = headers.get(b"content-length")
        if length is not None:
            if length.isdigit() and int(length) > self.max_body:
                await self._drain(receive)
                await self._refuse(400, f"request JSON size of {int(length)} bytes", scope, receive,
                                   send)
                return
            return await self.app(scope, receive, send)
        if b"chunked" not in headers.get(b"transfer-encoding", b"").lower():
            return await self.app(scope, receive, send)
        # Chunked: count what arrives, and hold it until the end or the limit.
        messages, size = [], 0
        while True:
            message = await receive()
            messages.append(message)
            size += len(message.get("body", b""))
            if size > self.max_body:
                more = message.get("more_body", False)
                messages.clear()
                if more:
                    await self._drain(receive)
                await self._refuse(413, "chunked request body", scope, receive, send)
                return
            if message["type"] != "http.request" or not message.get("more_body", False):
                break

        async def replay():
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, status, what, scope, receive, send):
        await error_response(
            status, f"{what} exceeds the maximum allowed input size of {self.max_body} bytes. "
            "Use --max-body-mb to increase the limit.")(scope, receive, send)

    @staticmethod
    async def _drain(receive):
        while (await receive()).get("more_body"):
            pass


class LogRequests:
    """-v: one line per request on stderr once it is answered, control
    characters shown as '?' so that a client cannot forge log lines."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started, status = time.monotonic(), [0]

        async def sending(message):
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            clean = lambda s: "".join("?" if ord(c) < 0x20 or c == "\x7f" else c for c in s)
            print(f"{clean(scope['method'])} {clean(scope['path'])} {status[0]} "
                  f"{(time.monotonic() - started) * 1e3:.3f} ms", file=sys.stderr, flush=True)


# --------------------------------------------------------------- start, stop


class Server(uvicorn.Server):
    def handle_exit(self, sig, frame):
        if not self.should_exit:
            print(f"shutdown: signal {sig}, draining requests", file=sys.stderr, flush=True)
        super().handle_exit(sig, frame)


def report_leftovers() -> None:
    """Count what still refers to POSIX shared memory in this process; both
    must be 0 once the registry is gone. The tests read this line."""
    with open("/proc/self/maps") as maps:
        mappings = sum(" /dev/shm/" in line for line in maps)
    descriptors = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            descriptors += os.readlink(f"/proc/self/fd/{fd}").startswith("/dev/shm/")
        except OSError:
            pass
    print(f"shutdown: done; shm mappings left: {mappings}, shm descriptors left: {descriptors}",
          file=sys.stderr, flush=True)


def main(argv=None) -> int:
    opts = parse_args(argv)
    registry = shmreg.Registry(busy_policy=opts.busy_policy,
                               reserved_key_prefixes=tuple(opts.reserved_key_prefix),
                               allowed_owner_uids=owners(opts), max_regions=opts.max_regions,
                               max_mapped_bytes=opts.max_mapped_bytes)
    app = create_app(registry, opts)
    app = LimitBody(app, opts.max_body_mb << 20)
    if opts.verbose:
        app = LogRequests(app)
    family = socket.AF_INET6 if ":" in opts.host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY on accepted connections
    # only when the protocol says TCP, and without it uvicorn's two writes
    # (head, then body) of a small response wait out the client's delayed ACK
    # (40 ms a request).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((opts.host, opts.port))
    sock.listen(1024)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                            timeout_graceful_shutdown=opts.drain_s, timeout_keep_alive=120)
    server = Server(config)
    # uvicorn re-raises the stop signal once it has shut down; this handler
    # makes that a no-op, so the process goes on to unmap and report.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: None)
    print(f"listening on {opts.host}:{sock.getsockname()[1]} (libshmreg {shmreg.__version__})",
          flush=True)
    asyncio.run(server.serve(sockets=[sock]))
    sock.close()
    # Every request has completed, so no reference is held: each region is
    # unmapped here, whatever the policy.
    registry.unregister_all()
    close = getattr(registry, "close", None)
    if close:
        close()
    del app, server, config, registry, close
    gc.collect()
    report_leftovers()
    return 0


if __name__ == "__main__":
    sys.exit(main())
