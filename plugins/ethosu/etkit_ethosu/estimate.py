"""Vela's performance estimate for every Ethos-U partition of a lowered program (users pick targets by it).

Each partition's TOSA graph (kept in the payload, or lowered again) is compiled once more with Vela's
per-layer statistics (``--verbose-performance``), which do not change the compiled bytes. The figures are
Vela's performance-model estimates (cycles, MACs, memory traffic), not measurements.
"""
from __future__ import annotations

from typing import Optional

from .compile_spec import EthosUCompileSpec
from .plugin import BACKEND_ID


def partition_estimates(program, target: Optional[str] = None) -> list:
    """The :class:`~etkit_ethosu.vela_compile.VelaResult` (with ``summary`` and ``layers``) of each Ethos-U
    partition of ``program``, in graph order.

    Args:
        program: an ``EdgeProgramManager`` after lowering, or an ``ExportedProgram`` with delegate calls.
        target: estimate for another accelerator (e.g. ``"ethos-u85-256"``) than the one lowered for; the
            partition's other compile-spec settings are kept only when the target family is the same.

    Raises:
        etkit_ethosu.vela_compile.VelaCompileError: Vela refuses a partition for ``target``.
    """
    from etkit.backend.delegate import LoweredBackendModule

    from .reference import delegate_tosa
    from .vela_compile import compile_tosa

    ep = program.exported_program() if hasattr(program, "exported_program") else program
    results = []
    for node in ep.graph.nodes:
        if node.op != "get_attr":
            continue
        lowered = getattr(ep.graph_module, node.target)
        if not isinstance(lowered, LoweredBackendModule) or lowered.backend_id != BACKEND_ID:
            continue
        spec = EthosUCompileSpec.from_list(lowered.compile_specs)
        if target is not None and target != spec.target:
            same_family = target.rsplit("-", 1)[0] == spec.target.rsplit("-", 1)[0]
            spec = EthosUCompileSpec(target, spec.system_config if same_family else None,
                                     spec.memory_mode if same_family else None, spec.extra_flags, spec.config_ini)
        results.append(compile_tosa(delegate_tosa(lowered), spec, estimate=True))
    return results


def performance_report(program, target: Optional[str] = None) -> str:
    """A readable per-partition, per-layer table of Vela's estimate for ``program`` (see
    :func:`partition_estimates`), ending with the program's total NPU cycles."""
    results = partition_estimates(program, target)
    if not results:
        return "no Ethos-U partition in this program"
    parts, total = [], 0
    for i, result in enumerate(results):
        parts.append(f"partition {i}:\n{result.format_estimate()}")
        total += int(result.summary.get("cycles_total", 0))
    parts.append(f"program: {len(results)} Ethos-U partition(s), {total:,} estimated cycles in total")
    return "\n\n".join(parts)
