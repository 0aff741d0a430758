"""``CompileSpec`` and ``DelegationSpec``: what a partition tells its backend (ExecuTorch's names)."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class CompileSpec:
    """One backend option stored with a delegate in the ``.pte`` (``BackendDelegate.compile_specs``).

    Attributes:
        key: option name, e.g. ``"compute_unit"``.
        value: raw bytes; the backend defines their encoding.
    """

    key: str
    value: bytes


@dataclass(frozen=True)
class DelegationSpec:
    """Which backend a partition goes to, with its compile specs.

    Attributes:
        backend_id: the backend's id, e.g. the id its plugin registered (``etkit backends`` lists them).
        compile_specs: passed to the backend's ``preprocess`` and stored in the program.
    """

    backend_id: str
    compile_specs: list = field(default_factory=list)
