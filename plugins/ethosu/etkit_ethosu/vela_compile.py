"""Compile a TOSA 1.0 flatbuffer with Vela, in process, into the Ethos-U payload and a performance estimate.

Vela 5.x (``ethos-u-vela``) is run the way ExecuTorch 1.5.1's ``backends/arm/arm_vela.py`` (``vela_compile``)
runs it: the flatbuffer is written to ``<tmp>/out.tosa``, ``ethosu.vela.vela.main`` gets the compile spec's flags
plus ``--output-dir=<tmp>/output`` and the path, and ``<tmp>/output/out_vela.npz`` (``--output-format=raw``) is
read with ``allow_pickle=False``, touching only the keys the payload needs. The payload built from it packs
(:func:`etkit_ethosu.payload.pack`) to the same bytes as ExecuTorch's ``vela_compile`` for the same TOSA bytes and
flags (docs/design/ethosu-route.md, sections 2.4, 2.5 and 4).

Differences from ExecuTorch, none of which changes the payload:

* the flags go to Vela as a fresh list (ExecuTorch space-joins and re-splits them, and appends to the caller's
  list);
* ``--verbose-performance`` is added when an estimate is asked for. It makes Vela keep its optimiser database
  (``enable_db=true``) and write ``out_per-layer.csv``; the compiled command stream, weights, scratch sizes and
  I/O records were checked to be byte-identical with and without it (Vela 5.2.0; U55/U65/U85, several memory
  modes), and ``tests/test_ethosu_vela_compile.py`` keeps checking it;
* Vela's output is captured instead of printed: Python's ``sys.stdout``/``sys.stderr`` and, because Vela's C++
  core (``regor``) writes its verbose traces (``--verbose-schedule``, ``--verbose-allocation``, ``--verbose-all``,
  ...) straight to file descriptor 1, the process's fds 1 and 2 too (``os.dup2`` around the call);
* failures that ExecuTorch would let through or report as a bare traceback are refused with
  :class:`VelaCompileError`, which names the target and says what to do.

Vela's outputs, named after the input file (``<net>`` = ``out``), are described by its options documentation
(``vela --help``, Vela's OPTIONS.md: ``--output-format``, ``--verbose-performance``) and written by its
``rawdata_writer.py`` and ``stats_writer.py``: ``<net>_vela.npz``, ``<net>_summary_<system_config>.csv`` (one row of
network totals) and, with ``--verbose-performance``, ``<net>_per-layer.csv`` (one row per NPU operator).
Vela's figures are estimates from its performance model, not measurements.

Capturing output takes over the process's file descriptors 1 and 2 for the few milliseconds Vela runs, so
whatever another thread writes to them meanwhile lands in :attr:`VelaResult.log`; compiles are serialised by a lock.
"""
from __future__ import annotations

import csv
import os
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from ._capture import CaptureOutput as _CaptureOutput
from .compile_spec import EthosUCompileSpec
from .payload import COMMAND_STREAM_MAGIC, VelaIO, VelaPayload

__all__ = ["VelaCompileError", "LayerEstimate", "VelaResult", "compile_tosa", "vela_version", "MAX_TOSA_BYTES"]

#: Largest TOSA flatbuffer handed to Vela, in bytes (2 GiB; ExecuTorch's ``EthosUBackend`` has the same limit
#: because Vela's flatbuffer reader cannot address more).
MAX_TOSA_BYTES = 2 * 1024 * 1024 * 1024

#: Base name ExecuTorch gives the flatbuffer; Vela names its outputs after it (``out_vela.npz``, ...).
_NET = "out"

#: Vela redirects process-wide file descriptors while it runs, and Vela itself keeps global state: one compile at
#: a time per process.
_LOCK = threading.Lock()

#: Per-layer CSV columns (Vela 5.x ``stats_writer.write_regor_perlayer_performance_csv``) -> LayerEstimate field.
_LAYER_COLUMNS = {
    "Original Operator": "original_operator",
    "NNG Operator": "nng_operator",
    "Target": "target",
    "Op Cycles": "op_cycles",
    "Network% (cycles)": "network_percent_cycles",
    "NPU": "npu_cycles",
    "SRAM AC": "sram_access_cycles",
    "DRAM AC": "dram_access_cycles",
    "OnFlash AC": "onchip_flash_access_cycles",
    "OffFlash AC": "offchip_flash_access_cycles",
    "MAC Count": "mac_count",
    "Name": "name",
}

#: Summary CSV columns every :attr:`VelaResult.summary` has (Vela's ``write_summary_metrics_csv_common``).
SUMMARY_KEYS = ("cycles_npu", "cycles_total", "inference_time", "inferences_per_second", "nn_macs",
                "sram_memory_used", "off_chip_flash_memory_used", "total_original_weights",
                "total_npu_encoded_weights")


class VelaCompileError(RuntimeError):
    """Vela could not compile the TOSA graph for the target, or its output cannot be stored as a payload.

    Attributes:
        target: the accelerator configuration (e.g. ``"ethos-u55-128"``).
        log: Vela's captured output (stdout and stderr, both Python and C++ writes).
    """

    def __init__(self, message: str, *, target: str, log: str = ""):
        super().__init__(message)
        self.target = target
        self.log = log


@dataclass(frozen=True)
class LayerEstimate:
    """Vela's estimate for one NPU operator (a row of ``out_per-layer.csv``, written with ``--verbose-performance``).

    Attributes:
        original_operator: the TOSA operator the row comes from (Vela's name, e.g. ``"Conv2D"``).
        nng_operator: the operator Vela scheduled after its graph optimisation (RESCALEs are usually fused into
            the operator before them, so they do not get a row of their own).
        target: ``"NPU"`` (``"CPU"`` never occurs for TOSA input: Vela refuses the graph instead).
        op_cycles: estimated cycles of the operator (NPU clock cycles), the maximum of its compute and memory
            access cycles.
        network_percent_cycles: ``op_cycles`` as a percentage of the network's total cycles.
        npu_cycles: estimated NPU compute cycles.
        sram_access_cycles, dram_access_cycles, onchip_flash_access_cycles, offchip_flash_access_cycles:
            estimated cycles spent on memory accesses to each memory (cycles).
        mac_count: multiply-accumulates of the operator.
        name: the operator's TOSA output tensor name (Vela's ``Name`` column), which attributes the row to the
            node that produced that tensor.
    """

    original_operator: str
    nng_operator: str
    target: str
    op_cycles: int
    network_percent_cycles: float
    npu_cycles: int
    sram_access_cycles: int
    dram_access_cycles: int
    onchip_flash_access_cycles: int
    offchip_flash_access_cycles: int
    mac_count: int
    name: str


@dataclass
class VelaResult:
    """What :func:`compile_tosa` returns.

    Attributes:
        payload: the compiled graph, ready for :func:`etkit_ethosu.payload.pack`.
        summary: Vela's network totals (``out_summary_<system_config>.csv``), numbers as ``int``/``float``. Among
            the keys: ``cycles_npu`` and ``cycles_total`` (cycles), ``inference_time`` (seconds, one inference at
            ``core_clock``), ``inferences_per_second``, ``nn_macs``, ``core_clock`` (Hz), ``sram_memory_used`` and
            ``off_chip_flash_memory_used`` (KiB, as Vela reports them), ``total_original_weights`` and
            ``total_npu_encoded_weights`` (bytes, as Vela counts them), ``accelerator_configuration``, ``system_config``,
            ``memory_mode``.
        layers: one :class:`LayerEstimate` per NPU operator, in Vela's order; empty when compiled with
            ``estimate=False``.
        log: Vela's captured output (its network summary, warnings and any verbose traces).
        target: the accelerator configuration compiled for.
    """

    payload: VelaPayload
    summary: dict
    layers: list = field(default_factory=list)
    log: str = ""
    target: str = ""

    def format_estimate(self) -> str:
        """A readable table of the estimate: per layer the tensor name, operator, cycles, share of the network's
        cycles and MACs; then the totals and the inference time in microseconds at the system config's clock.

        Vela's numbers are estimates from its performance model, not measurements.
        """
        s = self.summary
        rows = [(layer.name, _op_label(layer), f"{layer.op_cycles:,}", f"{layer.network_percent_cycles:.1f}",
                 f"{layer.mac_count:,}") for layer in self.layers]
        head = ("layer (tensor)", "op", "cycles", "% cycles", "MACs")
        widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(head)]
        align = ("<", "<", ">", ">", ">")

        def line(cells):
            return "  ".join(f"{c:{a}{w}}" for c, a, w in zip(cells, align, widths)).rstrip()

        title = (f"Vela estimate for {self.target or s.get('accelerator_configuration', '?')}, "
                 f"{s.get('system_config', '?')}, {s.get('memory_mode', '?')}")
        out = [title, line(head), line(["-" * w for w in widths])]
        out += [line(r) for r in rows]
        if not rows:
            out.append("(no per-layer estimate: compiled with estimate=False)")
        clock = s.get("core_clock")
        time_s = s.get("inference_time")
        out.append("")
        out.append(f"total: {int(s.get('cycles_total', 0)):,} cycles (NPU {int(s.get('cycles_npu', 0)):,}), "
                   f"{int(s.get('nn_macs', 0)):,} MACs")
        if isinstance(time_s, (int, float)):
            at = f" at {clock / 1e6:g} MHz" if isinstance(clock, (int, float)) and clock else ""
            out.append(f"inference time: {time_s * 1e6:.2f} us{at} "
                       f"({s.get('inferences_per_second', 0):,.0f} inferences/s)")
        out.append(f"memory: SRAM {s.get('sram_memory_used', 0):g} KiB, off-chip flash "
                   f"{s.get('off_chip_flash_memory_used', 0):g} KiB; weights {s.get('total_original_weights', 0):,} B "
                   f"-> {s.get('total_npu_encoded_weights', 0):,} B encoded; scratch "
                   f"{self.payload.scratch_size:,} B")
        return "\n".join(out)


def _op_label(layer: LayerEstimate) -> str:
    if layer.nng_operator and layer.nng_operator != layer.original_operator:
        return f"{layer.original_operator} -> {layer.nng_operator}"
    return layer.original_operator


def vela_version() -> str:
    """The installed Vela version (``ethos-u-vela`` distribution), e.g. ``"5.2.0"``.

    Raises:
        VelaCompileError: Vela is not installed.
    """
    try:
        from importlib.metadata import PackageNotFoundError, version
        return version("ethos-u-vela")
    except PackageNotFoundError:
        raise VelaCompileError("ethos-u-vela is not installed; install it with `pip install 'ethos-u-vela>=5.1,<6'`",
                               target="") from None


def compile_tosa(tosa: bytes, spec: EthosUCompileSpec, *, estimate: bool = True) -> VelaResult:
    """Compile a TOSA 1.0 flatbuffer for ``spec.target`` with Vela and return the payload and Vela's estimate.

    Args:
        tosa: the TOSA flatbuffer (as written by ``tosa_serializer``), at most :data:`MAX_TOSA_BYTES` bytes.
        spec: the compile spec; Vela gets ``spec.vela_flags()`` (ExecuTorch's flags and order).
        estimate: also ask Vela for its per-layer estimate (``--verbose-performance``); this does not change the
            compiled bytes.

    Returns:
        A :class:`VelaResult`; ``pack(result.payload)`` equals ExecuTorch 1.5.1's
        ``arm_vela.vela_compile(tosa, spec.vela_flags()).processed_bytes``.

    Raises:
        VelaCompileError: the flatbuffer is larger than 2 GiB; Vela is missing, raised, or exited non-zero
            (e.g. an operator that cannot run on the NPU: TOSA input has no CPU fallback); Vela reported CPU
            operators; Vela wrote no ``out_vela.npz``; or the memory mode needs a fast-scratch area (region 2),
            which the payload cannot describe.
    """
    target = spec.target
    tosa = bytes(tosa)
    if len(tosa) > MAX_TOSA_BYTES:
        raise VelaCompileError(
            f"the TOSA flatbuffer for {target} is {len(tosa)} bytes, over Vela's limit of {MAX_TOSA_BYTES} bytes "
            f"(2 GiB); split the model into smaller partitions or reduce its constant data", target=target)
    try:
        from ethosu.vela import vela
    except ImportError as exc:
        raise VelaCompileError(f"cannot compile for {target}: Vela is not importable ({exc}); install it with "
                               f"`pip install 'ethos-u-vela>=5.1,<6'`", target=target) from exc
    import numpy as np

    with tempfile.TemporaryDirectory(prefix="etkit-vela-") as tmp:
        tosa_path = os.path.join(tmp, f"{_NET}.tosa")
        output_dir = os.path.join(tmp, "output")
        with open(tosa_path, "wb") as f:
            f.write(tosa)
        args = [*spec.vela_flags(), f"--output-dir={output_dir}", tosa_path]
        if estimate:
            args.append("--verbose-performance")

        failure: Optional[BaseException] = None
        exit_code: object = 0
        with _LOCK, _CaptureOutput() as captured:
            try:
                exit_code = vela.main(list(args))
            except SystemExit as exc:  # argparse errors (unknown flag, bad value) exit
                exit_code = exc.code
            except Exception as exc:  # noqa: BLE001 - Vela raises RuntimeError/VelaError/ValueError/...
                failure = exc
        log = captured.text

        if failure is not None:
            raise _refusal(f"{type(failure).__name__}: {failure}", target, log) from failure
        if exit_code not in (0, None):
            raise _refusal(f"Vela exited with status {exit_code}", target, log)
        cpu_ops = _cpu_operator_count(log)
        if cpu_ops:
            raise _refusal(f"Vela placed {cpu_ops} operator(s) on the CPU", target, log, unsupported=True)

        npz_path = os.path.join(output_dir, f"{_NET}_vela.npz")
        if not os.path.isfile(npz_path):
            raise VelaCompileError(
                f"Vela finished for {target} but wrote no {_NET}_vela.npz; check that the compile spec's "
                f"extra_flags do not stop compilation (e.g. --version, --list-config-files, "
                f"--supported-ops-report) or change --output-format.\nVela's output:\n{_tail(log)}",
                target=target, log=log)
        payload = _read_npz(np, npz_path, target, spec, log)
        summary = _read_summary(output_dir, target, log)
        layers = _read_layers(os.path.join(output_dir, f"{_NET}_per-layer.csv")) if estimate else []
        cpu_layers = [layer for layer in layers if layer.target.upper() == "CPU"]
        if cpu_layers:
            names = ", ".join(f"{layer.original_operator} ({layer.name})" for layer in cpu_layers)
            raise _refusal(f"Vela placed these operators on the CPU: {names}", target, log, unsupported=True)
    return VelaResult(payload=payload, summary=summary, layers=layers, log=log, target=target)


def _refusal(reason: str, target: str, log: str, *, unsupported: bool = False) -> VelaCompileError:
    """The error for a graph Vela would not compile, with advice that fits Vela's reason."""
    if unsupported or "could not run on NPU" in f"{reason}\n{log}":
        advice = (f"for TOSA input Vela has no CPU fallback, so every operator in an Ethos-U partition must run "
                  f"on {target}'s NPU. Leave the operator named above out of the partition (the partitioner's "
                  f"per-target operator support), or compile for a target that supports it (the U85 supports "
                  f"more operators than the U55/U65: `vela --supported-ops-report`)")
    else:
        advice = ("check the compile spec (target, system_config, memory_mode, extra_flags and config_ini are "
                  "passed to Vela as flags) and that the graph is valid TOSA 1.0 (run it on the TOSA reference "
                  "model)")
    return VelaCompileError(f"Vela could not compile the TOSA graph for {target}: {reason}.\nWhat to do: {advice}."
                            f"\nVela's output:\n{_tail(log)}", target=target, log=log)


def _tail(log: str, lines: int = 40) -> str:
    kept = log.strip().splitlines()
    if len(kept) > lines:
        kept = [f"... ({len(kept) - lines} earlier lines)"] + kept[-lines:]
    return "\n".join(kept) if kept else "(nothing)"


def _cpu_operator_count(log: str) -> int:
    """Vela's "CPU operators = N (x%)" summary line, 0 when absent."""
    for line in log.splitlines():
        stripped = line.strip()
        if stripped.startswith("CPU operators ="):
            try:
                return int(stripped.split("=", 1)[1].split()[0])
            except (IndexError, ValueError):
                return 0
    return 0


def _as_int(value, what: str, target: str, log: str, *, lo: int = -(2 ** 31), hi: int = 2 ** 31 - 1) -> int:
    v = int(value)
    if not lo <= v <= hi:
        raise VelaCompileError(f"Vela's {what} for {target} is {v}, outside [{lo}, {hi}]: the payload cannot "
                               f"store it; make the partition smaller", target=target, log=log)
    return v


def _read_ios(data, prefix: str, target: str, log: str) -> list:
    """The ``<prefix>_shape/_elem_size/_offset/_region`` arrays as :class:`VelaIO` (ExecuTorch's
    ``vela_bin_pack_io``)."""
    shapes = data[f"{prefix}_shape"]
    elem_sizes, offsets, regions = (data[f"{prefix}_{k}"] for k in ("elem_size", "offset", "region"))
    ios = []
    for i in range(len(shapes)):
        shape = tuple(_as_int(d, f"{prefix} {i} shape", target, log) for d in shapes[i].tolist())
        if len(shape) != 6:
            raise VelaCompileError(f"Vela's {prefix} {i} for {target} has a {len(shape)}-D shape {shape}; the "
                                   f"payload expects 6-D (is this Vela 5.x?)", target=target, log=log)
        ios.append(VelaIO(shape, _as_int(elem_sizes[i], f"{prefix} {i} elem_size", target, log),
                          _as_int(offsets[i], f"{prefix} {i} offset", target, log),
                          _as_int(regions[i], f"{prefix} {i} region", target, log)))
    return ios


def _read_npz(np, path: str, target: str, spec: EthosUCompileSpec, log: str) -> VelaPayload:
    # Only the keys the payload needs: the *_quantization keys are pickled object arrays.
    with np.load(path, allow_pickle=False) as data:
        fast = int(np.asarray(data["scratch_fast_shape"]).reshape(-1)[0])
        if fast:
            raise VelaCompileError(
                f"memory mode {spec.memory_mode} on {target} ({spec.system_config}) needs {fast} bytes of "
                f"firmware-provided fast scratch (Vela region 2), which the payload cannot describe; use "
                f"memory_mode='Shared_Sram' or 'Sram_Only' (ExecuTorch's defaults for the U55 and U85)",
                target=target, log=log)
        scratch = int(np.asarray(data["scratch_shape"]).reshape(-1)[0])
        cmd = data["cmd_data"].tobytes()
        if not cmd.startswith(COMMAND_STREAM_MAGIC):
            raise VelaCompileError(f"Vela's command stream for {target} does not start with "
                                   f"{COMMAND_STREAM_MAGIC!r} (got {cmd[:4]!r}); is --output-format=raw set and "
                                   f"the Vela version 5.x ({vela_version()})?", target=target, log=log)
        return VelaPayload(
            cmd_data=cmd,
            weight_data=data["weight_data"].tobytes(),
            scratch_size=_as_int(scratch, "scratch size", target, log, lo=0, hi=2 ** 32 - 1),
            inputs=_read_ios(data, "input", target, log),
            outputs=_read_ios(data, "output", target, log),
        )


def _number(text: str):
    """``int`` when the CSV cell is an integer, ``float`` when a number, else the text."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def _read_summary(output_dir: str, target: str, log: str) -> dict:
    files = sorted(Path(output_dir).glob(f"{_NET}_summary_*.csv"))
    if not files:
        raise VelaCompileError(f"Vela compiled for {target} but wrote no {_NET}_summary_*.csv; is this Vela 5.x "
                               f"({vela_version()})?", target=target, log=log)
    with open(files[0], newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise VelaCompileError(f"Vela's summary {files[0].name} for {target} is empty", target=target, log=log)
    summary = {k: _number(v) for k, v in rows[0].items() if k is not None}
    missing = [k for k in SUMMARY_KEYS if k not in summary]
    if missing:
        raise VelaCompileError(f"Vela's summary {files[0].name} for {target} lacks {missing}; is this Vela 5.x "
                               f"({vela_version()})?", target=target, log=log)
    return summary


def _read_layers(path: str) -> list:
    """Rows of Vela's per-layer CSV. Vela joins cells with commas without quoting; ``Name`` is the last column,
    so a tensor name containing commas is kept whole by splitting at most ``len(header) - 1`` times."""
    if not os.path.isfile(path):
        return []  # Vela writes it only when its database has a performance table (no NPU operators: no rows)
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    if not lines:
        return []
    header = lines[0].split(",")
    layers = []
    for line in lines[1:]:
        if not line:
            continue
        cells = dict(zip(header, line.split(",", len(header) - 1)))
        values = {}
        for column, name in _LAYER_COLUMNS.items():
            cell = cells.get(column, "")
            if name in ("original_operator", "nng_operator", "target", "name"):
                values[name] = cell
            elif name == "network_percent_cycles":
                values[name] = _float(cell)
            else:
                values[name] = int(_float(cell))
        layers.append(LayerEstimate(**values))
    return layers


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return 0.0


    try:
        import ctypes
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):
        pass
