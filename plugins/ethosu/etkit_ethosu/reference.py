"""Host-side execution of a lowered program with each Ethos-U delegate run on the TOSA reference model.

No host has an Ethos-U NPU, so this is how a lowering's numerics are checked here: the program's graph
runs in PyTorch eager, and every ``EthosUBackend`` delegate runs its partition's TOSA 1.0 graph on Arm's
TOSA reference model (``tosa_reference_model`` from tosa-tools; bit-exact integer semantics). The TOSA graph
is taken from the payload when it was kept (``EthosUCompileSpec(keep_tosa=True)``), else lowered again from
the delegate's partition. Delegates of other backends run their partition in eager.
"""
from __future__ import annotations

import os
import sys
from typing import Callable, Optional, Sequence

import numpy as np
import torch
from torch.export.graph_signature import InputKind

from .plugin import BACKEND_ID


#: Printed by the reference model for every TOSA 1.0 graph (its serializer is 1.1 draft); harmless.
_VERSION_NOTICE = "WARNING: Different TOSA spec in flatbuffer and serializer versions detected"


class TosaReferenceError(RuntimeError):
    """The TOSA reference model refused a graph or its inputs (message includes its status)."""


def _reference_model():
    try:
        import tosa_reference_model
    except ImportError as exc:
        raise ImportError("running on the TOSA reference model needs tosa-tools: `pip install --no-deps "
                          "tosa-tools==2026.8.0` (see etkit-ethosu's README, \"Set-up notes and limits\")") from exc
    return tosa_reference_model


def run_tosa(flatbuffer: bytes, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Run a TOSA flatbuffer on the reference model.

    Args:
        flatbuffer: a TOSA 1.0 graph (e.g. :attr:`etkit_ethosu.lowering.LoweredTosa.flatbuffer`).
        inputs: numpy arrays in the graph's input order, with its dtypes (int8 for Ethos-U partitions).

    Returns:
        The outputs, in the graph's output order, with their dtypes and shapes.

    Raises:
        TosaReferenceError: the graph is invalid or the model reports an error (its status is quoted).
    """
    from ._capture import CaptureOutput

    model = _reference_model()
    os.environ.setdefault("TOSA_MODEL_NO_BACKTRACE", "1")  # else it attaches gdb on an invalid graph
    error = None
    with CaptureOutput() as captured:  # its C++ prints a version notice on every run
        try:
            outputs, status = model.run(bytes(flatbuffer), [np.ascontiguousarray(a) for a in inputs])
        except ValueError as exc:
            error = exc
    log = "\n".join(line for line in captured.text.splitlines()
                    if line.strip() and not line.startswith(_VERSION_NOTICE))
    if error is not None:
        raise TosaReferenceError(f"the TOSA reference model refused the graph or its inputs: {error}"
                                 + (f"\n{log}" if log else "")) from error
    if "VALID" not in str(status):
        raise TosaReferenceError(f"the TOSA reference model returned status {status}" + (f"\n{log}" if log else ""))
    if log:
        print(log, file=sys.stderr)
    return list(outputs)


def delegate_tosa(lowered) -> bytes:
    """The TOSA flatbuffer of one Ethos-U delegate (``LoweredBackendModule``): kept in its payload, or lowered
    again from its partition."""
    from .payload import unpack
    kept = unpack(lowered.processed_bytes).tosa
    if kept is not None:
        return kept
    from .lowering import lower_to_tosa
    return lower_to_tosa(lowered.original_module).flatbuffer


def _run_delegate(lowered, args, delegates: str, observe):
    if lowered.backend_id != BACKEND_ID or delegates == "eager":
        outputs = tuple(run_exported(lowered.original_module, args))
    else:
        arrays = [a.detach().contiguous().numpy() for a in args]
        outputs = tuple(torch.from_numpy(np.array(o)) for o in run_tosa(delegate_tosa(lowered), arrays))
    if observe is not None:
        observe(lowered, list(args), list(outputs))
    return outputs


def run_exported(ep, inputs: Sequence[torch.Tensor], delegates: str = "tosa",
                 observe: Optional[Callable] = None) -> list[torch.Tensor]:
    """Interpret an edge ``ExportedProgram`` in eager (constants from its state), running its delegate calls.

    Args:
        ep: the program.
        inputs: its user inputs.
        delegates: ``"tosa"``: Ethos-U delegates run on the TOSA reference model; ``"eager"``: they run their
            partition in eager (the PT2E reference). Other backends' delegates always run in eager.
        observe: called as ``observe(lowered_module, args, outputs)`` after each delegate call (for tests and
            debugging: compare a delegate's outputs with its partition's).

    Returns:
        The user outputs.
    """
    from etkit.backend.delegate import executorch_call_delegate

    user = iter(inputs)
    args = []
    for spec in ep.graph_signature.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            args.append(next(user))
        elif spec.target in ep.state_dict:
            args.append(ep.state_dict[spec.target])
        else:
            args.append(ep.constants[spec.target])

    class _Interpreter(torch.fx.Interpreter):
        def call_function(self, target, a, kw):
            if target is executorch_call_delegate:
                return _run_delegate(a[0], a[1:], delegates, observe)
            return super().call_function(target, a, kw)

    with torch.no_grad():
        out = _Interpreter(ep.graph_module).run(*args)
    outputs = list(out) if isinstance(out, (tuple, list)) else [out]
    return [o for o, spec in zip(outputs, ep.graph_signature.output_specs) if spec.kind.name == "USER_OUTPUT"]


def run_on_tosa_reference(program, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Execute a lowered program on the host, Ethos-U delegates on the TOSA reference model.

    Args:
        program: an ``EdgeProgramManager`` after ``to_backend``/``to_edge_transform_and_lower`` (its
            ``"forward"`` method) or an ``ExportedProgram`` with delegate calls.
        inputs: the method's user inputs (the tensors you would pass to the ``.pte``'s ``forward``).

    Returns:
        The method's outputs as a list of tensors.

    Raises:
        TosaReferenceError: the reference model refused a partition's graph.
        ImportError: tosa-tools is not installed.
    """
    ep = program.exported_program() if hasattr(program, "exported_program") else program
    return run_exported(ep, inputs)
