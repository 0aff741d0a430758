"""Helpers the Core ML plugin tests share: lower a model, open its payloads, read the ML Program spec."""
from __future__ import annotations

import collections
import importlib.util
from pathlib import Path

import torch

import etkit
from etkit.backend import LoweredBackendModule

REPO_ROOT = Path(__file__).resolve().parents[3]


def load_demo():
    """``examples/demo.py`` as a module (its model builders: MobileNetV2 with calibrated batch norm, MiniLM)."""
    spec = importlib.util.spec_from_file_location("etkit_demo", REPO_ROOT / "examples" / "demo.py")
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    return demo


def lower(model, inputs, partitioners, dynamic_shapes=None):
    ep = torch.export.export(model, inputs, dynamic_shapes=dynamic_shapes)
    return etkit.to_edge_transform_and_lower(ep, partitioner=list(partitioners))


def delegates(manager, backend_id="CoreMLBackend", method="forward") -> list:
    gm = manager.exported_program(method).graph_module
    return [m for _, m in gm.named_children() if isinstance(m, LoweredBackendModule) and m.backend_id == backend_id]


def program_ops(spec) -> list:
    """The ML Program's operations (``main`` function, its opset's block), in order."""
    fn = spec.mlProgram.functions["main"]
    return list(fn.block_specializations[fn.opset].operations)


def op_counts(spec) -> collections.Counter:
    return collections.Counter(op.type for op in program_ops(spec))


def dtype_name(value_type) -> str:
    from coremltools.proto import MIL_pb2
    return MIL_pb2.DataType.Name(value_type.tensorType.dataType)


def shape(value_type) -> tuple:
    return tuple(int(d.constant.size) for d in value_type.tensorType.dimensions)


def weight_of(spec, op_type: str, arg: str = "weight") -> list:
    """``(shape, dtype, producer op type)`` of argument ``arg`` of every ``op_type`` operation."""
    producers = {out.name: op for op in program_ops(spec) for out in op.outputs}
    found = []
    for op in program_ops(spec):
        if op.type != op_type or arg not in op.inputs:
            continue
        name = op.inputs[arg].arguments[0].name
        producer = producers.get(name)
        if producer is not None:
            found.append((shape(producer.outputs[0].type), dtype_name(producer.outputs[0].type), producer.type))
    return found
