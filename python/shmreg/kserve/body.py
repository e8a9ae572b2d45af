"""A request body: read within its bound, and parsed as the C server parses
JSON."""
from __future__ import annotations

import json
from typing import Any

from fastapi import Request

from .status import InferError

# The C server's default --max-body-mb, and the flag its messages name: the
# most bytes one tensor copied out of shared memory, or one response, may make
# the server hold. A region can be far larger than any body a client may send
# (a sparse object costs its client nothing), so shared memory must not be a
# way around the body's bound.
MAX_BODY_BYTES = 256 << 20
LIMIT_NAME = "--max-body-mb"

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _int64(text: str) -> int:
    value = int(text)
    if not _INT64_MIN <= value <= _INT64_MAX:
        # The C server's words for an integer it cannot hold (it reads all
        # of uint64; this module stops at int64).
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
