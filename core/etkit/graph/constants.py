"""The tensors behind constant placeholders (parameters, buffers, lifted constants): reading them, adding
lifted constants (``InputKind.CONSTANT_TENSOR``) and dropping the ones nothing uses."""
from __future__ import annotations

from typing import Optional

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, InputSpec, TensorArgument

from .signature import CONSTANT_KINDS, input_spec_of


def get_constant(ep: ExportedProgram, node: torch.fx.Node) -> Optional[torch.Tensor]:
    """The tensor behind a constant placeholder, or ``None`` if ``node`` is not one.

    Looks in ``ep.state_dict`` (parameters, persistent buffers) and ``ep.constants`` (lifted constants,
    non-persistent buffers).
    """
    spec = input_spec_of(ep, node)
    if spec is None or spec.kind not in CONSTANT_KINDS:
        return None
    if spec.target in ep.state_dict:
        return ep.state_dict[spec.target]
    return ep.constants.get(spec.target)


def add_constant(ep: ExportedProgram, name: str, tensor: torch.Tensor, fake_val) -> torch.fx.Node:
    """Add ``tensor`` as a lifted constant placeholder named after ``name``; returns the new node.

    The placeholder goes before the first user input and its spec before the first user-input spec, so
    placeholders and ``graph_signature.input_specs`` stay in the same order.
    """
    graph = ep.graph
    existing = {n.name for n in graph.nodes} | set(ep.constants)
    unique, i = name, 0
    while unique in existing:
        i += 1
        unique = f"{name}_{i}"
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    user_input = next((n for n in placeholders if get_constant(ep, n) is None), None)
    anchor = user_input or next(n for n in graph.nodes if n.op != "placeholder")
    with graph.inserting_before(anchor):
        node = graph.placeholder(unique)
    node.meta["val"] = fake_val
    ep.constants[unique] = tensor
    specs = ep.graph_signature.input_specs
    position = next((i for i, s in enumerate(specs) if s.kind == InputKind.USER_INPUT), len(specs))
    specs.insert(position, InputSpec(kind=InputKind.CONSTANT_TENSOR, arg=TensorArgument(name=node.name),
                                     target=unique))
    return node


def fake_like(ep: ExportedProgram, tensor: torch.Tensor):
    """A FakeTensor for ``tensor`` in the program's fake mode (for ``node.meta["val"]``)."""
    for node in ep.graph.nodes:
        val = node.meta.get("val")
        mode = getattr(val, "fake_mode", None)
        if mode is not None:
            return mode.from_tensor(tensor, static_shapes=True)
    return tensor


def drop_unused_constants(ep: ExportedProgram) -> None:
    """Remove constant placeholders nothing uses, with their specs and data."""
    for node in list(ep.graph.nodes):
        if node.op == "placeholder" and not node.users and get_constant(ep, node) is not None:
            spec = next(s for s in ep.graph_signature.input_specs if s.arg.name == node.name)
            ep.graph_signature.input_specs.remove(spec)
            ep.graph.erase_node(node)
            if not any(s.target == spec.target for s in ep.graph_signature.input_specs):
                ep.state_dict.pop(spec.target, None)
                ep.constants.pop(spec.target, None)
