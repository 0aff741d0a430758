"""What goes into ``.ptd`` data files instead of the ``.pte`` (seed page "Separating the program and data").

``ExecutorchBackendConfig.external_constants`` (ExecuTorch's option) tags constant placeholders:
``True`` sends every parameter, buffer and frozen constant to ``_default_external_constant.ptd``; a
callable ``(torch.fx.Node) -> Optional[str]`` names each one's file (``None`` keeps it in the ``.pte``).
Lifted tensor constants stay in the program, as in ExecuTorch ("closer to code than data").
``external_named_data`` sends backends' named data (a delegate's weights) to a file too; by default
it follows ``external_constants=True``.

A constant's key is its fully qualified name (``layers.0.linear.weight``). Two methods of one program
that hold different bytes under one name get ``<name>@<method>`` for the second.
"""
from __future__ import annotations

import re
from typing import Callable, Optional, Union

import torch

from ..serialize.ptd import PtdEntry, TensorLayout, serialize_ptd
from .dtypes import dim_order, scalar_type, tensor_bytes

#: ExecuTorch's tag (and file stem) for ``external_constants=True``
DEFAULT_TAG = "_default_external_constant"
#: alignment of each entry in a data file (bytes)
ENTRY_ALIGNMENT = 16

_TAG_PATTERN = re.compile(r"^[A-Za-z0-9_.\-]+$")


def _check_tag(tag: str, where: str) -> str:
    if not isinstance(tag, str) or not _TAG_PATTERN.match(tag) or tag in (".", ".."):
        raise ValueError(f"{where}: data file tag {tag!r} must be a plain file name stem (letters, digits, '_', "
                         f"'-', '.'), e.g. 'model_weights' for model_weights.ptd")
    return tag


class ExternalData:
    """The entries of each ``.ptd`` file, by tag, filled while the methods are emitted."""

    def __init__(self, external_constants: Union[bool, Callable] = False,
                 external_named_data: Union[None, bool, str] = None) -> None:
        if not (isinstance(external_constants, bool) or callable(external_constants)):
            raise TypeError(f"external_constants must be a bool or a callable (torch.fx.Node) -> Optional[str], "
                            f"got {type(external_constants).__name__}")
        self._constants = external_constants
        if external_named_data is None:
            external_named_data = external_constants is True
        if external_named_data is True:
            external_named_data = DEFAULT_TAG
        self.named_data_tag: Optional[str] = (
            _check_tag(external_named_data, "external_named_data") if external_named_data else None)
        #: ``{tag: {key: PtdEntry}}``
        self.files: dict[str, dict[str, PtdEntry]] = {}

    def tag_of(self, node: torch.fx.Node) -> Optional[str]:
        """The data file a constant placeholder goes to, or None to keep it in the program."""
        if self._constants is False or "_lifted_tensor" in node.name:
            return None
        if self._constants is True:
            return DEFAULT_TAG
        tag = self._constants(node)
        return _check_tag(tag, f"external_constants({node.name})") if tag else None

    def add_constant(self, tag: str, fqn: str, tensor: torch.Tensor, method: str) -> str:
        """Store ``tensor`` (contiguous) under ``fqn`` in file ``tag``; returns the key written in the program."""
        t = tensor.detach().contiguous()
        entry = PtdEntry(tensor_bytes(t), ENTRY_ALIGNMENT,
                         TensorLayout(scalar_type(t.dtype), tuple(t.shape), tuple(dim_order(t))))
        entries = self.files.setdefault(tag, {})
        key = fqn
        if key in entries and entries[key] != entry:
            key = f"{fqn}@{method}"
        if key in entries and entries[key] != entry:
            raise ValueError(f"method {method}: constant {fqn!r} holds different bytes under {key!r} already")
        entries[key] = entry
        return key

    def add_named_data(self, tag: str, key: str, data: bytes, owner: str) -> None:
        entries = self.files.setdefault(tag, {})
        entry = PtdEntry(bytes(data), ENTRY_ALIGNMENT)
        if key in entries and entries[key].data != entry.data:
            raise ValueError(f"{owner}: named data key {key!r} already holds different bytes in {tag}.ptd")
        entries[key] = entry

    def serialize(self) -> dict[str, bytes]:
        """``{file name: .ptd bytes}``, e.g. ``{"_default_external_constant.ptd": ...}``."""
        return {f"{tag}.ptd": serialize_ptd(entries) for tag, entries in self.files.items()}
