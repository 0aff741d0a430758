"""Seed corpora of the fuzz targets (docs/fuzzing.md), made from real programs that etkit lowers.

    python scripts/fuzz_corpus.py OUT_DIR [--targets fuzz_program,fuzz_xnnpack,...]

Writes ``OUT_DIR/<target>/<seed>`` files (the directory is emptied first):

- ``fuzz_program``: whole ``.pte`` files: small models on the portable kernels alone, and lowered to XNNPACK
  (the backend ``fuzz_program`` links).
- ``fuzz_xnnpack``, ``fuzz_vulkan``, ``fuzz_ethosu``: delegate-call cases in the layout
  ``runtime-cpp/fuzz/fuzz_delegate.cpp`` reads (the DelegateCall's tensor arguments, the delegate's compile
  specs, the program's named data, then the payload), one per delegate of the lowered programs.
- ``fuzz_bundled_program``: ``.bpte`` files (two test cases each) of portable and XNNPACK programs.
- ``fuzz_etdump``: ETDump files of portable and XNNPACK programs run twice (intermediate outputs logged).
- ``fuzz_ptd``: .ptd data files of portable programs (constants with tensor layouts) and XNNPACK programs
  (named data without layouts) exported with ``external_constants=True``.
- ``fuzz_ethosu_estimates``: the Vela layer-estimates blobs (named data) of the Ethos-U programs.
- ``fuzz_qnn_profile``: QNN profile CSV text in the shape QNN's profiler writes (one run, two, one cut short).
- ``fuzz_qnn_payload``, ``fuzz_coreml_payload``: the raw payloads (those targets read the payload alone).

A plugin that cannot be imported is an error: a fuzz run without seeds for a target would look like one
that found nothing.
"""
from __future__ import annotations

import argparse
import functools
import shutil
import struct
import sys
from pathlib import Path

import torch
from torch import nn

import etkit
from etkit.fb.DataLocation import DataLocation
from etkit.fb.InstructionArguments import InstructionArguments
from etkit.fb.KernelTypes import KernelTypes
from etkit.serialize.program_flatbuffer import as_bytes
from etkit.serialize.pte import read_layout

# ------------------------------------------------------------------------------------------ models


class Add(nn.Module):
    def forward(self, x, y):
        return x + y


class ConvRelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


class LinearSoftmax(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 8)

    def forward(self, x):
        return torch.softmax(self.fc2(torch.nn.functional.gelu(self.fc1(x))), dim=-1)


class PoolCat(nn.Module):
    def forward(self, x):
        a = torch.nn.functional.max_pool2d(x, 2)
        b = torch.nn.functional.avg_pool2d(x, 2)
        return torch.cat([a, b], dim=1).mean(dim=(2, 3))


class Counter(nn.Module):
    """A mutable buffer updated in place every call (the shape of a KV cache)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("cache", torch.zeros(4, 8))

    def forward(self, x, pos):
        self.cache.index_copy_(0, pos, x)
        return self.cache.sum(dim=0)


class Embed(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(32, 8)
        self.norm = nn.LayerNorm(8)

    def forward(self, ids):
        return self.norm(self.emb(ids)).sum(dim=1)


def _float_models():
    """(name, module, example inputs, dynamic_shapes or None) lowered for every float backend. Seeded: the same
    weights and inputs every time, so the seeds (and CI's fixed-seed fuzz run) are the same on every machine."""
    torch.manual_seed(0)
    batch = torch.export.Dim("batch", min=1, max=8)
    return [
        ("add", Add(), (torch.randn(2, 8), torch.randn(2, 8)), None),
        ("conv_relu", ConvRelu(), (torch.randn(1, 3, 8, 8),), None),
        ("linear_softmax", LinearSoftmax(), (torch.randn(2, 16),), None),
        ("linear_dynamic", LinearSoftmax(), (torch.randn(2, 16),), ({0: batch},)),
        ("pool_cat", PoolCat(), (torch.randn(1, 4, 8, 8),), None),
    ]


def _portable_models():
    return _float_models() + [
        ("counter", Counter(), (torch.randn(1, 8), torch.tensor([1])), None),
        ("embed", Embed(), (torch.randint(0, 32, (2, 5)),), None),
    ]


def _bundles():
    """.bpte files: a model lowered to the portable kernels and to XNNPACK, two test cases each (eager outputs)."""
    from etkit.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
    from etkit.devtools.bundled_program.core import BundledProgram
    from etkit.devtools.bundled_program.serialize import serialize_from_bundled_program_to_flatbuffer
    from etkit_xnnpack import XnnpackPartitioner

    seeds = []
    for name, model, inputs, _ in [_float_models()[0], _float_models()[2], _portable_models()[-1]]:
        for backend, partitioners in (("portable", []), ("xnnpack", [XnnpackPartitioner()])):
            torch.manual_seed(0)
            ep = torch.export.export(model.eval(), tuple(inputs))
            edge = etkit.to_edge_transform_and_lower(ep, partitioner=partitioners) if partitioners else etkit.to_edge(ep)
            second = tuple(torch.randint_like(x, 0, 32) if not x.is_floating_point() else torch.randn_like(x)
                           for x in inputs)
            cases = [MethodTestCase(inputs=list(i), expected_outputs=model(*i)) for i in (inputs, second)]
            bundle = BundledProgram(edge.to_executorch(), [MethodTestSuite(method_name="forward", test_cases=cases)])
            seeds.append((f"{backend}_{name}", bytes(serialize_from_bundled_program_to_flatbuffer(bundle))))
    return seeds


def _etdumps():
    """ETDumps of two executes each, with every intermediate output logged, of portable and XNNPACK programs."""
    import tempfile

    from etkit.runtime import Runtime
    from etkit_xnnpack import XnnpackPartitioner

    seeds = []
    for name, model, inputs, dynamic in _float_models()[:3]:
        for backend, partitioners in (("portable", []), ("xnnpack", [XnnpackPartitioner()])):
            program = Runtime.get().load_program(_lower(model, inputs, dynamic, partitioners), enable_etdump=True,
                                                 debug_buffer_size=1 << 16)
            method = program.load_method("forward")
            for _ in range(2):
                method.execute(list(inputs))
            with tempfile.TemporaryDirectory() as tmp:
                program.write_etdump_result_to_file(Path(tmp) / "seed.etdp")
                seeds.append((f"{backend}_{name}", (Path(tmp) / "seed.etdp").read_bytes()))
    return seeds


def _data_files():
    """.ptd files of portable and XNNPACK programs (ExecutorchBackendConfig(external_constants=True))."""
    from etkit_xnnpack import XnnpackPartitioner

    seeds = []
    for name, model, inputs, dynamic in _float_models()[:3]:
        for backend, partitioners in (("portable", []), ("xnnpack", [XnnpackPartitioner()])):
            config = etkit.ExecutorchBackendConfig(external_constants=True)
            program = _lower(model, inputs, dynamic, partitioners, config, manager=True)
            seeds += [(f"{backend}_{name}", blob) for blob in program.data_files.values()]
    return seeds


def _lower(model, inputs, dynamic_shapes, partitioners, config=None, manager=False):
    torch.manual_seed(0)
    if isinstance(model, nn.Module) and not isinstance(model, torch.fx.GraphModule):
        model = model.eval()  # a PT2E-converted GraphModule refuses eval()
    ep = torch.export.export(model, tuple(inputs), dynamic_shapes=dynamic_shapes)
    if partitioners:
        edge = etkit.to_edge_transform_and_lower(ep, partitioner=list(partitioners))
    else:
        edge = etkit.to_edge(ep)
    program = edge.to_executorch(config)
    return program if manager else bytes(program.buffer)


def _xnnpack_programs():
    from torchao.quantization import Int8DynamicActivationIntxWeightConfig, quantize_
    from torchao.quantization.granularity import PerGroup
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from etkit_xnnpack import XnnpackPartitioner
    from etkit_xnnpack.quantizer import XNNPACKQuantizer, get_symmetric_quantization_config

    programs = [(name, _lower(m, x, d, [XnnpackPartitioner()])) for name, m, x, d in _float_models()]
    # 8-bit static quantization (PT2E) of a conv model and 8da4w group-wise weights of a linear one.
    model, inputs = ConvRelu().eval(), (torch.randn(1, 3, 8, 8),)
    quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config())
    prepared = prepare_pt2e(torch.export.export(model, inputs).module(), quantizer)
    prepared(*inputs)
    programs.append(("conv_8a8w", _lower(convert_pt2e(prepared), inputs, None, [XnnpackPartitioner()])))
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 16)).eval()
    quantize_(model, Int8DynamicActivationIntxWeightConfig(weight_dtype=torch.int4, weight_granularity=PerGroup(32)))
    programs.append(("linear_8da4w", _lower(model, (torch.randn(2, 64),), None, [XnnpackPartitioner()])))
    return programs


def _vulkan_programs():
    from etkit_vulkan import VulkanPartitioner

    return [(name, _lower(m, x, d, [VulkanPartitioner()])) for name, m, x, d in _float_models()]


@functools.lru_cache(maxsize=None)  # fuzz_ethosu and fuzz_ethosu_estimates seed from the same programs
def _ethosu_programs():
    from etkit_ethosu import EthosUCompileSpec, EthosUPartitioner, quantize_for_ethosu

    programs = []
    for name, model, inputs, _ in _float_models()[:3] + [_float_models()[4]]:
        torch.manual_seed(0)
        reference = quantize_for_ethosu(model.eval(), inputs, None)
        partitioner = EthosUPartitioner(EthosUCompileSpec("ethos-u55-128"))
        programs.append((name, _lower(reference, inputs, None, [partitioner])))
    return programs


def _qnn_programs():
    from etkit_qnn import (QnnPartitioner, generate_htp_compiler_spec, generate_qnn_executorch_compiler_spec,
                           quantize_for_qnn)
    from etkit_qnn.quantizer import QuantDtype

    programs = []
    for name, model, inputs, _ in _float_models()[:3]:
        for fp16 in (True, False):
            program = model.eval() if fp16 else quantize_for_qnn(model.eval(), inputs, None,
                                                                  quant_dtype=QuantDtype.use_8a8w)
            specs = generate_qnn_executorch_compiler_spec(
                soc_model="SM8650", backend_options=generate_htp_compiler_spec(use_fp16=fp16))
            programs.append((f"{name}_{'fp16' if fp16 else '8a8w'}", _lower(program, inputs, None,
                                                                          [QnnPartitioner(specs)])))
    return programs


def _coreml_programs():
    from etkit_coreml import CoreMLPartitioner

    return [(name, _lower(m, x, d, [CoreMLPartitioner()])) for name, m, x, d in _float_models()[:3]]


# ------------------------------------------------------------------------------------------ cases


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _tensor_spec(evalue) -> bytes:
    t = evalue.val
    sizes = [int(s) for s in (t.sizes if t.sizes is not None else [])]
    if evalue.valType != KernelTypes.Tensor or len(sizes) > 8 or any(not 0 <= s < 65536 for s in sizes):
        raise ValueError("not a tensor argument the case layout holds")
    kind = (int(t.scalarType) & 0x7F) | (0x80 if t.shapeDynamism else 0)
    return struct.pack(f"<BB{len(sizes)}H", kind, len(sizes), *sizes)


def delegate_cases(pte: bytes, backend_id: str) -> list[bytes]:
    """One fuzz_delegate.cpp case per call of a ``backend_id`` delegate in ``pte``: the call's tensor
    arguments, the delegate's compile specs, the program's named data, then the payload."""
    layout = read_layout(pte)
    program = layout.program

    def segment(index: int) -> bytes:
        offset, size = layout.segment_ranges[index]
        return pte[offset:offset + size]

    named = b""
    entries = program.namedData or []
    for entry in entries:
        key = _text(entry.key).encode()
        data = segment(entry.segmentIndex)
        named += struct.pack("<B", len(key)) + key + struct.pack("<I", len(data)) + data
    named = struct.pack("<B", len(entries)) + named

    cases = []
    for plan in program.executionPlan or []:
        for chain in plan.chains or []:
            for instruction in chain.instructions or []:
                if instruction.instrArgsType != InstructionArguments.DelegateCall:
                    continue
                delegate = plan.delegates[instruction.instrArgs.delegateIndex]
                if _text(delegate.id) != backend_id:
                    continue
                args = [int(a) for a in instruction.instrArgs.args]
                header = struct.pack("<B", len(args)) + b"".join(_tensor_spec(plan.values[a]) for a in args)
                specs = delegate.compileSpecs or []
                header += struct.pack("<B", len(specs))
                for spec in specs:
                    key, value = _text(spec.key).encode(), as_bytes(spec.value)
                    header += struct.pack("<B", len(key)) + key + struct.pack("<H", len(value)) + value
                processed = delegate.processed
                payload = segment(processed.index) if processed.location == DataLocation.SEGMENT else \
                    as_bytes(program.backendDelegateData[processed.index].data)
                cases.append(header + named + payload)
    return cases


def raw_payloads(pte: bytes, backend_id: str) -> list[bytes]:
    from etkit.serialize.inspect import delegate_payloads

    return [payload for _, _, bid, payload, _ in delegate_payloads(pte) if bid == backend_id]


# target -> (programs, what to write per program)
TARGETS = {
    "fuzz_program": lambda: [(f"portable_{n}", _lower(m, x, d, [])) for n, m, x, d in _portable_models()]
    + [(f"xnnpack_{n}", p) for n, p in _xnnpack_programs()],
    "fuzz_bundled_program": _bundles,
    "fuzz_etdump": _etdumps,
    "fuzz_ptd": _data_files,
    "fuzz_xnnpack": lambda: _cases(_xnnpack_programs(), "XnnpackBackend", delegate_cases),
    "fuzz_vulkan": lambda: _cases(_vulkan_programs(), "VulkanBackend", delegate_cases),
    "fuzz_ethosu": lambda: _cases(_ethosu_programs(), "EthosUBackend", delegate_cases),
    "fuzz_ethosu_estimates": lambda: _named_data(_ethosu_programs(), "etkit_ethosu.layers."),
    "fuzz_qnn_profile": lambda: _qnn_profiles(),
    "fuzz_qnn_payload": lambda: _cases(_qnn_programs(), "QnnBackend", raw_payloads),
    "fuzz_coreml_payload": lambda: _cases(_coreml_programs(), "CoreMLBackend", raw_payloads),
}


def _qnn_profiles() -> list:
    """QNN profile CSV text in the shape onnxruntime-qnn 2.7.0 appends (plugins/qnn/runtime/src/qnn_profile.h):
    one run, two runs, a run cut short."""
    run = ("0,BACKEND,598641,CYCLES,BACKEND,ROOT,Accelerator (execute) time (cycles)\n"
           "0,NODE,234934,CYCLES,BACKEND,SUB-EVENT,Transpose:OpId_17 (cycles)\n"
           "0,NODE,159769,CYCLES,BACKEND,SUB-EVENT,Relu__3_token_2:OpId_26 (cycles)\n"
           "0,BACKEND,3842,US,BACKEND,ROOT,Accelerator (execute) time\n"
           "0,EXECUTE,3945,US,BACKEND,ROOT,QNN (execute) time\n")
    return [("one_run", run.encode()), ("two_runs", (run + run).encode()), ("cut_short", (run + run[:150]).encode())]


def _named_data(programs, prefix: str) -> list:
    """The named-data blobs whose keys start with ``prefix`` in each program."""
    from etkit.serialize import deserialize_pte

    seeds = []
    for name, pte in programs:
        named = deserialize_pte(pte).named_data
        seeds += [(f"{name}_{i}", blob) for i, (key, blob) in enumerate(sorted(named.items()))
                  if key.startswith(prefix)]
    return seeds


def _cases(programs, backend_id, extract):
    seeds = []
    for name, pte in programs:
        found = extract(pte, backend_id)
        if not found:
            raise RuntimeError(f"{name}: no {backend_id} delegate in the lowered program")
        seeds.extend((f"{name}_{i}", case) for i, case in enumerate(found))
    return seeds


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--targets", default=",".join(TARGETS), help="comma-separated (default: all)")
    args = parser.parse_args(argv)
    for target in args.targets.split(","):
        if target not in TARGETS:
            parser.error(f"unknown target {target!r}; known: {', '.join(TARGETS)}")
        out = args.out_dir / target
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        seeds = TARGETS[target]()
        for name, data in seeds:
            (out / name).write_bytes(data)
        print(f"{target}: {len(seeds)} seeds, {sum(len(d) for _, d in seeds)} bytes -> {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
