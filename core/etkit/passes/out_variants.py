"""Pick each functional op's out variant: the kernel the runtime calls (``aten::add.out``).

The runtime has no allocator on the execute path, so every kernel writes into memory planned ahead of
time: the emitter calls the op's ``.out`` overload with the planned tensor(s) as its ``out`` argument(s).
"""
from __future__ import annotations

import functools

import torch

#: Functional-schema arguments an out variant takes from its ``out`` tensor instead.
TENSOR_OPTIONS = ("dtype", "layout", "device", "pin_memory")


class NoOutVariantError(LookupError):
    """An op has no out-variant overload, so the runtime has no way to call it."""


def _out_args(schema) -> list:
    return [a for a in schema.arguments if a.is_out]


def _matches(functional, candidate) -> bool:
    """Same argument names and types (``squeeze_copy.dims`` takes ``int[] dim``, ``.dim`` takes ``int dim``),
    ignoring tensor options the out variant takes from its ``out`` tensor."""
    cand = [(a.name, str(a.type)) for a in candidate.arguments if not a.is_out]
    func = [(a.name, str(a.type)) for a in functional.arguments]
    if func == cand:
        return True
    cand_names = {name for name, _ in cand}
    return [arg for arg in func if arg[0] not in TENSOR_OPTIONS or arg[0] in cand_names] == cand


@functools.lru_cache(maxsize=None)
def out_variant(op: torch._ops.OpOverload) -> torch._ops.OpOverload:
    """The out-variant overload of a functional ``op`` (``aten.add.Tensor`` → ``aten.add.out``).

    Raises:
        NoOutVariantError: naming the op, when no overload of its packet writes to ``out`` tensors with the
        same arguments.
    """
    if _out_args(op._schema):
        return op
    if op.namespace == "quantized_decomposed":
        from etkit.dialects.quantized import define_out_variants
        define_out_variants()
    packet = op.overloadpacket
    for name in packet.overloads():
        candidate = getattr(packet, name)
        if _out_args(candidate._schema) and _matches(op._schema, candidate._schema):
            return candidate
    raise NoOutVariantError(
        f"{op} has no out-variant overload, so no runtime kernel can run it; decompose it before lowering "
        f"or delegate it to a backend")


def kernel_name(op: torch._ops.OpOverload) -> tuple[str, str]:
    """``(name, overload)`` as stored in the program's ``Operator`` table: ``("aten::add", "out")``."""
    return op._schema.name, op._schema.overload_name  # "" for a default overload, as ExecuTorch writes it


def bind_arguments(op: torch._ops.OpOverload, out_op: torch._ops.OpOverload, node: torch.fx.Node) -> list:
    """Values of ``out_op``'s non-out arguments, in schema order, taken from a call of functional ``op``.

    Missing arguments take the schema default; tensor options the out variant does not take are dropped.
    """
    given = {}
    for arg, value in zip(op._schema.arguments, node.args):
        given[arg.name] = value
    given.update(node.kwargs)
    values = []
    for arg in out_op._schema.arguments:
        if arg.is_out:
            continue
        if arg.name in given:
            values.append((arg, given[arg.name]))
        elif arg.has_default_value():
            values.append((arg, arg.default_value))
        elif isinstance(arg.type, torch.OptionalType):
            values.append((arg, None))
        else:
            raise NoOutVariantError(f"node {node.name}: {out_op} needs argument {arg.name!r}, which the call to "
                                    f"{op} does not provide")
    return values
