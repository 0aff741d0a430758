"""``EthosUCompileSpec``: which Ethos-U to compile for, and how Vela is called.

The stored form is ExecuTorch 1.5's: a list of :class:`~etkit.backend.CompileSpec` with the keys
``tosa_spec``, ``compile_flags``, ``output_format``, ``preserve_io_quantization`` and ``target`` (plus
``debug_artifact_path`` / ``keep_tosa`` when asked), values UTF-8 text. ``compile_flags`` are the Vela
command-line flags joined by single spaces, ``extra_flags`` first (ExecuTorch's ``arm/ethosu/compile_spec.py``
is the reference for the defaults per target).

Seed pages: "Arm Ethos-U Backend" (compile spec), "Arm Ethos-U Troubleshooting".
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence

from etkit.backend import CompileSpec

#: Accelerator configurations Vela 5.x accepts (``vela --help``, ``--accelerator-config``).
TARGETS = ("ethos-u55-32", "ethos-u55-64", "ethos-u55-128", "ethos-u55-256", "ethos-u65-256", "ethos-u65-512",
           "ethos-u85-128", "ethos-u85-256", "ethos-u85-512", "ethos-u85-1024", "ethos-u85-2048")

#: ``(system config, memory mode, TOSA spec)`` used when the caller leaves them ``None`` (ExecuTorch's defaults,
#: which differ from Vela's own: they need no firmware-provided fast scratch on U55 and U85).
_DEFAULTS = {
    "ethos-u55": ("Ethos_U55_High_End_Embedded", "Shared_Sram", "TOSA-1.0+INT+int16+int4+u55"),
    "ethos-u65": ("Ethos_U65_High_End", "Dedicated_Sram_384KB", "TOSA-1.0+INT+int16+int4+u55"),
    "ethos-u85": ("Ethos_U85_SYS_DRAM_Mid", "Sram_Only", "TOSA-1.0+INT+int16+int4+cf"),
}

#: Vela configuration file, resolved by Vela inside its own wheel (``vela --list-config-files``).
DEFAULT_CONFIG_INI = "Arm/vela.ini"


@dataclass
class EthosUCompileSpec:
    """What an Ethos-U partition is compiled for.

    Args:
        target: Vela accelerator config, e.g. ``"ethos-u55-128"`` (one of :data:`TARGETS`).
        system_config: a system config of ``config_ini`` (e.g. ``"Ethos_U55_High_End_Embedded"``); ``None``
            picks ExecuTorch's default for the target family.
        memory_mode: a memory mode of ``config_ini`` (e.g. ``"Shared_Sram"``); ``None`` likewise.
        extra_flags: more Vela flags, placed before the generated ones (e.g. ``["--optimise", "Size"]``).
        config_ini: Vela ini file; the default is the one Vela ships.
        keep_tosa: store each partition's TOSA flatbuffer in its payload's debug section so that
            ``etkit inspect MODEL --dump DIR`` and :func:`etkit_ethosu.run_on_tosa_reference` can use it from the
            ``.pte`` alone (the payload grows by the TOSA graph's size, weights included).

    Raises:
        ValueError: unknown target, or a flag containing a space (ExecuTorch stores flags space-joined).
    """

    target: str = "ethos-u55-128"
    system_config: Optional[str] = None
    memory_mode: Optional[str] = None
    extra_flags: Sequence[str] = field(default_factory=tuple)
    config_ini: str = DEFAULT_CONFIG_INI
    keep_tosa: bool = False

    def __post_init__(self) -> None:
        if self.target not in TARGETS:
            raise ValueError(f"unknown Ethos-U target {self.target!r}; Vela accepts: {', '.join(TARGETS)}")
        family = self.target.rsplit("-", 1)[0]
        system, memory, tosa = _DEFAULTS[family]
        self.system_config = self.system_config or system
        self.memory_mode = self.memory_mode or memory
        self.tosa_spec = tosa
        self.extra_flags = tuple(self.extra_flags)
        for flag in self.vela_flags():
            if " " in flag or not flag:
                raise ValueError(f"Vela flag {flag!r} is empty or contains a space; the compile spec stores flags "
                                 f"space-joined (as ExecuTorch does), so pass paths without spaces")

    @property
    def is_u55_family(self) -> bool:
        """U55 and U65 share the U55 operator constraints (no INTDIV, no comparisons, ...)."""
        return self.target.startswith(("ethos-u55", "ethos-u65"))

    def vela_flags(self) -> list[str]:
        """The Vela command-line flags, in ExecuTorch's order (``extra_flags`` first)."""
        return [*self.extra_flags, f"--accelerator-config={self.target}", f"--config={self.config_ini}",
                "--output-format=raw", f"--system-config={self.system_config}", f"--memory-mode={self.memory_mode}"]

    def to_list(self) -> list[CompileSpec]:
        """The compile specs stored with each delegate (ExecuTorch's keys and text encoding)."""
        specs = [CompileSpec("tosa_spec", self.tosa_spec.encode()),
                 CompileSpec("compile_flags", " ".join(self.vela_flags()).encode()),
                 CompileSpec("output_format", b"vela"),
                 CompileSpec("preserve_io_quantization", b"False"),
                 CompileSpec("target", self.target.encode())]
        if self.keep_tosa:
            specs.append(CompileSpec("keep_tosa", b"True"))
        return specs

    # ExecuTorch's private spelling, kept for code written against it
    _to_list = to_list

    @classmethod
    def from_list(cls, specs: Sequence[CompileSpec]) -> "EthosUCompileSpec":
        """Rebuild the spec from what :meth:`to_list` stored (also reads ExecuTorch-written lists).

        Raises:
            ValueError: no ``target`` or ``compile_flags`` key, or flags that do not name the target.
        """
        values = {s.key: bytes(s.value).decode() for s in specs}
        if "target" not in values or "compile_flags" not in values:
            raise ValueError(f"not an Ethos-U compile spec list (keys: {sorted(values)}); build it with "
                             f"EthosUCompileSpec(...).to_list()")
        flags = values["compile_flags"].split(" ")
        known = {"--accelerator-config": None, "--config": None, "--system-config": None, "--memory-mode": None}
        extra = []
        for flag in flags:
            name, _, value = flag.partition("=")
            if name in known and known[name] is None:
                known[name] = value
            elif flag != "--output-format=raw":
                extra.append(flag)
        if known["--accelerator-config"] != values["target"]:
            raise ValueError(f"compile_flags name accelerator {known['--accelerator-config']!r} but target is "
                             f"{values['target']!r}")
        return cls(target=values["target"], system_config=known["--system-config"],
                   memory_mode=known["--memory-mode"], extra_flags=extra,
                   config_ini=known["--config"] or DEFAULT_CONFIG_INI,
                   keep_tosa=values.get("keep_tosa") == "True")
