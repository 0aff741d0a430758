"""The etkit plugin contract: every hook a plugin may implement, in one file.

A plugin is a module named by an entry point in the group ``etkit.backends``::

    [project.entry-points."etkit.backends"]
    mybackend = "etkit_mybackend.plugin"

The module implements hooks below with ``@etkit.plugins.hookimpl``. It must be light: no torch import at
module level, because ``etkit backends`` imports every plugin just to list them.

Hooks hand objects to a ``register`` callback; the core owns the registries, checks what it is given and
reports conflicts. A plugin never writes to core globals.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional

import pluggy

if TYPE_CHECKING:  # annotations only: importing the contract imports neither torch nor the compiler
    import torch

    from etkit.program import EdgeProgramManager
    from etkit.plugins.spec import BackendSpec

hookspec = pluggy.HookspecMarker("etkit")

#: Version of this contract. A plugin states the version it was written for in ``BackendSpec.plugin_api``;
#: the core refuses a backend whose major version differs, naming both.
PLUGIN_API_VERSION = "1.0"


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


# --- tools -------------------------------------------------------------------------------------------

@hookspec(firstresult=True)
def etkit_describe_payload(backend_id: str, processed: bytes, compile_specs: dict[str, bytes]) -> Optional[list[str]]:
    """Describe one delegate payload for ``etkit inspect`` (what a vendor's users need to see: the
    compiled graph's name, target, inputs and outputs, op counts, ...).

    First result wins: implementations return ``None`` for backends they do not own. An exception is
    shown as "could not describe" on that delegate, never fails the inspection.

    :param backend_id: the delegate's backend id, e.g. ``"MyBackend"``.
    :param processed: the payload bytes ``preprocess`` produced.
    :param compile_specs: ``{key: value bytes}`` of the delegate's compile specs.
    :returns: a list of lines (no indentation; the tool indents them), or ``None``.
    """


@hookspec(firstresult=True)
def etkit_dump_payload(backend_id: str, processed: bytes, compile_specs: dict[str, bytes], directory: str,
                       stem: str) -> Optional[list[str]]:
    """Write one delegate payload's contents as files a vendor's tools read, for ``etkit inspect --dump DIR``
    (a compiled graph, a kept intermediate representation, ...).

    First result wins: implementations return ``None`` for backends they do not own; the core then writes the
    raw payload as ``<stem>.<backend_id>.bin``.

    :param backend_id: the delegate's backend id.
    :param processed: the payload bytes.
    :param compile_specs: ``{key: value bytes}`` of the delegate's compile specs.
    :param directory: the existing output directory.
    :param stem: a file-name prefix unique to this delegate (``<method>_<delegate index>``).
    :returns: the paths written (a list, may be empty with nothing worth writing), or ``None``.
    """


# --- testing -----------------------------------------------------------------------------------------

@hookspec(firstresult=True)
def etkit_conformance_tolerance(backend_id: str, dtype: torch.dtype) -> Optional[tuple[float, float]]:
    """Declare how far a backend's outputs may be from torch eager in the conformance suite.

    The suite (``pytest --etkit-backend NAME``, :mod:`etkit.conformance`) compares every delegated
    program with eager PyTorch using ``torch.testing.assert_close(atol=..., rtol=...)``. By default
    ``atol = rtol = 1e-4`` for float32 outputs (``1e-2`` for float16/bfloat16, exact for integers);
    a backend that computes with less precision (e.g. fp16 accumulation) says so here instead of
    failing. First result wins: implementations return ``None`` for backends they do not own.

    :param backend_id: the backend under test, e.g. ``"MyBackend"``.
    :param dtype: the ``torch.dtype`` of the output being compared.
    :returns: ``(atol, rtol)`` as floats, or ``None`` to keep the default.
    """


@hookspec(firstresult=True)
def etkit_conformance_prepare(backend_id: str, module: torch.nn.Module,
                              example_inputs: tuple[torch.Tensor, ...]) -> Optional[torch.nn.Module]:
    """Turn a conformance case into the kind of program the backend runs, before it is exported.

    A backend that runs only quantized programs (an int8 NPU) returns the case's module quantized with its
    own quantizer (PT2E ``prepare_pt2e`` + calibration on ``example_inputs`` + ``convert_pt2e``); the suite
    then exports that module and compares the backend with *its* eager outputs (the PT2E reference), using
    the backend's tolerance also for the program's fallback twin. First result wins: implementations
    return ``None`` for backends they do not own (and the case is used as it is).

    :param backend_id: the backend under test.
    :param module: the case's float module (eval mode).
    :param example_inputs: the case's inputs (a tuple of tensors).
    :returns: the module to export instead (a ``torch.nn.Module``/``GraphModule``), or ``None``.
    """


@hookspec(firstresult=True)
def etkit_conformance_reference_run(backend_id: str, program: EdgeProgramManager,
                                    inputs: tuple[torch.Tensor, ...]) -> Optional[list[torch.Tensor]]:
    """Run a lowered program on the host without the backend's hardware, for the conformance suite.

    A backend whose hardware is unavailable here but which has a bit-accurate host model (a vendor
    reference model, a simulator) executes ``program``'s delegates with it; the suite compares the
    result with eager like a real run ("reference" mode). First result wins: implementations return
    ``None`` for backends they do not own.

    :param backend_id: the backend under test.
    :param program: the ``EdgeProgramManager`` after lowering (its ``"forward"`` method).
    :param inputs: the method's user inputs.
    :returns: the method's outputs as a list of tensors, or ``None``.
    """
