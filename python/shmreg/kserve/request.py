"""A KServe v2 inference request decoded into numpy arrays: JSON data, the
binary tensor extension, or tensors in shared-memory regions."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .body import _INT64_MAX, LIMIT_NAME, MAX_BODY_BYTES, _size, parse_json
from .regions import RequestRegions
from .status import InferError, _clean_errors
from .tensors import (_NO_JSON, DATATYPES, Tensor, _element_ok, _expected_size, _flatten,
                      _typed, _window)

@dataclass
class InferRequest:
    id: str | None
    inputs: list[Tensor]
    outputs: list[dict] | None   # the request's "outputs", or None: every output
    parameters: dict
    header: dict = field(repr=False, default_factory=dict)


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
