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
holds one duration per run (``perf_data.raw``). A delegate's own events (e.g. one per XNNPACK
operator) are rows with ``is_delegated_op`` true, named by their delegate debug id. ``debug_data`` holds
the values logged for the event's instruction (the kernel's output, a delegate call's tensor
arguments), read from the debug buffer. It reads ETDumps written by etkit or by ExecuTorch 1.5.1.
"""
from __future__ import annotations

import enum
import os
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
    """The events of runs with the same signature; ``run_output`` holds the logged method outputs."""

    name: str
    events: list = field(default_factory=list)
    source_time_scale: TimeScale = TimeScale.NS
    target_time_scale: TimeScale = TimeScale.MS
    bundled_input_index: Optional[int] = None
    run_output: list = field(default_factory=list)

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
        if run.name.startswith("etkit: ") and "dropped" in run.name:
            dropped += int(run.name.split()[1]) if run.name.split()[1].isdigit() else 0
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
            events.append(Event(
                name=str(delegate_id) if is_delegated else (event_name or ""),
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


class Inspector:
    """Reads an ETDump (and optionally its debug buffer) into :attr:`event_blocks` (ExecuTorch's
    ``executorch.devtools.Inspector``; seed page "Inspector APIs").

    Args:
        etdump_path: the ETDump file (etkit's or ExecuTorch's).
        etrecord: not read yet by etkit: passing one raises NotImplementedError, so that no table
            silently lacks the operator names, module hierarchy and stack traces it would give.
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
        if etrecord is not None:
            raise NotImplementedError("etkit's Inspector does not read ETRecords yet; leave etrecord out "
                                      "(events are then named by the runtime and the delegates)")
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
        """Needs the module hierarchy an ETRecord gives, which etkit's Inspector does not read yet.

        Raises:
            NotImplementedError: always, for now.
        """
        raise NotImplementedError("find_total_for_module needs an ETRecord's module hierarchy, which etkit's "
                                  "Inspector does not read yet")

    def get_exported_program(self, graph: Optional[str] = None):
        raise NotImplementedError("get_exported_program needs an ETRecord, which etkit's Inspector does not read yet")

    def calculate_numeric_gap(self, distance: str = "MSE"):
        raise NotImplementedError("calculate_numeric_gap needs an ETRecord's reference graph, which etkit's "
                                  "Inspector does not read yet; compare_results(runtime, reference) compares "
                                  "outputs you have")


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
