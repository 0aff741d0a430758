"""``Partitioner`` and ``PartitionResult`` (seed page "Custom Compiler Passes and Partitioners")."""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch
from torch.export import ExportedProgram

from .compile_spec import DelegationSpec

#: ``node.meta`` key holding the partition tag of a node (ExecuTorch's name).
DELEGATION_TAG = "delegation_tag"


@dataclass
class PartitionResult:
    """What ``Partitioner.partition`` returns.

    Attributes:
        tagged_exported_program: the input program with ``node.meta["delegation_tag"]`` set on every node
            (constants included) that goes to a backend.
        partition_tags: ``{tag: DelegationSpec}`` for every tag used.
    """

    tagged_exported_program: ExportedProgram
    partition_tags: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Rejection:
    """Why one node stays outside a backend: ``reason`` is shown to the user verbatim."""

    node_name: str
    target: str
    reason: str

    def __str__(self) -> str:
        return f"{self.target} (node {self.node_name}): {self.reason}"


@dataclass
class PartitionReport:
    """What a partitioner delegated and what it left out, with reasons.

    Attributes:
        backend_id: the backend the partitioner targets.
        delegated: ``{op name: count}`` of nodes tagged for the backend.
        rejected: one :class:`Rejection` per compute node left outside.
        num_partitions: number of subgraphs (tags) created.
    """

    backend_id: str
    delegated: dict = field(default_factory=dict)
    rejected: list = field(default_factory=list)
    num_partitions: int = 0

    @property
    def num_delegated(self) -> int:
        return sum(self.delegated.values())

    def format(self) -> str:
        lines = [f"{self.backend_id}: {self.num_delegated} ops delegated in {self.num_partitions} partition(s), "
                 f"{len(self.rejected)} left outside"]
        lines += [f"  not delegated: {r}" for r in self.rejected]
        return "\n".join(lines)


class Partitioner(ABC):
    """Tags the nodes of an Edge program that one backend will run.

    Subclasses implement :meth:`partition`; :meth:`ops_to_not_decompose` lets a backend keep composite ops
    (e.g. ``aten.linear``) that ``to_edge_transform_and_lower`` would otherwise decompose.
    """

    def __init__(self, delegation_spec: Optional[DelegationSpec] = None) -> None:
        self.delegation_spec = delegation_spec

    @abstractmethod
    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        """Tag nodes (``node.meta["delegation_tag"]``) and return the tags with their delegation specs.

        Tagged nodes of one tag must form a subgraph whose fusion creates no cycle.
        """

    def ops_to_not_decompose(
        self, ep: ExportedProgram
    ) -> tuple[list[torch._ops.OpOverload], Optional[Callable[[torch.fx.Node], bool]]]:
        """Ops to keep whole during decomposition, and an optional filter deciding per node."""
        return [], None

    def report(self) -> Optional[PartitionReport]:
        """The report of the last :meth:`partition` call, if the partitioner keeps one."""
        return None
