"""shmreg.cuda_client without a GPU in reach: what it refuses before anything
is sent (host memory, other devices, gaps, objects of no interface), and
that a well-formed GPU-looking tensor reaches the library, which answers
for itself. server/tests/gpu/test_framework_tensors.py registers real
tensors with a server."""

import ctypes
import socket
import struct

import pytest

import shmreg
from shmreg import _shmreg, cuda_client
from dlpack_layout import DLDataType, DLDevice, DLManagedTensor, PyCapsule_New

# An address in the page range Linux never maps (below mmap_min_addr), so
# never device memory: with CUDA the driver does not know it, without CUDA
# the call ends before asking.
FAKE_PTR = 0x1000


class FakeCAI:
    """An object with only __cuda_array_interface__ (version 3)."""

    def __init__(self, **fields):
        cai = {"data": (FAKE_PTR, False), "shape": (4, 8), "typestr": "<f4", "strides": None, "version": 3}
        cai.update(fields)
        self.__cuda_array_interface__ = cai


class FakeDLPack:
    """A DLPack producer whose legacy capsule describes memory on device
    type `device` (the struct lives as long as this object; the capsule has
    no destructor, as nothing of it is owned). `reported` is what
    __dlpack_device__ says, device unless given."""

    def __init__(self, device, shape=(2, 3), strides=None, byte_offset=0, reported=None):
        self.reported = device if reported is None else reported
        self.shape = (ctypes.c_int64 * len(shape))(*shape)
        self.strides = (ctypes.c_int64 * len(strides))(*strides) if strides else None
        self.managed = DLManagedTensor()
        t = self.managed.dl_tensor
        t.data, t.device, t.ndim = FAKE_PTR, DLDevice(device, 0), len(shape)
        t.dtype = DLDataType(0, 16, 1)  # 2-byte items
        t.shape = self.shape
        t.strides = self.strides
        t.byte_offset = byte_offset
        self.capsules = 0

    def __dlpack_device__(self):
        return (self.reported, 0)

    def __dlpack__(self, stream=None):
        self.capsules += 1
        return PyCapsule_New(ctypes.addressof(self.managed), b"dltensor", None)


@pytest.fixture
def pair():
    """(client, peer): a connected SOCK_SEQPACKET pair, the client with a
    timeout as memfd_client.connect gives it."""
    client, peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    client.settimeout(2.0)
    yield client, peer
    client.close()
    peer.close()


def nothing_sent(peer):
    try:
        peer.recv(4096, socket.MSG_DONTWAIT)
    except BlockingIOError:
        return True
    return False


# --------------------------------------------------------------- windows ---

def test_byte_size_is_shape_times_itemsize():
    assert cuda_client.cuda_window(FakeCAI(shape=(3, 5), typestr="<i2")) == (FAKE_PTR, 30, False)
    assert cuda_client.cuda_window(FakeCAI(shape=(), typestr="|u1")) == (FAKE_PTR, 1, False)


def test_compact_strides_are_accepted():
    # Row-major strides given explicitly, and any stride on a dimension of one.
    assert cuda_client.cuda_window(FakeCAI(shape=(4, 8), strides=(32, 4)))[1] == 128
    assert cuda_client.cuda_window(FakeCAI(shape=(1, 8), strides=(999, 4)))[1] == 32


@pytest.mark.parametrize("shape,strides", [((4, 8), (4, 16)), ((4, 8), (64, 4)), ((4, 8), (32, 8))],
                         ids=["transposed", "row gap", "column step"])
def test_non_contiguous_is_refused(pair, shape, strides):
    client, peer = pair
    with pytest.raises(ValueError, match=r"not contiguous \(shape \(4, 8\), strides"):
        cuda_client.register_tensor(client, "x", FakeCAI(shape=shape, strides=strides))
    assert nothing_sent(peer)


def test_host_array_is_refused(pair):
    np = pytest.importorskip("numpy")
    client, peer = pair
    with pytest.raises(ValueError, match=r"DLPack device of type 1 \(CPU\), not CUDA \(2\)"):
        cuda_client.register_tensor(client, "x", np.zeros(16, dtype=np.float32))
    assert nothing_sent(peer)


def test_cpu_torch_tensor_is_refused(pair):
    torch = pytest.importorskip("torch")
    client, peer = pair
    with pytest.raises(ValueError, match=r"DLPack device of type 1 \(CPU\), not CUDA \(2\)"):
        cuda_client.register_tensor(client, "x", torch.zeros(16))
    assert nothing_sent(peer)


def test_an_interface_that_raises_falls_back_to_dlpack():
    # PyTorch raises for the interface of a bfloat16 tensor (TypeError) and
    # of one that requires grad (RuntimeError); DLPack then speaks for it.
    class Bfloat16Like(FakeDLPack):
        @property
        def __cuda_array_interface__(self):
            raise TypeError("unsupported dtype")

    fake = Bfloat16Like(2)
    assert cuda_client.cuda_window(fake) == (FAKE_PTR, 12, False)
    assert fake.capsules == 1


@pytest.mark.parametrize("device,label", [(3, "CUDA host"), (13, "CUDA managed"), (10, "ROCm")])
def test_other_dlpack_devices_are_refused_before_a_capsule_is_made(pair, device, label):
    client, peer = pair
    fake = FakeDLPack(device)
    with pytest.raises(ValueError, match=rf"type {device} \({label}"):
        cuda_client.register_tensor(client, "x", fake)
    assert fake.capsules == 0
    assert nothing_sent(peer)


def test_a_capsule_that_contradicts_its_device_is_refused(pair):
    # __dlpack_device__ says CUDA, the capsule says CPU: the capsule wins.
    client, peer = pair
    with pytest.raises(ValueError, match=r"capsule is on device type 1, not CUDA"):
        cuda_client.register_tensor(client, "x", FakeDLPack(1, reported=2))
    assert nothing_sent(peer)


def test_dlpack_gaps_are_refused(pair):
    client, peer = pair
    with pytest.raises(ValueError, match="not contiguous"):
        cuda_client.register_tensor(client, "x", FakeDLPack(2, shape=(2, 3), strides=(6, 2)))
    assert nothing_sent(peer)


def test_dlpack_window_reads_pointer_size_and_layout():
    # data + byte_offset; elements x item bytes; whether strides leave gaps.
    assert _shmreg.dlpack_window(FakeDLPack(2, byte_offset=64).__dlpack__()) == (2, 0, FAKE_PTR + 64, 12, True)
    assert _shmreg.dlpack_window(FakeDLPack(2, strides=(3, 1)).__dlpack__())[4] is True
    assert _shmreg.dlpack_window(FakeDLPack(2, strides=(1, 2)).__dlpack__())[4] is False
    with pytest.raises(TypeError, match="capsule named 'dltensor'"):
        _shmreg.dlpack_window(object())


def test_dlpack_window_of_numpy_capsules():
    np = pytest.importorskip("numpy")
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    assert _shmreg.dlpack_window(a.__dlpack__()) == (1, 0, a.ctypes.data, 48, True)
    assert _shmreg.dlpack_window(a[:, ::2].__dlpack__())[3:] == (24, False)
    try:
        versioned = a.__dlpack__(max_version=(1, 0))
    except TypeError:  # a numpy before versioned capsules
        pytest.skip("this numpy makes no versioned capsules")
    assert _shmreg.dlpack_window(versioned) == (1, 0, a.ctypes.data, 48, True)


@pytest.mark.parametrize("obj", [object(), b"bytes", 42], ids=["object", "bytes", "int"])
def test_objects_of_no_interface_are_refused(pair, obj):
    client, peer = pair
    with pytest.raises(TypeError, match="neither __cuda_array_interface__ nor __dlpack__"):
        cuda_client.register_tensor(client, "x", obj)
    assert nothing_sent(peer)


@pytest.mark.parametrize("drop", ["data", "shape", "typestr"])
def test_interface_without_a_key_is_refused(pair, drop):
    client, peer = pair
    fake = FakeCAI()
    del fake.__cuda_array_interface__[drop]
    with pytest.raises(TypeError, match=f"lacks '{drop}'"):
        cuda_client.register_tensor(client, "x", fake)
    assert nothing_sent(peer)


@pytest.mark.parametrize("fields,error,match", [
    ({"typestr": "float32"}, TypeError, "not a type string"),
    ({"data": FAKE_PTR}, TypeError, r"must be \(pointer, read_only\)"),
    ({"shape": (4, -1)}, ValueError, "non-negative"),
    ({"shape": (0, 8)}, ValueError, "holds no bytes"),
])
def test_malformed_interfaces_are_refused(pair, fields, error, match):
    client, peer = pair
    with pytest.raises(error, match=match):
        cuda_client.register_tensor(client, "x", FakeCAI(**fields))
    assert nothing_sent(peer)


def test_read_only_memory_needs_readonly(pair):
    client, peer = pair
    with pytest.raises(ValueError, match="read-only .* readonly=True"):
        cuda_client.register_tensor(client, "x", FakeCAI(data=(FAKE_PTR, True)))
    assert nothing_sent(peer)
    with pytest.raises(TypeError, match="readonly must be True or False"):
        cuda_client.register_tensor(client, "x", FakeCAI(), readonly=1)


# ------------------------------------------------------- the library's word ---

def test_negative_descriptor_is_the_librarys_invalid_argument():
    with pytest.raises(shmreg.InvalidArgument, match=r"shmreg_send_cuda_region: needs a socket \(-1\)"):
        cuda_client.register_tensor(-1, "x", FakeCAI())


def test_closed_socket_is_refused(pair):
    client, _ = pair
    client.close()
    with pytest.raises(shmreg.InvalidArgument, match=r"needs a socket \(-1\)"):
        cuda_client.register_tensor(client, "x", FakeCAI())


@pytest.mark.parametrize("name", ["", "n" * 256], ids=["empty", "256 bytes"])
def test_bad_names_are_the_librarys_invalid_argument(pair, name):
    client, peer = pair
    with pytest.raises(shmreg.InvalidArgument, match="a name of 1..255 bytes"):
        cuda_client.register_tensor(client, name, FakeCAI())
    assert nothing_sent(peer)


def test_binding_checks_its_argument_types():
    with pytest.raises(TypeError, match="sock must be an int"):
        _shmreg.send_cuda_region("3", "x", FAKE_PTR, 16)
    with pytest.raises(TypeError, match="readonly must be True or False"):
        _shmreg.send_cuda_region(3, "x", FAKE_PTR, 16, readonly=None)
    with pytest.raises(shmreg.InvalidArgument, match=r"ptr must be an int in \[0, 2\*\*64\)"):
        _shmreg.send_cuda_region(3, "x", -1, 16)


@pytest.mark.parametrize("make", [FakeCAI, lambda: FakeDLPack(2)], ids=["cuda_array_interface", "dlpack"])
def test_a_gpu_looking_tensor_reaches_the_library(pair, make):
    # Without CUDA the library ends the call with UNSUPPORTED and its reason;
    # with CUDA (the GPU machine runs this suite too) the driver does not
    # know the address. Either way before sending: the peer has nothing.
    client, peer = pair
    if shmreg.cuda_available():
        with pytest.raises(shmreg.InvalidArgument, match="is not device memory the CUDA driver knows"):
            cuda_client.register_tensor(client, "gpu_x", make())
    else:
        with pytest.raises(shmreg.Unsupported, match=r"^shmreg_send_cuda_region 'gpu_x': .*CUDA") as info:
            cuda_client.register_tensor(client, "gpu_x", make())
        assert info.value.code == 8
    assert nothing_sent(peer)


def test_the_sockets_timeout_is_left_as_it_was(pair):
    client, _ = pair
    before = client.getsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, 16)
    with pytest.raises(shmreg.Error):
        cuda_client.register_tensor(client, "x", FakeCAI())
    assert client.gettimeout() == 2.0
    assert client.getsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, 16) == before
    assert struct.unpack("@ll", before) == (0, 0)


def test_connect_is_memfd_clients():
    from shmreg import memfd_client
    assert cuda_client.connect is memfd_client.connect
