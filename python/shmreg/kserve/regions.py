"""The region references one request holds, released together when its
response has been sent."""
from __future__ import annotations

from typing import Any, AsyncIterator, Callable

import numpy as np

import shmreg

from .body import LIMIT_NAME, MAX_BODY_BYTES
from .status import InferError, _clean_errors


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
