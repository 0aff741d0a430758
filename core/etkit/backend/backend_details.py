"""``BackendDetails.preprocess`` and ``PreprocessResult`` (seed page "Backend Delegates")."""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Optional

from torch.export import ExportedProgram

from .compile_spec import CompileSpec


@dataclass
class PreprocessResult:
    """What a backend's ``preprocess`` returns.

    Attributes:
        processed_bytes: the payload handed to the backend's runtime ``init`` (stored in a segment).
        debug_handle_map: optional ``{delegate debug id (int or str): [Edge debug handles]}``: which
            partition nodes (``node.meta["debug_handle"]``) each id the delegate logs at run time
            (``EventTracer::log_delegate_event``) stands for; kept in the program's ``delegate_map`` and
            ETRecord so the Inspector maps delegate events back to nodes (docs/plugins.md).
        named_data: optional ``{key: bytes}`` stored in the program's named data (e.g. weights shared between
            delegates); the runtime exposes it to the backend through its ``NamedDataMap``.
    """

    processed_bytes: bytes
    debug_handle_map: Optional[dict] = None
    named_data: Optional[dict] = field(default=None)


class BackendDetails(ABC):
    """A backend's ahead-of-time half: turns one partition into bytes its runtime understands."""

    @staticmethod
    @abstractmethod
    def preprocess(edge_program: ExportedProgram, compile_specs: list[CompileSpec]) -> PreprocessResult:
        """Compile one partition.

        Args:
            edge_program: the partition as an Edge-dialect ``ExportedProgram``. Its placeholders are the
                partition's constants (parameters, buffers, lifted constants; read them with
                :func:`etkit.backend.utils.get_constant`) then its user inputs, in delegate-argument order;
                its output node lists the partition's outputs in order.
            compile_specs: the partition's :class:`DelegationSpec` compile specs.
        Returns:
            :class:`PreprocessResult`.
        Raises:
            Any exception; ``to_backend`` re-raises it naming the backend and partition.
        """
