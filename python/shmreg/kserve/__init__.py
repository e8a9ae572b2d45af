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

Its modules, by concern: ``status`` (library errors to HTTP statuses,
``InferError``), ``body`` (a request body's bound and JSON), ``tensors``
(datatypes, ``Tensor``, shared-memory windows), ``regions``
(``RequestRegions``), ``request`` (``decode_request``), ``response``
(``place_outputs``, ``encode_response``), ``shared_memory``
(``shared_memory_router``), ``metrics`` (``metrics_router``) and
``model_server`` (``model_server_router``). Import from ``shmreg.kserve``
itself: the names listed in ``__all__`` are the interface.
"""
from __future__ import annotations

from .body import LIMIT_NAME, MAX_BODY_BYTES, parse_json, read_body
from .metrics import RegistryCollector, metrics_router
from .model_server import model_server_router
from .regions import RequestRegions, request_regions
from .request import InferRequest, decode_request, header_length
# The values of OutputSlot.placement: public, though outside __all__.
from .response import PLACE_BINARY, PLACE_JSON, PLACE_SHM  # noqa: F401
from .response import OutputSlot, encode_response, place_outputs
from .shared_memory import CLIENT_SHM_DISABLED, shared_memory_router
from .status import InferError, error_response, http_status
from .tensors import DATATYPES, Tensor

__all__ = [
    "CLIENT_SHM_DISABLED", "DATATYPES", "LIMIT_NAME", "MAX_BODY_BYTES", "InferError",
    "InferRequest", "OutputSlot", "RegistryCollector", "RequestRegions", "Tensor",
    "decode_request", "encode_response", "error_response", "header_length", "http_status",
    "metrics_router", "model_server_router", "parse_json", "place_outputs", "read_body",
    "request_regions", "shared_memory_router",
]
