"""Run etkit-made XNNPACK payloads inside ExecuTorch 1.5.1 (the test oracle).

Runs in the oracle environment only (PYTHONPATH=$(scripts/et_oracle.sh | tail -n1)); never imports etkit.

    python et_run_payload.py model MODEL PAYLOAD_PT OUTDIR
        Build MODEL from oracle_models.py and lower it with ExecuTorch's XnnpackPartitioner (it must
        give exactly one partition), but let ExecuTorch's XnnpackBackend.preprocess return etkit's
        payload and named data (PAYLOAD_PT = torch.save({"payload": bytes, "named_data": {key: bytes}}))
        instead of its own; run the .pte with ExecuTorch's runtime.
        OUTDIR/result.pt = {"inputs", "eager", "outputs", "et_payload", "et_named_data"}.

    python et_run_payload.py stub IO_PT OUTDIR
        IO_PT = torch.save([{"payload": bytes, "named_data": {key: bytes}, "inputs": [Tensor],
        "output_shapes": [[int]]}, ...]).
        For each entry, build a stub module with the same inputs and output shapes that ExecuTorch
        delegates as one XNNPACK partition (relu of the concatenated, flattened inputs, sliced/padded and
        reshaped to each output shape), swap in the payload, run. This executes ANY etkit partition's
        payload in ExecuTorch's runtime. OUTDIR/result.pt = [{"outputs": [Tensor], "et_payload": bytes}].
"""
from __future__ import annotations

import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


class Stub(torch.nn.Module):
    def __init__(self, output_shapes):
        super().__init__()
        self.output_shapes = [list(s) for s in output_shapes]

    def forward(self, *xs):
        flat = torch.relu(torch.cat([x.reshape(-1) for x in xs]))
        outs = []
        for shape in self.output_shapes:
            n = math.prod(shape)
            part = flat[:n] if n <= flat.numel() else torch.nn.functional.pad(flat, (0, n - flat.numel()))
            outs.append(part.reshape(shape))
        return tuple(outs)


def _named_data_output(named_data):
    from executorch.exir._serialize._named_data_store import NamedDataStore

    store = NamedDataStore()
    for key, data in named_data.items():
        store.add_named_data(key, data, alignment=16)
    return store.get_named_data_store_output()


def _lower_with_payload(model, inputs, payload, named_data):
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.backends.xnnpack.xnnpack_preprocess import XnnpackBackend
    from executorch.exir import to_edge_transform_and_lower

    original = XnnpackBackend.preprocess
    captured = []

    def swapped(edge_program, compile_specs):
        result = original(edge_program, compile_specs)
        named = {}
        store = getattr(result, "data_store_output", None)
        if store is not None:
            for key, entry in store.pte_data.items():
                named[key] = bytes(store.buffers[getattr(entry, "buffer_index", entry)])
        captured.append((bytes(result.processed_bytes), named))
        result.processed_bytes = payload
        result.data_store_output = _named_data_output(named_data)
        return result

    XnnpackBackend.preprocess = staticmethod(swapped)
    try:
        ep = torch.export.export(model, tuple(inputs))
        pte = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch().buffer
    finally:
        XnnpackBackend.preprocess = staticmethod(original)
    if len(captured) != 1:
        raise SystemExit(f"ExecuTorch made {len(captured)} XNNPACK partitions; expected 1")
    return pte, captured[0]


def _run(pte, inputs):
    from executorch.runtime import Runtime

    method = Runtime.get().load_program(pte).load_method("forward")
    return [o.clone() for o in method.execute(list(inputs))]


def run_model(model_name: str, payload_path: str, outdir: str) -> None:
    from oracle_models import BUILDERS

    model, inputs = BUILDERS[model_name]()
    with torch.no_grad():
        eager = model(*inputs)
    eager = list(eager) if isinstance(eager, (tuple, list)) else [eager]
    mine = torch.load(payload_path, weights_only=False)
    pte, (et_payload, et_named) = _lower_with_payload(model, inputs, mine["payload"], mine["named_data"])
    outputs = _run(pte, inputs)
    os.makedirs(outdir, exist_ok=True)
    torch.save({"inputs": list(inputs), "eager": eager, "outputs": outputs, "et_payload": et_payload,
                "et_named_data": et_named}, os.path.join(outdir, "result.pt"))


def run_stub(io_path: str, outdir: str) -> None:
    results = []
    for io in torch.load(io_path, weights_only=False):
        stub = Stub(io["output_shapes"]).eval()
        pte, (et_payload, _) = _lower_with_payload(stub, io["inputs"], io["payload"], io["named_data"])
        results.append({"outputs": _run(pte, io["inputs"]), "et_payload": et_payload})
    os.makedirs(outdir, exist_ok=True)
    torch.save(results, os.path.join(outdir, "result.pt"))


if __name__ == "__main__":
    mode, rest = sys.argv[1], sys.argv[2:]
    if mode == "model":
        run_model(*rest[:3])
    elif mode == "stub":
        run_stub(*rest[:2])
    else:
        raise SystemExit(f"unknown mode {mode!r}; use 'model' or 'stub'")
