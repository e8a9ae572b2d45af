"""Register a framework's GPU tensor with a server's Unix socket (--uds), so
that requests can name it as a CUDA shared-memory region.

    import torch
    from shmreg import cuda_client

    x = torch.zeros(1 << 20, dtype=torch.float32, device="cuda")
    sock = cuda_client.connect("/run/shmreg.sock")
    nbytes = cuda_client.register_tensor(sock, "x", x)   # 4 MiB, "x"
    # ... infer over HTTP or gRPC naming region "x" ...
    sock.close()                                  # the server unregisters it

Whatever allocated the tensor: the library asks the driver
(shmreg/region_socket.h, shmreg_send_cuda_region) and sends a stream-ordered
pool's descriptor, a VMM range's chunks (PyTorch's expandable segments) or a
legacy CUDA IPC handle with the tensor's offset in its allocation.
docs/cuda.md says what each allocator needs.

The tensor may be a PyTorch tensor, a CuPy array, anything with
__cuda_array_interface__ (versions 2 and 3), or a DLPack producer
(__dlpack__ and __dlpack_device__) on a CUDA device. It must be compact
(C-contiguous): a region is one window of bytes.

Streams: registering reads no byte of the tensor, so nothing is
synchronised here (neither the interface's "stream" key nor a DLPack
stream). The bytes the server reads are those written when a request that
names the region arrives: synchronise the stream that wrote them before
sending it (torch.cuda.current_stream().synchronize(), or the CuPy
stream's), as with any CUDA shared memory. The server's writes into an
output are complete when its response arrives.

The memory must stay allocated while the server holds the region: keep
the tensor until the connection is closed.
"""

from __future__ import annotations

import re
import socket
import struct

from . import _shmreg
from .memfd_client import connect

__all__ = ["connect", "cuda_window", "register_tensor"]

# DLPack's device types (dlpack.h, DLDeviceType) named in messages.
_DLPACK_DEVICES = {1: "CPU", 2: "CUDA", 3: "CUDA host (pinned)", 4: "OpenCL", 7: "Vulkan", 8: "Metal",
                   9: "VPI", 10: "ROCm", 11: "ROCm host", 13: "CUDA managed", 14: "oneAPI"}
_KDL_CUDA = 2
# __cuda_array_interface__'s typestr: byte order, kind, item size in bytes.
_TYPESTR = re.compile(r"[<>|=]?[biufcmMOSUV](\d+)")
_TIMEVAL = struct.Struct("@ll")


def _cai_window(cai, what):
    """(pointer, byte size, read_only) of a __cuda_array_interface__ dict."""
    if not isinstance(cai, dict):
        raise TypeError(f"{what}.__cuda_array_interface__ must be a dict, not {type(cai).__name__}")
    missing = [k for k in ("data", "shape", "typestr") if k not in cai]
    if missing:
        raise TypeError(f"{what}.__cuda_array_interface__ lacks {', '.join(repr(k) for k in missing)}")
    data, shape, typestr = cai["data"], tuple(cai["shape"]), cai["typestr"]
    if not (isinstance(data, tuple) and len(data) == 2 and isinstance(data[0], int)):
        raise TypeError(f"{what}.__cuda_array_interface__['data'] must be (pointer, read_only), not {data!r}")
    match = _TYPESTR.fullmatch(typestr) if isinstance(typestr, str) else None
    if not match:
        raise TypeError(f"{what}.__cuda_array_interface__['typestr'] is not a type string: {typestr!r}")
    item = int(match.group(1))
    if any(not isinstance(n, int) or n < 0 for n in shape):
        raise ValueError(f"{what}: the shape must be non-negative ints, not {shape!r}")
    strides = cai.get("strides")
    if strides is not None and not _compact(shape, tuple(strides), item):
        raise ValueError(f"{what} is not contiguous (shape {shape}, strides {tuple(strides)} in bytes): a region "
                         "is one window of bytes; register a contiguous copy (tensor.contiguous(), "
                         "cupy.ascontiguousarray)")
    count = 1
    for n in shape:
        count *= n
    return data[0], count * item, bool(data[1])


def _compact(shape, strides, item):
    """Whether strides (bytes) lay shape out row-major without gaps; a
    dimension of one element may have any stride."""
    if len(strides) != len(shape):
        return False
    expected = item
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != expected:
            return False
        expected *= n
    return True


def _dlpack_window(obj, what):
    """(pointer, byte size, read_only) of a DLPack producer on a CUDA device,
    checked by its __dlpack_device__ before any capsule is made."""
    device = obj.__dlpack_device__()
    kind = int(device[0])
    if kind != _KDL_CUDA:
        raise ValueError(f"{what} is on a DLPack device of type {kind} "
                         f"({_DLPACK_DEVICES.get(kind, 'unknown')}), not CUDA (2): only GPU memory is "
                         "registered this way (host memory goes through shmreg.memfd_client)")
    kind, _, ptr, nbytes, compact = _shmreg.dlpack_window(obj.__dlpack__())
    if kind != _KDL_CUDA:
        raise ValueError(f"{what}'s DLPack capsule is on device type {kind}, not CUDA (2)")
    if not compact:
        raise ValueError(f"{what} is not contiguous (its DLPack strides leave gaps): a region is one window "
                         "of bytes; register a contiguous copy")
    return ptr, nbytes, False


def cuda_window(tensor: object) -> tuple[int, int, bool]:
    """(device pointer, byte size, read_only) of a compact GPU tensor: a
    PyTorch tensor, a CuPy array, an object with __cuda_array_interface__ or
    a DLPack producer on a CUDA device. Raises TypeError for an object that
    is none of these, ValueError for host memory, a non-CUDA device, a
    tensor that is not contiguous or one of no bytes."""
    what = f"the {type(tensor).__name__}"
    # PyTorch raises for the interface where it has none to give: a CPU
    # tensor (AttributeError), a dtype the interface cannot name such as
    # bfloat16 (TypeError), a tensor that requires grad (RuntimeError). DLPack
    # answers then: with the CPU device, refused by it; with the tensor;
    # or with PyTorch's own reason.
    try:
        cai = tensor.__cuda_array_interface__
    except (AttributeError, TypeError, RuntimeError):
        cai = None
    if cai is not None:
        ptr, nbytes, read_only = _cai_window(cai, what)
    elif hasattr(tensor, "__dlpack__") and hasattr(tensor, "__dlpack_device__"):
        ptr, nbytes, read_only = _dlpack_window(tensor, what)
    else:
        raise TypeError(f"{what} is not a GPU tensor: it has neither __cuda_array_interface__ nor "
                        "__dlpack__ and __dlpack_device__")
    if nbytes == 0:
        raise ValueError(f"{what} holds no bytes: a region needs at least one")
    return ptr, nbytes, read_only


def _send(sock: socket.socket | int, name: str, ptr: int, nbytes: int, readonly: bool) -> None:
    """shmreg_send_cuda_region on sock, a socket object (its timeout becomes
    SO_RCVTIMEO for the call: the library reads the answer with a blocking
    recv) or a descriptor in blocking mode."""
    if not isinstance(sock, socket.socket):
        _shmreg.send_cuda_region(sock, name, ptr, nbytes, readonly)
        return
    timeout = sock.gettimeout()
    if sock.fileno() < 0:  # closed: the library refuses it by its number
        _shmreg.send_cuda_region(-1, name, ptr, nbytes, readonly)
        return
    saved = sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, _TIMEVAL.size)
    try:
        sock.setblocking(True)
        if timeout is not None:
            seconds = int(timeout)
            # A zero timeval means no bound: the shortest wait stands for 0.
            micros = max(int((timeout - seconds) * 1e6), 0 if seconds else 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, _TIMEVAL.pack(seconds, micros))
        _shmreg.send_cuda_region(sock.fileno(), name, ptr, nbytes, readonly)
    finally:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, saved)
        sock.settimeout(timeout)


def register_tensor(sock: socket.socket | int, name: str, tensor: object, readonly: bool = False) -> int:
    """Ask the server at the other end of sock (from connect(), or the
    descriptor of a connected AF_UNIX SOCK_SEQPACKET socket in blocking mode)
    to register the bytes of tensor as CUDA region `name`, and wait for its
    answer. readonly: the server may only read the region (a tensor whose
    __cuda_array_interface__ says read-only needs it). Returns the byte size
    registered: the byte_size of set_shared_memory for the whole tensor.

    The tensor is checked before anything is sent (TypeError, ValueError;
    see cuda_window). Then the library's or the server's refusal raises the
    shmreg.Error subclass of its code with its message: InvalidArgument (a
    bad socket or name, a pointer the driver does not know), Unsupported (no
    CUDA here, memory that cannot be shared this way: the message says why),
    Cuda, System (no answer within the socket's timeout), AlreadyExists,
    ... Closing the connection unregisters every region sent over it."""
    if not isinstance(readonly, bool):
        raise TypeError(f"readonly must be True or False, not {readonly!r}")
    ptr, nbytes, read_only = cuda_window(tensor)
    if read_only and not readonly:
        raise ValueError(f"the {type(tensor).__name__} is read-only (its __cuda_array_interface__ says so): "
                         "register it with readonly=True")
    _send(sock, name, ptr, nbytes, readonly)
    return nbytes
