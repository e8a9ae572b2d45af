"""A KServe Python model server (``kserve.Model`` + ``kserve.ModelServer``,
``pip install kserve``) with Triton's system shared-memory protocol from
shmreg.kserve: a client registers a region, names it in an inference
request's parameters, and the model's inputs are read from it and its
outputs written into it (guarded copies: a client that truncates its object
gets a 400, the server goes on).

    python examples/kserve/server.py --http_port 8000

The model is ``simple`` as in the C server (INT32 [1, 16] INPUT0, INPUT1 ->
OUTPUT0 = sum, OUTPUT1 = difference), so server/README.md's tritonclient
snippet runs against this server unchanged. Everything shmreg adds is the
one ``include_router`` line in ``main``.
"""
from __future__ import annotations

import kserve
import kserve.model_server
import numpy as np
from kserve import InferOutput, InferRequest, InferResponse
from prometheus_client import REGISTRY

import shmreg
from shmreg.kserve import RegistryCollector, model_server_router


class Simple(kserve.Model):
    """INPUT0 + INPUT1 and INPUT0 - INPUT1, INT32, with int32 wrapping."""

    def __init__(self) -> None:
        super().__init__("simple")
        self.ready = True

    async def predict(self, payload: InferRequest, headers=None,
                      response_headers=None) -> InferResponse:
        by_name = {i.name: i.as_numpy() for i in payload.inputs}
        if set(by_name) != {"INPUT0", "INPUT1"}:
            raise kserve.errors.InvalidInput("model 'simple' takes INPUT0 and INPUT1")
        a, b = by_name["INPUT0"], by_name["INPUT1"]
        if a.dtype != np.int32 or a.shape != b.shape:
            raise kserve.errors.InvalidInput("INPUT0 and INPUT1 must be INT32 of one shape")
        outputs = []
        for name, value in (("OUTPUT0", a + b), ("OUTPUT1", a - b)):
            out = InferOutput(name, list(value.shape), "INT32")
            out.set_data_from_numpy(value, binary_data=False)
            outputs.append(out)
        return InferResponse(payload.id, self.name, outputs)


def parse_args() -> None:
    """--help prints KServe's flags and exits, as a command's --help should:
    kserve.model_server reads its flags at import with add_help=False, so
    without this the server would start on --help."""
    import argparse

    argparse.ArgumentParser(
        prog="server.py",
        description="KServe's model server with Triton's system shared-memory "
                    "protocol (shmreg.kserve), serving the model 'simple'.",
        parents=[kserve.model_server.parser],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    ).parse_known_args()


def main() -> None:
    parse_args()
    registry = shmreg.Registry(busy_policy="defer")
    server = kserve.ModelServer()  # its flags: --http_port, --workers, ...
    # Triton's shared-memory protocol: this line (before start(), which adds
    # KServe's own routes after it).
    kserve.model_server.app.include_router(model_server_router(registry, server.dataplane))
    # The registry's counters on KServe's own /metrics page.
    REGISTRY.register(RegistryCollector(registry))
    try:
        server.start([Simple()])
    finally:
        registry.close()


if __name__ == "__main__":
    main()
