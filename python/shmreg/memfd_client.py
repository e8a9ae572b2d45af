"""Register sealed memfd regions with a server's Unix socket, so that a
client's memory can be neither truncated nor grown under the server.

Standard library only: this file needs neither the compiled shmreg extension
nor anything from PyPI, so a client may also copy it alone. It speaks the
format of shmreg/region_socket.h's shmreg_send_region (the C client):

    import mmap
    from shmreg import memfd_client

    fd = memfd_client.create_sealed_memfd(4096, "my_inputs")
    buf = mmap.mmap(fd, 4096)                      # fill it: it is shared
    sock = memfd_client.connect("/run/shmreg.sock")
    memfd_client.register(sock, "my_inputs", fd, 4096)
    # ... infer over HTTP or gRPC naming region "my_inputs" ...
    sock.close()                                   # the server unregisters it

The server registers each region under a tag of the connection and
unregisters them all when the connection closes, including when this process
dies, so nothing is left behind.
"""

import fcntl
import os
import socket
import struct

# shmreg_send_fd's frame around a payload: magic "SHRF", payload size.
_FRAME = struct.Struct("=II")
_FRAME_MAGIC = 0x46524853
# The register request's header: magic "SRG1", flags, offset, byte_size.
_REQUEST = struct.Struct("=IIQQ")
_REQUEST_MAGIC = 0x31475253
ANSWER_MAX = 1024

READONLY = 0x1  # SHMREG_READONLY: the server maps the window read-only
NO_PIN = 0x4  # SHMREG_NO_PIN: the server does not page-lock it


class RegionRefused(Exception):
    """The server refused a registration. code is the library's code name
    (e.g. "SHMREG_ERR_INVALID_ARG"); the message is the server's."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


def create_sealed_memfd(size, debug_name="shmreg"):
    """A memfd of size bytes that can never shrink or grow (F_SEAL_SHRINK,
    F_SEAL_GROW), so the server may map it without fear of SIGBUS. The caller
    owns the descriptor; it is not inherited by child processes."""
    if size <= 0:
        raise ValueError(f"size must be positive, got {size}")
    fd = os.memfd_create(debug_name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, size)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
    except BaseException:
        os.close(fd)
        raise
    return fd


def connect(path, timeout=30.0):
    """A connection to the server's socket (SOCK_SEQPACKET). timeout bounds
    each wait for an answer; None waits forever."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        sock.settimeout(timeout)
        sock.connect(path)
    except BaseException:
        sock.close()
        raise
    return sock


def request_bytes(name, byte_size, offset=0, flags=0):
    """The frame shmreg_send_region sends (without its descriptor)."""
    encoded = name.encode() if isinstance(name, str) else bytes(name)
    payload = _REQUEST.pack(_REQUEST_MAGIC, flags, offset, byte_size) + encoded
    return _FRAME.pack(_FRAME_MAGIC, len(payload)) + payload


def register(sock, name, fd, byte_size, offset=0, flags=0):
    """Ask the server to register [offset, offset + byte_size) of fd as
    region name; returns the server's message, or raises RegionRefused with
    its code and message. The caller keeps fd and may close it afterwards."""
    socket.send_fds(sock, [request_bytes(name, byte_size, offset, flags)], [fd])
    answer = sock.recv(ANSWER_MAX)
    if not answer:
        raise ConnectionError("the server closed the connection without an answer")
    code, _, message = answer.decode(errors="replace").partition(" ")
    if code != "SHMREG_OK":
        raise RegionRefused(code, message)
    return message
