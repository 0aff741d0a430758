"""The lowering API: ``to_edge``, ``to_edge_transform_and_lower`` and the program managers.

Names and behaviour follow ExecuTorch's ``executorch.exir`` (seed pages "Exporting to ExecuTorch",
"Lowering a Model as a Delegate"): change ``executorch.exir`` to ``etkit`` in an import and keep going.
"""
from __future__ import annotations

import copy
import os
import time
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence, Union

import torch
from torch.export import ExportedProgram

from .backend.lowering import to_backend as _to_backend_one
from .backend.partitioner import PartitionReport, Partitioner
from .dialects.edge import EdgeCompileConfig
from .edge_lowering import decompose_to_edge, lower_edge_program, ops_to_keep
from .fallback import LoweringRecipe, fallback_twins

ProgramsArg = Union[ExportedProgram, dict]


def _as_dict(programs: ProgramsArg) -> dict:
    if isinstance(programs, ExportedProgram):
        return {"forward": programs}
    if isinstance(programs, dict) and all(isinstance(v, ExportedProgram) for v in programs.values()):
        return dict(programs)
    raise TypeError(f"expected an ExportedProgram or a dict of method name -> ExportedProgram, got "
                    f"{type(programs).__name__}")


def _constant_methods(constant_methods: Optional[dict], programs: dict) -> dict:
    from .emit.constant_methods import validate_constant_methods  # imports the generated etkit.fb
    return validate_constant_methods(constant_methods, programs)


def to_edge(programs: ProgramsArg, constant_methods: Optional[dict] = None,
            compile_config: Optional[EdgeCompileConfig] = None,
            generate_etrecord: bool = False) -> "EdgeProgramManager":
    """Decompose exported programs to the Edge dialect (Core ATen ops, view ops as copies).

    Args:
        programs: an ``ExportedProgram`` (method ``forward``) or ``{method name: ExportedProgram}``.
        constant_methods: ``{method name: value}``, as in ExecuTorch's ``exir.to_edge``: each entry becomes
            one more method of the program, with no inputs, returning the value (often configuration, e.g.
            ``{"get_max_seq_len": 128, "get_eos_ids": [2, 3]}``). A value is an ``int``, ``float``,
            ``bool``, ``str``, ``torch.dtype``, ``torch.layout`` or ``torch.Tensor`` (stored as a
            constant), or a list/tuple/dict of them: each element is one output of the method
            (``get_eos_ids`` above returns 2 values). See :mod:`etkit.emit.constant_methods`.
        compile_config: :class:`EdgeCompileConfig`.
        generate_etrecord: keep a copy of the Edge programs (and the exported one) so that
            ``to_executorch().get_etrecord()`` gives the ETRecord (:mod:`etkit.devtools.etrecord`).
    Returns:
        :class:`EdgeProgramManager`.
    Raises:
        etkit.dialects.edge.EdgeDialectError: a value has a dtype a .pte cannot hold.
        TypeError: a constant method's value (or an element of it) has another type; the message names it.
        ValueError: a constant method has the name of one of ``programs``' methods.
    """
    programs = _as_dict(programs)
    constant_methods = _constant_methods(constant_methods, programs)
    config = compile_config or EdgeCompileConfig()
    edge = {name: decompose_to_edge(ep, (), config) for name, ep in programs.items()}
    manager = EdgeProgramManager(edge, config, constant_methods=constant_methods)
    if generate_etrecord:
        manager._keep_for_etrecord(programs.get("forward") if len(programs) == 1 else None)
    return manager


def to_edge_transform_and_lower(programs: ProgramsArg, transform_passes: Sequence = (),
                                partitioner: Optional[Union[Partitioner, Sequence[Partitioner], dict]] = None,
                                constant_methods: Optional[dict] = None,
                                compile_config: Optional[EdgeCompileConfig] = None,
                                generate_etrecord: bool = False) -> "EdgeProgramManager":
    """Decompose to Edge keeping what the partitioners ask to keep, then lower to their backends.

    Partitioners are applied in order; each sees what the previous ones left. Per method,
    ``partitioner`` may also be ``{method name: [partitioners]}``.

    Args:
        programs: an ``ExportedProgram`` (method ``forward``) or ``{method name: ExportedProgram}``.
        transform_passes: graph passes applied to every method before lowering.
        partitioner: a :class:`Partitioner`, a list of them, or ``{method name: [partitioners]}``.
        constant_methods: ``{method name: value}``, methods with no inputs returning constant values, as
            in ExecuTorch's ``exir.to_edge_transform_and_lower`` (see :func:`to_edge`).
        compile_config: :class:`EdgeCompileConfig`.
        generate_etrecord: keep the Edge programs as they are before lowering (every operator node, with
            its debug handle) so that ``to_executorch().get_etrecord()`` gives the ETRecord.
    Returns:
        :class:`EdgeProgramManager`; its :attr:`~EdgeProgramManager.partition_reports` say what each
        partitioner delegated and why each other node stayed out.
    Raises:
        TypeError: a constant method's value (or an element of it) has a type a .pte cannot hold.
        ValueError: a constant method has the name of one of ``programs``' methods.
    """
    programs = _as_dict(programs)
    constant_methods = _constant_methods(constant_methods, programs)
    config = compile_config or EdgeCompileConfig()
    if partitioner is None:
        per_method = {name: [] for name in programs}
    elif isinstance(partitioner, dict):
        per_method = {name: list(partitioner.get(name, [])) for name in programs}
    else:
        plist = [partitioner] if isinstance(partitioner, Partitioner) else list(partitioner)
        per_method = {name: plist for name in programs}
    edge, keep_by_method = {}, {}
    for name, ep in programs.items():
        keep_by_method[name] = ops_to_keep(per_method[name], ep)
        edge[name] = decompose_to_edge(ep, keep_by_method[name], config, per_method[name])
    manager = EdgeProgramManager(edge, config, constant_methods=constant_methods)
    for fn in transform_passes:
        manager = manager.transform([fn])
    if generate_etrecord:
        manager._keep_for_etrecord(programs.get("forward") if len(programs) == 1 else None)
    before_partitioning = dict(manager._programs)  # lowering works on copies: these stay as they are
    for name in programs:
        manager._programs[name], reports = lower_edge_program(manager._programs[name], per_method[name],
                                                              keep_by_method[name], config)
        manager.partition_reports[name].extend(reports)
    manager._recipe = LoweringRecipe(before_partitioning, per_method, keep_by_method, config)
    return manager


class EdgeProgramManager:
    """Edge-dialect programs, one per method; lowered with :meth:`to_backend`, written with :meth:`to_executorch`."""

    def __init__(self, programs: dict, compile_config: Optional[EdgeCompileConfig] = None,
                 constant_methods: Optional[dict] = None) -> None:
        self._programs = dict(programs)
        self.compile_config = compile_config or EdgeCompileConfig()
        #: ``{method name: value}`` of the constant methods (ExecuTorch's attribute name), or None.
        self._config_methods: Optional[dict] = dict(constant_methods) if constant_methods else None
        #: ``{method name: [PartitionReport, ...]}``, one per partitioner applied.
        self.partition_reports: dict = {name: [] for name in programs}
        #: How the methods were lowered, for fallback twins (set by ``to_edge_transform_and_lower``).
        self._recipe: Optional[LoweringRecipe] = None
        #: generate_etrecord=True: {method: Edge program before lowering} and the program as exported
        self._etrecord_edge: Optional[dict] = None
        self._etrecord_exported: Optional[ExportedProgram] = None

    @property
    def methods(self) -> set:
        return set(self._programs)

    @property
    def config_methods(self) -> set:
        """Names of the constant methods (``constant_methods`` of :func:`to_edge`)."""
        return set(self._config_methods) if self._config_methods else set()

    def exported_program(self, method_name: str = "forward") -> ExportedProgram:
        """The Edge ``ExportedProgram`` of one method."""
        return self._programs[method_name]

    def transform(self, passes: Sequence) -> "EdgeProgramManager":
        """Apply graph passes (callables taking and returning/modifying a GraphModule) to every method."""
        new = {}
        for name, ep in self._programs.items():
            ep = copy.deepcopy(ep)
            for p in passes:
                out = p(ep.graph_module)
                gm = getattr(out, "graph_module", out)
                if isinstance(gm, torch.fx.GraphModule) and gm is not ep.graph_module:
                    ep.graph_module.graph = gm.graph
                ep.graph_module.recompile()
            new[name] = ep
        manager = EdgeProgramManager(new, self.compile_config, constant_methods=copy.deepcopy(self._config_methods))
        manager.partition_reports = {k: list(v) for k, v in self.partition_reports.items()}
        if self._etrecord_edge is not None:  # the record describes the program as transformed
            manager._keep_for_etrecord(self._etrecord_exported)
        return manager

    def _keep_for_etrecord(self, exported: Optional[ExportedProgram]) -> None:
        from .emit.program_builder import copy_program
        self._etrecord_edge = {name: copy_program(ep) for name, ep in self._programs.items()}
        self._etrecord_exported = exported

    def _lower_method(self, name: str, partitioner: Partitioner) -> None:
        ep, report = _to_backend_one(self._programs[name], partitioner)
        self._programs[name] = ep
        if report is not None:
            self.partition_reports.setdefault(name, []).append(report)

    def to_backend(self, partitioner: Union[Partitioner, dict]) -> "EdgeProgramManager":
        """Lower every method with ``partitioner`` (or ``{method: partitioner}``); returns a new manager."""
        manager = EdgeProgramManager(dict(self._programs), self.compile_config,
                                     constant_methods=copy.deepcopy(self._config_methods))
        manager.partition_reports = {k: list(v) for k, v in self.partition_reports.items()}
        manager._etrecord_edge, manager._etrecord_exported = self._etrecord_edge, self._etrecord_exported
        recipe = self._recipe
        if recipe is not None:
            recipe = recipe.with_partitioners({k: list(v) for k, v in recipe.partitioners.items()})
        for name in self._programs:
            p = partitioner.get(name) if isinstance(partitioner, dict) else partitioner
            if p is not None:
                manager._lower_method(name, p)
                if recipe is not None:
                    recipe.partitioners.setdefault(name, []).append(p)
        manager._recipe = recipe
        return manager

    def to_executorch(self, config: Optional["ExecutorchBackendConfig"] = None) -> "ExecutorchProgramManager":
        """Out-variant conversion, memory planning and emission; returns the program ready to write."""
        from .emit.program_builder import build_program
        config = config or ExecutorchBackendConfig()
        start = time.perf_counter()
        programs = dict(self._programs)
        if config.delegate_fallback:
            programs.update(fallback_twins(self._recipe, self._programs, config.delegate_fallback))
        debug_info: dict = {}
        contents, plans, external = build_program(programs, config, self._config_methods, debug_info)
        manager = ExecutorchProgramManager(contents, config, plans, time.perf_counter() - start,
                                           config_methods=self._config_methods, debug_info=debug_info,
                                           external_data=external)
        if self._etrecord_edge is not None:
            from .devtools.etrecord import ETRecord
            manager._etrecord = ETRecord.from_managers(self._etrecord_edge, manager,
                                                       exported_program=self._etrecord_exported)
        return manager


@dataclass
class ExecutorchBackendConfig:
    """Options of ``to_executorch`` (ExecuTorch's names).

    Attributes:
        memory_planning_pass: a :class:`etkit.passes.memory_planning.MemoryPlanningPass`.
        segment_alignment: byte alignment of every segment in the file (default 4096, seed ".pte file format").
        constant_tensor_alignment: byte alignment of each constant inside the constant segment.
        delegate_alignment: byte alignment of delegate payloads (``None``: segment alignment only).
        extract_delegate_segments: accepted for compatibility; payloads always go to segments.
        constant_folding: compute ops whose inputs are all constants ahead of time
            (:mod:`etkit.passes.constant_folding`).
        delegate_fallback: ``True`` (or a list of backend ids) adds a ``"<method>#fallback"`` twin of
            every method that delegates to a backend which exists only on some platforms, lowered
            without it; etkit's runtime runs the twin where that backend is unavailable
            (:mod:`etkit.fallback`, docs/fallback.md). Needs ``to_edge_transform_and_lower``.
        external_constants: ExecuTorch's option. ``True`` keeps every parameter, buffer and frozen
            constant in a ``.ptd`` data file (``_default_external_constant.ptd``) instead of the
            ``.pte``, keyed by fully qualified name; a callable ``(torch.fx.Node) -> Optional[str]``
            names each constant's file stem (None: keep it in the ``.pte``). Write the files with
            :meth:`ExecutorchProgramManager.write_tensor_data_to_file`; load with ``data_path=``
            (docs/runtime.md, ".ptd data files").
        external_named_data: backends' named data (a delegate's weights) go to a data file too:
            ``True`` (the default when ``external_constants is True``) to the default one, a string
            to ``<string>.ptd``, ``False`` to keep them in the ``.pte``.
    """

    memory_planning_pass: object = None
    segment_alignment: int = 4096
    constant_tensor_alignment: int = 16
    delegate_alignment: Optional[int] = None
    extract_delegate_segments: bool = True
    constant_folding: bool = True
    delegate_fallback: Union[bool, Sequence[str]] = False
    external_constants: Union[bool, Callable] = False
    external_named_data: Union[None, bool, str] = None


class ExecutorchProgramManager:
    """A program ready to be written: :attr:`buffer` holds the ``.pte`` bytes."""

    def __init__(self, contents, config: ExecutorchBackendConfig, plans: dict, emit_seconds: float,
                 config_methods: Optional[dict] = None, debug_info: Optional[dict] = None,
                 external_data=None) -> None:
        self._contents = contents
        self._external_data = external_data
        self._data_files: Optional[dict] = None
        self._debug_info = debug_info or {}
        self._etrecord = None
        self._config_methods = config_methods
        self.config = config
        #: ``{method name: MemoryPlan}`` of each method.
        self.memory_plans = plans
        self.emit_seconds = emit_seconds
        self._buffer: Optional[bytes] = None

    @property
    def config_methods(self) -> set:
        """Names of the constant methods written in the program."""
        return set(self._config_methods) if self._config_methods else set()

    @property
    def debug_handle_map(self) -> dict:
        """``{method: {instruction index: debug handle, or the sorted handles of a delegate's partition}}``:
        which Edge nodes (``node.meta["debug_handle"]``) each instruction runs (ExecuTorch's name)."""
        return {m: dict(info["debug_handle_map"]) for m, info in self._debug_info.items()}

    @property
    def delegate_map(self) -> dict:
        """``{method: {delegate-call instruction index: {"name": backend id, "delegate_map": the backend's
        PreprocessResult.debug_handle_map}}}`` (ExecuTorch's name)."""
        return {m: dict(info["delegate_map"]) for m, info in self._debug_info.items()}

    def get_etrecord(self):
        """The :class:`etkit.devtools.etrecord.ETRecord` kept because the Edge program was made with
        ``generate_etrecord=True``; ``.save(path)`` writes it.

        Raises:
            RuntimeError: the Edge program was made without ``generate_etrecord=True``.
        """
        if self._etrecord is None:
            raise RuntimeError("no ETRecord: pass generate_etrecord=True to to_edge_transform_and_lower (or to_edge), "
                               "or call etkit.devtools.generate_etrecord(path, edge_manager, executorch_manager)")
        return self._etrecord

    @property
    def buffer(self) -> bytes:
        """The serialized ``.pte`` program (ExecuTorch 1.5 format)."""
        if self._buffer is None:
            from .serialize import serialize_pte
            self._buffer = serialize_pte(self._contents, segment_alignment=self.config.segment_alignment,
                                         constant_tensor_alignment=self.config.constant_tensor_alignment,
                                         delegate_alignment=self.config.delegate_alignment)
        return self._buffer

    def write_to_file(self, path_or_file) -> None:
        """Write :attr:`buffer` to a path or a binary file object."""
        if hasattr(path_or_file, "write"):
            path_or_file.write(self.buffer)
        else:
            with open(path_or_file, "wb") as f:
                f.write(self.buffer)

    @property
    def data_files(self) -> dict:
        """``{file name: bytes}`` of the ``.ptd`` data files (FlatTensor, schema/flat_tensor.fbs) that
        ``external_constants`` / ``external_named_data`` asked for, e.g.
        ``{"_default_external_constant.ptd": b"..."}``; empty when the program keeps all its data."""
        if self._data_files is None:
            self._data_files = self._external_data.serialize() if self._external_data is not None else {}
        return dict(self._data_files)

    def write_tensor_data_to_file(self, outdir) -> list:
        """Write each of :attr:`data_files` into the directory ``outdir`` (ExecuTorch's method); returns
        their paths. Load a program with its file: ``Runtime.get().load_program(pte, data_path=ptd)``.

        Raises:
            RuntimeError: the program has no data files (set ``ExecutorchBackendConfig(external_constants=True)``).
        """
        if not self.data_files:
            raise RuntimeError("this program keeps all its data in the .pte: there is no .ptd to write (export "
                               "with ExecutorchBackendConfig(external_constants=True) to make one)")
        paths = []
        for name, blob in self.data_files.items():
            path = os.path.join(os.fspath(outdir), name)
            with open(path, "wb") as f:
                f.write(blob)
            paths.append(path)
        return paths
