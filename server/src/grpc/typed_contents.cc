/*
 * An input's typed 'contents' as its bytes (typed_contents.h). Triton reads
 * the fields in the proto's order and takes the first with elements; a
 * second one is refused, and so is a field whose datatype is not the
 * input's. FP16 and BF16 have no field: any typed field is refused for them
 * by that rule, and their clients send raw_input_contents. The element
 * count is checked as the raw path checks a byte size, by the shape, before
 * anything is allocated.
 */
#include "grpc/typed_contents.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "common/datatype.h"

namespace grpc_service {

namespace {

using contents = inference::InferTensorContents;

/* The typed fields, in the order Triton reads them. */
enum field { F_BOOL, F_INT, F_INT64, F_UINT, F_UINT64, F_FP32, F_FP64, F_BYTES, F_COUNT };

static_assert(sizeof(bool) == 1, "bool_contents' elements are BOOL's bytes");

int count_of(const contents &v, field f)
{
    switch (f) {
    case F_BOOL: return v.bool_contents_size();
    case F_INT: return v.int_contents_size();
    case F_INT64: return v.int64_contents_size();
    case F_UINT: return v.uint_contents_size();
    case F_UINT64: return v.uint64_contents_size();
    case F_FP32: return v.fp32_contents_size();
    case F_FP64: return v.fp64_contents_size();
    case F_BYTES: return v.bytes_contents_size();
    case F_COUNT: break;
    }
    return 0;
}

/* The datatype f's elements are read as for an input of datatype declared:
 * int_contents and uint_contents carry the 8- and 16-bit integers too, each
 * element cut to its low bytes (unchecked, as Triton does). */
const char *type_of(field f, const char *declared)
{
    switch (f) {
    case F_BOOL: return "BOOL";
    case F_INT:
        return strcmp(declared, "INT8") == 0 || strcmp(declared, "INT16") == 0 ? declared : "INT32";
    case F_INT64: return "INT64";
    case F_UINT:
        return strcmp(declared, "UINT8") == 0 || strcmp(declared, "UINT16") == 0 ? declared
                                                                                 : "UINT32";
    case F_UINT64: return "UINT64";
    case F_FP32: return "FP32";
    case F_FP64: return "FP64";
    case F_BYTES: return "BYTES";
    case F_COUNT: break;
    }
    return "";
}

/* The elements of a fixed-size field, in memory as the protocol's. */
const void *elements_of(const contents &v, field f)
{
    switch (f) {
    case F_BOOL: return v.bool_contents().data();
    case F_INT: return v.int_contents().data();
    case F_INT64: return v.int64_contents().data();
    case F_UINT: return v.uint_contents().data();
    case F_UINT64: return v.uint64_contents().data();
    case F_FP32: return v.fp32_contents().data();
    case F_FP64: return v.fp64_contents().data();
    case F_BYTES:
    case F_COUNT: break;
    }
    return nullptr;
}

/* The field with elements, or F_COUNT for none; Triton's refusals of a
 * second one and of one of another datatype, in its order. */
server_status pick_field(infer_ctx *c, const contents &v, const tensor *t, field *picked)
{
    *picked = F_COUNT;
    for (int i = 0; i < F_COUNT; i++) {
        field f = static_cast<field>(i);
        if (count_of(v, f) == 0)
            continue;
        if (*picked != F_COUNT)
            return infer_fail(c, STATUS_INVALID_ARG,
                              "unexpected explicit tensor data for input tensor '%s' for model "
                              "'%s', binary data was already supplied.",
                              t->name, model_name(c->m));
        if (strcmp(type_of(f, t->datatype), t->datatype) != 0)
            return infer_fail(c, STATUS_INVALID_ARG,
                              "unexpected explicit tensor data for input tensor '%s' for model "
                              "'%s' of type '%s', expected datatype '%s'",
                              t->name, model_name(c->m), type_of(f, t->datatype), t->datatype);
        *picked = f;
    }
    return STATUS_OK;
}

/* BYTES elements as the raw form has them: each a 4-byte length, then its
 * bytes. Bounded by --max-body-mb like any tensor the server copies: the
 * prefixes make the buffer up to twice the message's bytes. */
server_status bytes_input(infer_ctx *c, const contents &v, tensor *t)
{
    size_t size = 0;
    for (const std::string &e : v.bytes_contents()) {
        if (e.size() > UINT32_MAX || e.size() + 4 > infer_max_copy() - size)
            return infer_fail(c, STATUS_TOO_LARGE,
                              "input '%s': its bytes_contents take more than the %zu bytes "
                              "the server copies for one tensor (--max-body-mb)",
                              t->name, infer_max_copy());
        size += 4 + e.size();
    }
    char *out = static_cast<char *>(std::malloc(size ? size : 1));
    if (!out)
        return infer_fail(c, STATUS_INTERNAL,
                          "input '%s': out of memory for %zu bytes", t->name, size);
    t->owned = t->data = out;
    t->byte_size = size;
    for (const std::string &e : v.bytes_contents()) {
        uint32_t n = static_cast<uint32_t>(e.size());
        std::memcpy(out, &n, 4);
        std::memcpy(out + 4, e.data(), e.size());
        out += 4 + e.size();
    }
    return STATUS_OK;
}

/* 4-byte elements into size-byte ones, each keeping its low bytes (the
 * host is little-endian, as the raw form is). */
server_status narrowed_input(infer_ctx *c, const void *wide, size_t count, int size, tensor *t)
{
    char *out = static_cast<char *>(std::malloc(count ? count * size : 1));
    if (!out)
        return infer_fail(c, STATUS_INTERNAL, "input '%s': out of memory for %zu bytes", t->name,
                          count * size);
    for (size_t i = 0; i < count; i++)
        std::memcpy(out + i * size, static_cast<const char *>(wide) + i * 4, size);
    t->owned = t->data = out;
    t->byte_size = count * size;
    return STATUS_OK;
}

} // namespace

server_status input_from_contents(infer_ctx *c,
                                  const inference::ModelInferRequest::InferInputTensor &in,
                                  tensor *t)
{
    static char no_elements;
    const contents &v = in.contents();
    field f;
    server_status st = pick_field(c, v, t, &f);
    if (st)
        return st;
    if (f == F_BYTES)
        return bytes_input(c, v, t);
    size_t count = f == F_COUNT ? 0 : static_cast<size_t>(count_of(v, f));
    int size = datatype_size(t->datatype);
    /* the size the elements give, checked by the shape before any copy */
    if ((st = infer_check_input_size(c, t, count * static_cast<size_t>(size))) != 0)
        return st;
    if (f == F_COUNT) { /* an empty message: a tensor of no elements */
        t->data = &no_elements;
        t->byte_size = 0;
        return STATUS_OK;
    }
    if ((f == F_INT || f == F_UINT) && size < 4)
        return narrowed_input(c, elements_of(v, f), count, size, t);
    /* The request outlives the model's run (InferCall::run frees it after). */
    t->data = const_cast<void *>(elements_of(v, f));
    t->byte_size = count * static_cast<size_t>(size);
    return STATUS_OK;
}

} // namespace grpc_service
