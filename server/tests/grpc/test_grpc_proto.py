"""The server's protos (server/proto/inference.proto and
model_config.proto, written for this project) are wire compatible with the
ones Triton's clients were generated from: every service method, message,
field and enum value they declare has the name, number, type and cardinality
of tritonclient's own descriptors, except the fields this server adds
(numbers from 1000 up), which others skip."""
import pytest
from tritonclient.grpc import model_config_pb2, service_pb2

from grpc_support import proto_classes

OWN_FIELDS_FROM = 1000


FILES = {"inference.proto": service_pb2, "model_config.proto": model_config_pb2}


def ours(name="inference.proto"):
    fds = proto_classes()["__descriptor_set__"]
    (f,) = [f for f in fds.file if f.name == name]
    return f


def theirs(name="inference.proto"):
    return FILES[name].DESCRIPTOR


def walk(messages, prefix="inference."):
    for m in messages:
        yield prefix + m.name, m
        yield from walk(m.nested_type, prefix + m.name + ".")


def test_package_and_service():
    f = ours()
    assert f.package == theirs().package == "inference"
    (service,) = f.service
    assert service.name == "GRPCInferenceService"
    their_methods = theirs().services_by_name["GRPCInferenceService"].methods_by_name
    for method in service.method:
        theirs_m = their_methods[method.name]
        assert method.input_type.lstrip(".") == theirs_m.input_type.full_name
        assert method.output_type.lstrip(".") == theirs_m.output_type.full_name
        assert not method.client_streaming and not method.server_streaming


def enums(f):
    for e in f.enum_type:
        yield "inference." + e.name, e
    for name, m in walk(f.message_type):
        for e in m.enum_type:
            yield name + "." + e.name, e


@pytest.mark.parametrize("file,name", [(f, n) for f in FILES for n, m in walk(ours(f).message_type)
                                       if not m.options.map_entry])
def test_message_fields(file, name):
    mine = dict(walk(ours(file).message_type))[name]
    other = theirs(file).pool.FindMessageTypeByName(name)
    other_fields = {f.name: f for f in other.fields}
    for field in mine.field:
        if field.number >= OWN_FIELDS_FROM:
            assert field.number not in other.fields_by_number
            continue
        assert field.name in other_fields, f"{name}.{field.name} is not in Triton's proto"
        o = other_fields[field.name]
        assert (field.number, field.type) == (o.number, o.type), f"{name}.{field.name}"
        assert (field.label == field.LABEL_REPEATED) == o.is_repeated, f"{name}.{field.name}"
        if field.type_name:
            assert field.type_name.lstrip(".") == (o.message_type or o.enum_type).full_name
        if field.HasField("oneof_index"):
            assert mine.oneof_decl[field.oneof_index].name == o.containing_oneof.name


@pytest.mark.parametrize("file,name", [(f, n) for f in FILES for n, _ in enums(ours(f))])
def test_enum_values(file, name):
    mine = dict(enums(ours(file)))[name]
    other = theirs(file).pool.FindEnumTypeByName(name)
    assert {v.name: v.number for v in mine.value} == {v.name: v.number for v in other.values}
