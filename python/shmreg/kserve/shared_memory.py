"""Triton's system and CUDA shared-memory endpoints (register, unregister,
status) as an APIRouter over a registry."""
from __future__ import annotations

import base64
import binascii
from typing import Any, Sequence

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

import shmreg

from .body import LIMIT_NAME, MAX_BODY_BYTES, _is_int, _size, parse_json, read_body
from .status import InferError, error_response, http_status

# Triton 2.73's answer (word for word, as the C server's) to register and
# unregister when client shared memory is not allowed: UNSUPPORTED, HTTP 501.
# Status stays open, as there.
CLIENT_SHM_DISABLED = ("Client shared memory is disabled. Start the server with "
                       "'--allow-client-shm=true' to enable.")

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
