"""QNN compile specs: the target SoC, its HTP architecture and the HTP precision.

ExecuTorch's API (seed page "Qualcomm AI Engine Backend", step 3)::

    backend_options = generate_htp_compiler_spec(use_fp16=not quantized)
    compile_spec = generate_qnn_executorch_compiler_spec(soc_model=QcomChipset.SM8650,
                                                         backend_options=backend_options)
    QnnPartitioner(compile_spec)

The chipset ids and the chipset -> HTP architecture table are Qualcomm's public SoC numbering as ExecuTorch
1.5.1 lists it (``QcomChipset``, ``get_soc_to_htp_arch_map``); ONNX Runtime's QNN execution provider takes
the same ids as its ``soc_model`` option. etkit stores the choice as plain compile specs (one ASCII value per
key, readable in ``etkit inspect``) instead of ExecuTorch's ``qnn_compile_spec`` flatbuffer:

========================  ======================================================================
key                       value
========================  ======================================================================
``qnn_soc_model``         chipset id, decimal (``QcomChipset``; e.g. ``57`` for SM8650)
``qnn_htp_arch``          HTP architecture, decimal (68, 69, 73, 75, 79, 81)
``qnn_precision``         ``quantized`` (QDQ graphs; the default) or ``fp16``
``qnn_performance_mode``  ``QnnExecuTorchHtpPerformanceMode`` value, decimal (a run-time hint)
========================  ======================================================================
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

from etkit.backend import CompileSpec

__all__ = ["QcomChipset", "HtpArch", "QnnExecuTorchHtpPerformanceMode", "QnnExecuTorchBackendOptions",
           "QnnCompileSpec", "generate_htp_compiler_spec", "generate_qnn_executorch_compiler_spec",
           "get_soc_to_htp_arch_map"]


class HtpArch(enum.IntEnum):
    """Hexagon Tensor Processor generations."""

    NONE = 0
    V68 = 68
    V69 = 69
    V73 = 73
    V75 = 75
    V79 = 79
    V81 = 81


class QcomChipset(enum.IntEnum):
    """Qualcomm SoCs with an HTP, by Qualcomm's SoC id (the ``soc_model`` of QNN tools)."""

    UNKNOWN_SM = 0
    SA8295 = 39
    SA8797 = 72
    SC8380XP = 60
    SM8350 = 30
    SM8450 = 36
    SM8475 = 42
    SM8550 = 43
    SM8650 = 57
    SM8750 = 69
    SM8850 = 87
    SSG2115P = 46
    SSG2125P = 58
    SXR1230P = 45
    SXR2230P = 53
    SXR2330P = 75
    QCS9100 = 77
    SAR2230P = 95
    SA8255 = 52
    SW6100 = 96
    QCM6490 = 93
    SM8845 = 97


_SOC_TO_ARCH = {
    "SA8295": HtpArch.V68, "SA8797": HtpArch.V81, "SC8380XP": HtpArch.V73, "SM8350": HtpArch.V68,
    "SM8450": HtpArch.V69, "SM8475": HtpArch.V69, "SM8550": HtpArch.V73, "SA8255": HtpArch.V73,
    "SM8650": HtpArch.V75, "SM8750": HtpArch.V79, "SM8850": HtpArch.V81, "SSG2115P": HtpArch.V73,
    "SSG2125P": HtpArch.V73, "SXR1230P": HtpArch.V73, "SXR2230P": HtpArch.V69, "SXR2330P": HtpArch.V79,
    "QCS9100": HtpArch.V73, "SAR2230P": HtpArch.V81, "SW6100": HtpArch.V81, "QCM6490": HtpArch.V68,
    "SM8845": HtpArch.V81,
}


def get_soc_to_htp_arch_map() -> dict[str, HtpArch]:
    """``{chipset name: HtpArch}`` for every known chipset (a copy)."""
    return dict(_SOC_TO_ARCH)


class QnnExecuTorchHtpPerformanceMode(enum.IntEnum):
    """HTP power/performance votes (a run-time hint; the x86 simulator ignores it)."""

    kHtpDefault = 0
    kHtpSustainedHighPerformance = 1
    kHtpBurst = 2
    kHtpHighPerformance = 3
    kHtpPowerSaver = 4
    kHtpLowPowerSaver = 5
    kHtpHighPowerSaver = 6
    kHtpLowBalanced = 7
    kHtpBalanced = 8


@dataclass(frozen=True)
class QnnExecuTorchBackendOptions:
    """HTP options returned by :func:`generate_htp_compiler_spec`."""

    use_fp16: bool = False
    performance_mode: QnnExecuTorchHtpPerformanceMode = QnnExecuTorchHtpPerformanceMode.kHtpBurst


def generate_htp_compiler_spec(use_fp16: bool, use_dlbc: bool = False, use_multi_contexts: bool = False,
                               use_weight_sharing: bool = False, use_slc_allocator: bool = False,
                               htp_performance_mode: QnnExecuTorchHtpPerformanceMode =
                               QnnExecuTorchHtpPerformanceMode.kHtpBurst) -> QnnExecuTorchBackendOptions:
    """HTP backend options (ExecuTorch's signature).

    Args:
        use_fp16: compile float32 subgraphs to run in fp16 on the HTP (float programs); ``False`` (quantized)
            takes PT2E-quantized programs (``QnnQuantizer``) and runs them in 8/16-bit integer arithmetic.
        use_dlbc, use_multi_contexts, use_weight_sharing, use_slc_allocator: ExecuTorch's on-device
            options; not implemented by etkit's route (one context per partition, no shared spill-fill
            buffer, no weight sharing between graphs), so only ``False`` is accepted.
        htp_performance_mode: power/performance vote recorded in the compile specs.

    Raises:
        NotImplementedError: one of the unimplemented options is ``True``.
    """
    for name, value in (("use_dlbc", use_dlbc), ("use_multi_contexts", use_multi_contexts),
                        ("use_weight_sharing", use_weight_sharing), ("use_slc_allocator", use_slc_allocator)):
        if value:
            raise NotImplementedError(f"generate_htp_compiler_spec({name}=True): etkit's QNN route compiles one "
                                      f"context per partition through ONNX Runtime and has no {name}; leave it False")
    return QnnExecuTorchBackendOptions(bool(use_fp16), QnnExecuTorchHtpPerformanceMode(htp_performance_mode))


@dataclass(frozen=True)
class QnnCompileSpec:
    """The decoded compile specs of one QNN delegate.

    Attributes:
        soc_model: the target chipset.
        htp_arch: its HTP architecture (from the chipset table).
        use_fp16: fp16 precision for float subgraphs instead of quantized QDQ subgraphs.
        performance_mode: HTP performance vote.
    """

    soc_model: QcomChipset = QcomChipset.SM8650
    htp_arch: HtpArch = HtpArch.V75
    use_fp16: bool = False
    performance_mode: QnnExecuTorchHtpPerformanceMode = QnnExecuTorchHtpPerformanceMode.kHtpBurst

    @property
    def precision(self) -> str:
        return "fp16" if self.use_fp16 else "quantized"

    def to_list(self) -> list[CompileSpec]:
        return [CompileSpec("qnn_soc_model", str(int(self.soc_model)).encode()),
                CompileSpec("qnn_htp_arch", str(int(self.htp_arch)).encode()),
                CompileSpec("qnn_precision", self.precision.encode()),
                CompileSpec("qnn_performance_mode", str(int(self.performance_mode)).encode())]

    @classmethod
    def from_list(cls, specs) -> "QnnCompileSpec":
        """Decode ``[CompileSpec]`` (or ``{key: bytes}``) written by :meth:`to_list`.

        Raises:
            ValueError: a QNN key is missing or holds a value that is not one of the documented ones.
        """
        values = dict(specs) if isinstance(specs, dict) else {s.key: s.value for s in specs}
        missing = [k for k in ("qnn_soc_model", "qnn_precision") if k not in values]
        if missing:
            raise ValueError(f"QNN compile specs lack {missing}: build them with "
                             f"generate_qnn_executorch_compiler_spec(soc_model=..., backend_options=...)")
        try:
            soc = QcomChipset(int(bytes(values["qnn_soc_model"]).decode()))
            precision = bytes(values["qnn_precision"]).decode()
            mode = QnnExecuTorchHtpPerformanceMode(int(bytes(values.get("qnn_performance_mode", b"2")).decode()))
        except (ValueError, UnicodeDecodeError) as exc:
            raise ValueError(f"QNN compile specs hold an unknown value: {exc}") from None
        if precision not in ("quantized", "fp16"):
            raise ValueError(f"qnn_precision is {precision!r}; expected 'quantized' or 'fp16'")
        return cls(soc, _SOC_TO_ARCH.get(soc.name, HtpArch.NONE), precision == "fp16", mode)


def generate_qnn_executorch_compiler_spec(soc_model: QcomChipset, backend_options: QnnExecuTorchBackendOptions,
                                          debug: bool = False, saver: bool = False, online_prepare: bool = False,
                                          dump_intermediate_outputs: bool = False, profile_level: int = 0,
                                          shared_buffer: bool = False, is_from_context_binary: bool = False,
                                          op_package_options=None, use_mha2sha: bool = False) -> list[CompileSpec]:
    """Compile specs for ``QnnPartitioner`` (ExecuTorch's signature; seed page "Qualcomm AI Engine Backend").

    Args:
        soc_model: the chipset to compile for (``QcomChipset`` or its name, e.g. ``"SM8650"``); its HTP
            architecture follows from the chipset table.
        backend_options: from :func:`generate_htp_compiler_spec`.
        debug, profile_level, dump_intermediate_outputs: accepted and ignored (ONNX Runtime's logging
            is used; ``ETKIT_QNN_LOG_LEVEL`` at run time).
        saver, online_prepare, shared_buffer, is_from_context_binary, op_package_options, use_mha2sha:
            not implemented by etkit's route; only their defaults are accepted.

    Returns:
        ``[CompileSpec]`` with the keys documented in this module.

    Raises:
        ValueError: an unknown chipset, or a chipset without an HTP architecture in the table.
        NotImplementedError: an unimplemented option is set.
    """
    for name, value in (("saver", saver), ("online_prepare", online_prepare), ("shared_buffer", shared_buffer),
                        ("is_from_context_binary", is_from_context_binary), ("use_mha2sha", use_mha2sha),
                        ("op_package_options", op_package_options)):
        if value:
            raise NotImplementedError(f"generate_qnn_executorch_compiler_spec({name}=...): not implemented by "
                                      f"etkit's QNN route (ahead-of-time HTP context binaries); leave the default")
    soc = _chipset(soc_model)
    arch = _SOC_TO_ARCH.get(soc.name)
    if arch is None:
        raise ValueError(f"unknown SoC model for QNN: {soc_model!r}; known: {', '.join(sorted(_SOC_TO_ARCH))}")
    if not isinstance(backend_options, QnnExecuTorchBackendOptions):
        raise TypeError("backend_options must come from generate_htp_compiler_spec(use_fp16=...)")
    return QnnCompileSpec(soc, arch, backend_options.use_fp16, backend_options.performance_mode).to_list()


def _chipset(soc_model) -> QcomChipset:
    if isinstance(soc_model, str):
        try:
            return QcomChipset[soc_model.upper()]
        except KeyError:
            raise ValueError(f"unknown SoC model for QNN: {soc_model!r}; known: "
                             f"{', '.join(sorted(_SOC_TO_ARCH))}") from None
    try:
        return QcomChipset(int(soc_model))
    except ValueError:
        raise ValueError(f"unknown SoC model for QNN: {soc_model!r}; known: {', '.join(sorted(_SOC_TO_ARCH))}") from None
