"""Reading and writing ``.pte`` program files, wire-compatible with ExecuTorch 1.5.

``serialize_pte(PteContents) -> bytes`` and ``deserialize_pte(bytes) -> PteContents``; malformed
input raises ``PteFormatError``. ``etkit.serialize.inspect.format_program`` renders a file for
``etkit inspect``.
"""

from etkit.serialize.errors import PteFormatError
from etkit.serialize.pte import PteContents, deserialize_pte, read_layout, serialize_pte

__all__ = ["PteContents", "PteFormatError", "deserialize_pte", "read_layout", "serialize_pte"]
