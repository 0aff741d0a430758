"""Reading and fixing an ``ExportedProgram``'s graph signature: which placeholder is what, and outputs
renamed after a rewrite."""
from __future__ import annotations

from typing import Optional

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, InputSpec, OutputSpec, TensorArgument

#: Input kinds whose values are known ahead of time.
CONSTANT_KINDS = (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)


def input_spec_of(ep: ExportedProgram, node: torch.fx.Node) -> Optional[InputSpec]:
    """The ``graph_signature.input_specs`` entry of placeholder ``node``, or ``None`` (not a placeholder, or
    not in the signature)."""
    if node.op != "placeholder":
        return None
    for spec in ep.graph_signature.input_specs:
        if spec.arg.name == node.name:
            return spec
    return None


def is_constant(ep: ExportedProgram, node: torch.fx.Node) -> bool:
    """True if ``node`` is a placeholder for a parameter, buffer or lifted tensor constant."""
    spec = input_spec_of(ep, node)
    return spec is not None and spec.kind in CONSTANT_KINDS


def is_user_input(ep: ExportedProgram, node: torch.fx.Node) -> bool:
    """True if ``node`` is a placeholder for an input the caller passes at run time."""
    spec = input_spec_of(ep, node)
    return spec is not None and spec.kind == InputKind.USER_INPUT


def rename_output(ep: ExportedProgram, old_name: str, new_name: str) -> None:
    """Point the graph signature's outputs named ``old_name`` at ``new_name`` after a graph rewrite.

    Every pass that replaces a node feeding the output node must call this, or the program's signature
    names a node that no longer exists.
    """
    specs = ep.graph_signature.output_specs
    for i, spec in enumerate(specs):
        if isinstance(spec.arg, TensorArgument) and spec.arg.name == old_name:
            specs[i] = OutputSpec(kind=spec.kind, arg=TensorArgument(name=new_name), target=spec.target)
