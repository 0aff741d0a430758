"""``BackendSpec``: what a plugin tells the core about one backend."""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Callable, Optional


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
    heavy; :meth:`load` resolves them.

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
    """

    backend_id: str
    backend_details: str
    partitioners: dict = field(default_factory=dict)
    quantizers: dict = field(default_factory=dict)
    runtime_module: Optional[str] = None
    cmake_package: Optional[str] = None
    cmake_target: Optional[str] = None
    register_function: Optional[str] = None
    plugin_api: str = "1.0"
    version: str = "unknown"
    availability: Callable[[], Availability] = _always_available
    runs_everywhere: bool = True

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
