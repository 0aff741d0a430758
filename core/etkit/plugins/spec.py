"""``BackendSpec``: what a plugin tells the core about one backend."""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Union

from .hookspecs import PLUGIN_API_VERSION


@dataclass(frozen=True)
class Availability:
    """Whether a backend can run on this machine; ``reason`` says why not (and what to do)."""

    available: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return self.available


def _always_available() -> Availability:
    return Availability(True)


@dataclass(frozen=True)
class BackendSpec:
    """One backend, as a plugin registers it through ``etkit_register_backends``.

    Class-valued fields are given as ``"module:attribute"`` strings so that listing plugins imports nothing
    heavy; :meth:`load_backend_details`, :meth:`load_partitioner` and :meth:`load_quantizer` import them.

    Attributes:
        backend_id: the id stored in ``BackendDelegate.id`` of a ``.pte`` (e.g. ``"MyBackend"``); must
            match the id the backend's C++ delegate registers under.
        backend_details: ``"module:Class"`` of the :class:`etkit.backend.BackendDetails` subclass
            whose ``preprocess`` turns a partition into bytes.
        partitioners: ``{public name: "module:Class"}`` of the backend's partitioners.
        quantizers: ``{public name: "module:Class"}`` of the backend's PT2E quantizers.
        runtime_module: module whose import registers the C++ delegate into the Python runtime
            (``None`` if the backend has no runtime here).
        cmake_package: name of the CMake package for static linking into a native runner.
        cmake_target: the package's static delegate library target (default ``<cmake_package>::delegate``).
        register_function: the ``extern "C"`` function the native runner calls to register it.
        plugin_api: version of :mod:`etkit.plugins.hookspecs` the plugin was written for.
        version: the plugin distribution's version, shown by ``etkit backends``.
        availability: callable returning :class:`Availability` on this machine.
        runs_everywhere: ``False`` for a backend that exists only on some platforms or hardware (an
            OS framework, a vendor NPU). ``ExecutorchBackendConfig(delegate_fallback=True)`` gives every
            method that delegates to such a backend a twin lowered without it, which the runtime runs
            when the backend is unavailable (docs/fallback.md).

    Per-backend behaviour of the tools (plugin API 2.0; in 1.x these were first-result hooks). Each is
    ``None`` (the core's default), a callable, or a ``"module:function"`` string imported on first use
    (:meth:`resolve`), so listing plugins stays light:

        describe_payload: ``(processed: bytes, compile_specs: dict[str, bytes]) -> list[str]``: lines
            ``etkit inspect`` prints under each of this backend's delegates (the compiled graph's name,
            target, inputs/outputs, op counts). An exception is shown as "could not describe", never fails
            the inspection. Default: only the payload's size.
        dump_payload: ``(processed, compile_specs, directory: str, stem: str) -> list[str]``: write one
            payload as the files the vendor's tools read, for ``etkit inspect --dump DIR``; returns the paths
            written (``stem`` is ``<method>_<delegate index>``, unique per delegate). Default: the raw payload
            as ``<stem>.<backend_id>.bin``.
        conformance_tolerance: ``(dtype: torch.dtype) -> tuple[float, float] | None``: ``(atol, rtol)`` for
            comparing an output of ``dtype`` with eager in the conformance suite; ``None`` keeps the
            default (``etkit.conformance.checks.DEFAULT_TOLERANCES``: 1e-4 for float32, 1e-2 for
            float16/bfloat16, exact for integers).
        conformance_prepare: ``(module: torch.nn.Module, example_inputs: tuple[torch.Tensor, ...]) ->
            torch.nn.Module | None``: the module the suite exports instead of a case's float module (a
            backend that runs only quantized programs returns it quantized with its own PT2E quantizer,
            calibrated on ``example_inputs``); eager outputs then come from the returned module.
        conformance_reference_run: ``(program: EdgeProgramManager, inputs: tuple[torch.Tensor, ...]) ->
            list[torch.Tensor] | None``: run the lowered program's ``"forward"`` on a host-side model of the
            hardware (a vendor reference model or simulator), for the suite's "reference" mode when the
            hardware is absent.
    """

    backend_id: str
    backend_details: str
    partitioners: dict = field(default_factory=dict)
    quantizers: dict = field(default_factory=dict)
    runtime_module: Optional[str] = None
    cmake_package: Optional[str] = None
    cmake_target: Optional[str] = None
    register_function: Optional[str] = None
    plugin_api: str = PLUGIN_API_VERSION
    version: str = "unknown"
    availability: Callable[[], Availability] = _always_available
    runs_everywhere: bool = True
    describe_payload: Union[None, str, Callable[..., Any]] = None
    dump_payload: Union[None, str, Callable[..., Any]] = None
    conformance_tolerance: Union[None, str, Callable[..., Any]] = None
    conformance_prepare: Union[None, str, Callable[..., Any]] = None
    conformance_reference_run: Union[None, str, Callable[..., Any]] = None

    def is_available(self) -> Availability:
        """Ask the plugin whether this backend can run here; an exception counts as unavailable."""
        try:
            result = self.availability()
        except Exception as exc:  # a broken probe must not hide the backend from the listing
            return Availability(False, f"availability check raised {type(exc).__name__}: {exc}")
        if isinstance(result, Availability):
            return result
        ok, reason = result if isinstance(result, tuple) else (bool(result), "")
        return Availability(bool(ok), reason)

    def load_backend_details(self):
        """Import and return the ``BackendDetails`` class."""
        return load_object(self.backend_details)

    def load_partitioner(self, name: str):
        """Import and return the partitioner class registered as ``name`` in :attr:`partitioners`.

        Raises:
            KeyError: no partitioner of that name; the message lists the backend's partitioners.
        """
        return load_object(self._named(self.partitioners, name, "partitioner"))

    def load_quantizer(self, name: Optional[str] = None):
        """Import and return the PT2E quantizer class registered as ``name`` in :attr:`quantizers` (the first
        one when ``name`` is ``None``), e.g. to quantize a model for this backend before ``torch.export``.

        Raises:
            KeyError: the backend registers no quantizer, or none of that name (the message lists them).
        """
        if name is None:
            if not self.quantizers:
                raise KeyError(f"backend {self.backend_id!r} registers no quantizer in its BackendSpec")
            name = next(iter(self.quantizers))
        return load_object(self._named(self.quantizers, name, "quantizer"))

    def _named(self, table: dict, name: str, kind: str) -> str:
        try:
            return table[name]
        except KeyError:
            raise KeyError(f"backend {self.backend_id!r} has no {kind} {name!r}; it registers "
                           f"{', '.join(table) or 'none'}") from None

    def resolve(self, field_name: str) -> Optional[Callable[..., Any]]:
        """The callable in per-backend behaviour field ``field_name`` (``describe_payload``, ``dump_payload``,
        ``conformance_tolerance``, ``conformance_prepare``, ``conformance_reference_run``), importing a
        ``"module:function"`` string on first use; ``None`` when the plugin leaves the core's default.

        Raises:
            ValueError: ``field_name`` is not one of those fields.
            ImportError: the string names a module or function that does not exist.
            TypeError: the field (or what the string names) is not callable.
        """
        if field_name not in BEHAVIOUR_FIELDS:
            raise ValueError(f"{field_name!r} is not a per-backend behaviour field of BackendSpec "
                             f"({', '.join(BEHAVIOUR_FIELDS)})")
        value = getattr(self, field_name)
        if value is None:
            return None
        function = load_object(value) if isinstance(value, str) else value
        if not callable(function):
            raise TypeError(f"BackendSpec({self.backend_id!r}).{field_name} is {function!r}, which is not callable; "
                            f"give a function or a 'module:function' string")
        return function


#: The ``BackendSpec`` fields that hold per-backend behaviour of the tools (see :class:`BackendSpec`).
BEHAVIOUR_FIELDS = ("describe_payload", "dump_payload", "conformance_tolerance", "conformance_prepare",
                    "conformance_reference_run")


def load_object(ref: str):
    """Import ``"package.module:Attribute"`` and return the attribute.

    Raises:
        ImportError: naming the reference when the module or attribute is missing.
    """
    module_name, _, attr = ref.partition(":")
    module = importlib.import_module(module_name)
    try:
        return getattr(module, attr) if attr else module
    except AttributeError:
        raise ImportError(f"{ref!r}: module {module_name!r} has no attribute {attr!r}") from None


def distribution_version(name: str) -> str:
    """The installed version of distribution ``name`` (for ``BackendSpec.version``), or ``"unknown"`` in a
    source checkout where it is not installed."""
    try:
        from importlib.metadata import version
        return version(name)
    except Exception:
        return "unknown"
