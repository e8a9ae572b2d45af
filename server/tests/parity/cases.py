"""The requests sent to both servers. Each case is a function of a client
(clients.HttpClient or clients.GrpcClient: the same calls over either
protocol) and the shm objects of the test (ShmObjects); it may make setup
calls and returns the one answer that is compared. A case runs on a server
with no region registered, and whatever it registers is unregistered after
it. Cases that only make sense for one protocol say so in `protocols`.
"""
import json
import os

import numpy as np

PAGE = os.sysconf("SC_PAGE_SIZE")
U64_MAX = (1 << 64) - 1
TENSOR = 64  # bytes of one INT32 [1,16] tensor of `simple`

CASES = {}


def case(protocols=("http", "grpc")):
    def add(fn):
        CASES[fn.__name__] = (fn, protocols)
        return fn
    return add


class ShmObjects:
    """POSIX shm objects of one test, created on first use and unlinked at
    the end: key(suffix) -> "/<marker>_<suffix>", an object of `size` bytes."""

    def __init__(self, marker):
        self.marker = marker
        self.made = []

    def key(self, suffix, size=PAGE):
        key = f"/{self.marker}_{suffix}"
        if key not in self.made:
            fd = os.open(f"/dev/shm{key}", os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.ftruncate(fd, size)
            finally:
                os.close(fd)
            self.made.append(key)
        return key

    def write(self, key, offset, data):
        with open(f"/dev/shm{key}", "r+b") as f:
            f.seek(offset)
            f.write(data)

    def read(self, key, offset, size):
        with open(f"/dev/shm{key}", "rb") as f:
            f.seek(offset)
            return f.read(size)

    def close(self):
        for key in self.made:
            try:
                os.unlink(f"/dev/shm{key}")
            except FileNotFoundError:
                pass


# ------------------------------------------------------------ register (system)

@case()
def register_ok(c, shm):
    return c.register_system("r", shm.key("obj"), 0, PAGE)


@case()
def register_then_status_one(c, shm):
    c.register_system("r", shm.key("obj", 2 * PAGE), PAGE, PAGE)
    return c.status_system("r")


@case()
def register_missing_key(c, shm):
    return c.register_system("r", f"/{shm.marker}_absent", 0, PAGE)


@case()
def register_key_without_slash(c, shm):
    shm.key("obj")
    return c.register_system("r", f"{shm.marker}_obj", 0, PAGE)


@case()
def register_zero_byte_size(c, shm):
    return c.register_system("r", shm.key("obj"), 0, 0)


@case()
def register_byte_size_past_object(c, shm):
    return c.register_system("r", shm.key("obj"), 0, 2 * PAGE)


@case()
def register_offset_at_object_end(c, shm):
    return c.register_system("r", shm.key("obj"), PAGE, 64)


@case()
def register_offset_beyond_object(c, shm):
    return c.register_system("r", shm.key("obj"), 4 * PAGE, 64)


@case()
def register_unaligned_offset(c, shm):
    return c.register_system("r", shm.key("obj"), 3, 64)


@case()
def register_offset_2_63(c, shm):
    return c.register_system("r", shm.key("obj"), 1 << 63, 64)


@case()
def register_offset_u64_max_page(c, shm):
    """The largest page-aligned offset: only the overflow check can refuse it."""
    return c.register_system("r", shm.key("obj"), (U64_MAX + 1) - PAGE, 64)


@case()
def register_offset_u64_max(c, shm):
    return c.register_system("r", shm.key("obj"), U64_MAX, 64)


@case()
def register_byte_size_2_63(c, shm):
    return c.register_system("r", shm.key("obj"), 0, 1 << 63)


@case()
def register_byte_size_u64_max(c, shm):
    return c.register_system("r", shm.key("obj"), 0, U64_MAX)


@case()
def register_offset_plus_size_overflows(c, shm):
    return c.register_system("r", shm.key("obj"), PAGE, U64_MAX - PAGE + 2)


@case()
def register_duplicate_name(c, shm):
    c.register_system("r", shm.key("obj"), 0, PAGE)
    return c.register_system("r", shm.key("obj2"), 0, PAGE)


@case()
def register_same_key_twice(c, shm):
    """Accepted or refused, no more: Triton 2.51 maps the second region
    through the descriptor it kept from the first, which it has closed, so
    its status and words depend on what that descriptor number is now
    (500 'Invalid shared memory region' or 400 'invalid args')."""
    c.register_system("r1", shm.key("obj"), 0, PAGE)
    answer = c.register_system("r2", shm.key("obj"), 0, PAGE)
    return "accepted" if answer in ("200", "OK") else "refused"


# ------------------------------------------------------------ status, unregister

@case()
def status_all_empty(c, shm):
    return c.status_system()


@case()
def status_all_two(c, shm):
    c.register_system("a", shm.key("obj"), 0, PAGE)
    c.register_system("b", shm.key("obj2", 2 * PAGE), PAGE, 128)
    return c.status_system()


@case(protocols=("http",))
def status_all_in_name_order(c, shm):
    """The order of HTTP's status list (gRPC's is a map). Names are
    registered in reverse order (12 of them: a hash order that happens to be
    sorted is a chance of 1 in 12!); answers compare status lists sorted."""
    names = [f"r{i:02d}" for i in range(12)][::-1]
    for i, name in enumerate(names):
        c.register_system(name, shm.key(f"obj{i}"), 0, PAGE)
    _, body = c.raw("GET", "/v2/systemsharedmemory/status")
    listed = [r["name"] for r in json.loads(body)]
    return "name order" if listed == sorted(names) else "not name order"


@case()
def status_unknown(c, shm):
    return c.status_system("nope")


@case()
def unregister_known(c, shm):
    c.register_system("r", shm.key("obj"), 0, PAGE)
    c.unregister_system("r")
    return c.status_system("r")


@case()
def unregister_known_answer(c, shm):
    c.register_system("r", shm.key("obj"), 0, PAGE)
    return c.unregister_system("r")


@case()
def unregister_unknown(c, shm):
    return c.unregister_system("nope")


@case()
def unregister_all(c, shm):
    c.register_system("a", shm.key("obj"), 0, PAGE)
    c.register_system("b", shm.key("obj2"), 0, PAGE)
    first = c.unregister_system()
    return f"{first} / then status: {c.status_system()}"


@case()
def unregister_then_register_again(c, shm):
    c.register_system("r", shm.key("obj"), 0, PAGE)
    c.unregister_system("r")
    return c.register_system("r", shm.key("obj"), 0, PAGE)


# ------------------------------------------------------------ CUDA shared memory (no GPU here)

CUDA_IPC_HANDLE = 64  # bytes of a cudaIpcMemHandle_t


@case()
def cuda_register_no_driver(c, shm):
    return c.register_cuda("g", bytes(CUDA_IPC_HANDLE), 0, 1024)


@case()
def cuda_register_handle_too_short(c, shm):
    return c.register_cuda("g", bytes(10), 0, 1024)


@case(protocols=("http",))
def cuda_register_handle_not_base64(c, shm):
    return c.register_cuda("g", "not base64 !!!", 0, 1024)


@case(protocols=("http",))
def cuda_register_handle_missing(c, shm):
    return c.request("POST", "/v2/cudasharedmemory/region/g/register", {"device_id": 0, "byte_size": 1024})


@case()
def cuda_status_all_empty(c, shm):
    return c.status_cuda()


@case()
def cuda_status_unknown(c, shm):
    return c.status_cuda("nope")


@case()
def cuda_unregister_unknown(c, shm):
    return c.unregister_cuda("nope")


@case()
def cuda_status_of_system_region(c, shm):
    c.register_system("r", shm.key("obj"), 0, PAGE)
    return c.status_cuda("r")


# ------------------------------------------------------------ inference through shm

IO = 4 * TENSOR  # the region "io": INPUT0, INPUT1, OUTPUT0, OUTPUT1 back to back


def io_region(c, shm):
    """Register "io" over a fresh page holding INPUT0 = 0..15, INPUT1 = 10s."""
    key = shm.key("io")
    a = np.arange(16, dtype=np.int32)
    b = np.full(16, 10, dtype=np.int32)
    shm.write(key, 0, a.tobytes() + b.tobytes() + bytes(2 * TENSOR))
    c.register_system("io", key, 0, IO)
    return key


def win(offset, byte_size=TENSOR, region="io"):
    return {"region": region, "offset": offset, "byte_size": byte_size}


def infer_simple(c, in0=None, in1=None, out0=None, out1=None, request_id=None):
    inputs = [("INPUT0", [1, 16], "INT32", in0 or win(0)),
              ("INPUT1", [1, 16], "INT32", in1 or win(TENSOR))]
    outputs = [("OUTPUT0", out0 or win(2 * TENSOR)), ("OUTPUT1", out1 or win(3 * TENSOR))]
    return c.infer("simple", inputs, outputs, request_id)


@case()
def infer_ok(c, shm):
    key = io_region(c, shm)
    answer = infer_simple(c)
    out = np.frombuffer(shm.read(key, 2 * TENSOR, 2 * TENSOR), dtype=np.int32)
    return f"{answer} / outputs {out.tolist()}"


@case()
def infer_unknown_input_region(c, shm):
    io_region(c, shm)
    return infer_simple(c, in0=win(0, region="nope"))


@case()
def infer_unknown_output_region(c, shm):
    io_region(c, shm)
    return infer_simple(c, out0=win(2 * TENSOR, region="nope"))


@case()
def infer_input_offset_at_region_end(c, shm):
    io_region(c, shm)
    return infer_simple(c, in0=win(IO))


@case()
def infer_input_window_past_region_end(c, shm):
    io_region(c, shm)
    return infer_simple(c, in0=win(IO - TENSOR // 2))


@case()
def infer_input_byte_size_not_tensor(c, shm):
    io_region(c, shm)
    return infer_simple(c, in0=win(0, TENSOR // 2))


@case()
def infer_input_byte_size_not_tensor_with_id(c, shm):
    """Triton's core names the request by the id the client sent."""
    io_region(c, shm)
    return infer_simple(c, in0=win(0, TENSOR // 2), request_id="parity-7")


@case()
def infer_input_offset_2_63(c, shm):
    io_region(c, shm)
    return infer_simple(c, in0=win(1 << 63))


@case()
def infer_input_offset_u64_near_max(c, shm):
    io_region(c, shm)
    return infer_simple(c, in0=win(U64_MAX + 1 - 32))


@case()
def infer_input_byte_size_u64_near_max(c, shm):
    io_region(c, shm)
    return infer_simple(c, in0=win(0, U64_MAX + 1 - 32))


@case()
def infer_output_offset_at_region_end(c, shm):
    io_region(c, shm)
    return infer_simple(c, out0=win(IO))


@case()
def infer_output_window_past_region_end(c, shm):
    """The tensor (64 bytes at 192) fits; the declared 128-byte window does not."""
    io_region(c, shm)
    return infer_simple(c, out1=win(3 * TENSOR, 2 * TENSOR))


@case()
def infer_output_window_too_small(c, shm):
    io_region(c, shm)
    return infer_simple(c, out0=win(2 * TENSOR, TENSOR // 2))


@case()
def infer_output_offset_u64_near_max(c, shm):
    io_region(c, shm)
    return infer_simple(c, out0=win(U64_MAX + 1 - 32))


@case()
def infer_output_byte_size_u64_near_max(c, shm):
    io_region(c, shm)
    return infer_simple(c, out0=win(2 * TENSOR, U64_MAX + 1 - 32))


@case()
def infer_output_byte_size_u64_near_max_at_0(c, shm):
    io_region(c, shm)
    return infer_simple(c, out0=win(0, U64_MAX + 1 - 32))


@case()
def infer_output_offset_2_63(c, shm):
    io_region(c, shm)
    return infer_simple(c, out0=win(1 << 63))


@case()
def infer_offset_without_region(c, shm):
    io_region(c, shm)
    return infer_simple(c, in0={"offset": 0, "byte_size": TENSOR})


@case()
def infer_region_without_byte_size(c, shm):
    io_region(c, shm)
    return infer_simple(c, in0={"region": "io", "offset": 0})


# ------------------------------------------------------------ typed contents (gRPC)
# Triton's explicit-content example clients: the elements of each input in
# the typed field of its datatype rather than in raw_input_contents.

def infer_int_contents(c, in1=None, inputs=None, raw=()):
    in0 = {"int_contents": list(range(16))}
    inputs = inputs or [("INPUT0", [1, 16], "INT32", in0),
                        ("INPUT1", [1, 16], "INT32", in1 or {"int_contents": [1] * 16})]
    return c.infer_contents("simple", inputs, ["OUTPUT0", "OUTPUT1"], raw)


@case(protocols=("grpc",))
def infer_contents_int32(c, shm):
    return infer_int_contents(c)


@case(protocols=("grpc",))
def infer_contents_count_not_shape(c, shm):
    return infer_int_contents(c, in1={"int_contents": [1] * 15})


@case(protocols=("grpc",))
def infer_contents_beside_raw(c, shm):
    return infer_int_contents(c, inputs=[("INPUT0", [1, 16], "INT32",
                                          {"int_contents": list(range(16))}),
                                         ("INPUT1", [1, 16], "INT32", {})],
                              raw=[bytes(TENSOR)])


@case(protocols=("grpc",))
def infer_contents_two_fields(c, shm):
    return infer_int_contents(c, in1={"int_contents": [1] * 16, "int64_contents": [1] * 16})


@case(protocols=("grpc",))
def infer_contents_field_of_another_datatype(c, shm):
    return infer_int_contents(c, in1={"fp32_contents": [1.0] * 16})


# ------------------------------------------------------------ health

@case(protocols=("http",))
def health_live(c, shm):
    return c.request("GET", "/v2/health/live")


@case(protocols=("http",))
def health_ready(c, shm):
    return c.request("GET", "/v2/health/ready")


# ------------------------------------------------------------ malformed HTTP bodies

@case(protocols=("http",))
def body_not_json(c, shm):
    return c.request("POST", "/v2/models/simple/infer", b"{")


@case(protocols=("http",))
def body_json_array(c, shm):
    return c.request("POST", "/v2/models/simple/infer", b"[]")


@case(protocols=("http",))
def register_body_not_json(c, shm):
    return c.request("POST", "/v2/systemsharedmemory/region/r/register", b"{\"key\": ")


@case(protocols=("http",))
def register_offset_negative(c, shm):
    return c.request("POST", "/v2/systemsharedmemory/region/r/register",
                     {"key": shm.key("obj"), "offset": -1, "byte_size": 64})


@case(protocols=("http",))
def register_offset_2_64(c, shm):
    return c.request("POST", "/v2/systemsharedmemory/region/r/register",
                     {"key": shm.key("obj"), "offset": 1 << 64, "byte_size": 64})


@case(protocols=("http",))
def register_offset_string(c, shm):
    return c.request("POST", "/v2/systemsharedmemory/region/r/register",
                     {"key": shm.key("obj"), "offset": "0", "byte_size": 64})


@case(protocols=("http",))
def register_key_missing(c, shm):
    return c.request("POST", "/v2/systemsharedmemory/region/r/register", {"offset": 0, "byte_size": 64})


# The example refuses bodies above --max-body-mb (the parity tier starts it
# with 1 MiB); Triton 2.51 has no limit. A valid request padded past 1 MiB.
OVERSIZED = 1 << 20


@case(protocols=("http",))
def body_oversized(c, shm):
    io_region(c, shm)
    body = {"inputs": [{"name": n, "shape": [1, 16], "datatype": "INT32",
                        "parameters": {"shared_memory_region": "io", "shared_memory_offset": o,
                                       "shared_memory_byte_size": TENSOR}}
                       for n, o in (("INPUT0", 0), ("INPUT1", TENSOR))]}
    data = json.dumps(body).encode() + b" " * (OVERSIZED + 1)
    return c.request("POST", "/v2/models/simple/infer", data)


# ------------------------------------------------------------ a NUL inside a string

@case()
def register_key_with_nul(c, shm):
    """Triton's shm_open reads the key as a C string: "K\\0zz" opens K."""
    key = shm.key("obj")
    answer = c.register_system("r", key + "\0zz", 0, PAGE)
    return f"{answer} / then status: {c.status_system()}"


@case(protocols=("grpc",))
def register_name_with_nul(c, shm):
    return c.register_system("r\0x", shm.key("obj"), 0, PAGE)


@case()
def infer_input_region_with_nul(c, shm):
    io_region(c, shm)
    return infer_simple(c, in0=win(0, region="io\0junk"))


@case(protocols=("http",))
def register_path_with_nul(c, shm):
    answer = c.register_system("r%00x", shm.key("obj"), 0, PAGE)
    return f"{answer} / then status: {c.status_system()}"
