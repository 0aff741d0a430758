"""Fallback twins: one ``.pte`` that runs everywhere, using a platform-only backend where it exists.

With ``ExecutorchBackendConfig(delegate_fallback=True)``, every method that delegates to a backend whose
plugin declares ``BackendSpec(runs_everywhere=False)`` (an OS framework or an NPU that many machines lack)
gets a twin: the same method lowered again from the exported program with that backend's partitioners
left out, so the partitioners after it (or the portable kernels) take its nodes. The twin is written as
one more execution plan named ``"<method>#fallback"``. ``delegate_fallback`` may also list backend ids.

Encoding (docs/fallback.md): the file stays a valid ExecuTorch program; ExecuTorch's runtime sees the
twin as an extra method and never runs it unless asked. etkit's runtime hides ``#fallback`` plans from
method lists, and ``load_method("forward")`` loads ``"forward#fallback"`` when the primary plan fails
because a backend is not registered or not available (``Method.fallback_reason`` says which).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Optional, Union

from torch.export import ExportedProgram

#: Name suffix of a twin plan; the C++ runtime's ``kFallbackMethodSuffix`` is the same string.
FALLBACK_SUFFIX = "#fallback"


class FallbackError(ValueError):
    """A fallback twin cannot be built; the message says why and what to do."""


@dataclass
class LoweringRecipe:
    """How ``to_edge_transform_and_lower`` made a program, kept so a method can be lowered again.

    Attributes:
        programs: ``{method: ExportedProgram}`` as given (before decomposition to Edge).
        transform_passes: the passes applied before lowering.
        partitioners: ``{method: [Partitioner, ...]}`` in the order they were applied.
        compile_config: the ``EdgeCompileConfig`` used.
    """

    programs: dict
    transform_passes: tuple = ()
    partitioners: dict = field(default_factory=dict)
    compile_config: object = None


def fallback_backends(delegate_fallback: Union[bool, Iterable[str]]) -> set[str]:
    """Backend ids to build twins without: ``True`` means every installed backend declared
    ``runs_everywhere=False``; otherwise the ids given."""
    if delegate_fallback is True:
        from .plugins.manager import get_backend_specs
        return {s.backend_id for s in get_backend_specs() if not getattr(s, "runs_everywhere", True)}
    if isinstance(delegate_fallback, str):
        return {delegate_fallback}
    return set(delegate_fallback or ())


def delegated_backends(ep: ExportedProgram) -> set[str]:
    """Backend ids of the delegates called by ``ep``'s graph."""
    from .backend import LoweredBackendModule
    return {m.backend_id for _, m in ep.graph_module.named_children() if isinstance(m, LoweredBackendModule)}


def _backend_of(partitioner) -> Optional[str]:
    spec = getattr(partitioner, "delegation_spec", None)
    return getattr(spec, "backend_id", None)


def fallback_twins(recipe: Optional[LoweringRecipe], programs: dict,
                   delegate_fallback: Union[bool, Iterable[str]]) -> dict:
    """``{"<method>#fallback": ExportedProgram}`` for every method of ``programs`` (lowered Edge
    programs) that delegates to a backend in :func:`fallback_backends`.

    Raises:
        FallbackError: the program was not made by ``to_edge_transform_and_lower`` (or was transformed
            after lowering), so it cannot be lowered again; or a twin would still need such a backend.
    """
    backends = fallback_backends(delegate_fallback)
    needing = sorted(name for name, ep in programs.items() if delegated_backends(ep) & backends)
    if not needing:
        return {}
    if recipe is None:
        raise FallbackError(
            f"delegate_fallback needs the exported program to lower {needing} again without "
            f"{sorted(backends)}; build the program with etkit.to_edge_transform_and_lower(...) and do not "
            f"transform it after lowering")
    from .program import to_edge_transform_and_lower

    twins = {}
    for name in needing:
        keep = [p for p in recipe.partitioners.get(name, []) if _backend_of(p) not in backends]
        manager = to_edge_transform_and_lower({name: recipe.programs[name]}, recipe.transform_passes, {name: keep},
                                              compile_config=recipe.compile_config)
        twin = manager.exported_program(name)
        left = delegated_backends(twin) & backends
        if left:
            raise FallbackError(f"the fallback of method {name!r} still delegates to {sorted(left)}")
        twins[name + FALLBACK_SUFFIX] = twin
    return twins
