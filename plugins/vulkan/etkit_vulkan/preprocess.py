"""``VulkanBackend``: one partition -> a Vulkan delegate payload (VH00 header + VkGraph flatbuffer; constants
in the program's named data). See :mod:`etkit_vulkan.lowering` for the rewrites and
:mod:`etkit_vulkan.serialization` for the format."""
from __future__ import annotations

from torch.export import ExportedProgram

from etkit.backend import BackendDetails, CompileSpec, PreprocessResult

from .compile_options import VulkanCompileOptions
from .lowering import lower_partition
from .serialization import payload


class VulkanBackend(BackendDetails):
    @staticmethod
    def preprocess(edge_program: ExportedProgram, compile_specs: list[CompileSpec]) -> PreprocessResult:
        """Deterministic: the same partition and specs give the same bytes and named data."""
        options = VulkanCompileOptions.from_compile_specs(compile_specs)
        flatbuffer, named = lower_partition(edge_program, options)
        return PreprocessResult(processed_bytes=payload.pack(flatbuffer), named_data=named)
