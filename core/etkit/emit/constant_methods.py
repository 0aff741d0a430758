"""Constant methods: ``to_edge(..., constant_methods={"get_max_seq_len": 128})``.

Each entry becomes one more execution plan of the program, named after its key, with no inputs and no
instructions: its outputs are the constant values themselves (ExecuTorch's ``exir.to_edge``
``constant_methods``, written the way ExecuTorch 1.5.1's emitter writes them, so both runtimes read them).

A value is flattened with torch's pytree; each leaf becomes one output value:

- ``int`` -> ``Int``, ``float`` -> ``Double``, ``bool`` -> ``Bool``, ``str`` -> ``String``;
- ``torch.dtype`` / ``torch.layout`` -> ``Int`` (the format's ScalarType / Layout number);
- ``torch.Tensor`` -> a constant ``Tensor`` whose bytes are in the constant segment.

So ``{"get_eos_ids": [2, 3]}`` is a method with two ``Int`` outputs. The plan's
``container_meta_type.encoded_out_str`` is the treespec of the value (``torch.utils._pytree.treespec_dumps``,
as ExecuTorch's pip wheel writes), ``encoded_inp_str`` is empty (there are no inputs).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Iterable, Optional

import torch
from torch.utils import _pytree as pytree

from etkit.fb.Bool import BoolT
from etkit.fb.Chain import ChainT
from etkit.fb.ContainerMetadata import ContainerMetadataT
from etkit.fb.Double import DoubleT
from etkit.fb.EValue import EValueT
from etkit.fb.ExecutionPlan import ExecutionPlanT
from etkit.fb.Int import IntT
from etkit.fb.KernelTypes import KernelTypes
from etkit.fb.String import StringT
from etkit.fb.Tensor import TensorT

from ..fallback import FALLBACK_SUFFIX
from .dtypes import LAYOUT, SCALAR_TYPE

_SUPPORTED = "int, float, bool, str, torch.dtype, torch.layout, torch.Tensor, or a list/tuple/dict of them"
_INT64 = (-(2 ** 63), 2 ** 63 - 1)


def _check_leaf(name: str, leaf: Any) -> None:
    where = f"constant method {name!r}"
    if isinstance(leaf, torch.Tensor):
        if leaf.layout != torch.strided:
            raise TypeError(f"{where}: a {leaf.layout} tensor cannot be stored; use a dense (strided) tensor")
        if leaf.dtype not in SCALAR_TYPE:
            raise TypeError(f"{where}: a tensor of dtype {leaf.dtype} cannot be stored in a .pte "
                            f"(supported: {', '.join(str(d) for d in SCALAR_TYPE)})")
        return
    if isinstance(leaf, torch.layout):
        if leaf not in LAYOUT:
            raise TypeError(f"{where}: layout {leaf} has no number in the .pte format")
        return
    if isinstance(leaf, (bool, float, str, torch.dtype)):
        if isinstance(leaf, torch.dtype) and leaf not in SCALAR_TYPE:
            raise TypeError(f"{where}: dtype {leaf} has no ScalarType in the .pte format")
        return
    if isinstance(leaf, int):
        if not _INT64[0] <= leaf <= _INT64[1]:
            raise ValueError(f"{where}: {leaf} does not fit in a 64-bit integer")
        return
    raise TypeError(f"{where} returns a value of type {type(leaf).__name__} ({leaf!r:.60}), which a .pte cannot "
                    f"hold; supported: {_SUPPORTED}")


def validate_constant_methods(constant_methods: Optional[Mapping], method_names: Iterable[str]) -> dict:
    """Check ``constant_methods`` (``{method name: value}``) and return it as a new dict (``{}`` for None).

    Raises:
        TypeError: not a dict, a name is not a non-empty str, or a value (or an element of it) has a type a
            .pte cannot hold (the message names the method).
        ValueError: a name is also the name of an exported method (or ends in ``"#fallback"``), or an int does
            not fit in 64 bits.
    """
    if constant_methods is None:
        return {}
    if not isinstance(constant_methods, Mapping):
        hint = " (pass the EdgeCompileConfig as compile_config=...)" \
            if type(constant_methods).__name__ == "EdgeCompileConfig" else ""
        raise TypeError(f"constant_methods must be a dict of method name -> constant value, got "
                        f"{type(constant_methods).__name__}{hint}")
    methods = set(method_names)
    for name, value in constant_methods.items():
        if not isinstance(name, str) or not name:
            raise TypeError(f"constant_methods: method names must be non-empty strings, got {name!r}")
        if name in methods:
            raise ValueError(f"constant method {name!r} has the name of an exported method of the program; "
                             f"give the constant method another name")
        if name.endswith(FALLBACK_SUFFIX):
            raise ValueError(f"constant method {name!r}: names ending in {FALLBACK_SUFFIX!r} are reserved for "
                             f"fallback twins (etkit.fallback)")
        leaves, spec = pytree.tree_flatten(value)
        for leaf in leaves:
            _check_leaf(name, leaf)
        try:
            pytree.treespec_dumps(spec)
        except Exception as exc:  # a container type torch cannot serialize (e.g. an unregistered class)
            raise TypeError(f"constant method {name!r}: the structure of its value ({type(value).__name__}) "
                            f"cannot be written ({exc}); use a list, tuple or dict") from None
    return dict(constant_methods)


def emit_constant_method(name: str, value: Any, data) -> ExecutionPlanT:
    """The ``ExecutionPlanT`` of constant method ``name`` returning ``value``; tensors' bytes are added to
    ``data`` (the program's :class:`~etkit.emit.method_emitter.ProgramData`).

    Raises:
        TypeError, ValueError: as :func:`validate_constant_methods`.
    """
    leaves, spec = pytree.tree_flatten(value)
    values = []
    for leaf in leaves:
        _check_leaf(name, leaf)
        if isinstance(leaf, torch.Tensor):
            t = leaf.detach().cpu().contiguous()
            # a constant: bytes in the constant segment, static shape, contiguous (how they are stored)
            tensor = TensorT(scalarType=SCALAR_TYPE[t.dtype], storageOffset=0, sizes=list(t.shape),
                             dimOrder=list(range(t.dim())), requiresGrad=False,
                             dataBufferIdx=data.add_constant(t), allocationInfo=None, layout=0, shapeDynamism=0)
            values.append(EValueT(valType=KernelTypes.Tensor, val=tensor))
        elif isinstance(leaf, bool):
            values.append(EValueT(valType=KernelTypes.Bool, val=BoolT(boolVal=leaf)))
        elif isinstance(leaf, int):
            values.append(EValueT(valType=KernelTypes.Int, val=IntT(intVal=int(leaf))))
        elif isinstance(leaf, float):
            values.append(EValueT(valType=KernelTypes.Double, val=DoubleT(doubleVal=float(leaf))))
        elif isinstance(leaf, str):
            values.append(EValueT(valType=KernelTypes.String, val=StringT(stringVal=leaf)))
        elif isinstance(leaf, torch.dtype):
            values.append(EValueT(valType=KernelTypes.Int, val=IntT(intVal=SCALAR_TYPE[leaf])))
        else:  # torch.layout (checked above)
            values.append(EValueT(valType=KernelTypes.Int, val=IntT(intVal=LAYOUT[leaf])))
    outputs = list(range(len(values)))
    return ExecutionPlanT(
        name=name,
        containerMetaType=ContainerMetadataT(encodedInpStr="", encodedOutStr=pytree.treespec_dumps(spec)),
        values=values, inputs=[], outputs=outputs,
        chains=[ChainT(inputs=[], outputs=[], instructions=[], stacktrace=None)],
        operators=[], delegates=[], nonConstBufferSizes=[0], nonConstBufferDevice=None)
