"""A test-only backend plugin: proves the core lowers to a backend it has never heard of.

``ToyPartitioner`` delegates every ``aten.add.Tensor`` and ``aten.mul.Tensor``; ``ToyBackend.preprocess``
writes the partition's op names as text, so tests can read what reached the backend.
"""
import torch

from etkit.backend import (BackendDetails, DelegationSpec, Partitioner, PartitionReport, PartitionResult,
                           PreprocessResult, Rejection)
from etkit.backend.utils import node_target_name, tag_constant_data
from etkit.plugins import BackendSpec, hookimpl

TOY_ID = "ToyBackend"
TOY_OPS = {torch.ops.aten.add.Tensor, torch.ops.aten.mul.Tensor}


class ToyBackend(BackendDetails):
    @staticmethod
    def preprocess(edge_program, compile_specs):
        ops = [node_target_name(n) for n in edge_program.graph.nodes if n.op == "call_function"]
        inputs = [n.name for n in edge_program.graph.nodes if n.op == "placeholder"]
        text = f"ops={','.join(ops)};inputs={','.join(inputs)}"
        return PreprocessResult(processed_bytes=text.encode(), named_data={"toy.key": b"toy-data"})


class ToyPartitioner(Partitioner):
    def __init__(self, one_partition_per_node: bool = False):
        super().__init__(DelegationSpec(TOY_ID, []))
        self.one_partition_per_node = one_partition_per_node
        self._report = None

    def partition(self, ep):
        report = PartitionReport(TOY_ID)
        tags = {}
        for i, node in enumerate(ep.graph.nodes):
            if node.op != "call_function":
                continue
            if node.target in TOY_OPS:
                tag = f"toy_{i}" if self.one_partition_per_node else "toy_0"
                node.meta["delegation_tag"] = tag
                tags[tag] = self.delegation_spec
                name = node_target_name(node)
                report.delegated[name] = report.delegated.get(name, 0) + 1
            else:
                report.rejected.append(Rejection(node.name, node_target_name(node), "toy backend only adds and multiplies"))
        tag_constant_data(ep)
        report.num_partitions = len(tags)
        self._report = report
        return PartitionResult(ep, tags)

    def report(self):
        return self._report


class ToyPlugin:
    """The plugin object, as an entry point module would be. ``behaviour`` adds ``BackendSpec`` fields (e.g.
    ``describe_payload=...``) to the toy backend's spec."""

    def __init__(self, **behaviour):
        self.behaviour = behaviour

    @hookimpl
    def etkit_register_backends(self, register):
        register(BackendSpec(backend_id=TOY_ID, backend_details=f"{__name__}:ToyBackend",
                             partitioners={"ToyPartitioner": f"{__name__}:ToyPartitioner"}, version="0.0.1",
                             **self.behaviour))
