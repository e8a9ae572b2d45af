"""Triton's shared-memory extension for FastAPI servers, over a shmreg.Registry.

Two parts, usable apart:

- ``shared_memory_router(registry)``: an ``APIRouter`` with Triton's system and
  CUDA shared-memory endpoints (``/v2/systemsharedmemory/...`` and
  ``/v2/cudasharedmemory/...``: register, unregister, status), answering with
  Triton's status codes and the library's messages, as the C example server
  (``server/``) does.
- ``metrics_router(registry)``: ``GET /metrics`` with the registry's counters
  under the C server's ``shmreg_*`` names (prometheus_client).
- ``model_server_router(registry, dataplane)``: both of the above's
  shared-memory endpoints plus ``POST /v2/models/{name}/infer`` for a KServe
  Python ``ModelServer`` (``kserve`` on PyPI), whose own infer route takes
  no tensor without ``data``: mounted on its app, requests naming regions
  reach its ``kserve.Model`` objects unchanged.
- The request path of a KServe v2 ``infer`` endpoint: ``decode_request`` turns
  a request (JSON, binary tensor extension, or tensors naming shared-memory
  regions) into numpy arrays, ``place_outputs`` gives each output its array,
  and ``encode_response`` builds the answer. Every region reference a request
  takes is kept in its ``RequestRegions``, which releases them all in one
  place when the response has been sent, on every outcome: use the FastAPI
  dependency ``request_regions(registry)`` (or ``RequestRegions`` as a
  context manager where the response is sent inside the ``with``).

A system region is never read or written in place: a client can truncate
its shm object under the mapping, and a plain load of a lost page is SIGBUS,
which kills the whole server. Inputs are copied out of the region and
outputs into it with the guarded copies (``Region.read_into`` and
``write_from``), which turn that fault into ``shmreg.Fault``: a 400 for that
one request, and every other client is served.

The rule is docs/integration.md's: acquire while parsing, release when the
response is done. Needs ``fastapi>=0.118``, whose dependencies with ``yield``
finish after the response has been sent (``pip install 'shmreg[fastapi]'``).
"""
from __future__ import annotations

import base64
import binascii
import functools
import json
import math
import secrets
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable, Sequence

import numpy as np
from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

import shmreg
from shmreg import _shmreg

__all__ = [
    "CLIENT_SHM_DISABLED", "DATATYPES", "LIMIT_NAME", "MAX_BODY_BYTES", "InferError",
    "InferRequest", "OutputSlot", "RegistryCollector", "RequestRegions", "Tensor",
    "decode_request", "encode_response", "error_response", "header_length", "http_status",
    "metrics_router", "model_server_router", "parse_json", "place_outputs", "read_body",
    "request_regions", "shared_memory_router",
]

# ------------------------------------------------------------------- errors

# The table of server/src/core/triton.h (python/tests/test_status_table.py
# checks this copy against it): Triton's statuses where Triton has one,
# since clients test for them. By the library's names of its errors, each of
# which must be here and nothing else: checked against the library's error
# table (shmreg._shmreg.ERROR_TABLE) at import. A code the table does not
# know answers 500.
_STATUS_BY_ERROR = {
    "SHMREG_ERR_INVALID_ARG": 400, "SHMREG_ERR_NOT_FOUND": 404, "SHMREG_ERR_ALREADY_EXISTS": 400,
    "SHMREG_ERR_OUT_OF_BOUNDS": 400, "SHMREG_ERR_BUSY": 400, "SHMREG_ERR_SYSTEM": 500,
    "SHMREG_ERR_CUDA": 500, "SHMREG_ERR_UNSUPPORTED": 501, "SHMREG_ERR_NO_MEMORY": 507,
    "SHMREG_ERR_WRONG_KIND": 404,  # the name is not one of this endpoint's kind
    "SHMREG_ERR_FAULT": 400,  # the client truncated its own object under the mapping
}


def _status_by_code() -> dict[int, int]:
    errors = {name: value for name, value, _ in _shmreg.ERROR_TABLE if value != 0}
    if set(errors) != set(_STATUS_BY_ERROR):
        raise ImportError(
            "shmreg.kserve's HTTP statuses do not match the library's error table (SHMREG_ERR_MAP): "
            f"no status for {sorted(set(errors) - set(_STATUS_BY_ERROR))}, "
            f"a status for no error {sorted(set(_STATUS_BY_ERROR) - set(errors))}")
    return {value: _STATUS_BY_ERROR[name] for name, value in errors.items()}


_STATUS_BY_CODE = _status_by_code()


def http_status(err: shmreg.Error) -> int:
    """The HTTP status of a library error: 400, 404, 500, 501 or 507."""
    return _STATUS_BY_CODE.get(err.code, 500)


def error_response(status: int, message: str) -> JSONResponse:
    """Every error body is ``{"error": message}``, as Triton sends them."""
    return JSONResponse({"error": message}, status_code=status)


# Triton 2.73's answer (word for word, as the C server's) to register and
# unregister when client shared memory is not allowed: UNSUPPORTED, HTTP 501.
# Status stays open, as there.
CLIENT_SHM_DISABLED = ("Client shared memory is disabled. Start the server with "
                       "'--allow-client-shm=true' to enable.")

# The C server's default --max-body-mb, and the flag its messages name: the
# most bytes one tensor copied out of shared memory, or one response, may make
# the server hold. A region can be far larger than any body a client may send
# (a sparse object costs its client nothing), so shared memory must not be a
# way around the body's bound.
MAX_BODY_BYTES = 256 << 20
LIMIT_NAME = "--max-body-mb"

# An upper bound on the bytes of JSON one byte of tensor data becomes in a
# response (the C server's): "-128," is five characters for one INT8, "false,"
# six for one BOOL.
_JSON_BYTES_PER_DATA_BYTE = 7


class InferError(Exception):
    """A request that cannot be served: its HTTP status and message."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message

    @classmethod
    def from_shmreg(cls, err: shmreg.Error) -> "InferError":
        return cls(http_status(err), str(err))

    def response(self) -> JSONResponse:
        return error_response(self.status, self.message)


def _clean_errors(fn: Callable) -> Callable:
    """Raise a function's InferError afresh from the function itself. The
    original's traceback holds the frames of the parsing below, whose locals
    hold numpy views of regions, and every such view holds a reference: a
    caller keeping the exception (a log, a test) would keep the regions in
    use after the request. The fresh one is raised outside the except block,
    so the original and its frames are freed first."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except InferError as e:
            error = InferError(e.status, e.message)
        # This frame stays in the new traceback: it must hold neither the
        # request (args) nor the error itself (a cycle only gc would free,
        # with every frame the error later passes through).
        del args, kwargs
        try:
            raise error
        finally:
            del error

    return wrapper


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _int64(text: str) -> int:
    value = int(text)
    if not _INT64_MIN <= value <= _INT64_MAX:
        # The C server's words for an integer it cannot hold (it reads all
        # of uint64 since it moved to json-c; this module stops at int64).
        raise ValueError("too big integer")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"invalid token '{name}'")


def parse_json(data: bytes | str) -> Any:
    """Parse a request body as the C server does: integers must fit int64
    (a bigger one is "too big integer", so 2**64 - 32 never reaches the
    registry), NaN and Infinity are not JSON. Raises InferError(400)."""
    try:
        return json.loads(data, parse_int=_int64, parse_constant=_no_constant)
    except json.JSONDecodeError as e:
        raise InferError(400, f"failed to parse the request JSON buffer: {e.msg} at line "
                              f"{e.lineno}, column {e.colno}") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise InferError(400, f"failed to parse the request JSON buffer: {e}") from None
    except RecursionError:
        # A body of a few hundred kilobytes of '[' passes Python's recursion
        # limit: a client's malformed request, not the server's failure.
        raise InferError(400, "failed to parse the request JSON buffer: nesting too deep") \
            from None


async def read_body(request: Request, max_bytes: int = MAX_BODY_BYTES,
                    limit_name: str = LIMIT_NAME) -> bytes:
    """A request's body, at most ``max_bytes`` of it: past that, InferError
    400 in the C server's (and Triton's) words when its Content-Length says
    so, 413 for a chunked body once what has arrived passes it. The rest is
    read and dropped, so that the client sees the answer rather than a reset
    connection."""
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > max_bytes:
        async for _ in request.stream():
            pass
        raise InferError(400, f"request JSON size of {int(length)} bytes exceeds the maximum "
                              f"allowed input size of {max_bytes} bytes. Use {limit_name} to "
                              "increase the limit.")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            chunks.clear()
            async for _ in request.stream():
                pass
            raise InferError(413, f"chunked request body exceeds the maximum allowed input size "
                                  f"of {max_bytes} bytes. Use {limit_name} to increase the limit.")
        chunks.append(chunk)
    return b"".join(chunks)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _size(v: Any) -> int | None:
    """A JSON integer >= 0, or None."""
    return v if _is_int(v) and v >= 0 else None


# --------------------------------------------------------- the shm endpoints

_KINDS = {"system": "systemsharedmemory", "cuda": "cudasharedmemory"}


def _empty() -> Response:
    return Response(status_code=200)


def _status_entry(s: Any) -> dict:
    # "in_use" is the key this frontend's clients read; its value is the
    # references held (one per tensor a request placed in the region).
    entry = {"name": s.name, "byte_size": s.byte_size, "in_use": s.in_use,
             "pending_unregister": bool(s.pending_unregister)}
    if s.kind == "cuda":
        entry["device_id"] = s.device_id
    else:
        entry["key"] = s.key
        entry["offset"] = s.offset
    return entry


def _register_body(data: bytes) -> dict:
    body = parse_json(data)
    if not isinstance(body, dict):
        raise InferError(400, "the register request must be a JSON object")
    return body


def _body_size(body: dict, field_name: str, required: bool) -> int:
    if field_name not in body and not required:
        return 0
    value = _size(body.get(field_name))
    if value is None:
        raise InferError(400, f"'{field_name}' must be {'given as ' if required else ''}"
                              "a non-negative integer")
    return value


def _register_system(registry: Any, name: str, body: dict) -> None:
    key = body.get("key")
    if "key" not in body:  # Triton's words when there is none
        raise InferError(400, "Shared memory register request has no 'key' field")
    if not isinstance(key, str):
        raise InferError(400, "'key' must be given as a string")
    offset = _body_size(body, "offset", False)
    byte_size = _body_size(body, "byte_size", True)
    registry.register_system(name, key, byte_size, offset=offset)


# A cudaIpcMemHandle_t is 64 bytes; anything up to this decodes, so that the
# library, not this parser, reports a handle of the wrong size (as in C).
_MAX_HANDLE = 128


def _register_cuda(registry: Any, name: str, body: dict) -> None:
    raw = body.get("raw_handle")
    b64 = raw.get("b64") if isinstance(raw, dict) else None
    if "raw_handle" not in body:  # Triton's words when there is none
        raise InferError(400, "Shared memory register request has no 'raw_handle' field")
    if not isinstance(b64, str):
        raise InferError(400, "'raw_handle' must be given as {\"b64\": \"<base64>\"}")
    device = body.get("device_id")
    if not _is_int(device) or not 0 <= device <= 1 << 20:
        raise InferError(400, "'device_id' must be given as a non-negative integer")
    byte_size = _body_size(body, "byte_size", True)
    try:
        handle = base64.b64decode("".join(b64.split()), validate=True)
    except (binascii.Error, ValueError):
        handle = None
    if handle is None or len(handle) > _MAX_HANDLE:
        raise InferError(400, f"'raw_handle' of region '{name}' is not valid base64 of at most "
                              f"{_MAX_HANDLE} bytes")
    registry.register_cuda_ipc(name, handle, device, byte_size)


def _register_status(err: shmreg.Error) -> int:
    """A registration's status, as the C server's: 429 (Too Many Requests)
    when a configured limit refused it, which the client can wait out (the
    library says "limit of" then), not the server's lack of memory (507)."""
    if isinstance(err, shmreg.NoMemory) and "limit of" in str(err):
        return 429
    return http_status(err)


def shared_memory_router(registry: Any, *, kinds: Sequence[str] = ("system", "cuda"),
                         allow_client_shm: bool = False, max_body_bytes: int = MAX_BODY_BYTES,
                         limit_name: str = LIMIT_NAME, **router_options: Any) -> APIRouter:
    """An APIRouter with Triton's shared-memory extension over ``registry``:

    ====================================================  ===========================
    ``POST v2/{kind}sharedmemory/region/{name}/register``  register_system / _cuda_ipc
    ``GET  v2/{kind}sharedmemory[/region/{name}]/status``   status
    ``POST v2/{kind}sharedmemory/region/{name}/unregister`` unregister
    ``POST v2/{kind}sharedmemory/unregister``               unregister_all
    ====================================================  ===========================

    ``kind`` is ``system`` or ``cuda``. Bodies are checked before the library
    is called (400 for a missing or mistyped field); library errors answer
    with ``http_status`` and the library's message. Unregistering a name that
    is not registered answers 200, as Triton does; a name registered as the
    other kind is a 404 saying so. The handlers are plain functions, which
    FastAPI runs in its thread pool: a register that pins, or an unregister
    that unmaps, never holds up the event loop.

    ``allow_client_shm`` is Triton 2.73's ``--allow-client-shm``, off by
    default as there: a registration makes the server map, read and write an
    object a client names, so until the server's author turns it on,
    register and unregister answer 501 with ``CLIENT_SHM_DISABLED``; status
    stays open. Who may be named is the registry's business
    (``allowed_owner_uids``, by default the server's own uid). A register
    body past ``max_body_bytes`` is refused unread (``read_body``)."""
    router = APIRouter(**router_options)

    def refused(name: str | None = None) -> Response:
        return error_response(501, CLIENT_SHM_DISABLED)

    def add(kind: str) -> None:
        base = f"/v2/{_KINDS[kind]}"
        register_one = _register_system if kind == "system" else _register_cuda

        def status(name: str | None = None) -> Response:
            try:
                regions = registry.status(name, kind=kind)
            except shmreg.Error as e:
                return error_response(http_status(e), str(e))
            # In name order, as Triton lists them (its regions are a std::map).
            return JSONResponse([_status_entry(s) for s in sorted(regions, key=lambda s: s.name)])

        def unregister(name: str | None = None) -> Response:
            try:
                if name is None:
                    registry.unregister_all(kind=kind)
                else:
                    registry.unregister(name, kind=kind)
            except shmreg.Error as e:
                # Absent is success, as in Triton (its clients "unregister
                # before registering"); WRONG_KIND and BUSY are errors. One
                # call tells them apart.
                if not isinstance(e, shmreg.NotFound):
                    return error_response(http_status(e), str(e))
            return _empty()

        async def register(name: str, request: Request) -> Response:
            try:
                body = _register_body(await read_body(request, max_body_bytes, limit_name))
                # Registering may pin or import a CUDA handle: off the loop.
                await run_in_threadpool(register_one, registry, name, body)
            except InferError as e:
                return e.response()
            except shmreg.Error as e:
                return error_response(_register_status(e), str(e))
            return _empty()

        router.add_api_route(f"{base}/status", status, methods=["GET"])
        router.add_api_route(f"{base}/region/{{name}}/status", status, methods=["GET"])
        change = (unregister, register) if allow_client_shm else (refused, refused)
        router.add_api_route(f"{base}/unregister", change[0], methods=["POST"])
        router.add_api_route(f"{base}/region/{{name}}/unregister", change[0], methods=["POST"])
        router.add_api_route(f"{base}/region/{{name}}/register", change[1], methods=["POST"])

    for kind in kinds:
        add(kind)
    return router


# ------------------------------------------------------- region references


class RequestRegions:
    """The region references one inference request holds, released together.

    ``input(...)`` acquires a window of a named region and returns a copy of
    its bytes (a uint8 numpy array), made with the guarded copy: a client
    that truncated its object gets a 400, and the server lives. ``output(...)``
    acquires a window for an output and returns the ``shmreg.Region``; the
    output's bytes are written into it by ``encode_response``, guarded too.
    Each acquired Region is held until ``release()``, so the count shown by
    status is one per tensor for the whole request, as for the C server.
    ``release()`` drops them all; idempotent; also the context manager's
    exit."""

    def __init__(self, registry: Any):
        self.registry = registry
        self._held: list[Any] = []

    def _acquire(self, region: str, offset: int, byte_size: int) -> Any:
        try:
            ref = self.registry.acquire(region, offset, byte_size)
        except shmreg.Error as e:
            raise InferError.from_shmreg(e) from None
        self._held.append(ref)  # the request owns it now
        if ref.kind == "cuda":
            self._device_to_host(ref, region)
        return ref

    @staticmethod
    def _device_to_host(ref: Any, region: str) -> np.ndarray:
        # The models here run on the CPU, and numpy cannot read device
        # memory; a server with CuPy or PyTorch takes the DLPack view itself.
        raise InferError(501, f"shared memory region '{region}' is CUDA memory, which this "
                              "server's CPU models cannot read")

    @_clean_errors
    def input(self, region: str, offset: int, byte_size: int, *, tensor: str = "",
              max_bytes: int = MAX_BODY_BYTES, limit_name: str = LIMIT_NAME) -> np.ndarray:
        """A copy of the bytes [offset, offset + byte_size) of ``region``.
        Raises InferError with the library's message (400 when the client
        truncated its object), Triton's for an empty window (a region
        named without a byte size), which holds no tensor, or the C server's
        400 for a window past ``max_bytes`` (input ``tensor``; the message
        names ``limit_name``, how the operator raises it), checked after the
        window's bounds and before anything is allocated."""
        ref = self._acquire(region, offset, byte_size)
        if byte_size == 0:
            raise InferError(400, f"Invalid offset + byte size for shared memory region: "
                                  f"'{region}'")
        if byte_size > max_bytes:
            raise InferError(400, f"input '{tensor}' takes {byte_size} bytes of shared memory "
                                  f"region '{region}', more than this server copies for one "
                                  f"tensor ({max_bytes}, {limit_name})")
        data = np.empty(byte_size, dtype=np.uint8)
        try:
            ref.read_into(data)
        except shmreg.Error as e:
            raise InferError.from_shmreg(e) from None
        return data

    @_clean_errors
    def output(self, name: str, region: str, offset: int, byte_size: int) -> Any:
        """The window for output ``name``, as a held ``shmreg.Region``: 400
        when the region was registered read-only, before any model runs."""
        ref = self._acquire(region, offset, byte_size)
        if not ref.writable:
            raise InferError(400, f"output '{name}' cannot be written to shared memory region "
                                  f"'{region}': it was registered read-only")
        return ref

    @property
    def count(self) -> int:
        return len(self._held)

    def release(self) -> None:
        held, self._held = self._held, []
        for ref in held:
            ref.release()

    def __enter__(self) -> "RequestRegions":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


def request_regions(registry: Any) -> Callable[[], AsyncIterator[RequestRegions]]:
    """A FastAPI dependency: ``regions: RequestRegions = Depends(request_regions(reg))``.
    The references are released after the response has been sent, or when
    the handler fails, whatever the outcome (fastapi>=0.118 runs the exit of
    a dependency with yield after the response).

    It is an async generator on purpose: its exit runs on the event loop
    right after the last byte is handed to the transport, before the loop
    reads another request. A plain generator's exit would be sent to the
    thread pool, and a client that unregisters as soon as it has the
    response could find the region still in use."""

    async def dependency() -> AsyncIterator[RequestRegions]:
        held = RequestRegions(registry)
        try:
            yield held
        finally:
            held.release()

    return dependency


# --------------------------------------------------------------- datatypes

# KServe v2 datatypes: (numpy dtype, element size). BF16 has no numpy type:
# it is carried as its 16-bit pattern. BYTES has no fixed size.
DATATYPES: dict[str, tuple[np.dtype | None, int]] = {
    "BOOL": (np.dtype(np.bool_), 1), "UINT8": (np.dtype("<u1"), 1),
    "UINT16": (np.dtype("<u2"), 2), "UINT32": (np.dtype("<u4"), 4),
    "UINT64": (np.dtype("<u8"), 8), "INT8": (np.dtype("<i1"), 1),
    "INT16": (np.dtype("<i2"), 2), "INT32": (np.dtype("<i4"), 4),
    "INT64": (np.dtype("<i8"), 8), "FP16": (np.dtype("<f2"), 2),
    "BF16": (np.dtype("<u2"), 2), "FP32": (np.dtype("<f4"), 4),
    "FP64": (np.dtype("<f8"), 8), "BYTES": (None, 0),
}
_NO_JSON = {"FP16", "BF16", "BYTES"}
_INT_RANGES = {
    "UINT8": (0, 2**8 - 1), "UINT16": (0, 2**16 - 1), "UINT32": (0, 2**32 - 1),
    "UINT64": (0, _INT64_MAX),  # JSON integers here are int64
    "INT8": (-(2**7), 2**7 - 1), "INT16": (-(2**15), 2**15 - 1),
    "INT32": (-(2**31), 2**31 - 1), "INT64": (_INT64_MIN, _INT64_MAX),
}


def _typed(raw: np.ndarray, datatype: str, shape: Sequence[int]) -> np.ndarray:
    """The uint8 array raw seen as datatype and shape (a view, no copy)."""
    dtype, size = DATATYPES[datatype]
    if dtype is None:
        return raw
    return raw.view(dtype).reshape(shape)


def _element_ok(datatype: str, v: Any) -> bool:
    if datatype == "BOOL":
        return isinstance(v, bool)
    if datatype in ("FP32", "FP64"):
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    lo, hi = _INT_RANGES[datatype]
    return _is_int(v) and lo <= v <= hi


def _flatten(data: Any, max_depth: int) -> list | None:
    """The leaves of nested lists, in order; None when they nest deeper
    than max_depth. A loop, not a recursion: a client's nesting must not
    reach Python's recursion limit."""
    out: list = []
    stack = [iter((data,))]
    while stack:
        for v in stack[-1]:
            if isinstance(v, list):
                if len(stack) > max_depth:
                    return None
                stack.append(iter(v))
                break
            out.append(v)
        else:
            stack.pop()
    return out


# ------------------------------------------------------------ the request


@dataclass
class Tensor:
    """One input or output: name, datatype, shape, and its data as a numpy
    array of that datatype and shape (for BYTES, the raw uint8 bytes)."""
    name: str
    datatype: str
    shape: list[int]
    data: np.ndarray | None = None
    byte_size: int = 0


@dataclass
class InferRequest:
    id: str | None
    inputs: list[Tensor]
    outputs: list[dict] | None   # the request's "outputs", or None: every output
    parameters: dict
    header: dict = field(repr=False, default_factory=dict)


def _window(params: dict, what: str, name: str) -> tuple[str, int, int] | None:
    """shared_memory_{region,offset,byte_size} of a tensor's parameters, or
    None. As in Triton's HTTP: an offset or size without a region is not
    looked at, and a region without a size is an empty window."""
    region = params.get("shared_memory_region")
    offset = params.get("shared_memory_offset")
    size = params.get("shared_memory_byte_size")
    if region is None:
        return None
    if not isinstance(region, str):
        raise InferError(400, f"'shared_memory_region' of {what} '{name}' must be a string")
    if size is None:
        size = 0
    if _size(size) is None:
        raise InferError(400, f"'shared_memory_byte_size' of {what} '{name}' must be a "
                              "non-negative integer")
    if offset is not None and _size(offset) is None:
        raise InferError(400, f"'shared_memory_offset' of {what} '{name}' must be a "
                              "non-negative integer")
    return region, offset or 0, size


def _expected_size(t: Tensor) -> int | None:
    size = DATATYPES[t.datatype][1]
    if size == 0:
        return None
    return size * math.prod(t.shape)


# As the C server: a shape of more dimensions is refused, and a byte size
# past INT64_MAX (Triton's and gRPC's byte sizes are int64) overflows.
_MAX_DIMS = 8


def _check_shape(t: Tensor) -> None:
    if len(t.shape) > _MAX_DIMS:
        raise InferError(400, f"shape has {len(t.shape)} dimensions; at most {_MAX_DIMS} are "
                              "supported")
    expected = _expected_size(t)
    if expected is not None and expected > _INT64_MAX:
        raise InferError(400, f"input '{t.name}': shape too large")


def _check_size(t: Tensor, model: str, given: int, request_id: str | None) -> None:
    expected = _expected_size(t)
    if expected is not None and expected != given:  # Triton's core's words
        raise InferError(400, f"[request id: {request_id or '<id_unknown>'}] input byte size "
                              f"mismatch for input '{t.name}' for model '{model}'. "
                              f"Expected {expected}, got {given}")


def _input_from_json(t: Tensor, data: Any) -> np.ndarray:
    if t.datatype in _NO_JSON:
        raise InferError(400, f"input '{t.name}': {t.datatype} tensors must be sent as binary "
                              "data or in shared memory, not as JSON")
    # Python's integers: numpy's int64 product of [2**32, 2**32] wraps to 0,
    # which empty data would match.
    n = math.prod(t.shape)
    flat = _flatten(data, max(len(t.shape), 1))
    if flat is None or len(flat) != n or not all(_element_ok(t.datatype, v) for v in flat):
        raise InferError(400, f"unable to parse 'data' of input '{t.name}': expected {n} "
                              f"{t.datatype} elements matching its shape")
    return np.array(flat, dtype=DATATYPES[t.datatype][0]).reshape(t.shape)


def header_length(headers: Any) -> int | None:
    """The ``Inference-Header-Content-Length`` of a request's headers (any
    mapping with case-insensitive names, such as FastAPI's), or None when
    absent. Raises InferError(400) unless it is a decimal integer."""
    text = headers.get("inference-header-content-length")
    if text is None:
        return None
    if not (text.isascii() and text.isdigit()):
        raise InferError(400, "Inference-Header-Content-Length must be a non-negative integer")
    return int(text)


@_clean_errors
def decode_request(body: bytes | memoryview, header_length: int | None, model: str,
                   regions: RequestRegions, max_inputs: int = 8, *,
                   max_copy_bytes: int = MAX_BODY_BYTES,
                   limit_name: str = LIMIT_NAME) -> InferRequest:
    """A KServe v2 inference request, its inputs as numpy arrays.

    body: the whole request body; header_length: the value of the
    ``Inference-Header-Content-Length`` header (None when absent: the body is
    all JSON). An input is taken from its JSON ``data``, from the binary
    section after the header (``binary_data_size``), or from the shared
    memory region its parameters name, acquired into ``regions`` (a view of
    the mapped bytes: no copy). Sizes are checked with Triton's messages,
    a window's after its bounds (Triton's order). A window of more than
    ``max_copy_bytes`` is refused before it is copied (the C server's 400
    naming ``limit_name``), as are a shape whose byte size passes int64 and
    data nested deeper than its shape. Raises InferError; references already
    taken stay in ``regions`` and go with the rest."""
    body = memoryview(body)
    if header_length is None:
        header_length = len(body)
    elif header_length == 0 or header_length > len(body):
        raise InferError(400, f"Inference-Header-Content-Length {header_length} is outside the "
                              f"request body of {len(body)} bytes")
    root = parse_json(bytes(body[:header_length]))
    if not isinstance(root, dict):
        raise InferError(400, "the inference request must be a JSON object")
    params = root.get("parameters", {})
    if not isinstance(params, dict):
        raise InferError(400, "request 'parameters' must be an object")
    binary, at = body[header_length:], 0
    rid = root.get("id")
    rid = rid if isinstance(rid, str) else None

    inputs_json = root.get("inputs")
    if not isinstance(inputs_json, list) or not inputs_json:
        raise InferError(400, "the request needs a non-empty 'inputs' array")
    if len(inputs_json) > max_inputs:
        raise InferError(400, f"at most {max_inputs} inputs are accepted")
    inputs = []
    for j in inputs_json:
        name = j.get("name") if isinstance(j, dict) else None
        datatype = j.get("datatype") if isinstance(j, dict) else None
        if not isinstance(name, str) or not isinstance(datatype, str):
            raise InferError(400, "each input needs a string 'name', a string 'datatype' and a "
                                  "'shape'")
        if datatype not in DATATYPES:
            raise InferError(400, f"input '{name}' has an unknown datatype '{datatype}'")
        shape = j.get("shape")
        if not isinstance(shape, list):
            raise InferError(400, "'shape' must be an array of integers")
        if not all(_size(d) is not None for d in shape):
            raise InferError(400, "'shape' must be an array of non-negative integers")
        t = Tensor(name, datatype, shape)
        _check_shape(t)
        tparams = j.get("parameters", {})
        if not isinstance(tparams, dict):
            raise InferError(400, f"'parameters' of input '{name}' must be an object")
        window = _window(tparams, "input", name)
        binary_size = tparams.get("binary_data_size")
        data = j.get("data")
        sources = (window is not None) + (binary_size is not None) + (data is not None)
        if sources != 1:  # Triton's words
            raise InferError(400, "Input must set only one of the following fields: 'data', "
                                  "'binary_data_size' in 'parameters', 'shared_memory_region' in "
                                  "'parameters'. But" + (" set" if sources else " no field is set")
                                  + (" 'data'" if data is not None else "")
                                  + (" 'binary_data_size'" if binary_size is not None else "")
                                  + (" 'shared_memory_region'" if window is not None else ""))
        if data is not None:
            t.data = _input_from_json(t, data)
        elif window is not None:
            region, offset, size = window
            # Its bounds first (Triton's order), then the copy's bound.
            raw = regions.input(region, offset, size, tensor=name, max_bytes=max_copy_bytes,
                                limit_name=limit_name)
            _check_size(t, model, size, rid)
            t.data = _typed(raw, datatype, shape)
        else:
            n = _size(binary_size)
            if n is None:
                raise InferError(400, f"'binary_data_size' of input '{name}' must be a "
                                      "non-negative integer")
            if n > len(binary) - at:
                raise InferError(400, f"input '{name}' claims {n} bytes of binary data but only "
                                      f"{len(binary) - at} remain in the request")
            _check_size(t, model, n, rid)
            raw = np.frombuffer(binary[at:at + n], dtype=np.uint8)
            t.data = _typed(raw, datatype, shape)
            at += n
        t.byte_size = t.data.nbytes
        inputs.append(t)
    if at != len(binary):
        raise InferError(400, f"the request carries {len(binary) - at} bytes of binary data that "
                              "no input claims")
    outputs = root.get("outputs")
    if outputs is not None and not isinstance(outputs, list):
        raise InferError(400, "'outputs' must be an array")
    return InferRequest(rid, inputs, outputs, params, root)


# ------------------------------------------------------------- the outputs

PLACE_JSON, PLACE_BINARY, PLACE_SHM = "json", "binary", "shm"


@dataclass
class OutputSlot:
    """Where one output goes: ``array`` is what the model writes, a buffer
    of this process; for PLACE_SHM, ``region`` is the client's window, which
    ``encode_response`` copies ``array`` into (guarded)."""
    tensor: Tensor
    placement: str
    array: np.ndarray
    region: Any = None


def _slot(t: Tensor, placement: str, regions: RequestRegions,
          window: tuple[str, int, int] | None) -> OutputSlot:
    size = _expected_size(t)
    size = t.byte_size if size is None else size
    if placement == PLACE_SHM:
        region, offset, given = window
        if given < size:
            raise InferError(400, f"shared memory size specified with the request for output "
                                  f"'{t.name}' ({given} bytes) should be at least {size} bytes "
                                  "to hold the results")
        # Acquire only the bytes the output fills.
        ref = regions.output(t.name, region, offset, size)
        raw = np.empty(size, dtype=np.uint8)
        return OutputSlot(t, placement, _typed(raw, t.datatype, t.shape), ref)
    if placement == PLACE_JSON and t.datatype in _NO_JSON:
        raise InferError(400, f"output '{t.name}' is {t.datatype}: request it as binary data or "
                              "in shared memory")
    raw = np.empty(size, dtype=np.uint8)
    return OutputSlot(t, placement, _typed(raw, t.datatype, t.shape))


def _check_response_size(plan: Sequence[tuple[Tensor, str, Any]], max_bytes: int,
                         limit_name: str) -> None:
    """The C server's bound on what a response may make the server hold,
    checked before any output buffer exists: an output as JSON costs several
    bytes of text (and more of Python objects) per byte of data."""
    total = 0
    for t, place, _ in plan:
        size = _expected_size(t)
        size = t.byte_size if size is None else size
        if place == PLACE_JSON:
            total += size * _JSON_BYTES_PER_DATA_BYTE
        elif place == PLACE_BINARY:
            total += size
    if total > max_bytes:
        raise InferError(400, f"the response could take up to {total} bytes, more than this "
                              f"server sends ({max_bytes}, {limit_name}): ask for large outputs "
                              "in shared memory, or as binary data rather than JSON")


@_clean_errors
def place_outputs(request: InferRequest, model: str, described: Sequence[Tensor],
                  regions: RequestRegions, *, max_response_bytes: int = MAX_BODY_BYTES,
                  limit_name: str = LIMIT_NAME) -> list[OutputSlot]:
    """The model's outputs (``described``: name, datatype, shape, and
    byte_size for BYTES) placed as the request asks: in the shared-memory
    region its parameters name (size checked, window acquired into
    ``regions``, writable; the model writes a buffer that ``encode_response``
    copies into the region), as binary data, or as JSON; outputs the request
    does not list are left out. A response that could pass
    ``max_response_bytes`` (JSON counted at 7 bytes a data byte, binary
    outputs at their size) is refused with the C server's 400 naming
    ``limit_name``, before any output buffer is made. Raises InferError."""
    plan = _plan_outputs(request, model, described)
    _check_response_size(plan, max_response_bytes, limit_name)
    return [_slot(t, place, regions, window) for t, place, window in plan]


def _plan_outputs(request: InferRequest, model: str,
                  described: Sequence[Tensor]) -> list[tuple[Tensor, str, Any]]:
    """Each output's (tensor, placement, shared-memory window or None)."""
    binary_all = request.parameters.get("binary_data_output") is True
    if request.outputs is None:
        place = PLACE_BINARY if binary_all else PLACE_JSON
        return [(t, place, None) for t in described]
    by_name = {t.name: t for t in described}
    slots: dict[str, tuple[Tensor, str, Any]] = {}
    for j in request.outputs:
        name = j.get("name") if isinstance(j, dict) else None
        if not isinstance(name, str):
            raise InferError(400, "each requested output needs a string 'name'")
        if name not in by_name or name in slots:
            raise InferError(400, f"unexpected inference output '{name}' for model '{model}'")
        oparams = j.get("parameters", {})
        if not isinstance(oparams, dict):
            raise InferError(400, f"'parameters' of output '{name}' must be an object")
        window = _window(oparams, "output", name)
        binary = oparams.get("binary_data")
        if window is not None:
            place = PLACE_SHM
        elif (binary is True) if binary is not None else binary_all:
            place = PLACE_BINARY
        else:
            place = PLACE_JSON
        slots[name] = (by_name[name], place, window)
    # In the model's order, as the C server answers.
    return [slots[t.name] for t in described if t.name in slots]


_JSON_CHUNK = 1 << 16  # elements turned into Python numbers at a time


def _json_array(array: np.ndarray) -> list[bytes]:
    """The JSON text of array's elements as one flat array, in pieces."""
    flat = array.reshape(-1)
    pieces = [b"["]
    for at in range(0, flat.size, _JSON_CHUNK):
        if at:
            pieces.append(b",")
        pieces.append(json.dumps(flat[at:at + _JSON_CHUNK].tolist(),
                                 separators=(",", ":"))[1:-1].encode())
    pieces.append(b"]")
    return pieces


def encode_response(model: str, request: InferRequest, slots: Sequence[OutputSlot],
                    version: str = "1") -> Response:
    """The response: a JSON header, then the binary outputs in its order.
    An output in shared memory is copied into the client's region here
    (guarded: InferError(400) when the client truncated its object) and
    listed with name, datatype and shape only (no data, no parameters:
    Triton's C++ client reads any output parameters as binary data)."""
    outputs, chunks, texts = [], [], []
    # JSON data is written apart and joined into the header's text at a
    # random mark: a list of a whole output's Python numbers would cost the
    # server several times the bound place_outputs checked.
    mark = secrets.token_hex(16)
    for s in slots:
        if s.placement == PLACE_SHM:
            try:
                s.region.write_from(np.ascontiguousarray(s.array))
            except shmreg.Error as e:
                raise InferError.from_shmreg(e) from None
    for s in slots:
        t = s.tensor
        o = {"name": t.name, "datatype": t.datatype, "shape": list(t.shape)}
        if s.placement == PLACE_BINARY:
            o["parameters"] = {"binary_data_size": s.array.nbytes}
            chunks.append(s.array)
        elif s.placement == PLACE_JSON:
            o["data"] = f"{mark}{len(texts)}"
            texts.append(_json_array(s.array))
        outputs.append(o)
    header = {"model_name": model, "model_version": version, "outputs": outputs}
    if request.id is not None:
        header["id"] = request.id
    text = json.dumps(header, separators=(",", ":")).encode()
    if texts:
        parts = []
        for i, data in enumerate(texts):
            before, text = text.split(f'"{mark}{i}"'.encode(), 1)
            parts += [before, *data]
        text = b"".join([*parts, text])
        del parts, texts
    if not chunks:
        return Response(text, media_type="application/json")
    body = b"".join([text, *(np.ascontiguousarray(c).view(np.uint8).reshape(-1) for c in chunks)])
    return Response(body, media_type="application/octet-stream",
                    headers={"Inference-Header-Content-Length": str(len(text))})


# ------------------------------------------------------------------ metrics

# The C server's names (server/src/http/metrics.c): (name, kind, help, Stats field).
_REGISTRY_METRICS = (
    ("shmreg_regions", "gauge", "Regions listed by status: registered or pending.", "regions"),
    ("shmreg_pending_regions", "gauge",
     "Regions unregistered under the defer policy that requests still hold.", "pending_regions"),
    ("shmreg_detached_regions", "gauge",
     "Regions unregistered under the detach policy, still mapped for references held.",
     "detached_regions"),
    ("shmreg_references", "gauge", "References requests hold on listed regions.", "references"),
    ("shmreg_mapped_regions", "gauge", "Regions still mapped: listed and detached.",
     "mapped_regions"),
    ("shmreg_mapped_bytes", "gauge",
     "Bytes mapped, cached and waiting for reclaim included.", "mapped_bytes"),
    ("shmreg_pinned_bytes", "gauge", "Bytes page-locked, cached included.", "pinned_bytes"),
    ("shmreg_registrations_total", "counter", "Successful registrations.", "registrations"),
    ("shmreg_registration_refusals_total", "counter", "Registrations refused, for any reason.",
     "refusals"),
    ("shmreg_reclaim_waiting_bytes", "gauge",
     "Bytes of released regions the reclaim thread has yet to unmap.", "reclaim_waiting_bytes"),
    ("shmreg_cached_bytes", "gauge",
     "Bytes of mappings the registration cache keeps with no region on them.", "cached_bytes"),
    ("shmreg_cached_mappings", "gauge", "Mappings the registration cache keeps.",
     "cached_mappings"),
    ("shmreg_cache_hits_total", "counter", "Registrations that reused a cached or live mapping.",
     "cache_hits"),
    ("shmreg_cache_misses_total", "counter",
     "Registrations of a cacheable source that opened a new mapping.", "cache_misses"),
    ("shmreg_cache_evictions_total", "counter",
     "Cached mappings unmapped for cache_bytes, for room, or by trim.", "cache_evictions"),
)


class RegistryCollector:
    """A prometheus_client collector of ``registry``'s counters under the C
    server's names: one Registry.stats() snapshot a scrape, so the counters
    of one page agree with each other. ``metrics_router`` serves it; a server
    that already has a /metrics page of prometheus_client's default registry
    (KServe's ModelServer) adds it there instead:
    ``prometheus_client.REGISTRY.register(RegistryCollector(registry))``."""

    def __init__(self, registry: Any) -> None:
        self.registry = registry

    def collect(self) -> Any:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
        stats = self.registry.stats()
        for name, kind, help_text, field_name in _REGISTRY_METRICS:
            family = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
            yield family(name, help_text, value=getattr(stats, field_name))


def metrics_router(registry: Any, *, path: str = "/metrics", **router_options: Any) -> APIRouter:
    """An APIRouter serving ``GET /metrics`` (Prometheus text format) with
    ``registry``'s counters under the C server's ``shmreg_*`` names:
    ``shmreg_regions``, ``shmreg_mapped_bytes``, ``shmreg_registrations_total``,
    ... (docs/python.md lists them). Needs ``prometheus_client``. The page is
    made from its own ``CollectorRegistry``, so a server that already exports
    prometheus_client's default registry keeps its own ``/metrics`` apart
    (mount this one under another ``path``, or register a
    ``RegistryCollector`` in that registry)."""
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

    collectors = CollectorRegistry(auto_describe=False)
    collectors.register(RegistryCollector(registry))
    router = APIRouter(**router_options)

    def metrics() -> Response:
        try:
            page = generate_latest(collectors)
        except shmreg.Error as e:  # a closed registry
            return error_response(http_status(e), str(e))
        return Response(page, media_type=CONTENT_TYPE_LATEST)

    router.add_api_route(path, metrics, methods=["GET"])
    return router


# ------------------------------------------------- KServe's Python ModelServer


def _kserve_request(model: str, request: InferRequest) -> Any:
    """The decoded request as ``kserve.InferRequest``: each input's numpy
    array (a copy of the shared memory, or the request's own data)."""
    from kserve import InferInput
    from kserve import InferRequest as KServeRequest
    inputs = [InferInput(t.name, list(t.shape), t.datatype, data=t.data) for t in request.inputs]
    return KServeRequest(model, inputs, request_id=request.id, parameters=request.parameters)


def _kserve_outputs(model: str, response: Any) -> tuple[list[Tensor], dict[str, np.ndarray]]:
    outputs = getattr(response, "outputs", None)
    if outputs is None:  # a model answering a dict speaks v1, not v2
        raise InferError(500, f"model '{model}' did not answer with a kserve.InferResponse")
    described, arrays = [], {}
    for o in outputs:
        array = np.asarray(o.as_numpy())
        if o.datatype not in DATATYPES:
            raise InferError(500, f"output '{o.name}' of model '{model}' has datatype "
                                  f"'{o.datatype}', which this router cannot place")
        described.append(Tensor(o.name, o.datatype, [int(d) for d in o.shape],
                                byte_size=array.nbytes))
        arrays[o.name] = array
    return described, arrays


def model_server_router(registry: Any, dataplane: Any, *, allow_client_shm: bool = False,
                        max_body_bytes: int = MAX_BODY_BYTES, limit_name: str = LIMIT_NAME,
                        **router_options: Any) -> APIRouter:
    """Triton's shared-memory protocol for a KServe Python model server:

        server = kserve.ModelServer()
        kserve.model_server.app.include_router(
            shmreg.kserve.model_server_router(registry, server.dataplane))
        server.start([model])

    The router holds ``shared_memory_router(registry)`` and
    ``POST /v2/models/{name}[/versions/{v}]/infer``, which, mounted before the
    ModelServer adds its own routes (``start`` does that), answers every v2
    inference: JSON, binary tensor data, or tensors naming regions. Inputs
    are decoded by ``decode_request`` (regions read with the guarded copy),
    handed to the model as a ``kserve.InferRequest`` through
    ``dataplane.infer`` (so the model's preprocess, predict and postprocess
    run as usual), and its ``InferResponse`` outputs are placed as the request
    asks (``place_outputs``, ``encode_response``: into the client's region,
    guarded). An unknown or unready model raises KServe's own errors, which
    its app answers as usual.

    The C server's defences, by default as there: registering client shared
    memory answers 501 unless ``allow_client_shm``; a request body, a tensor
    copied out of a region and a response are each bounded by
    ``max_body_bytes`` (400 naming ``limit_name``); a malformed body (nested
    too deep, a shape whose byte size overflows) is a 400."""
    router = shared_memory_router(registry, allow_client_shm=allow_client_shm,
                                  max_body_bytes=max_body_bytes, limit_name=limit_name,
                                  **router_options)
    limits = {"limit_name": limit_name}

    async def infer(request: Request, model_name: str, model_version: str | None = None,
                    regions: RequestRegions = Depends(request_regions(registry))) -> Response:
        if not await dataplane.model_ready(model_name):
            from kserve.errors import ModelNotReady
            raise ModelNotReady(model_name)
        try:
            body = await read_body(request, max_body_bytes, limit_name)
            decoded = decode_request(body, header_length(request.headers), model_name, regions,
                                     max_copy_bytes=max_body_bytes, **limits)
            del body
            response, _ = await dataplane.infer(model_name, _kserve_request(model_name, decoded))
            described, arrays = _kserve_outputs(model_name, response)
            slots = place_outputs(decoded, model_name, described, regions,
                                  max_response_bytes=max_body_bytes, **limits)
            for slot in slots:
                np.copyto(slot.array, arrays[slot.tensor.name].reshape(slot.array.shape),
                          casting="unsafe")
            return encode_response(model_name, decoded, slots)
        except InferError as e:
            return e.response()

    router.add_api_route("/v2/models/{model_name}/infer", infer, methods=["POST"])
    router.add_api_route("/v2/models/{model_name}/versions/{model_version}/infer", infer,
                         methods=["POST"])
    return router
