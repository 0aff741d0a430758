"""``VulkanBackend``: one partition -> a Vulkan delegate payload (VH00 header + VkGraph flatbuffer; constants
in the program's named data). See :mod:`etkit_vulkan.lowering` for the rewrites and
:mod:`etkit_vulkan.serialization` for the format."""
from __future__ import annotations

from torch.export import ExportedProgram

from etkit.backend import BackendDetails, CompileSpec, PreprocessResult

from .compile_spec import VulkanCompileOptions
from .lowering import lower_partition
from .serialization import payload


class VulkanBackend(BackendDetails):
    @staticmethod
    def preprocess(edge_program: ExportedProgram, compile_specs: list[CompileSpec]) -> PreprocessResult:
        """Deterministic: the same partition and specs give the same bytes and named data.

        ``debug_handle_map``: each payload node's id is the debug handle of the Edge node it came from
        (the anchor of a fused group), and the runtime logs every dispatch of that node with the id, so
        the map is the identity on the partition's handles."""
        options = VulkanCompileOptions.from_compile_specs(compile_specs)
        flatbuffer, named = lower_partition(edge_program, options)
        handles = sorted({n.meta["debug_handle"] for n in edge_program.graph.nodes
                          if isinstance(n.meta.get("debug_handle"), int)})
        return PreprocessResult(processed_bytes=payload.pack(flatbuffer), named_data=named,
                                debug_handle_map={h: [h] for h in handles})
