"""--uds PATH: GPU memory registered over the same Unix socket as sealed
memfds, in the CUDA-region format of shmreg/region_socket.h (a VMM range
with a descriptor per chunk, a pool allocation with the pool's descriptor, a
legacy IPC handle with none), on a machine without a GPU.

The requests are built byte for byte (support/cuda_region_frames.py), with
memfds standing in for the chunks' and the pool's descriptors: the server
cannot tell them apart before the driver does. Without a GPU a well-formed
request reaches the library and is answered UNSUPPORTED; everything checked
before that (the form of the request, the descriptors, the connection's and
the uid's limits, a taken name) is answered as on a GPU machine, every
descriptor that came is closed, and the connection stays usable."""
import errno
import os
import socket

import pytest

import cuda_region_frames as crf
from uds_client import REGION_BYTES, filled_region, load_memfd_client
from uds_fixtures import settled_open_fds, sock_path, status, uds_server  # noqa: F401 (fixtures)

pytestmark = pytest.mark.servers("c")

mc = load_memfd_client()

CHUNK = 2 << 20  # PyTorch's expandable segments' chunk on most GPUs
# A driver here would try the stand-in descriptors and answer CUDA instead.
needs_no_gpu = pytest.mark.skipif(os.path.exists("/proc/driver/nvidia"),
                                  reason="a GPU driver is loaded: these tests expect a machine without one")


def stand_ins(n):
    """n memfds standing in for the descriptors a GPU client would send."""
    return [os.memfd_create(f"stand_in_{i}", os.MFD_CLOEXEC) for i in range(n)]


def close_all(fds):
    for fd in fds:
        os.close(fd)


def vmm_range(name, chunks=3, **overrides):
    """A window across chunks of CHUNK bytes: from the middle of the first
    into the last, as a tensor of expandable segments may lie."""
    args = dict(chunk_sizes=[CHUNK] * chunks, offset=CHUNK // 2, byte_size=(chunks - 1) * CHUNK)
    args.update(overrides)
    return crf.payload(crf.SOURCE_CUDA_VMM_RANGE, name, **args)


def pool(name, **overrides):
    args = dict(offset=256, byte_size=1 << 20)
    args.update(overrides)
    return crf.payload(crf.SOURCE_CUDA_POOL, name, **args)


def legacy_ipc(name, **overrides):
    args = dict(offset=4096, byte_size=1 << 20)
    args.update(overrides)
    return crf.payload(crf.SOURCE_CUDA_IPC, name, **args)


# (payload, descriptors sent) of a well-formed request of each source, by
# the region name it asks for.
WELL_FORMED = {
    "gpu_range": (vmm_range("gpu_range"), 3),
    "gpu_pool": (pool("gpu_pool"), 1),
    "gpu_ipc": (legacy_ipc("gpu_ipc"), 0),
}


def send_request(sock, data, n_fds, **frame_args):
    """Send data with n_fds fresh stand-ins (closed here once sent); the answer."""
    fds = stand_ins(n_fds)
    try:
        return crf.request(sock, data, fds, **frame_args)
    finally:
        close_all(fds)


def register_memfd(sock, name):
    fd, _ = filled_region(mc)
    try:
        return mc.register(sock, name, fd, REGION_BYTES)
    finally:
        os.close(fd)


# ------------------------------------------------- well-formed, no GPU here


@needs_no_gpu
@pytest.mark.parametrize("name", sorted(WELL_FORMED))
def test_well_formed_request_is_unsupported_and_the_connection_stays_usable(uds_server, name):
    server = uds_server()
    sock = mc.connect(server.sock_path)
    code, message = send_request(sock, *WELL_FORMED[name])
    assert code == "SHMREG_ERR_UNSUPPORTED", (code, message)
    assert f"'{name}'" in message and "CUDA" in message, message
    assert status(server, "cuda") == {} and status(server) == {}
    # The same connection registers a memfd region as usual.
    assert "registered system shared memory region 'after_gpu'" in register_memfd(sock, "after_gpu")
    assert sorted(status(server)) == ["after_gpu"]
    sock.close()
    server.wait_until(lambda: status(server) == {}, what="the connection's region to go")


@needs_no_gpu
def test_the_most_chunks_one_message_carries_reach_the_library(uds_server):
    server = uds_server()
    sock = mc.connect(server.sock_path)
    code, message = send_request(sock, vmm_range("widest", chunks=crf.CHUNKS_MAX), crf.CHUNKS_MAX)
    assert code == "SHMREG_ERR_UNSUPPORTED", (code, message)
    assert "'widest'" in message, message
    sock.close()


# ------------------------------------------------------------- descriptors


# (payload, descriptors sent, frame arguments) of requests that carry
# descriptors: well-formed ones and refused ones of each kind.
CARRYING_FDS = [
    (vmm_range("leak_range"), 3, {}),
    (pool("leak_pool"), 1, {}),
    (vmm_range("leak_range_253", chunks=crf.CHUNKS_MAX), crf.CHUNKS_MAX, {}),
    (vmm_range("more_fds", chunks=2), 3, {}),
    (vmm_range("fewer_fds", chunks=3), 2, {}),
    (legacy_ipc("ipc_with_fd"), 1, {}),
    (pool("pool_two_fds"), 2, {}),
    (vmm_range("bad_magic", magic=0x58585858), 3, {}),
    (vmm_range("bad_uuid", uuid="x" * 40), 3, {}),
    (vmm_range("frame_count_lies"), 3, {"count": 2}),
    (vmm_range("cut_short")[:40], 3, {}),
    (pool("bad_frame_magic"), 1, {"magic": 0x12345678}),
]


def test_every_descriptor_that_came_is_closed(uds_server):
    """The server's descriptor count comes back to where it was after many
    requests carrying descriptors, registered or refused."""
    server = uds_server()
    sock = mc.connect(server.sock_path)
    assert register_memfd(sock, "warm_up")  # the HTTP and socket paths are set up
    status(server)
    baseline = settled_open_fds(server)
    sent = 0
    for _ in range(5):
        for data, n_fds, frame_args in CARRYING_FDS:
            code, message = send_request(sock, data, n_fds, **frame_args)
            assert code != "SHMREG_OK", (data[-20:], message)
            sent += n_fds
    assert sent > 1000
    left = settled_open_fds(server) - baseline
    assert left == 0, f"{left} more descriptors open after {sent} were sent"
    assert sorted(status(server)) == ["warm_up"] and status(server, "cuda") == {}
    sock.close()


def test_more_descriptors_than_a_range_may_have_cannot_be_sent():
    """SHMREG_CUDA_CHUNKS_MAX is what one message can carry: the kernel
    refuses a 254th descriptor at the sender (SCM_MAX_FD), in one message of
    descriptors or split over two, so no server ever sees it."""
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    fds = stand_ins(crf.CHUNKS_MAX + 1)
    try:
        for messages in (1, 2):
            with pytest.raises(OSError) as e:
                crf.send(a, crf.frame(vmm_range("too_wide", chunks=crf.CHUNKS_MAX + 1), len(fds)), fds, messages)
            assert e.value.errno == errno.EINVAL
    finally:
        close_all(fds)
        a.close()
        b.close()


# ------------------------------------------------------------ malformed


# (what, payload, descriptors sent, frame arguments, code, part of the message)
MALFORMED = [
    ("wrong magic", vmm_range("m_magic", magic=0x31475253), 3, {},
     "SHMREG_ERR_INVALID_ARG", "not a CUDA register request: its magic"),
    ("zero field not zero", legacy_ipc("m_zero", zero=7), 0, {},
     "SHMREG_ERR_INVALID_ARG", "its magic or its zero field"),
    ("more fds than chunks", vmm_range("m_more", chunks=2), 3, {},
     "SHMREG_ERR_OUT_OF_BOUNDS", "carries 2 descriptors, this one 3"),
    ("fewer fds than chunks", vmm_range("m_fewer", chunks=3), 2, {},
     "SHMREG_ERR_NOT_FOUND", "carries 3 descriptors, this one 2"),
    ("a range without chunks", vmm_range("m_none", chunks=0, byte_size=1), 0, {},
     "SHMREG_ERR_INVALID_ARG", "a chunk count that does not fit its source"),
    ("more chunks than SHMREG_CUDA_CHUNKS_MAX", vmm_range("m_254", chunks=crf.CHUNKS_MAX + 1), crf.CHUNKS_MAX, {},
     "SHMREG_ERR_INVALID_ARG", "a chunk count that does not fit its source"),
    ("the frame's count is not the fds sent", vmm_range("m_count"), 3, {"count": 4},
     "SHMREG_ERR_SYSTEM", "the descriptor count does not match the descriptors received"),
    ("fds on a legacy IPC request", legacy_ipc("m_ipc_fd"), 1, {},
     "SHMREG_ERR_OUT_OF_BOUNDS", "carries 0 descriptors, this one 1"),
    ("a chunk count on a legacy IPC request", legacy_ipc("m_ipc_chunks", chunk_count=2), 0, {},
     "SHMREG_ERR_INVALID_ARG", "a chunk count that does not fit its source"),
    ("a pool without its fd", pool("m_pool_none"), 0, {},
     "SHMREG_ERR_NOT_FOUND", "carries 1 descriptors, this one 0"),
    ("a pool with two fds", pool("m_pool_two"), 2, {},
     "SHMREG_ERR_OUT_OF_BOUNDS", "carries 1 descriptors, this one 2"),
    ("payload shorter than its header", pool("m_short")[:79], 1, {},
     "SHMREG_ERR_INVALID_ARG", "shorter than its header"),
    ("payload cut inside the name", pool("m_cut_name")[:-3], 1, {},
     "SHMREG_ERR_INVALID_ARG", "a name length or a size that does not match the payload"),
    ("payload cut inside the chunk sizes", vmm_range("m_cut_sizes")[:80 + 12], 3, {},
     "SHMREG_ERR_INVALID_ARG", "a name length or a size that does not match the payload"),
    ("the frame promises more than came", pool("m_promise"), 1, {"size": 300},
     "SHMREG_ERR_SYSTEM", "payload size does not match the header"),
    ("empty name", pool(""), 1, {},
     "SHMREG_ERR_INVALID_ARG", "a name length or a size that does not match the payload"),
    ("control character in the name", pool("bad\x01name"), 1, {},
     "SHMREG_ERR_INVALID_ARG", "invalid region name: it contains a control character"),
    ("NUL in the name", pool("bad\x00name"), 1, {},
     "SHMREG_ERR_INVALID_ARG", "a NUL inside the name or the UUID"),
    ("256-byte name", pool("n" * 256), 1, {},
     "SHMREG_ERR_INVALID_ARG", "a name length or a size that does not match the payload"),
    ("SHMREG_PIN", pool("m_pin", flags=0x2), 1, {},
     "SHMREG_ERR_INVALID_ARG", "flags other than SHMREG_READONLY"),
    ("SHMREG_NO_PIN", legacy_ipc("m_no_pin", flags=0x4), 0, {},
     "SHMREG_ERR_INVALID_ARG", "flags other than SHMREG_READONLY"),
    ("unknown flag", vmm_range("m_flag", flags=0x80000000), 3, {},
     "SHMREG_ERR_INVALID_ARG", "flags other than SHMREG_READONLY"),
    ("a shm key's source", crf.payload(0, "m_src_shm", 64), 0, {},
     "SHMREG_ERR_INVALID_ARG", "a source that is not CUDA IPC, a VMM range or a pool"),
    ("a memfd's source", crf.payload(3, "m_src_fd", 64), 1, {},
     "SHMREG_ERR_INVALID_ARG", "a source that is not CUDA IPC, a VMM range or a pool"),
    ("unknown source", crf.payload(99, "m_src_99", 64), 0, {},
     "SHMREG_ERR_INVALID_ARG", "a source that is not CUDA IPC, a VMM range or a pool"),
    ("garbage UUID", pool("m_uuid", uuid="GPU-" + "not-a-uuid" * 3 + "-at-al"), 1, {},
     "SHMREG_ERR_INVALID_ARG", "is not a GPU's UUID"),
    ("UUID of NULs", legacy_ipc("m_uuid_nul", uuid=b"\x00" * 40), 0, {},
     "SHMREG_ERR_INVALID_ARG", "a NUL inside the name or the UUID"),
    ("window past the chunks", vmm_range("m_past", offset=CHUNK + 1), 3, {},
     "SHMREG_ERR_OUT_OF_BOUNDS", "is past the 6291456 bytes of its 3 chunks"),
    ("a chunk of size 0", vmm_range("m_chunk0", chunk_sizes=[CHUNK, 0, CHUNK], byte_size=CHUNK), 3, {},
     "SHMREG_ERR_INVALID_ARG", "chunk 1 has descriptor"),
    ("a payload past a frame's room", pool("m_long") + b"x" * 4096, 1, {},
     "SHMREG_ERR_OUT_OF_BOUNDS", "payload truncated"),
    ("a frame that is not shmreg_send_fds's", pool("m_frame_magic"), 1, {"magic": 0x12345678},
     "SHMREG_ERR_SYSTEM", "not a shmreg_send_fd message"),
]


def test_malformed_requests_are_refused_and_the_server_keeps_serving(uds_server):
    server = uds_server()
    sock = mc.connect(server.sock_path)
    for what, data, n_fds, frame_args, code, part in MALFORMED:
        got, message = send_request(sock, data, n_fds, **frame_args)
        assert (got, part in message) == (code, True), (what, got, message)
    # Nothing registered, and the same connection still registers.
    assert status(server) == {} and status(server, "cuda") == {}
    register_memfd(sock, "still_serving")
    assert sorted(status(server)) == ["still_serving"]
    sock.close()


# ------------------------------------------------------------------- bounds


def test_region_limit_counts_gpu_requests_before_the_driver(uds_server):
    """--uds-max-regions counts memfd regions, and a GPU request past it is
    refused for the limit, not UNSUPPORTED: the limit is checked first.
    Another connection has its own room."""
    server = uds_server("--uds-max-regions", "2")
    sock = mc.connect(server.sock_path)
    register_memfd(sock, "r0")
    register_memfd(sock, "r1")
    baseline = settled_open_fds(server)
    for name in sorted(WELL_FORMED):
        code, message = send_request(sock, *WELL_FORMED[name])
        assert code == "SHMREG_ERR_NO_MEMORY", (name, code, message)
        assert "already holds 2 regions" in message and "--uds-max-regions 2" in message, message
    assert settled_open_fds(server) == baseline
    other = mc.connect(server.sock_path)
    code, message = send_request(other, *WELL_FORMED["gpu_ipc"])
    assert code != "SHMREG_ERR_NO_MEMORY", message
    sock.close()
    other.close()


def test_uid_share_counts_gpu_requests(uds_server):
    """With two uids allowed, a GPU request of a uid whose connections hold
    its share of --max-regions is refused for the share."""
    me = os.geteuid()
    server = uds_server("--allow-uid", str(me), "--allow-uid", "4242", "--max-regions", "4")
    first, second = mc.connect(server.sock_path), mc.connect(server.sock_path)
    register_memfd(first, "s0")
    register_memfd(second, "s1")
    code, message = send_request(second, *WELL_FORMED["gpu_pool"])
    assert (code, message) == ("SHMREG_ERR_NO_MEMORY", f"uid {me}'s connections hold 2 regions, its share of "
                                                       "--max-regions among the 2 uids --allow-uid accepts")
    first.close()
    second.close()


def test_name_held_by_another_connection_is_taken(uds_server):
    server = uds_server()
    holder, other = mc.connect(server.sock_path), mc.connect(server.sock_path)
    register_memfd(holder, "taken")
    code, message = send_request(other, vmm_range("taken"), 3)
    assert (code, message) == ("SHMREG_ERR_ALREADY_EXISTS", "shared memory region 'taken' already in manager")
    holder.close()
    other.close()


def test_connection_limit_holds_for_gpu_clients(uds_server):
    server = uds_server("--uds-max-connections", "1")
    first = mc.connect(server.sock_path)
    code, _ = send_request(first, *WELL_FORMED["gpu_ipc"])
    assert code != "SHMREG_OK"
    extra = mc.connect(server.sock_path)
    code, message = crf.answer(extra)
    assert code == "SHMREG_ERR_NO_MEMORY" and "too many connections" in message, message
    assert extra.recv(crf.ANSWER_MAX) == b"", "the refused connection stays open"
    extra.close()
    # The slot frees with its connection.
    first.close()
    server.wait_until(lambda: _answers(server.sock_path), what="the first connection's slot to free")


def _answers(path):
    """Whether a new connection is served: its GPU request answered with
    something other than the connection limit."""
    sock = mc.connect(path)
    try:
        code, message = send_request(sock, *WELL_FORMED["gpu_ipc"])
    except OSError:
        return False
    finally:
        sock.close()
    return "too many connections" not in message
