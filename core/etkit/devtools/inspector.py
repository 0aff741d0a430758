"""The Inspector: an ETDump (and its debug buffer) as tables of events (seed page "Inspector APIs").

    from etkit.devtools import Inspector
    inspector = Inspector(etdump_path="model.etdp", debug_buffer_path="model.debug.bin")
    inspector.print_data_tabular()                     # one row per event, times in ms
    df = inspector.to_dataframe()                      # pandas.DataFrame, ExecuTorch's columns
    for block in inspector.event_blocks:               # "Default" (loading), "Execute"
        for event in block.events:
            event.name, event.perf_data.p50, event.debug_data

ExecuTorch's surface and its grouping: the "Execute" runs whose events have the same signatures (name,
instruction id, delegate debug id, in order) form one :class:`EventBlock`, and each :class:`Event`
holds one duration per run (``perf_data.raw``). A delegate's own events (e.g. one per operator the backend
ran) are rows with ``is_delegated_op`` true, named by their delegate debug id. ``debug_data`` holds
the values logged for the event's instruction (the kernel's output, a delegate call's tensor
arguments), read from the debug buffer. It reads ETDumps written by etkit or by ExecuTorch 1.5.1.
"""
from __future__ import annotations

import enum
import os
import re
import statistics
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Optional, Sequence

from etkit.devtools.etdump import DebugEvent, ETDumpError, ProfileEvent, debug_value, read_etdump

__all__ = ["Event", "EventBlock", "Inspector", "PerfData", "TimeScale", "compare_results"]


class TimeScale(str, enum.Enum):
    """Units of event times (ExecuTorch's ``TimeScale``)."""

    NS = "ns"
    US = "us"
    MS = "ms"
    S = "s"
    CYCLES = "cycles"


_NS_PER = {TimeScale.NS: 1.0, TimeScale.US: 1e3, TimeScale.MS: 1e6, TimeScale.S: 1e9}


def _scale(source: TimeScale, target: TimeScale) -> float:
    if source == target:
        return 1.0
    if TimeScale.CYCLES in (source, target):
        raise ValueError("cannot convert between cycles and time units; pass the same source and target scale")
    return _NS_PER[source] / _NS_PER[target]


@dataclass
class PerfData:
    """Durations of one event over the runs, in the Inspector's target time scale."""

    raw: list

    @property
    def p10(self) -> float:
        return _percentile(self.raw, 10)

    @property
    def p50(self) -> float:
        return _percentile(self.raw, 50)

    @property
    def p90(self) -> float:
        return _percentile(self.raw, 90)

    @property
    def avg(self) -> float:
        return statistics.fmean(self.raw)

    @property
    def min(self) -> float:
        return min(self.raw)

    @property
    def max(self) -> float:
        return max(self.raw)


def _percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default, as ExecuTorch uses)."""
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


@dataclass
class Event:
    """One row: a profiled span (or a logged value without timing) of one instruction."""

    name: str
    perf_data: Optional[PerfData] = None
    op_types: list = field(default_factory=list)
    delegate_debug_identifier: "int | str | None" = None
    stack_traces: dict = field(default_factory=dict)
    module_hierarchy: dict = field(default_factory=dict)
    is_delegated_op: bool = False
    delegate_backend_name: Optional[str] = None
    debug_handles: "int | tuple | None" = None
    debug_data: list = field(default_factory=list)
    start_time: list = field(default_factory=list)
    _instruction_id: Optional[int] = None

    def asdict(self, include_units: bool, unit: str) -> dict:
        suffix = f" ({unit})" if include_units else ""
        perf = self.perf_data
        row = {"event_name": self.name, f"raw{suffix}": perf.raw if perf else None}
        for stat in ("p10", "p50", "p90", "avg", "min", "max"):
            row[f"{stat}{suffix}"] = getattr(perf, stat) if perf else None
        row.update({
            "op_types": self.op_types,
            "delegate_debug_identifier": self.delegate_debug_identifier,
            "stack_traces": self.stack_traces,
            "module_hierarchy": self.module_hierarchy,
            "is_delegated_op": self.is_delegated_op,
            "delegate_backend_name": self.delegate_backend_name,
            "debug_data": self.debug_data,
            "start_time": self.start_time,
        })
        return row


@dataclass
class EventBlock:
    """The events of runs with the same signature; ``run_output`` holds the logged method outputs. A block
    run on a bundled test case's inputs (``load_bundled_input``) has its ``bundled_input_index`` and, with an
    ETRecord holding reference outputs, that case's expected outputs in ``reference_output``."""

    name: str
    events: list = field(default_factory=list)
    source_time_scale: TimeScale = TimeScale.NS
    target_time_scale: TimeScale = TimeScale.MS
    bundled_input_index: Optional[int] = None
    run_output: list = field(default_factory=list)
    reference_output: Optional[list] = None

    def to_dataframe(self, include_units: bool = False):
        import pandas as pd

        rows = [dict(event_block_name=self.name, **e.asdict(include_units, self.target_time_scale.value))
                for e in self.events]
        return pd.DataFrame(rows)


def _signature(event: ProfileEvent) -> tuple:
    return (event.name, event.instruction_id, event.delegate_debug_id)


def _build_blocks(dump, buffer: Optional[bytes], scale: float, source: TimeScale,
                  target: TimeScale) -> tuple[list, int]:
    groups: dict = {}  # (run name, signatures) -> [per-run (profile events, debug values by instruction, outputs)]
    dropped = 0
    for run in dump.run_data:
        marker = re.fullmatch(r"etkit: (\d+) events dropped.*", run.name)
        if marker:  # the runtime's count of events that did not fit (extension/devtools/etdump.h)
            dropped += int(marker.group(1))
            continue
        profile = [e for e in run.events if isinstance(e, ProfileEvent)]
        debug_by_instruction: dict = {}
        outputs = []
        for e in run.events:
            if not isinstance(e, DebugEvent):
                continue
            if e.value.is_output:
                outputs.append(debug_value(e.value, buffer))
            else:
                key = (e.instruction_id, e.delegate_debug_id_int if e.delegate_debug_id_int != -1
                       else (e.delegate_debug_id_str or None))
                debug_by_instruction.setdefault(key, []).append(debug_value(e.value, buffer))
        if not profile and not debug_by_instruction and not outputs:
            continue
        key = (run.name, run.bundled_input_index, tuple(_signature(e) for e in profile))
        groups.setdefault(key, []).append((profile, debug_by_instruction, outputs))
    blocks = []
    for (name, bundled_index, signatures), runs in groups.items():
        events = []
        last_debug = runs[-1][1]
        for k, (event_name, instruction, delegate_id) in enumerate(signatures):
            spans = [run[0][k] for run in runs]
            is_delegated = delegate_id is not None
            label = spans[0].delegate_debug_id_str if is_delegated else None
            events.append(Event(
                name=(label or str(delegate_id)) if is_delegated else (event_name or ""),
                perf_data=PerfData([(s.end_time - s.start_time) * scale for s in spans]),
                delegate_debug_identifier=delegate_id,
                is_delegated_op=is_delegated,
                debug_data=[] if is_delegated else list(last_debug.get((instruction, None), [])),
                start_time=[s.start_time for s in spans],
                _instruction_id=instruction if instruction != -1 else None,
            ))
        blocks.append(EventBlock(name, events, source, target, bundled_index if bundled_index != -1 else None,
                                 runs[-1][2]))
    return blocks, dropped


def _associate(blocks: list, etrecord, where: str) -> None:
    """Gives each event of an instruction the debug handles and node metadata the ETRecord has for it.

    Raises:
        ETRecordError: the ETRecord is of another program (its delegate calls sit at other instructions, or
            none of the ETDump's operator instructions has a debug handle).
    """
    from etkit.devtools.etrecord import ETRecordError

    methods = sorted(etrecord._debug_handle_map) or sorted(etrecord._node_tables)
    method = "forward" if "forward" in methods else (methods[0] if len(methods) == 1 else None)
    if method is None:
        raise ETRecordError(f"{where}: the ETRecord has methods {methods} and none is 'forward'; "
                            f"the Inspector needs one method to map instructions to")
    handles = etrecord._debug_handle_map.get(method, {})
    delegates = etrecord._delegate_map.get(method, {})
    nodes = etrecord._node_tables.get(method, {})
    operator_ids = {e._instruction_id for b in blocks for e in b.events if e.name == "OPERATOR_CALL"}
    delegate_ids = {e._instruction_id for b in blocks for e in b.events if e.name == "DELEGATE_CALL"}
    wrong = sorted(i for i in delegate_ids if str(i) not in delegates)
    if wrong or (operator_ids and handles and not any(str(i) in handles for i in operator_ids)):
        raise ETRecordError(
            f"{where}: the ETRecord is not of this program: the ETDump has delegate calls at instructions "
            f"{sorted(delegate_ids)} and operator calls at {len(operator_ids)} instructions; the ETRecord's "
            f"method {method!r} has delegate calls at {sorted(int(k) for k in delegates)} and debug handles "
            f"for {len(handles)} instructions")
    for block in blocks:
        for event in block.events:
            key = str(event._instruction_id) if event._instruction_id is not None else None
            if key is None or event.name in ("Method::execute", "Program::load_method", "Method::init"):
                continue
            found = handles.get(key)
            delegate = delegates.get(key)
            if delegate is not None:
                event.delegate_backend_name = delegate.get("name")
            if event.is_delegated_op:
                inner = (delegate or {}).get("delegate_map") or {}
                found = inner.get(str(event.delegate_debug_identifier))
            if found is None:
                continue
            event.debug_handles = found if isinstance(found, int) else tuple(found)
            for handle in ([found] if isinstance(found, int) else found):
                info = nodes.get(int(handle))
                if info is None or info.name in event.stack_traces:
                    continue
                event.stack_traces[info.name] = info.stack_trace
                event.module_hierarchy[info.name] = info.nn_module_stack
                event.op_types.append(info.target)


def _attach_reference_outputs(blocks: list, etrecord, where: str) -> None:
    """Gives each block run on bundled test case k the ETRecord's reference outputs of case k of ``forward``.

    Raises:
        ETRecordError: the ETDump ran a test case the ETRecord has no reference outputs for.
    """
    from etkit.devtools.etrecord import ETRecordError

    references = (etrecord._reference_outputs or {}).get("forward")
    if references is None:
        return
    for block in blocks:
        k = block.bundled_input_index
        if k is None:
            continue
        if not 0 <= k < len(references):
            raise ETRecordError(f"{where}: block {block.name!r} ran bundled test case {k}; the ETRecord has reference "
                                f"outputs for {len(references)} test case(s) of 'forward'")
        block.reference_output = list(references[k])


class Inspector:
    """Reads an ETDump (and optionally its debug buffer) into :attr:`event_blocks` (ExecuTorch's
    ``executorch.devtools.Inspector``; seed page "Inspector APIs").

    Args:
        etdump_path: the ETDump file (etkit's or ExecuTorch's).
        etrecord: an ETRecord (path, or :class:`etkit.devtools.etrecord.ETRecord`) of the same program,
            written by etkit or by ExecuTorch: each event of an instruction then gets the debug handles,
            operator types, stack traces and module hierarchy of the Edge nodes it ran (a delegate call:
            the nodes of its partition; a delegate's own event: the nodes its debug id maps to, where the
            backend gave a debug handle map), and :meth:`find_total_for_module` works. Method
            "forward" is used (or the only method), as ExecuTorch's Inspector does.
        source_time_scale / target_time_scale: units of the file's times and of the tables
            (default: ns -> ms).
        debug_buffer_path: the debug buffer written with the ETDump; without it ``debug_data`` and
            ``run_output`` hold None for tensors.

    Raises:
        ETDumpError: the ETDump or debug buffer cannot be read (names the file and the part).
    """

    def __init__(self, etdump_path: "str | os.PathLike | None" = None, etrecord: Any = None,
                 source_time_scale: TimeScale = TimeScale.NS, target_time_scale: TimeScale = TimeScale.MS,
                 debug_buffer_path: "str | os.PathLike | None" = None, **unused: Any) -> None:
        if etdump_path is None:
            raise ValueError("Inspector needs etdump_path (an ETDump written by the runtime)")
        self._etrecord = None
        if etrecord is not None:
            from etkit.devtools.etrecord import ETRecord, parse_etrecord

            self._etrecord = etrecord if isinstance(etrecord, ETRecord) else parse_etrecord(etrecord)
        buffer = None
        if debug_buffer_path is not None:
            try:
                buffer = Path(debug_buffer_path).read_bytes()
            except OSError as exc:
                raise ETDumpError(f"cannot read debug buffer {os.fspath(debug_buffer_path)!r}: {exc}") from None
        self._source = TimeScale(source_time_scale)
        self._target = TimeScale(target_time_scale)
        dump = read_etdump(etdump_path)
        try:
            self.event_blocks, self.dropped_events = _build_blocks(
                dump, buffer, _scale(self._source, self._target), self._source, self._target)
        except ETDumpError as exc:
            raise ETDumpError(f"{os.fspath(etdump_path)}: {exc}") from None
        if self._etrecord is not None:
            _associate(self.event_blocks, self._etrecord, os.fspath(etdump_path))
            _attach_reference_outputs(self.event_blocks, self._etrecord, os.fspath(etdump_path))
        if self.dropped_events:
            warnings.warn(f"{os.fspath(etdump_path)}: the runtime dropped {self.dropped_events} events (its event "
                          f"storage was full); raise etdump_capacity", stacklevel=2)

    def to_dataframe(self, include_units: bool = False, include_delegate_debug_data: bool = False):
        """One row per event of every block (pandas.DataFrame) with ExecuTorch's columns:
        event_block_name, event_name, raw, p10, p50, p90, avg, min, max, op_types,
        delegate_debug_identifier, stack_traces, module_hierarchy, is_delegated_op,
        delegate_backend_name, debug_data, start_time."""
        import pandas as pd

        frames = [b.to_dataframe(include_units) for b in self.event_blocks]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def print_data_tabular(self, file: Optional[IO[str]] = None, include_units: bool = True,
                           include_delegate_debug_data: bool = False) -> None:
        """Prints the table of :meth:`to_dataframe` (without the debug tensors) to ``file`` (default:
        ``sys.stdout`` at the time of the call)."""
        df = self.to_dataframe(include_units, include_delegate_debug_data)
        shown = df.drop(columns=[c for c in ("debug_data", "start_time", "stack_traces", "module_hierarchy")
                                 if c in df.columns])
        print(shown.to_string(max_colwidth=48), file=file if file is not None else sys.stdout)

    def save_data_to_tsv(self, file: IO[str], include_units: bool = True,
                         include_delegate_debug_data: bool = False) -> None:
        self.to_dataframe(include_units, include_delegate_debug_data).to_csv(file, sep="\t")

    def find_total_for_module(self, module_name: str) -> float:
        """Sum of the average time (target time scale) of the events whose nodes ran inside a module
        whose ``nn_module_stack`` key contains ``module_name`` (ExecuTorch's rule: OPERATOR_CALL rows are
        skipped, their ``native_call_*`` twins count). A delegate call whose events inside it map to nodes
        is counted through those events, not as a whole: its time would otherwise count twice, and the
        events say which modules it spent it on.

        Raises:
            ValueError: the Inspector was made without an ETRecord.
        """
        if self._etrecord is None:
            raise ValueError("find_total_for_module needs the module hierarchy of an ETRecord: "
                             "Inspector(etdump_path=..., etrecord=...)")
        total = 0.0
        for block in self.event_blocks:
            itemized = {e._instruction_id for e in block.events if e.is_delegated_op and e.debug_handles}
            for event in block.events:
                if event.name == "OPERATOR_CALL" or event.perf_data is None:
                    continue
                if event.name == "DELEGATE_CALL" and event._instruction_id in itemized:
                    continue
                if any(h and any(module_name in key for key in h) for h in event.module_hierarchy.values()):
                    total += event.perf_data.avg
        return total

    def get_exported_program(self, graph: Optional[str] = None):
        """The Edge ``ExportedProgram`` of method ``graph`` (default "forward") from the ETRecord, or the
        program as exported for ``graph="exported_program"``.

        Raises:
            ValueError: no ETRecord, or the ETRecord does not hold that program in a form torch can load
                (ExecuTorch's Edge programs use its own operator classes; their nodes are still used).
        """
        if self._etrecord is None:
            raise ValueError("get_exported_program needs an ETRecord: Inspector(etdump_path=..., etrecord=...)")
        if graph == "exported_program":
            program = self._etrecord.exported_program
        else:
            program = self._etrecord.edge_dialect_program.get(graph or "forward")
        if program is None:
            raise ValueError(f"the ETRecord holds no loadable program {graph or 'forward'!r} "
                             f"(methods: {sorted(self._etrecord.edge_dialect_program)})")
        return program

    def calculate_numeric_gap(self, distance="MSE", inputs: Optional[Sequence[Any]] = None,
                              reference_graph: Optional[str] = None):
        """Compares each operator's runtime output (the ETDump's intermediate outputs, last execute) with
        the output of the same Edge node run in torch eager on the same inputs (ExecuTorch's
        ``calculate_numeric_gap``, seed page "Debugging Models in ExecuTorch").

        The reference run interprets the ETRecord's Edge program (``torch.fx.Interpreter`` over
        ``ExportedProgram.module()``) and keeps every node's output by debug handle. A kernel call is
        compared with its node; a delegate call's outputs (the last ``num_outs`` tensors it logged) with
        its partition's outputs, in order of shape. ``inputs``: what the runtime ran on (default: the
        ETRecord's first representative inputs, the exported program's example inputs).

        With ``reference_graph="exported_program"`` the reference is the program as exported, before Edge
        (the ETRecord's ``exported_program``): each Edge node is traced back to the ATen node it came from
        (``node.meta["from_node"]``), and only the Edge node that produces that ATen node's value (e.g. the
        ``addmm`` of a decomposed ``linear``) is compared, with the ATen node's output. The default (None or
        ``"edge_dialect_exported_program"``) is the Edge program; ExecuTorch's default prefers the exported
        program when it can trace every node back.

        Args:
            distance: "MSE" (mean squared difference), "L1" (mean absolute difference), "SNR" (dB,
                10 log10(reference power / difference power); lower is worse), or a
                :class:`~etkit.devtools.numerical_comparator.NumericalComparatorBase` of your own (its
                ``preprocessing`` sees every pair first, its ``element_compare`` scores each).
        Returns:
            pandas.DataFrame, one row per compared instruction, in execution order: aot_ops,
            aot_intermediate_output, runtime_ops, runtime_intermediate_output, gap, stacktraces.
        Raises:
            ValueError: no ETRecord, no loadable Edge program in it, no inputs, no intermediate outputs in
                the ETDump (record it with a debug buffer), an unknown distance or reference graph, or
                ``"exported_program"`` without an exported program in the ETRecord.
        """
        import pandas as pd
        import torch

        from etkit.devtools.numerical_comparator import comparator_for

        if reference_graph not in (None, "edge_dialect_exported_program", "exported_program"):
            raise ValueError(f"unknown reference_graph {reference_graph!r}; use 'edge_dialect_exported_program' "
                             f"(the default) or 'exported_program'")

        comparator = comparator_for(distance)
        comparator.inspector = self
        program = self.get_exported_program()
        if inputs is None:
            inputs = (self._etrecord.representative_inputs or [None])[0]
        if inputs is None:
            raise ValueError("no inputs: pass inputs=[...] (what the runtime ran on), or record representative "
                             "inputs in the ETRecord")
        if reference_graph == "exported_program":
            aten = getattr(self._etrecord, "exported_program", None)
            if aten is None:
                raise ValueError("reference_graph='exported_program' needs the exported program in the ETRecord "
                                 "(lower with generate_etrecord=True, or pass exported_program to "
                                 "generate_etrecord)")
            aten_outputs = {n.name: v for n, v in _reference_outputs(aten, list(inputs)).items()}
            aot_names = _aten_producers(program, set(aten_outputs))
            reference = {edge: aten_outputs[name] for edge, name in aot_names.items()}
        else:
            reference = _reference_outputs(program, list(inputs))
            aot_names = {}
        nodes = program.graph.nodes
        by_handle = {n.meta.get("debug_handle"): n for n in nodes if isinstance(n.meta.get("debug_handle"), int)}
        blocks = [b for b in self.event_blocks if b.name == "Execute"]
        if not blocks:
            raise ValueError("the ETDump has no Execute block")
        method = "forward" if "forward" in self._etrecord._instruction_id_to_num_outs_map else None
        num_outs = self._etrecord._instruction_id_to_num_outs_map.get(method or "", {})
        mapping, described = {}, {}
        for event in blocks[-1].events:
            if event.name not in ("OPERATOR_CALL", "DELEGATE_CALL") or event.debug_handles is None:
                continue
            logged = [t for t in event.debug_data if isinstance(t, torch.Tensor)]
            if not logged:
                continue
            handles = [event.debug_handles] if isinstance(event.debug_handles, int) else list(event.debug_handles)
            if event.name == "OPERATOR_CALL":
                pairs = [(by_handle.get(handles[0]), logged[-1])]
            else:
                outs = num_outs.get(str(event._instruction_id), 1)
                partition = {by_handle[h] for h in handles if h in by_handle}
                produced = [n for n in partition if any(u not in partition for u in n.users)]
                pairs = _match_by_shape(produced, logged[-outs:], reference)
            for node, runtime in pairs:
                expected = reference.get(node) if node is not None else None
                if isinstance(expected, (tuple, list)):  # a multi-output op logs its last out tensor
                    same = [t for t in expected if isinstance(t, torch.Tensor) and t.shape == runtime.shape
                            and t.dtype == runtime.dtype]
                    expected = same[-1] if same else None
                if (not isinstance(expected, torch.Tensor) or expected.shape != runtime.shape
                        or expected.dtype != runtime.dtype):
                    continue
                key = ((node.meta["debug_handle"],), expected.detach())
                mapping[key] = (tuple(handles), runtime)
                described[key[0]] = (node, event.name if event.name != "OPERATOR_CALL" else str(event.op_types[:1]))
        if not mapping:
            raise ValueError("nothing to compare: the ETDump holds no intermediate outputs of instructions the "
                             "ETRecord maps (load the program with debug_buffer_size > 0)")
        rows = []
        for (aot_handles, expected), (_, runtime) in comparator.preprocessing(mapping).items():
            node, runtime_op = described.get(aot_handles, (None, None))
            name = aot_names.get(node, node.name) if node is not None else str(aot_handles)
            rows.append({
                "aot_ops": [name], "aot_intermediate_output": expected,
                "runtime_ops": [runtime_op], "runtime_intermediate_output": runtime,
                "gap": [comparator.element_compare(expected, runtime)],
                "stacktraces": {name: node.meta.get("stack_trace") if node is not None else None},
            })
        return pd.DataFrame(rows)


def _aten_origin(node, aten_names: set) -> Optional[str]:
    """The name of the exported program's node that Edge node ``node`` came from (its ``from_node`` chain,
    nearest first), or None."""
    sources = node.meta.get("from_node") or []
    while sources:
        source = sources[-1]
        if source.name in aten_names:
            return source.name
        sources = source.from_node
    return None


def _aten_producers(edge_program, aten_names: set) -> dict:
    """``{Edge node: ATen node name}`` for the Edge nodes that compute their ATen node's value: of the Edge
    nodes that came from one ATen node, the one whose value is used outside them (a getitem is skipped: its
    multi-output producer logs another tensor)."""
    import operator

    groups: dict = {}
    for node in edge_program.graph.nodes:
        if node.op == "call_function":
            name = _aten_origin(node, aten_names)
            if name is not None:
                groups.setdefault(name, set()).add(node)
    producers = {}
    for name, members in groups.items():
        leaving = [n for n in members if n.target is not operator.getitem
                   and any(u not in members for u in n.users)]
        if len(leaving) == 1:
            producers[leaving[0]] = name
    return producers


def _reference_outputs(program, inputs: list) -> dict:
    """Every node's output when ``program`` runs in eager on ``inputs``: {fx node of program.graph: value}."""
    import torch

    module = program.module()
    by_name = {n.name: n for n in program.graph.nodes}
    captured = {}

    class Capture(torch.fx.Interpreter):
        def run_node(self, n):
            value = super().run_node(n)
            original = by_name.get(n.name)
            if original is not None and n.op == "call_function":
                captured[original] = value
            return value

    with torch.no_grad():
        Capture(module).run(*inputs)
    return captured


def _match_by_shape(nodes: list, runtime: list, reference: dict) -> list:
    """Pairs each runtime output with a reference node of the same shape, each used once, in node order."""
    free = [n for n in nodes if hasattr(reference.get(n), "shape")]
    pairs = []
    for tensor in runtime:
        for node in free:
            if reference[node].shape == tensor.shape:
                pairs.append((node, tensor))
                free.remove(node)
                break
    return pairs


def compare_results(reference_output: Sequence[Any], run_output: Sequence[Any],
                    metrics: Optional[Sequence[str]] = None) -> dict:
    """Compares two lists of tensors pairwise (ExecuTorch's ``compare_results``): metric name -> one value
    per pair. Metrics: "snr" (dB, 10*log10(signal power / noise power); inf when equal), "mse",
    "cosine_similarity", "l1" (mean absolute difference).

    Raises:
        ValueError: the lists differ in length, a pair differs in shape, or a metric is unknown.
    """
    import torch

    functions = {
        "snr": lambda r, x: float("inf") if torch.equal(r, x) else float(
            10 * torch.log10(r.pow(2).mean() / (r - x).pow(2).mean())),
        "mse": lambda r, x: float((r - x).pow(2).mean()),
        "cosine_similarity": lambda r, x: float(torch.nn.functional.cosine_similarity(
            r.flatten(), x.flatten(), dim=0)) if r.numel() else 1.0,
        "l1": lambda r, x: float((r - x).abs().mean()),
    }
    chosen = list(functions) if metrics is None else list(metrics)
    unknown = [m for m in chosen if m not in functions]
    if unknown:
        raise ValueError(f"unknown metrics {unknown}; known: {sorted(functions)}")
    if len(reference_output) != len(run_output):
        raise ValueError(f"{len(reference_output)} reference outputs but {len(run_output)} run outputs")
    results: dict = {m: [] for m in chosen}
    for i, (ref, out) in enumerate(zip(reference_output, run_output)):
        ref = torch.as_tensor(ref).double()
        out = torch.as_tensor(out).double()
        if ref.shape != out.shape:
            raise ValueError(f"output {i}: reference shape {tuple(ref.shape)} differs from run shape {tuple(out.shape)}")
        for m in chosen:
            results[m].append(functions[m](ref, out))
    return results
