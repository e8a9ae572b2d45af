"""A KServe Python model server (``kserve.Model`` + ``kserve.ModelServer``,
``pip install kserve``) with Triton's system shared-memory protocol from
shmreg.kserve: a client registers a region, names it in an inference
request's parameters, and the model's inputs are read from it and its
outputs written into it (guarded copies: a client that truncates its object
gets a 400, the server goes on).

    python python/examples/kserve/server.py --http_port 8000 --allow-client-shm=true

The model is ``simple`` as in the C server (INT32 [1, 16] INPUT0, INPUT1 ->
OUTPUT0 = sum, OUTPUT1 = difference), so server/README.md's tritonclient
snippet runs against this server unchanged. Everything shmreg adds is the
one ``include_router`` line in ``main``, with the C server's defences and
flags: client shared memory off unless ``--allow-client-shm=true``, HTTP on
127.0.0.1 unless ``--host`` says otherwise (KServe's own listener takes every
interface), and the registry's owner allow-list and limits.
"""
from __future__ import annotations

import argparse

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


def parse_args() -> argparse.Namespace:
    """This server's flags (the C server's names) beside KServe's. --help
    prints both and exits, as a command's --help should: kserve.model_server
    reads its flags at import with add_help=False, so without this the
    server would start on --help."""
    p = argparse.ArgumentParser(
        prog="server.py",
        description="KServe's model server with Triton's system shared-memory "
                    "protocol (shmreg.kserve), serving the model 'simple'.",
        parents=[kserve.model_server.parser],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--host", default="127.0.0.1", help="address the HTTP server listens on")
    p.add_argument("--allow-client-shm", choices=("true", "false"), default="false",
                   help="let clients register and unregister shared memory, as Triton's flag")
    p.add_argument("--allow-uid", action="append", default=[], metavar="UID|any",
                   type=lambda text: text if text == "any" else str(int(text)),
                   help="map only shm objects this uid owns (repeatable; default: the "
                        "server's own uid; any: every owner)")
    p.add_argument("--max-regions", type=int, default=4096,
                   help="regions registered at once, 0 = no limit")
    p.add_argument("--max-mapped-bytes", type=int, default=1 << 40,
                   help="bytes mapped for all regions, 0 = no limit")
    p.add_argument("--max-body-mb", type=int, default=256,
                   help="largest request body, tensor copied out of shared memory and "
                        "response, in MiB")
    opts, _ = p.parse_known_args()
    return opts


class ModelServer(kserve.ModelServer):
    """KServe's server with its HTTP listener on one address: KServe's
    REST server binds every interface, and a registration makes the server
    map and read objects a client names."""

    def __init__(self, host: str) -> None:
        super().__init__()  # its flags: --http_port, --workers, ...
        self.host = host
        if self.workers > 1:  # KServe's processes take no address: every interface
            raise SystemExit("--workers must be 1 here: KServe's multi-process server "
                             "listens on every interface, whatever --host says")

    def setup_event_loop(self) -> None:
        # start() has made the REST server and not yet bound it.
        if self._rest_server is not None:
            self._rest_server.config.host = self.host
        super().setup_event_loop()


def main() -> None:
    opts = parse_args()
    owners = "any" if "any" in opts.allow_uid else [int(u) for u in opts.allow_uid] or None
    registry = shmreg.Registry(busy_policy="defer", allowed_owner_uids=owners,
                               max_regions=opts.max_regions,
                               max_mapped_bytes=opts.max_mapped_bytes)
    server = ModelServer(opts.host)
    # Triton's shared-memory protocol: this line (before start(), which adds
    # KServe's own routes after it).
    kserve.model_server.app.include_router(model_server_router(
        registry, server.dataplane, allow_client_shm=opts.allow_client_shm == "true",
        max_body_bytes=opts.max_body_mb << 20))
    # The registry's counters on KServe's own /metrics page.
    REGISTRY.register(RegistryCollector(registry))
    try:
        server.start([Simple()])
    finally:
        registry.close()


if __name__ == "__main__":
    main()
