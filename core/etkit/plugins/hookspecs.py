"""The etkit plugin contract: every hook a plugin may implement, in one file.

A plugin is a module named by an entry point in the group ``etkit.backends``::

    [project.entry-points."etkit.backends"]
    mybackend = "etkit_mybackend.plugin"

The module implements hooks below with ``@etkit.plugins.hookimpl``. It must be light: no torch import at
module level, because ``etkit backends`` imports every plugin just to list them.

Hooks hand objects to a ``register`` callback; the core owns the registries, checks what it is given and
reports conflicts. A plugin never writes to core globals.

Only hooks every plugin answers are hooks. What belongs to one backend (describing or dumping its payload,
its conformance tolerance, preparation and reference run, its quantizers) is a field of the
:class:`~etkit.plugins.spec.BackendSpec` it registers (plugin API 2.0; 1.x had first-result hooks for
these, which a 2.0 core refuses by name, see :data:`MOVED_TO_BACKEND_SPEC`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import pluggy

if TYPE_CHECKING:  # annotations only: importing the contract imports nothing heavy
    from etkit.plugins.spec import BackendSpec

hookspec = pluggy.HookspecMarker("etkit")

#: Version of this contract. A plugin states the version it was written for in ``BackendSpec.plugin_api``;
#: the core refuses a backend whose major version differs, naming both.
PLUGIN_API_VERSION = "2.0"

#: Plugin API 1.x hooks that became ``BackendSpec`` fields in 2.0: hook name -> field name. A plugin that
#: still implements one is refused with a message naming the field.
MOVED_TO_BACKEND_SPEC = {
    "etkit_describe_payload": "describe_payload",
    "etkit_dump_payload": "dump_payload",
    "etkit_conformance_tolerance": "conformance_tolerance",
    "etkit_conformance_prepare": "conformance_prepare",
    "etkit_conformance_reference_run": "conformance_reference_run",
}


# --- backends ----------------------------------------------------------------------------------------

@hookspec
def etkit_register_backends(register: Callable[[BackendSpec], None]) -> None:
    """Register the backends this plugin provides.

    Called once, when the plugin manager is first built. Call ``register(BackendSpec(...))`` once per
    backend. Every implementation is called (this is not a first-result hook). Registering a
    ``backend_id`` that another plugin already registered is an error reported with both plugins' names.

    :param register: the core's callback; it validates the spec (id, plugin API version) and stores it.
    :returns: nothing; results are ignored.
    """


# --- compilation -----------------------------------------------------------------------------------

@hookspec
def etkit_memory_planning_requirements(register: Callable[[str, int], None]) -> None:
    """Declare alignment needs of planned memory, instead of the core naming any backend.

    Call ``register(reason, alignment_bytes)``; the memory planner aligns every planned tensor to the
    largest alignment registered (power of two, in bytes). Every implementation is called.
    """
