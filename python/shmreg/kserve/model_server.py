"""Triton's shared-memory protocol mounted on KServe's Python ModelServer."""
from __future__ import annotations

from typing import Any

import numpy as np
from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from .body import LIMIT_NAME, MAX_BODY_BYTES, read_body
from .regions import RequestRegions, request_regions
from .request import InferRequest, decode_request, header_length
from .response import encode_response, place_outputs
from .shared_memory import shared_memory_router
from .status import InferError
from .tensors import DATATYPES, Tensor

def _kserve_request(model: str, request: InferRequest) -> Any:
    """The decoded request as ``kserve.InferRequest``: each input's numpy
    array (a copy of the shared memory, or the request's own data)."""
    from kserve import InferInput
    from kserve import InferRequest as KServeRequest
    inputs = [InferInput(t.name, list(t.shape), t.datatype, data=t.data) for t in request.inputs]
    return KServeRequest(model, inputs, request_id=request.id, parameters=request.parameters)


def _kserve_outputs(model: str, response: Any) -> tuple[list[Tensor], dict[str, np.ndarray]]:
    outputs = getattr(response, "outputs", None)
    if outputs is None:  # a model answering a dict speaks v1, not v2
        raise InferError(500, f"model '{model}' did not answer with a kserve.InferResponse")
    described, arrays = [], {}
    for o in outputs:
        array = np.asarray(o.as_numpy())
        if o.datatype not in DATATYPES:
            raise InferError(500, f"output '{o.name}' of model '{model}' has datatype "
                                  f"'{o.datatype}', which this router cannot place")
        described.append(Tensor(o.name, o.datatype, [int(d) for d in o.shape],
                                byte_size=array.nbytes))
        arrays[o.name] = array
    return described, arrays


def model_server_router(registry: Any, dataplane: Any, *, allow_client_shm: bool = False,
                        max_body_bytes: int = MAX_BODY_BYTES, limit_name: str = LIMIT_NAME,
                        **router_options: Any) -> APIRouter:
    """Triton's shared-memory protocol for a KServe Python model server:

        server = kserve.ModelServer()
        kserve.model_server.app.include_router(
            shmreg.kserve.model_server_router(registry, server.dataplane))
        server.start([model])

    The router holds ``shared_memory_router(registry)`` and
    ``POST /v2/models/{name}[/versions/{v}]/infer``, which, mounted before the
    ModelServer adds its own routes (``start`` does that), answers every v2
    inference: JSON, binary tensor data, or tensors naming regions. Inputs
    are decoded by ``decode_request`` (regions read with the guarded copy),
    handed to the model as a ``kserve.InferRequest`` through
    ``dataplane.infer`` (so the model's preprocess, predict and postprocess
    run as usual), and its ``InferResponse`` outputs are placed as the request
    asks (``place_outputs``, ``encode_response``: into the client's region,
    guarded). An unknown or unready model raises KServe's own errors, which
    its app answers as usual.

    The C server's defences, by default as there: registering client shared
    memory answers 501 unless ``allow_client_shm``; a request body, a tensor
    copied out of a region and a response are each bounded by
    ``max_body_bytes`` (400 naming ``limit_name``); a malformed body (nested
    too deep, a shape whose byte size overflows) is a 400."""
    router = shared_memory_router(registry, allow_client_shm=allow_client_shm,
                                  max_body_bytes=max_body_bytes, limit_name=limit_name,
                                  **router_options)
    limits = {"limit_name": limit_name}

    async def infer(request: Request, model_name: str, model_version: str | None = None,
                    regions: RequestRegions = Depends(request_regions(registry))) -> Response:
        if not await dataplane.model_ready(model_name):
            from kserve.errors import ModelNotReady
            raise ModelNotReady(model_name)
        try:
            body = await read_body(request, max_body_bytes, limit_name)
            decoded = decode_request(body, header_length(request.headers), model_name, regions,
                                     max_copy_bytes=max_body_bytes, **limits)
            del body
            response, _ = await dataplane.infer(model_name, _kserve_request(model_name, decoded))
            described, arrays = _kserve_outputs(model_name, response)
            slots = place_outputs(decoded, model_name, described, regions,
                                  max_response_bytes=max_body_bytes, **limits)
            for slot in slots:
                np.copyto(slot.array, arrays[slot.tensor.name].reshape(slot.array.shape),
                          casting="unsafe")
            return encode_response(model_name, decoded, slots)
        except InferError as e:
            return e.response()

    router.add_api_route("/v2/models/{model_name}/infer", infer, methods=["POST"])
    router.add_api_route("/v2/models/{model_name}/versions/{model_version}/infer", infer,
                         methods=["POST"])
    return router
