"""What a .pte program needs from the runtime that runs it: kernels and backends.

``program_requirements(data)`` reads a .pte (etkit's or ExecuTorch's) and lists, per method, the
kernels its ``KernelCall`` instructions name (``aten::add.out``, as the runtime's kernel registry
names them) and the backend ids its delegates name. ``etkit inspect`` compares them
with the running installation, and the selective build lists the kernels a program needs.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from etkit.serialize.program_flatbuffer import as_bytes
from etkit.serialize.pte import read_layout


def _text(value) -> str:
    return "" if value is None else as_bytes(value).decode("utf-8", errors="replace")


@dataclass
class ProgramRequirements:
    """Attributes:
        kernels: ``{kernel name: [methods that call it]}``, e.g. ``{"aten::add.out": ["forward"]}``.
        backends: ``{backend id: [methods that delegate to it]}``.
    """

    kernels: dict[str, list[str]] = field(default_factory=dict)
    backends: dict[str, list[str]] = field(default_factory=dict)
    #: every execution plan's name, in file order (fallback twins, ``"<method>#fallback"``, included).
    methods: list[str] = field(default_factory=list)

    def for_method(self, method: str) -> "ProgramRequirements":
        """The requirements of one execution plan only."""
        def only(table: dict) -> dict:
            return {k: [method] for k, users in table.items() if method in users}
        return ProgramRequirements(only(self.kernels), only(self.backends), [method])

    def missing(self, kernels: set[str], backends: set[str], reasons: Optional[dict] = None) -> list[str]:
        """One sentence per requirement not in ``kernels`` / ``backends`` (what is registered in a
        runtime), saying what to do about it; empty when the program can load. ``reasons`` maps a backend
        id to why its installed plugin cannot run here (``BackendSpec.is_available``)."""
        problems = []
        for backend in sorted(set(self.backends) - backends):
            why = (reasons or {}).get(backend) or ("install the etkit plugin that provides it, or re-lower the "
                                                   "model without that backend's partitioner")
            problems.append(f"backend {backend!r} (used by {', '.join(self.backends[backend])}) is not available "
                            f"here: {why}")
        for kernel in sorted(set(self.kernels) - kernels):
            problems.append(f"kernel {kernel!r} (used by {', '.join(self.kernels[kernel])}) has no implementation "
                            f"here: re-lower so a backend takes the op, or link a kernel library that provides it")
        return problems


def program_requirements(data: bytes) -> ProgramRequirements:
    """The kernels and backends ``data`` (a .pte file's bytes) needs.

    Raises:
        PteFormatError: ``data`` is not a .pte this etkit reads (see ``etkit inspect``).
    """
    program = read_layout(data).program
    req = ProgramRequirements()
    for plan in program.executionPlan or []:
        method = _text(plan.name)
        req.methods.append(method)
        for op in plan.operators or []:
            name, overload = _text(op.name), _text(op.overload)
            req.kernels.setdefault(f"{name}.{overload}" if overload else name, []).append(method)
        for delegate in plan.delegates or []:
            users = req.backends.setdefault(_text(delegate.id), [])
            if method not in users:
                users.append(method)
    return req
