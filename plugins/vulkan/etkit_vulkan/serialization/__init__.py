"""The Vulkan delegate payload: header (:mod:`.payload`) and VkGraph flatbuffer (:mod:`.graph_builder`)."""
