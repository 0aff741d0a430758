"""Fallback twins: one ``.pte`` that runs everywhere, using a platform-only backend where it exists.

With ``ExecutorchBackendConfig(delegate_fallback=True)``, every method that delegates to a backend whose
plugin declares ``BackendSpec(runs_everywhere=False)`` (an OS framework or an NPU that many machines lack)
gets a twin: the same method lowered again from its Edge program as it was before partitioning, with that
backend's partitioners left out, so the partitioners after it (or the portable kernels) take its nodes. The
twin is written as one more execution plan named ``"<method>#fallback"``. ``delegate_fallback`` may also
list backend ids.

Encoding (docs/fallback.md): the file stays a valid ExecuTorch program; ExecuTorch's runtime sees the
twin as an extra method and never runs it unless asked. etkit's runtime hides ``#fallback`` plans from
method lists, and ``load_method("forward")`` loads ``"forward#fallback"`` when the primary plan fails
because a backend is not registered or not available (``Method.fallback_reason`` says which).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from typing import Iterable, Optional, Union

from torch.export import ExportedProgram

from ._runtime import FALLBACK_METHOD_SUFFIX

from .edge_lowering import decompose_unwanted, lower_edge_program

#: Name suffix of a twin plan: the C++ runtime's ``kFallbackMethodSuffix`` (one definition, read through the
#: runtime's binding).
FALLBACK_SUFFIX = FALLBACK_METHOD_SUFFIX


class FallbackError(ValueError):
    """A fallback twin cannot be built; the message says why and what to do."""


@dataclass
class LoweringRecipe:
    """What ``to_edge_transform_and_lower`` lowered, kept so a method can be lowered again.

    Attributes:
        edge_programs: ``{method: ExportedProgram}``, the Edge programs as they were before partitioning
            (after the transform passes). Lowering works on copies, so these stay as they were.
        partitioners: ``{method: [Partitioner, ...]}`` in the order they were applied (including the ones
            ``EdgeProgramManager.to_backend`` applied afterwards).
        kept_ops: ``{method: [op, ...]}``, the ops the partitioners asked to keep whole when the method was
            decomposed to Edge.
        compile_config: the ``EdgeCompileConfig`` used.
    """

    edge_programs: dict
    partitioners: dict = field(default_factory=dict)
    kept_ops: dict = field(default_factory=dict)
    compile_config: object = None

    def with_partitioners(self, partitioners: dict) -> "LoweringRecipe":
        """The same recipe with ``partitioners`` (``{method: [Partitioner, ...]}``) instead."""
        return replace(self, partitioners=partitioners)


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


def lower_without(recipe: LoweringRecipe, method: str, backends: set[str]) -> ExportedProgram:
    """Lower ``method`` again from its Edge program before partitioning, leaving out the partitioners of
    ``backends``; returns the new lowered program (the recipe is not changed).

    Nodes of the ops kept whole for a left-out partitioner are decomposed first when no remaining
    partitioner wants them whole (:func:`etkit.edge_lowering.decompose_unwanted`), so the remaining
    partitioners see what they would have seen had the left-out ones never been given.
    """
    config = recipe.compile_config
    keep = [p for p in recipe.partitioners.get(method, []) if _backend_of(p) not in backends]
    ep = copy.deepcopy(recipe.edge_programs[method])
    kept = decompose_unwanted(ep, keep, recipe.kept_ops.get(method, []), config)
    twin, _ = lower_edge_program(ep, keep, kept, config)
    return twin


def fallback_twins(recipe: Optional[LoweringRecipe], programs: dict,
                   delegate_fallback: Union[bool, Iterable[str]]) -> dict:
    """``{"<method>#fallback": ExportedProgram}`` for every method of ``programs`` (lowered Edge
    programs) that delegates to a backend in :func:`fallback_backends`, each lowered again by
    :func:`lower_without`.

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
    twins = {}
    for name in needing:
        twin = lower_without(recipe, name, backends)
        left = delegated_backends(twin) & backends
        if left:
            raise FallbackError(f"the fallback of method {name!r} still delegates to {sorted(left)}")
        twins[name + FALLBACK_SUFFIX] = twin
    return twins
