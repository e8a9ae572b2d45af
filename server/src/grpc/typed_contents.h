/*
 * An input's typed 'contents' (InferTensorContents: bool_contents,
 * int_contents, ... bytes_contents) as the tensor's bytes, with Triton's
 * rules and words, for infer_call.cc.
 */
#ifndef SERVER_GRPC_TYPED_CONTENTS_H
#define SERVER_GRPC_TYPED_CONTENTS_H

#include "core/infer_core.h"
#include "inference.grpc.pb.h"

namespace grpc_service {

/* Point t (its name and datatype set) at the elements of in.contents(), or
 * at a buffer of its own (t->owned) where the field's elements are wider
 * than the datatype's or BYTES need their length prefixes. in outlives the
 * model's run, as the raw path's bytes do. STATUS_OK, or the infer_fail status:
 * a field of another datatype than the input's, two fields with elements, a
 * byte size the shape does not give, or BYTES larger than --max-body-mb. */
server_status input_from_contents(infer_ctx *c,
                                  const inference::ModelInferRequest::InferInputTensor &in,
                                  tensor *t);

} // namespace grpc_service

#endif
