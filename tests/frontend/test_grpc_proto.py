"""The frontend's proto (examples/v2-frontend/proto/inference.proto, written
for this project) is wire compatible with the one Triton's clients were
generated from: every service method, message and field it declares has the
name, number, type and cardinality of tritonclient's own descriptors, except
the fields this frontend adds (numbers from 1000 up), which others skip."""
import pytest
from tritonclient.grpc import service_pb2

from grpc_support import proto_classes

OWN_FIELDS_FROM = 1000


def ours():
    fds = proto_classes()["__descriptor_set__"]
    (f,) = [f for f in fds.file if f.name == "inference.proto"]
    return f


def theirs():
    return service_pb2.DESCRIPTOR


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


@pytest.mark.parametrize("name", [n for n, m in walk(ours().message_type)
                                  if not m.options.map_entry])
def test_message_fields(name):
    mine = dict(walk(ours().message_type))[name]
    other = theirs().pool.FindMessageTypeByName(name)
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
