"""``VulkanPartitioner(compile_options)``: the options of seed page "Partitioner API" (Vulkan), and their
compile-spec encoding (one ``CompileSpec`` per option, value bytes as below).

=========================  =====================================================================  =========
option                     meaning                                                                 spec bytes
=========================  =====================================================================  =========
``require_dynamic_shapes``  the model will run with varying input shapes: only ops whose Vulkan     1 byte
                           implementation resizes are delegated (all of this delegate's ops do;
                           the option keeps ExecuTorch's meaning and guards future ops)
``force_fp16``             float32 tensors are computed and stored as float16 inside the delegate;  1 byte
                           inputs and outputs stay float32 (converted at the boundary)
``storage_type_override``  ``"buffer"`` (default) or ``"texture3d"``: how tensors are held on the    1 byte
                           device (``VkStorageType``); a tensor that does not fit the device's 3-D  (0 / 1)
                           image limits stays a buffer
``memory_layout_override`` accepted for compatibility; textures are width-packed (the only layout   -
                           this delegate's shaders read)
=========================  =====================================================================  =========
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from etkit.backend import CompileSpec

from .fb.VkStorageType import VkStorageType

_STORAGE_NAMES = {"buffer": VkStorageType.BUFFER, "texture3d": VkStorageType.TEXTURE_3D,
                  "texture_3d": VkStorageType.TEXTURE_3D}
_KNOWN = {"require_dynamic_shapes", "force_fp16", "storage_type_override", "memory_layout_override",
          "skip_tag_memory_metadata", "small_texture_limits", "downcast_64_bit"}


@dataclass(frozen=True)
class VulkanCompileOptions:
    """Parsed ``compile_options``. Unknown keys raise so a typo never silently does nothing."""

    require_dynamic_shapes: bool = False
    force_fp16: bool = False
    storage_type: int = VkStorageType.BUFFER

    @classmethod
    def parse(cls, options: Optional[Mapping[str, Any]]) -> "VulkanCompileOptions":
        """Raises:
            ValueError: an unknown option or an unknown storage type (the message lists the known ones).
        """
        options = dict(options or {})
        unknown = set(options) - _KNOWN
        if unknown:
            raise ValueError(f"VulkanPartitioner: unknown compile option(s) {sorted(unknown)}; known: {sorted(_KNOWN)}")
        storage = options.get("storage_type_override", VkStorageType.BUFFER)
        if isinstance(storage, str):
            if storage.lower() not in _STORAGE_NAMES:
                raise ValueError(f"VulkanPartitioner: storage_type_override {storage!r} is not one of "
                                 f"{sorted(_STORAGE_NAMES)}")
            storage = _STORAGE_NAMES[storage.lower()]
        elif hasattr(storage, "value"):  # an enum such as ExecuTorch's VkStorageType
            storage = int(storage.value)
        if storage not in (VkStorageType.BUFFER, VkStorageType.TEXTURE_3D):
            raise ValueError(f"VulkanPartitioner: storage_type_override {storage!r} is not supported "
                             f"(buffer or texture3d)")
        return cls(require_dynamic_shapes=bool(options.get("require_dynamic_shapes", False)),
                   force_fp16=bool(options.get("force_fp16", False)), storage_type=int(storage))

    def to_compile_specs(self) -> list[CompileSpec]:
        return [CompileSpec("require_dynamic_shapes", bytes([int(self.require_dynamic_shapes)])),
                CompileSpec("force_fp16", bytes([int(self.force_fp16)])),
                CompileSpec("storage_type_override", bytes([self.storage_type]))]

    @classmethod
    def from_compile_specs(cls, specs: Sequence[CompileSpec]) -> "VulkanCompileOptions":
        values = {s.key: bytes(s.value) for s in specs}

        def flag(key: str) -> bool:
            return bool(values.get(key, b"\x00")[:1] == b"\x01")

        storage = values.get("storage_type_override", bytes([VkStorageType.BUFFER]))
        return cls(require_dynamic_shapes=flag("require_dynamic_shapes"), force_fp16=flag("force_fp16"),
                   storage_type=storage[0] if storage else VkStorageType.BUFFER)
