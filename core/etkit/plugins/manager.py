"""Plugin discovery: one pluggy ``PluginManager("etkit")`` and the backend registry it fills.

Environment switches:
    ETKIT_PLUGINS      comma-separated entry-point names to load (all when unset)
    ETKIT_BLOCK_PLUGINS comma-separated entry-point names never to load
    ETKIT_TRACE_PLUGINS=1 print every hook call to stderr
"""
from __future__ import annotations

import os
import sys
import threading
from importlib import metadata
from typing import Iterable, Optional

import pluggy

from . import hookspecs
from .spec import BackendSpec

ENTRY_POINT_GROUP = "etkit.backends"


class PluginError(RuntimeError):
    """A plugin broke the contract (bad spec, duplicate backend id, incompatible API version)."""


class BackendNotFoundError(LookupError):
    """No installed plugin provides the requested backend."""


def _env_names(var: str) -> Optional[set[str]]:
    raw = os.environ.get(var)
    if raw is None:
        return None
    return {name.strip() for name in raw.split(",") if name.strip()}


class BackendRegistry:
    """The backends registered by plugins, keyed by backend id."""

    def __init__(self) -> None:
        self._specs: dict[str, BackendSpec] = {}
        self._owners: dict[str, str] = {}

    def register(self, spec: BackendSpec, owner: str) -> None:
        if not isinstance(spec, BackendSpec):
            raise PluginError(f"plugin {owner!r} registered {spec!r}, expected an etkit.plugins.BackendSpec")
        major = spec.plugin_api.split(".")[0]
        if major != hookspecs.PLUGIN_API_VERSION.split(".")[0]:
            raise PluginError(
                f"plugin {owner!r} (backend {spec.backend_id!r}, version {spec.version}) was written for etkit plugin "
                f"API {spec.plugin_api}, but this etkit provides plugin API {hookspecs.PLUGIN_API_VERSION}; "
                f"install a version of the plugin built for this etkit")
        if spec.backend_id in self._specs:
            raise PluginError(
                f"backend id {spec.backend_id!r} registered twice: by {self._owners[spec.backend_id]!r} and by "
                f"{owner!r}; uninstall one or block it with ETKIT_BLOCK_PLUGINS")
        self._specs[spec.backend_id] = spec
        self._owners[spec.backend_id] = owner

    def specs(self) -> list[BackendSpec]:
        return [self._specs[k] for k in sorted(self._specs)]

    def owner(self, backend_id: str) -> str:
        return self._owners[backend_id]

    def find(self, name: str) -> list[BackendSpec]:
        """The specs whose backend id or plugin (entry-point) name is ``name``, case-insensitively: what a
        user types (a plugin's name or its backend id); empty when none matches."""
        return [s for s in self.specs() if name.lower() in (s.backend_id.lower(), self.owner(s.backend_id).lower())]

    def names(self) -> list[str]:
        """``"plugin (BackendId)"`` for every registered backend, as error messages list them."""
        return [f"{self.owner(s.backend_id)} ({s.backend_id})" for s in self.specs()]

    def get(self, backend_id: str) -> BackendSpec:
        try:
            return self._specs[backend_id]
        except KeyError:
            known = ", ".join(sorted(self._specs)) or "none"
            raise BackendNotFoundError(
                f"no installed etkit plugin provides backend {backend_id!r} (installed backends: {known}); "
                f"install the plugin that provides it, then run `etkit backends` to check") from None


class EtkitPluginManager:
    """Loads plugins (entry points plus any objects added in-process) and builds the registries."""

    def __init__(self, load_entry_points: bool = True) -> None:
        self.pm = pluggy.PluginManager("etkit")
        self.pm.add_hookspecs(hookspecs)
        self.load_errors: dict[str, str] = {}
        if os.environ.get("ETKIT_TRACE_PLUGINS"):
            self.pm.trace.root.setwriter(lambda msg: sys.stderr.write(f"[etkit plugins] {msg}"))
            self.pm.enable_tracing()
        if load_entry_points:
            self._load_entry_points()
        self._registry: Optional[BackendRegistry] = None

    def _load_entry_points(self) -> None:
        allow, block = _env_names("ETKIT_PLUGINS"), _env_names("ETKIT_BLOCK_PLUGINS") or set()
        for ep in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            if ep.name in block or (allow is not None and ep.name not in allow):
                continue
            if self.pm.get_plugin(ep.name) is not None:
                continue
            # an installed-but-broken plugin is reported (`etkit backends` shows it), not fatal to the others
            try:
                plugin = ep.load()
            except Exception as exc:
                self.load_errors[ep.name] = f"import of {ep.value!r} failed: {type(exc).__name__}: {exc}"
                continue
            try:
                self._register_checked(plugin, ep.name)
            except pluggy.PluginValidationError as exc:
                self.load_errors[ep.name] = f"{ep.value!r} breaks the etkit plugin contract: {exc}"


    def _register_checked(self, plugin: object, name: str) -> None:
        """Register ``plugin`` and check its hooks; a plugin that fails is left unregistered.

        Raises:
            pluggy.PluginValidationError: a hook implementation whose name is not in :mod:`.hookspecs`
                (e.g. ``etkit_register_backend`` without the ``s``) or whose arguments the spec lacks; the
                message names the plugin and the hook, and suggests the closest hook name.
        """
        self.pm.register(plugin, name=name)
        try:
            self.pm.check_pending()
        except pluggy.PluginValidationError as exc:
            self.pm.unregister(name=name)
            raise pluggy.PluginValidationError(exc.plugin, _explain_unknown_hooks(str(exc))) from None

    def add_plugin(self, plugin: object, name: str) -> None:
        """Register an in-process plugin object (tests, notebooks); rebuilds the registries.

        Raises:
            pluggy.PluginValidationError: the plugin implements a hook the contract does not define (the
                plugin is not kept); see :meth:`_register_checked`.
            ValueError: a plugin is already registered under ``name``.
        """
        self._register_checked(plugin, name)
        self._registry = None

    def remove_plugin(self, name: str) -> None:
        plugin = self.pm.get_plugin(name)
        if plugin is not None:
            self.pm.unregister(plugin)
        self._registry = None

    @property
    def registry(self) -> BackendRegistry:
        if self._registry is None:
            registry = BackendRegistry()
            for impl in self.pm.hook.etkit_register_backends.get_hookimpls():
                owner = impl.plugin_name
                impl.function(register=lambda spec, _owner=owner: registry.register(spec, _owner))
            self._registry = registry
        return self._registry

    def memory_alignment_requests(self) -> list[tuple[str, int]]:
        """``[(reason, alignment in bytes), ...]``: what the plugins registered through
        ``etkit_memory_planning_requirements``, in call order (empty when none asks).
        :func:`etkit.passes.memory_planning.planned_alignment` turns them into the alignment used."""
        requests: list[tuple[str, int]] = []
        self.pm.hook.etkit_memory_planning_requirements(
            register=lambda reason, alignment: requests.append((str(reason), int(alignment))))
        return requests

    def memory_alignment(self) -> int:
        """Largest planned-memory alignment any plugin asked for (at least 16 bytes). Kept for existing
        callers; the compiler uses :func:`etkit.passes.memory_planning.planned_alignment`, which also
        counts the memory planner's own ``alignment``."""
        return max([16, *(alignment for _, alignment in self.memory_alignment_requests())])


def _explain_unknown_hooks(message: str) -> str:
    """pluggy's message, plus "did you mean" for each unknown hook name that is close to a real one."""
    import difflib
    import re

    known = [n for n in dir(hookspecs) if n.startswith("etkit_")]
    hints = []
    for unknown in re.findall(r"unknown hook '([^']+)'", message):
        moved = hookspecs.MOVED_TO_BACKEND_SPEC.get(unknown)
        if moved:
            hints.append(f"{unknown!r} is a plugin API 1.x hook; in plugin API {hookspecs.PLUGIN_API_VERSION} it is "
                         f"the BackendSpec field {moved!r} (a function or 'module:function' string without the "
                         f"backend_id argument): move it there and state plugin_api={hookspecs.PLUGIN_API_VERSION!r}, "
                         f"or install a plugin version built for this etkit.")
            continue
        close = difflib.get_close_matches(unknown, known, n=1)
        if close:
            hints.append(f"did you mean {close[0]!r} instead of {unknown!r}?")
    return " ".join([message, *hints, "(the hooks are listed in etkit.plugins.hookspecs)"])


_lock = threading.Lock()
_manager: Optional[EtkitPluginManager] = None


def get_plugin_manager() -> EtkitPluginManager:
    """The process-wide plugin manager, created on first use."""
    global _manager
    with _lock:
        if _manager is None:
            _manager = EtkitPluginManager()
        return _manager


def reset_plugin_manager() -> None:
    """Forget the process-wide manager (the next call rediscovers plugins)."""
    global _manager
    with _lock:
        _manager = None


def get_backend_specs() -> list[BackendSpec]:
    """Every registered backend, sorted by id."""
    return get_plugin_manager().registry.specs()


def get_backend_spec(backend_id: str) -> BackendSpec:
    """The spec for ``backend_id``; raises :class:`BackendNotFoundError` naming the installed ones."""
    return get_plugin_manager().registry.get(backend_id)


def backend_behaviour(backend_id: str, field_name: str):
    """The function in ``BackendSpec.<field_name>`` (e.g. ``"describe_payload"``) of the installed backend
    ``backend_id``, or ``None`` when no installed plugin provides that backend or its spec leaves the field
    unset (the core's default applies).

    Raises:
        ValueError, ImportError, TypeError: as :meth:`etkit.plugins.spec.BackendSpec.resolve`.
    """
    try:
        spec = get_backend_spec(backend_id)
    except BackendNotFoundError:
        return None
    return spec.resolve(field_name)
