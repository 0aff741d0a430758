"""Memory planning: give every non-constant tensor a planned buffer (``mem_id``) and an offset in it.

Seed page "Memory Planning": tensors whose lifetimes do not overlap may share memory. Two algorithms:
``naive`` (every tensor its own range) and ``greedy`` (largest first, each placed at the lowest aligned
offset that overlaps no simultaneously live tensor). Lifetimes are ``[first def, last use]`` in
instruction order, inclusive.

Several arenas (e.g. fast SRAM and DRAM on a microcontroller) come from ExecuTorch's hook: a subclass of
:class:`MemoryPlanningPass` overrides ``run(graph_module, graph_signature)``, sets ``node.meta["spec"].mem_id``
on the nodes it wants elsewhere than buffer 1 (a multi-output node's ``spec`` is a tuple, one per output) and
returns ``super().run(...)``. Each buffer is planned on its own; the program's ``non_const_buffer_sizes``
(``MethodMeta.memory_planned_buffer_sizes``) then lists one size per ``mem_id``. After planning, each
spec's ``mem_offset`` holds the tensor's offset, as in ExecuTorch.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from ..plugins.manager import get_plugin_manager

#: Byte alignment of every planned tensor unless the planner or a plugin asks for more (ExecuTorch's too).
DEFAULT_ALIGNMENT = 16


def planned_alignment(planner_alignment: Optional[int] = None) -> int:
    """The byte alignment of every planned tensor of a program: the largest of :data:`DEFAULT_ALIGNMENT`,
    ``planner_alignment`` (the :class:`MemoryPlanningPass`'s ``alignment``; None: not given) and what the
    installed plugins register through ``etkit_memory_planning_requirements``. The one source of planned
    alignment: emission passes it to :meth:`MemoryPlanningPass.plan`, which computes it when not given.
    """
    requested = [alignment for _, alignment in get_plugin_manager().memory_alignment_requests()]
    return max([DEFAULT_ALIGNMENT, planner_alignment or 1, *requested])


@dataclass(eq=False)
class TensorAllocation:
    """One planned tensor.

    Attributes:
        name: what it is (node name, ``name[i]`` for a tuple element), for reports and errors.
        nbytes: size in bytes (upper bound for dynamic shapes).
        lifetime: ``(first, last)`` instruction positions, inclusive.
        mem_id: planned buffer id (1; 0 is reserved by the format).
        mem_offset: byte offset inside that buffer, set by the planner.
    """

    name: str
    nbytes: int
    lifetime: tuple
    mem_id: int = 1
    mem_offset: Optional[int] = None
    #: the graph node the tensor belongs to and which of its outputs it is (for ``node.meta["spec"]``)
    node: object = None
    output_index: int = 0


@dataclass(eq=False)
class TensorSpec:
    """What memory planning knows of one tensor, kept in ``node.meta["spec"]`` (ExecuTorch's ``TensorSpec``,
    the fields a custom plan uses).

    Attributes:
        dtype, shape: the tensor's (upper-bound shape for dynamic dims).
        nbytes: its size in bytes.
        mem_id: the planned buffer to place it in (None: buffer 1); a custom ``run`` sets it.
        mem_offset: its byte offset in that buffer, set by planning.
    """

    dtype: object
    shape: tuple
    nbytes: int
    mem_id: Optional[int] = None
    mem_offset: Optional[int] = None


@dataclass
class MemoryPlan:
    """Result of planning: ``buffer_sizes[i]`` is the byte size of planned buffer ``i`` (entry 0 is 0)."""

    allocations: list = field(default_factory=list)
    buffer_sizes: list = field(default_factory=lambda: [0])
    algorithm: str = "greedy"

    @property
    def total_bytes(self) -> int:
        return sum(self.buffer_sizes)

    @property
    def unshared_bytes(self) -> int:
        """What the tensors would take without sharing (the naive plan's size, before alignment)."""
        return sum(a.nbytes for a in self.allocations)


def _align(value: int, alignment: int) -> int:
    return (value + alignment - 1) // alignment * alignment


def overlaps(a: TensorAllocation, b: TensorAllocation) -> bool:
    """True if the two tensors are live at the same time."""
    return a.lifetime[0] <= b.lifetime[1] and b.lifetime[0] <= a.lifetime[1]


def plan_naive(allocs: list, alignment: int) -> int:
    """Every tensor its own range, in order; returns the buffer size."""
    offset = 0
    for a in allocs:
        a.mem_offset = offset
        offset = _align(offset + a.nbytes, alignment)
    return offset


def plan_greedy(allocs: list, alignment: int) -> int:
    """Largest tensors first, each at the lowest aligned offset free during its lifetime; returns the size."""
    placed: list = []
    size = 0
    for a in sorted(allocs, key=lambda x: (-x.nbytes, x.lifetime[0], x.name)):
        busy = sorted((p.mem_offset, p.mem_offset + p.nbytes) for p in placed if overlaps(p, a))
        offset = 0
        for start, end in busy:
            if offset + a.nbytes <= start:
                break
            offset = max(offset, _align(end, alignment))
        a.mem_offset = offset
        placed.append(a)
        size = max(size, offset + a.nbytes)
    return _align(size, alignment)


ALGORITHMS: dict = {"naive": plan_naive, "greedy": plan_greedy}


class MemoryPlanningPass:
    """ExecuTorch's ``MemoryPlanningPass`` options.

    Args:
        memory_planning_algo: ``"greedy"`` (default), ``"naive"``, or a callable
            ``(allocations, alignment) -> buffer size`` that sets each allocation's ``mem_offset``.
        alloc_graph_input: plan memory for method inputs (the runtime copies inputs in); when False the
            caller's input memory is used directly.
        alloc_graph_output: plan memory for method outputs; when False the caller must provide output memory.
        alignment: minimum byte alignment of every planned tensor; plugins may raise it
            (``etkit_memory_planning_requirements``). :func:`planned_alignment` gives the one used.
    """

    def __init__(self, memory_planning_algo: "str | Callable" = "greedy", alloc_graph_input: bool = True,
                 alloc_graph_output: bool = True, alignment: int = DEFAULT_ALIGNMENT) -> None:
        if isinstance(memory_planning_algo, str) and memory_planning_algo not in ALGORITHMS:
            raise ValueError(f"unknown memory_planning_algo {memory_planning_algo!r}; use one of "
                             f"{sorted(ALGORITHMS)} or a callable")
        self.memory_planning_algo = memory_planning_algo
        self.alloc_graph_input = alloc_graph_input
        self.alloc_graph_output = alloc_graph_output
        self.alignment = alignment

    def run(self, graph_module, graph_signature=None):
        """ExecuTorch's hook, called on the method's graph before planning (``node.meta["spec"]`` is set on
        every planned tensor's node). The default does nothing; override it to set ``spec.mem_id``."""
        return None

    def plan(self, allocs: list, alignment: Optional[int] = None) -> MemoryPlan:
        """Assign offsets to ``allocs``, each buffer (``mem_id``) planned on its own, and return the plan.

        Args:
            allocs: the :class:`TensorAllocation` of every planned tensor; their ``mem_offset`` is set.
            alignment: the program's alignment (emission passes :func:`planned_alignment`); the larger of it
                and ``self.alignment`` is used. None: :func:`planned_alignment` of ``self.alignment``.
        Raises:
            ValueError: an allocation's ``mem_id`` is not an int >= 1 (names the tensor).
            RuntimeError: a custom algorithm left a tensor without an offset.
        """
        align = planned_alignment(self.alignment) if alignment is None else max(self.alignment, alignment)
        algo = self.memory_planning_algo
        fn = ALGORITHMS[algo] if isinstance(algo, str) else algo
        by_buffer: dict = {}
        for a in allocs:
            if isinstance(a.mem_id, bool) or not isinstance(a.mem_id, int) or a.mem_id < 1:
                raise ValueError(f"tensor {a.name}: mem_id {a.mem_id!r} is not a planned buffer id (an int >= 1; "
                                 f"0 is reserved by the format)")
            by_buffer.setdefault(a.mem_id, []).append(a)
        sizes = [0] * (max(by_buffer, default=0) + 1)
        for mem_id, group in sorted(by_buffer.items()):
            sizes[mem_id] = fn(group, align)
        for a in allocs:
            if a.mem_offset is None:
                raise RuntimeError(f"memory planner {algo!r} left tensor {a.name} without an offset")
        name = algo if isinstance(algo, str) else getattr(algo, "__name__", "custom")
        return MemoryPlan(allocations=list(allocs), buffer_sizes=sizes, algorithm=name)
