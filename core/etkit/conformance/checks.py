"""What the conformance suite checks, as plain functions (the pytest side is :mod:`.suite`).

Each ``check_*`` function returns a list of problems (empty when the backend conforms); the suite fails
a test with them. Nothing here names a backend: the backend under test is found through the plugin
registry.
"""
from __future__ import annotations

import collections
import copy
import importlib.util
import os
import struct
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Optional

#: Default tolerances against torch eager, by output dtype name; a backend may declare others through
#: ``BackendSpec.conformance_tolerance``.
DEFAULT_TOLERANCES = {"float32": (1e-4, 1e-4), "float16": (1e-2, 1e-2), "bfloat16": (1e-2, 1e-2),
                      "float64": (1e-7, 1e-7)}


class ConformanceUsageError(LookupError):
    """``--etkit-backend`` names no installed backend (the message lists the installed ones)."""


# ------------------------------------------------------------------------------------------------ backend

@dataclass(frozen=True)
class BackendUnderTest:
    """The resolved ``--etkit-backend``: its spec, the plugin that registered it, the partitioner used."""

    spec: object  # etkit.plugins.BackendSpec
    plugin: str
    partitioner_name: str
    atol: Optional[float] = None  # command-line overrides of the tolerances
    rtol: Optional[float] = None

    @property
    def backend_id(self) -> str:
        return self.spec.backend_id

    def tolerance(self, dtype) -> tuple[float, float]:
        """``(atol, rtol)`` for an output of ``dtype``: the command line's, else :func:`tolerance`."""
        atol, rtol = tolerance(self.backend_id, dtype)
        return (atol if self.atol is None else self.atol, rtol if self.rtol is None else self.rtol)

    def new_partitioner(self):
        """A default-constructed instance of the backend's partitioner.

        Raises:
            ImportError: the partitioner class cannot be imported.
            TypeError: it cannot be constructed without arguments.
        """
        from ..plugins import load_object
        return load_object(self.spec.partitioners[self.partitioner_name])()


def resolve_backend(name: str, partitioner: Optional[str] = None, atol: Optional[float] = None,
                    rtol: Optional[float] = None) -> BackendUnderTest:
    """Find the backend ``name`` names: a backend id (``MyBackend``) or a plugin's entry-point name.

    Raises:
        ConformanceUsageError: nothing matches, a plugin provides several backends, the backend declares
            no partitioner, or ``partitioner`` is not one of its partitioners; the message lists the
            choices.
    """
    from ..plugins import get_plugin_manager

    manager = get_plugin_manager()
    registry = manager.registry
    specs = registry.specs()
    matches = [s for s in specs if s.backend_id == name]
    if not matches:
        matches = [s for s in specs if registry.owner(s.backend_id) == name]
    if not matches:
        installed = ", ".join(f"{s.backend_id} (plugin {registry.owner(s.backend_id)})" for s in specs) or "none"
        broken = "".join(f"; plugin {n!r} failed to load: {e}" for n, e in sorted(manager.load_errors.items()))
        raise ConformanceUsageError(
            f"--etkit-backend {name}: no installed backend has this id or plugin name (installed: {installed})"
            f"{broken}. Install the plugin, or check `etkit backends`")
    if len(matches) > 1:
        raise ConformanceUsageError(
            f"--etkit-backend {name}: plugin {name!r} provides several backends "
            f"({', '.join(s.backend_id for s in matches)}); pass one backend id")
    spec = matches[0]
    if not spec.partitioners:
        raise ConformanceUsageError(f"backend {spec.backend_id} declares no partitioner in its BackendSpec; the "
                                    f"conformance suite lowers programs with it")
    chosen = partitioner or next(iter(spec.partitioners))
    if chosen not in spec.partitioners:
        raise ConformanceUsageError(f"--etkit-partitioner {chosen}: backend {spec.backend_id} has partitioners "
                                    f"{', '.join(spec.partitioners)}")
    return BackendUnderTest(spec, registry.owner(spec.backend_id), chosen, atol, rtol)


def default_tolerance(dtype) -> tuple[float, float]:
    """``(atol, rtol)`` the suite uses unless a backend declares its own: :data:`DEFAULT_TOLERANCES`,
    exact for other dtypes (also the tolerance of programs that run on the portable kernels only)."""
    return DEFAULT_TOLERANCES.get(str(dtype).replace("torch.", ""), (0.0, 0.0))


def tolerance(backend_id: str, dtype) -> tuple[float, float]:
    """``(atol, rtol)`` for comparing an output of ``dtype`` with eager: the backend's declaration
    (``BackendSpec.conformance_tolerance``) or :data:`DEFAULT_TOLERANCES` (exact for other dtypes).

    Raises:
        etkit.plugins.PluginError: the declaration returned something other than two non-negative numbers.
    """
    from ..plugins import PluginError, backend_behaviour

    declare = backend_behaviour(backend_id, "conformance_tolerance")
    declared = None if declare is None else declare(dtype)
    if declared is not None:
        try:
            atol, rtol = (float(v) for v in declared)
        except (TypeError, ValueError):
            atol = rtol = -1.0
        if atol < 0 or rtol < 0:
            raise PluginError(f"BackendSpec.conformance_tolerance of {backend_id} returned {declared!r}; expected "
                              f"(atol, rtol) with both >= 0, or None")
        return atol, rtol
    return default_tolerance(dtype)


# ------------------------------------------------------------------------------------------------ lowering

@dataclass(frozen=True)
class NodeRecord:
    """A node of the program a partitioner tagged, as it was right after ``partition``."""

    name: str
    op: str
    target: str
    tag: Optional[str]
    is_constant: bool
    user_tags: tuple


@dataclass
class PartitionSnapshot:
    """What one ``partition`` call returned, recorded before lowering consumed it."""

    nodes: list
    partition_tags: dict
    report: object  # PartitionReport or None


@dataclass
class LoweredCase:
    """One case lowered to the backend under test.

    Attributes:
        eager_outputs: torch eager's outputs on ``inputs`` (a list of tensors).
        snapshots: one per ``partition`` call.
        delegates: the ``LoweredBackendModule`` of every delegate call for this backend.
        pte: the ``.pte`` bytes.
        prepared: the case was prepared by the backend (e.g. quantized); ``eager_outputs`` are then the
            prepared module's.
    """

    inputs: tuple
    eager_outputs: list
    manager: object
    snapshots: list = field(default_factory=list)
    delegates: list = field(default_factory=list)
    pte: bytes = b""
    prepared: bool = False  # the backend's BackendSpec.conformance_prepare replaced the case's module

    @property
    def delegated(self) -> bool:
        return bool(self.delegates)

    def not_delegated_reason(self, backend_id: str, limit: int = 3) -> str:
        """Why nothing reached the backend, from the partition report."""
        report = self.snapshots[-1].report if self.snapshots else None
        if report is None:
            return f"{backend_id}'s partitioner tagged no node (it keeps no report saying why)"
        if not report.rejected:
            return f"{backend_id}'s partitioner tagged no node and rejected none"
        reasons = [str(r) for r in report.rejected]
        more = f"; and {len(reasons) - limit} more" if len(reasons) > limit else ""
        return "; ".join(reasons[:limit]) + more


def _recording(partitioner, snapshots: list):
    """Wrap ``partitioner`` so every ``partition`` result is recorded; everything else is forwarded."""
    from ..backend import DELEGATION_TAG, Partitioner
    from ..backend.utils import is_constant, node_target_name

    class Recording(Partitioner):
        def __init__(self) -> None:
            super().__init__(partitioner.delegation_spec)

        def partition(self, exported_program):
            result = partitioner.partition(exported_program)
            ep = result.tagged_exported_program
            nodes = [NodeRecord(n.name, n.op, node_target_name(n) if n.op == "call_function" else n.op,
                                n.meta.get(DELEGATION_TAG), n.op == "placeholder" and is_constant(ep, n),
                                tuple(u.meta.get(DELEGATION_TAG) for u in n.users))
                     for n in ep.graph.nodes]
            snapshots.append(PartitionSnapshot(nodes, dict(result.partition_tags), copy.deepcopy(partitioner.report())))
            return result

        def ops_to_not_decompose(self, ep):
            return partitioner.ops_to_not_decompose(ep)

        def report(self):
            return partitioner.report()

    return Recording()


def lower_case(backend: BackendUnderTest, case) -> LoweredCase:
    """Export ``case``, lower it with the backend's partitioner, and serialize the program.

    Raises:
        Whatever lowering raises (a failed preprocess, a cycle, ...): the suite reports it as a failure.
    """
    import torch

    import etkit
    from ..backend import LoweredBackendModule

    module, inputs = case.build()
    prepared = prepare_case(backend.backend_id, module, inputs)
    module = prepared if prepared is not None else module
    with torch.no_grad():
        eager = module(*inputs)
    eager = list(eager) if isinstance(eager, (tuple, list)) else [eager]
    snapshots: list = []
    ep = torch.export.export(module, inputs)
    manager = etkit.to_edge_transform_and_lower(ep, partitioner=[_recording(backend.new_partitioner(), snapshots)])
    gm = manager.exported_program().graph_module
    delegates = [m for _, m in gm.named_children()
                 if isinstance(m, LoweredBackendModule) and m.backend_id == backend.backend_id]
    pte = manager.to_executorch().buffer
    return LoweredCase(inputs, eager, manager, snapshots, delegates, pte, prepared is not None)


def prepare_case(backend_id: str, module, inputs):
    """The backend's own version of a case's module (``BackendSpec.conformance_prepare``), or ``None``.

    Raises:
        etkit.plugins.PluginError: it returned something that is not a ``torch.nn.Module``.
    """
    import torch

    from ..plugins import PluginError, backend_behaviour

    prepare = backend_behaviour(backend_id, "conformance_prepare")
    prepared = None if prepare is None else prepare(module, tuple(inputs))
    if prepared is not None and not isinstance(prepared, torch.nn.Module):
        raise PluginError(f"BackendSpec.conformance_prepare of {backend_id} returned {type(prepared).__name__}; "
                          f"expected a torch.nn.Module or None")
    return prepared


def reference_run(backend_id: str, manager, inputs):
    """The backend's host-side reference execution of a lowered program
    (``BackendSpec.conformance_reference_run``): a list of output tensors, or ``None`` if it offers none."""
    from ..plugins import backend_behaviour

    run = backend_behaviour(backend_id, "conformance_reference_run")
    outputs = None if run is None else run(manager, tuple(inputs))
    return None if outputs is None else list(outputs)


# ------------------------------------------------------------------------------------------------ contract

def check_tags(backend_id: str, snapshot: PartitionSnapshot) -> list[str]:
    """Tags go only on nodes the partitioner says it supports, and every tag names this backend.

    Checks: every ``partition_tags`` value is a ``DelegationSpec`` for ``backend_id``; every tag on a node
    is in ``partition_tags``; only operator calls and constant placeholders are tagged; a tagged constant
    is used by its partition only; and, when the partitioner keeps a report, no tagged node is among its
    rejections, its ``delegated`` counts are the tagged operator calls, and ``num_partitions`` is the
    number of tags used.
    """
    from ..backend import DelegationSpec

    problems = []
    for tag, spec in snapshot.partition_tags.items():
        if not isinstance(spec, DelegationSpec):
            problems.append(f"partition_tags[{tag!r}] is {type(spec).__name__}, not a DelegationSpec")
        elif spec.backend_id != backend_id:
            problems.append(f"partition_tags[{tag!r}] names backend {spec.backend_id!r}, not {backend_id!r}")
    tagged = [n for n in snapshot.nodes if n.tag is not None]
    for n in tagged:
        if n.tag not in snapshot.partition_tags:
            problems.append(f"node {n.name} has tag {n.tag!r}, which partition_tags does not list")
        if n.op == "placeholder" and n.is_constant:
            if any(t != n.tag for t in n.user_tags):
                problems.append(f"constant {n.name} is tagged {n.tag!r} but also used outside that partition")
        elif n.op != "call_function":
            problems.append(f"node {n.name} ({n.op}) is tagged; only operator calls and constants may be")
    report = snapshot.report
    if report is not None:
        calls = [n for n in tagged if n.op == "call_function"]
        rejected = {r.node_name: r for r in report.rejected}
        for n in calls:
            if n.name in rejected:
                problems.append(f"node {n.name} is tagged although the report rejects it: {rejected[n.name]}")
        counted = collections.Counter(n.target for n in calls)
        if dict(counted) != dict(report.delegated):
            problems.append(f"report.delegated {dict(report.delegated)} differs from the tagged operator calls "
                            f"{dict(counted)}")
        used = {n.tag for n in calls}
        if report.num_partitions != len(used):
            problems.append(f"report.num_partitions is {report.num_partitions}, but {len(used)} tag(s) are used")
        if report.backend_id != backend_id:
            problems.append(f"report.backend_id is {report.backend_id!r}, not {backend_id!r}")
    return problems


def check_preprocess_deterministic(spec, delegates: list) -> list[str]:
    """Preprocessing each delegated partition again, twice, gives the bytes (and named data) lowering stored."""
    details = spec.load_backend_details()
    problems = []
    for i, lowered in enumerate(delegates):
        runs = [details.preprocess(copy.deepcopy(lowered.original_module), list(lowered.compile_specs))
                for _ in range(2)]
        payloads = [bytes(r.processed_bytes) for r in runs]
        named = [dict(r.named_data or {}) for r in runs]
        if payloads[0] != payloads[1] or named[0] != named[1]:
            problems.append(f"partition {i}: two preprocess runs on the same partition gave different "
                            f"{'payloads' if payloads[0] != payloads[1] else 'named data'} "
                            f"({len(payloads[0])} and {len(payloads[1])} bytes)")
        elif payloads[0] != lowered.processed_bytes or named[0] != lowered.named_data:
            problems.append(f"partition {i}: preprocess gave other bytes than during lowering (does it depend on "
                            f"state, or modify its input program?)")
    return problems


# ------------------------------------------------------------------------------------------------ native ABI

def archive_symbols(path: os.PathLike) -> set[str]:
    """The global symbols a static library (``ar`` archive, GNU or BSD symbol table) defines.

    Raises:
        ValueError: ``path`` is not an ``ar`` archive, or has no symbol table.
    """
    data = Path(path).read_bytes()
    if not data.startswith(b"!<arch>\n"):
        raise ValueError(f"{path} is not an ar archive")
    at = 8
    while at + 60 <= len(data):
        name = data[at:at + 16].decode("ascii", "replace").strip()
        size = int(data[at + 48:at + 58].decode().strip())
        body = data[at + 60:at + 60 + size]
        if name in ("/", "/SYM64/"):
            width = 8 if name == "/SYM64/" else 4
            count = int.from_bytes(body[:width], "big")
            strings = body[width + width * count:]
            return {s.decode("ascii", "replace") for s in strings.split(b"\0")[:count]}
        if name.startswith("__.SYMDEF"):
            ranlib_size = struct.unpack_from("<I", body, 0)[0]
            strtab = body[4 + ranlib_size + 4:]
            names = set()
            for k in range(ranlib_size // 8):
                offset = struct.unpack_from("<I", body, 4 + 8 * k)[0]
                names.add(strtab[offset:strtab.index(b"\0", offset)].decode("ascii", "replace"))
            return names
        at += 60 + size + (size & 1)
    raise ValueError(f"{path} has no symbol table (run ranlib on it)")


def cmake_package_dirs(spec, plugin: str) -> list[Path]:
    """Directories holding ``<cmake_package>Config.cmake`` for ``spec``, found through the ``cmake.prefix``
    entry points of the plugin's distribution (or one named like the package). Empty if there are none."""
    if not spec.cmake_package:
        return []
    dist = None
    for ep in metadata.entry_points(group="etkit.backends"):
        if ep.name == plugin:
            dist = getattr(ep, "dist", None)
    found = []
    for ep in metadata.entry_points(group="cmake.prefix"):
        same_dist = dist is not None and getattr(ep, "dist", None) is not None and ep.dist.name == dist.name
        if ep.name != spec.cmake_package and not same_dist:
            continue
        module_spec = importlib.util.find_spec(ep.value.split(":")[0])
        for location in (module_spec.submodule_search_locations or []) if module_spec else []:
            for config in Path(location).rglob("*onfig.cmake"):
                if config.name in (f"{spec.cmake_package}Config.cmake", f"{spec.cmake_package.lower()}-config.cmake"):
                    found.append(config.parent)
    return sorted(set(found))


def check_register_function(spec, plugin: str) -> tuple[list[str], Optional[str]]:
    """The static library of the backend's CMake package defines ``spec.register_function``.

    Returns:
        ``(problems, skip reason)``: the reason is set when this cannot be checked here (no register
        function or CMake package declared, or the package is not installed where the plugin's
        ``cmake.prefix`` entry point points).
    """
    if not spec.register_function:
        return [], f"{spec.backend_id} declares no register_function (no native runner support)"
    dirs = cmake_package_dirs(spec, plugin)
    if not dirs:
        return [], (f"the CMake package {spec.cmake_package!r} of {spec.backend_id} was not found through a "
                    f"cmake.prefix entry point, so its static library cannot be inspected")
    archives = sorted({a for d in dirs for a in d.parent.parent.rglob("*.a")})
    for archive in archives:
        try:
            if spec.register_function in archive_symbols(archive):
                return [], None
        except (ValueError, OSError):
            continue
    names = ", ".join(str(a) for a in archives) or "none"
    return [f"no static library of the CMake package {spec.cmake_package!r} defines {spec.register_function!r} "
            f"(archives searched: {names})"], None
