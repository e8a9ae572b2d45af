"""ModelInfer with typed 'contents' (InferTensorContents), built with
tritonclient's own protobuf classes as Triton's explicit-content example
clients build them: every datatype the models take, with Triton's rules and
words (the field of the input's datatype, one field only, the element count
by the shape, never beside raw_input_contents), and BYTES bounded by
--max-body-mb."""
import numpy as np
import pytest
from tritonclient.grpc import service_pb2

from grpc_support import assert_clean_stop, call, start_with_grpc

ARANGE = np.arange(16, dtype=np.int32).reshape(1, 16)
ONES = np.ones((1, 16), dtype=np.int32)


@pytest.fixture(scope="module")
def server():
    s = start_with_grpc("--threads", "2", "--max-body-mb", "1")
    yield s
    assert_clean_stop(s)


def infer(server, req):
    """(response, None) or (None, (code name, details))."""
    resp, err = call(server.grpc_url, "ModelInfer", req, service_pb2.ModelInferResponse)
    return (resp, None) if err is None else (None, (err.code().name, err.details()))


def request(model, *inputs):
    """inputs: (name, datatype, shape, {contents field: values} or None)."""
    req = service_pb2.ModelInferRequest(model_name=model)
    for name, datatype, shape, contents in inputs:
        t = req.inputs.add(name=name, datatype=datatype, shape=shape)
        for field, values in (contents or {}).items():
            getattr(t.contents, field).extend(values)
    return req


def simple_request(in0=ARANGE.ravel().tolist(), in1=ONES.ravel().tolist()):
    return request("simple", ("INPUT0", "INT32", [1, 16], {"int_contents": in0}),
                   ("INPUT1", "INT32", [1, 16], {"int_contents": in1}))


def test_int_contents_on_simple(server):
    resp, err = infer(server, simple_request())
    assert err is None, err
    out = {o.name: np.frombuffer(raw, np.int32).reshape(list(o.shape))
           for o, raw in zip(resp.outputs, resp.raw_output_contents)}
    np.testing.assert_array_equal(out["OUTPUT0"], ARANGE + ONES)
    np.testing.assert_array_equal(out["OUTPUT1"], ARANGE - ONES)


# datatype, field, values, the bytes the model receives
CASES = [
    ("BOOL", "bool_contents", [True, False, True], np.array([1, 0, 1], np.uint8)),
    ("INT8", "int_contents", [-128, 127, 300], np.array([-128, 127, 44], np.int8)),
    ("INT16", "int_contents", [-32768, 32767, 70000], np.array([-32768, 32767, 4464], np.int16)),
    ("INT32", "int_contents", [-2**31, 2**31 - 1, 0], np.array([-2**31, 2**31 - 1, 0], np.int32)),
    ("INT64", "int64_contents", [-2**63, 2**63 - 1, 5], np.array([-2**63, 2**63 - 1, 5], np.int64)),
    ("UINT8", "uint_contents", [0, 255, 257], np.array([0, 255, 1], np.uint8)),
    ("UINT16", "uint_contents", [0, 65535, 65537], np.array([0, 65535, 1], np.uint16)),
    ("UINT32", "uint_contents", [0, 2**32 - 1, 7], np.array([0, 2**32 - 1, 7], np.uint32)),
    ("UINT64", "uint64_contents", [0, 2**64 - 1, 9], np.array([0, 2**64 - 1, 9], np.uint64)),
    ("FP32", "fp32_contents", [0.5, -1.25, 3e38], np.array([0.5, -1.25, 3e38], np.float32)),
    ("FP64", "fp64_contents", [0.5, -1e300, 2.0], np.array([0.5, -1e300, 2.0], np.float64)),
]


@pytest.mark.parametrize("datatype,field,values,expected", CASES, ids=[c[0] for c in CASES])
def test_every_fixed_size_datatype_through_identity(server, datatype, field, values, expected):
    """Elements of int_contents and uint_contents keep their low bytes for
    the 8- and 16-bit integers, as Triton cuts them."""
    resp, err = infer(server, request("identity", ("INPUT0", datatype, [3], {field: values})))
    assert err is None, err
    assert (resp.outputs[0].datatype, list(resp.outputs[0].shape)) == (datatype, [3])
    assert resp.raw_output_contents[0] == expected.tobytes()


def test_bytes_contents_travel_with_their_length_prefixes(server):
    values = [b"", b"ab", b"\x00\xff" * 3]
    resp, err = infer(server, request("identity", ("INPUT0", "BYTES", [3],
                                                   {"bytes_contents": values})))
    assert err is None, err
    assert resp.raw_output_contents[0] == b"".join(
        len(v).to_bytes(4, "little") + v for v in values)


def test_a_count_the_shape_does_not_give(server):
    assert infer(server, simple_request(in1=[1] * 15))[1] == (
        "INVALID_ARGUMENT", "[request id: <id_unknown>] input byte size mismatch for input "
        "'INPUT1' for model 'simple'. Expected 64, got 60")


def test_a_shape_of_2_to_the_40_with_one_element_allocates_nothing(server):
    """The count is checked by the shape before the narrowing copy."""
    assert infer(server, request("identity", ("INPUT0", "INT8", [2**40],
                                              {"int_contents": [1]})))[1] == (
        "INVALID_ARGUMENT", "[request id: <id_unknown>] input byte size mismatch for input "
        "'INPUT0' for model 'identity'. Expected 1099511627776, got 1")


def test_empty_contents_are_no_elements(server):
    req = simple_request()
    req.inputs[1].contents.Clear()
    req.inputs[1].contents.SetInParent()  # present, with no element
    assert infer(server, req)[1] == (
        "INVALID_ARGUMENT", "[request id: <id_unknown>] input byte size mismatch for input "
        "'INPUT1' for model 'simple'. Expected 64, got 0")


def test_contents_beside_raw_input_contents(server):
    req = request("simple", ("INPUT0", "INT32", [1, 16], {"int_contents": [0] * 16}),
                  ("INPUT1", "INT32", [1, 16], None))
    req.raw_input_contents.append(ONES.tobytes())
    assert infer(server, req)[1] == (
        "INVALID_ARGUMENT", "contents field must not be specified when using "
        "raw_input_contents for 'INPUT0' for model 'simple'")


def test_two_fields_with_elements(server):
    req = simple_request()
    req.inputs[0].contents.fp32_contents.extend([1.0] * 16)
    assert infer(server, req)[1] == (
        "INVALID_ARGUMENT", "unexpected explicit tensor data for input tensor 'INPUT0' for "
        "model 'simple', binary data was already supplied.")


@pytest.mark.parametrize("datatype,field,named", [
    ("INT32", "fp32_contents", "FP32"),
    ("INT8", "uint_contents", "UINT32"),
    ("UINT16", "int_contents", "INT32"),
    ("FP16", "fp32_contents", "FP32"),  # FP16 and BF16 have no field
    ("BF16", "uint_contents", "UINT32"),
    ("BYTES", "int_contents", "INT32"),
])
def test_the_field_of_another_datatype(server, datatype, field, named):
    assert infer(server, request("identity", ("INPUT0", datatype, [2], {field: [1, 2]})))[1] == (
        "INVALID_ARGUMENT", f"unexpected explicit tensor data for input tensor 'INPUT0' for "
        f"model 'identity' of type '{named}', expected datatype '{datatype}'")


def test_bytes_contents_past_max_body_mb(server):
    """400,000 empty strings take 800 kB of the 1 MiB message and 1.6 MB
    with their length prefixes: refused before that buffer is allocated."""
    n = 400_000
    req = request("identity", ("INPUT0", "BYTES", [n], {"bytes_contents": [b""] * n}))
    assert req.ByteSize() < 1 << 20
    code, message = infer(server, req)[1]
    assert code == "RESOURCE_EXHAUSTED"
    assert message == ("input 'INPUT0': its bytes_contents take more than the 1048576 bytes "
                       "the server copies for one tensor (--max-body-mb)")
