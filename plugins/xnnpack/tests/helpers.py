"""Shared helpers for the etkit-xnnpack tests: register the plugin in-process, lower a model, read payloads."""
from __future__ import annotations

import importlib.util

import pytest
import torch

HAVE_FB = importlib.util.find_spec("etkit_xnnpack.fb") is not None
requires_fb = pytest.mark.skipif(
    not HAVE_FB, reason="etkit_xnnpack.fb (generated from schema/xnnpack_graph.fbs at build time) is missing; "
                        "build/install the plugin: pip install plugins/xnnpack")


class Fn(torch.nn.Module):
    """A module whose forward is ``fn(self, *inputs)``, holding ``modules`` (layers, parameters) as
    attributes: a one-line test model."""

    def __init__(self, fn, **modules):
        super().__init__()
        self.fn = fn
        for name, value in modules.items():
            setattr(self, name, value)

    def forward(self, *xs):
        return self.fn(self, *xs)


def seeded_randn(seed: int, *shape: int) -> torch.Tensor:
    """``torch.randn(*shape)`` from its own generator seeded with ``seed`` (float32)."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def ensure_plugin_registered() -> None:
    """Make ``XnnpackBackend`` known to etkit even when the plugin is used from a source checkout
    (no installed entry point)."""
    from etkit.plugins import get_plugin_manager
    import etkit_xnnpack.plugin as plugin

    pm = get_plugin_manager()
    names = {spec.backend_id for spec in pm.registry.specs()}
    if "XnnpackBackend" not in names:
        pm.add_plugin(plugin, "xnnpack")


def to_edge_program(model: torch.nn.Module, inputs: tuple):
    """Export + decompose to the Edge dialect without partitioning."""
    import etkit
    return etkit.to_edge(torch.export.export(model, inputs)).exported_program()


def lower(model: torch.nn.Module, inputs: tuple, **partitioner_kwargs):
    """``(edge program manager, partitioner)`` after ``to_edge_transform_and_lower`` with XnnpackPartitioner."""
    import etkit
    from etkit_xnnpack import XnnpackPartitioner

    ensure_plugin_registered()
    partitioner = XnnpackPartitioner(**partitioner_kwargs)
    manager = etkit.to_edge_transform_and_lower(torch.export.export(model, inputs), partitioner=[partitioner])
    return manager, partitioner


def lowered_modules(manager) -> list:
    """The ``LoweredBackendModule`` of every delegate call in the ``forward`` method, in graph order."""
    gm = manager.exported_program().graph_module
    mods = []
    for node in gm.graph.nodes:
        if node.op == "get_attr" and node.target.startswith("lowered_module_"):
            mods.append(getattr(gm, node.target))
    return mods


def node_kind_names() -> dict:
    from etkit_xnnpack.fb.XNodeUnion import XNodeUnion
    return {v: k for k, v in vars(XNodeUnion).items() if not k.startswith("_")}


def parse_payload(payload: bytes):
    """``(header, XNNGraphT, constant-data bytes)`` of a payload."""
    from etkit_xnnpack.serialization.graph_builder import parse_graph
    from etkit_xnnpack.serialization.payload import split_payload

    header, fb, constants = split_payload(payload)
    return header, parse_graph(fb), constants


def redeclare_values(program: bytes, pick, dims: list[int], *, count: int | None = 1) -> bytes:
    """``program`` (a .pte with one XNNPACK delegate) with the declared dims of the payload values that
    ``pick(XNNTensorValueT)`` selects set to ``dims``, constants and everything else unchanged: a crafted file
    for the delegate's checks. ``count``: how many values must be picked (None: at least one)."""
    import flatbuffers
    from etkit.serialize.pte import deserialize_pte, serialize_pte
    from etkit_xnnpack.serialization import FLATBUFFER_IDENTIFIER, assemble_payload

    contents = deserialize_pte(program)
    _, graph, constants = parse_payload(contents.delegate_data[0])
    picked = [v.xvalueUnion for v in graph.xvalues if pick(v.xvalueUnion)]
    assert (len(picked) == count) if count is not None else picked, [list(v.xvalueUnion.dims) for v in graph.xvalues]
    for value in picked:
        value.dims = dims
    builder = flatbuffers.Builder(1024)
    builder.Finish(graph.Pack(builder), file_identifier=FLATBUFFER_IDENTIFIER)
    contents.delegate_data[0] = assemble_payload(bytes(builder.Output()), constants)
    return serialize_pte(contents)
