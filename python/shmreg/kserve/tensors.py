"""KServe v2 tensors: the datatypes, a tensor, and the shared-memory window
its parameters name."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .body import _INT64_MAX, _INT64_MIN, _is_int, _size
from .status import InferError

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


@dataclass
class Tensor:
    """One input or output: name, datatype, shape, and its data as a numpy
    array of that datatype and shape (for BYTES, the raw uint8 bytes)."""
    name: str
    datatype: str
    shape: list[int]
    data: np.ndarray | None = None
    byte_size: int = 0

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
