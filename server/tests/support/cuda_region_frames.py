"""The CUDA-region register request of shmreg/region_socket.h ("the
CUDA-region wire format"), built byte for byte with struct, so that tests can
send well-formed requests without a GPU and malformed ones no client library
would send.

A request is one shmreg_send_fds frame on a SOCK_SEQPACKET socket: a 16-byte
header (uint32 magic "SRFS", uint32 payload size, uint32 descriptor count,
uint32 zero), the descriptors in one SCM_RIGHTS message, then the payload:

    uint32 magic "SRC1", uint32 flags, uint32 source, uint32 chunk count,
    uint64 offset, uint64 byte_size, 40 bytes of GPU UUID, uint32 name
    length, uint32 zero                      (the 80-byte header)
    legacy IPC: the 64-byte handle; a pool: the 64-byte export data;
    a VMM range: one uint64 size per chunk
    the name, not NUL-terminated

Host byte order throughout. The answer is the memfd-region format's: one
record, "<code name> <message>".
"""
import array
import socket
import struct

FDS_FRAME = struct.Struct("=IIII")
FDS_FRAME_MAGIC = 0x53465253
REQUEST = struct.Struct("=IIIIQQ40sII")
REQUEST_MAGIC = 0x31435253
assert REQUEST.size == 80, REQUEST.size  # SHMREG_CUDA_REGION_REQUEST_HEADER

SOURCE_CUDA_IPC = 1
SOURCE_CUDA_VMM_RANGE = 5
SOURCE_CUDA_POOL = 6
READONLY = 0x1
CHUNKS_MAX = 253  # SHMREG_CUDA_CHUNKS_MAX, the kernel's SCM_MAX_FD
HANDLE_BYTES = 64
ANSWER_MAX = 1024
UUID = "GPU-0badc0de-1234-5678-9abc-def012345678"


def payload(source, name, byte_size, offset=0, flags=0, uuid=UUID, chunk_sizes=(), handle=None,
            magic=REQUEST_MAGIC, chunk_count=None, name_length=None, zero=0):
    """A request's payload. The keyword arguments after flags override what
    a well-formed request carries: chunk_count (default: the number of
    chunk_sizes for a range, else 0), name_length (default: the name's)."""
    encoded = name.encode() if isinstance(name, str) else bytes(name)
    raw_uuid = uuid.encode() if isinstance(uuid, str) else bytes(uuid)
    assert len(raw_uuid) == 40, f"a UUID field is 40 bytes, not {len(raw_uuid)}: struct would pad or cut it"
    if chunk_count is None:
        chunk_count = len(chunk_sizes) if source == SOURCE_CUDA_VMM_RANGE else 0
    if name_length is None:
        name_length = len(encoded)
    head = REQUEST.pack(magic, flags, source, chunk_count, offset, byte_size, raw_uuid, name_length, zero)
    if source == SOURCE_CUDA_VMM_RANGE:
        body = b"".join(struct.pack("=Q", size) for size in chunk_sizes)
    else:
        body = bytes(range(HANDLE_BYTES)) if handle is None else handle
    return head + body + encoded


def frame(data, count, magic=FDS_FRAME_MAGIC, size=None, zero=0):
    """data in a shmreg_send_fds frame whose header says count descriptors
    and size payload bytes (default: len(data))."""
    return FDS_FRAME.pack(magic, len(data) if size is None else size, count, zero) + data


def send(sock, record, fds=(), rights_messages=1):
    """Send record with fds on it, in rights_messages SCM_RIGHTS messages
    (none when there are no fds; the kernel hands the receiver one)."""
    fds = list(fds)
    if not fds:
        sock.sendmsg([record])
        return
    step = -(-len(fds) // rights_messages)
    ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds[i:i + step]))
                 for i in range(0, len(fds), step)]
    sock.sendmsg([record], ancillary)


def answer(sock):
    """(code name, message) of the server's next answer."""
    got = sock.recv(ANSWER_MAX)
    if not got:
        raise ConnectionError("the server closed the connection without an answer")
    code, _, message = got.decode(errors="replace").partition(" ")
    return code, message


def request(sock, data, fds=(), **frame_args):
    """Send payload data with fds in a frame (its header's count: the fds
    sent, unless frame_args say otherwise); the answer."""
    frame_args.setdefault("count", len(fds))
    send(sock, frame(data, **frame_args), fds)
    return answer(sock)
