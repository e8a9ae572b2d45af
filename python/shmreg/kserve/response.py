"""A KServe v2 inference response: each output placed as the request asks
(JSON, binary data, or the client's shared-memory region), then encoded."""
from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
from fastapi.responses import Response

import shmreg

from .body import LIMIT_NAME, MAX_BODY_BYTES
from .regions import RequestRegions
from .request import InferRequest
from .status import InferError, _clean_errors
from .tensors import _NO_JSON, Tensor, _expected_size, _typed, _window

# An upper bound on the bytes of JSON one byte of tensor data becomes in a
# response (the C server's): "-128," is five characters for one INT8, "false,"
# six for one BOOL.
_JSON_BYTES_PER_DATA_BYTE = 7

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
