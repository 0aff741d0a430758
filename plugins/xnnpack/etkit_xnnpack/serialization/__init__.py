"""The XNNPACK delegate payload: header + flatbuffer graph + constant data."""
from .payload import (CONSTANT_ALIGNMENT, FLATBUFFER_IDENTIFIER, HEADER_MAGIC, XnnHeader, assemble_payload,
                      split_payload)

__all__ = ["CONSTANT_ALIGNMENT", "FLATBUFFER_IDENTIFIER", "HEADER_MAGIC", "XnnHeader", "assemble_payload",
           "split_payload"]
