"""Shared by the Ethos-U plugin's tests: quantize + lower a model, and compare each delegate's TOSA run with
its partition run in eager (the PT2E reference) on the same int8 inputs."""
from __future__ import annotations

from dataclasses import dataclass

import torch

import etkit
from etkit_ethosu import EthosUCompileSpec, EthosUPartitioner, quantize_for_ethosu
from etkit_ethosu.reference import run_exported


@dataclass
class Lowered:
    reference: torch.fx.GraphModule   # the PT2E reference model
    manager: object                   # EdgeProgramManager after lowering
    partitioner: EthosUPartitioner

    @property
    def report(self):
        return self.partitioner.report()


def lower(model, inputs, target: str = "ethos-u55-128", calibration=None, **spec) -> Lowered:
    torch.manual_seed(0)
    reference = quantize_for_ethosu(model.eval(), inputs, calibration)
    partitioner = EthosUPartitioner(EthosUCompileSpec(target, **spec))
    manager = etkit.to_edge_transform_and_lower(torch.export.export(reference, tuple(inputs)),
                                                partitioner=[partitioner])
    return Lowered(reference, manager, partitioner)


def delegate_lsb_differences(lowered: Lowered, inputs) -> list[int]:
    """For each Ethos-U delegate call: the largest |TOSA reference - eager partition| over its int8 outputs,
    both computed from the same delegate inputs."""
    diffs = []

    def observe(module, args, outputs):
        eager = run_exported(module.original_module, args, "eager")
        diffs.append(max(int((o.int() - e.int()).abs().max()) for o, e in zip(outputs, eager)))

    run_exported(lowered.manager.exported_program(), list(inputs), "tosa", observe)
    return diffs


def output_steps(lowered: Lowered) -> list[float]:
    """The quantization step (scale) of each program output: the ``dequantize`` node producing it."""
    graph = lowered.manager.exported_program().graph
    (out,) = [n for n in graph.nodes if n.op == "output"]
    steps = []
    for node in out.args[0]:
        while node.op == "call_function" and "dequantize_per_tensor" not in str(node.target):
            node = node.args[0]  # float ops after the last dequantize (none for fully delegated programs)
        steps.append(float(node.args[1]) if node.op == "call_function" else 0.0)
    return steps
