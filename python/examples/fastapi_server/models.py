"""The built-in models of the C example (server/src/models/models.c),
with the same metadata, checks, messages and statistics:

- simple: INPUT0 + INPUT1 -> OUTPUT0, INPUT0 - INPUT1 -> OUTPUT1, INT32
  [-1, 16], batch at most 8, wrapping like int32 hardware;
- simple_delayed: simple after sleeping --delay-ms;
- identity: OUTPUT0 = INPUT0, any datatype and shape (metadata: FP16
  [3, -1, -1], a detector's image, which perf_analyzer generates data from).
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import numpy as np

from shmreg.kserve import InferError, Tensor


@dataclass
class Spec:
    name: str
    datatype: str
    dims: tuple  # without the batch dimension; -1: any size


@dataclass
class Model:
    name: str
    inputs: tuple
    outputs: tuple
    max_batch_size: int = 0  # > 0: the first dimension is the batch
    any_input: bool = False  # identity: every datatype and shape
    delayed: bool = False
    stats: dict = field(default_factory=lambda: dict(success=0, success_ns=0, fail=0,
                                                     fail_ns=0, last_ms=0))
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    # ------------------------------------------------------------ metadata

    def _shape(self, spec: Spec) -> list:
        return ([-1] if self.max_batch_size > 0 else []) + list(spec.dims)

    def metadata(self) -> dict:
        tensors = lambda specs: [{"name": s.name, "datatype": s.datatype,
                                  "shape": self._shape(s)} for s in specs]
        return {"name": self.name, "versions": ["1"], "platform": "shmreg_builtin",
                "inputs": tensors(self.inputs), "outputs": tensors(self.outputs)}

    def config(self) -> dict:
        tensors = lambda specs: [{"name": s.name, "data_type": f"TYPE_{s.datatype}",
                                  "format": "FORMAT_NONE", "dims": list(s.dims)} for s in specs]
        return {"name": self.name, "platform": "shmreg_builtin", "backend": "shmreg_builtin",
                "max_batch_size": self.max_batch_size, "input": tensors(self.inputs),
                "output": tensors(self.outputs), "model_transaction_policy": {"decoupled": False},
                "instance_group": [{"count": 1, "kind": "KIND_CPU"}]}

    def stats_json(self) -> dict:
        with self.lock:
            s = dict(self.stats)
        d = lambda count, ns: {"count": count, "ns": ns}
        ok = s["success"]
        # The whole request is compute_infer here: no queue, no batching.
        return {"name": self.name, "version": "1", "last_inference": s["last_ms"],
                "inference_count": ok, "execution_count": ok,
                "inference_stats": {"success": d(ok, s["success_ns"]),
                                    "fail": d(s["fail"], s["fail_ns"]), "queue": d(ok, 0),
                                    "compute_input": d(ok, 0),
                                    "compute_infer": d(ok, s["success_ns"]),
                                    "compute_output": d(ok, 0), "cache_hit": d(0, 0),
                                    "cache_miss": d(0, 0)},
                "batch_stats": []}

    def record(self, ok: bool, ns: int) -> None:
        with self.lock:
            self.stats["success" if ok else "fail"] += 1
            self.stats["success_ns" if ok else "fail_ns"] += ns
            self.stats["last_ms"] = time.time_ns() // 1_000_000

    # ------------------------------------------------------------ requests

    def _shape_matches(self, spec: Spec, t: Tensor) -> bool:
        batch = 1 if self.max_batch_size > 0 else 0
        if len(t.shape) != len(spec.dims) + batch:
            return False
        if batch and not 1 <= t.shape[0] <= self.max_batch_size:
            return False
        return all(d < 0 or t.shape[i + batch] == d for i, d in enumerate(spec.dims))

    def bind_inputs(self, inputs: list) -> list:
        """The request's inputs in the model's order, checked."""
        if len(inputs) != len(self.inputs):
            raise InferError(400, f"expected {len(self.inputs)} inputs but got {len(inputs)} "
                                  f"inputs for model '{self.name}'")
        ordered = [None] * len(self.inputs)
        names = [s.name for s in self.inputs]
        for t in inputs:
            i = names.index(t.name) if t.name in names else -1
            if i < 0 or ordered[i] is not None:
                raise InferError(400, f"unexpected inference input '{t.name}' for model "
                                      f"'{self.name}'")
            spec = self.inputs[i]
            if not self.any_input:
                if t.datatype != spec.datatype:
                    raise InferError(400, f"inference input '{t.name}' data-type is "
                                          f"'{t.datatype}', but model '{self.name}' expects "
                                          f"'{spec.datatype}'")
                if not self._shape_matches(spec, t):
                    want = ",".join(str(d) for d in self._shape(spec))
                    got = ",".join(str(d) for d in t.shape)
                    raise InferError(400, f"unexpected shape for input '{t.name}' for model "
                                          f"'{self.name}'. Expected [{want}] (batch at most "
                                          f"{self.max_batch_size}), got [{got}]")
            ordered[i] = t
        if len(ordered) == 2 and ordered[0].shape != ordered[1].shape:
            raise InferError(400, f"inputs of model '{self.name}' must have the same shape")
        return ordered

    def describe_outputs(self, ordered: list) -> list:
        """Every output has the datatype, shape and size of the first input."""
        first = ordered[0]
        return [Tensor(s.name, first.datatype if self.any_input else s.datatype,
                       list(first.shape), byte_size=first.byte_size) for s in self.outputs]

    def run(self, ordered: list, outputs: list, delay_s: float) -> None:
        """Write the outputs (numpy arrays: views of the client's regions or
        buffers) from the inputs."""
        if self.delayed and delay_s:
            time.sleep(delay_s)
        if self.any_input:
            if outputs[0] is not None:
                np.copyto(outputs[0], ordered[0].data)  # may be the same shared memory
            return
        a, b = ordered[0].data, ordered[1].data
        if outputs[0] is not None:
            np.add(a, b, out=outputs[0])  # int32 arithmetic wraps, as in C
        if outputs[1] is not None:
            np.subtract(a, b, out=outputs[1])


def builtin_models() -> dict:
    def simple(name: str, delayed: bool) -> Model:
        return Model(name, (Spec("INPUT0", "INT32", (16,)), Spec("INPUT1", "INT32", (16,))),
                     (Spec("OUTPUT0", "INT32", (16,)), Spec("OUTPUT1", "INT32", (16,))),
                     max_batch_size=8, delayed=delayed)

    return {m.name: m for m in (
        simple("simple", False), simple("simple_delayed", True),
        Model("identity", (Spec("INPUT0", "FP16", (3, -1, -1)),),
              (Spec("OUTPUT0", "FP16", (3, -1, -1)),), any_input=True),
    )}
