"""torch dtypes ↔ the format's ``ScalarType`` numbers (schema/scalar_type.fbs)."""
import torch

from ..scalar_types import torch_dtypes

#: torch dtype -> ScalarType, and back (the runtime's types, etkit/scalar_types.py).
DTYPE: dict = torch_dtypes()
SCALAR_TYPE: dict = {v: k for k, v in DTYPE.items()}

#: ExecuTorch's encodings of ``torch.memory_format`` and ``torch.layout`` arguments (exir/tensor.py).
# c10::MemoryFormat's values; the out tensor's dim_order already says the layout, kernels follow it.
MEMORY_FORMAT = {torch.contiguous_format: 0, torch.preserve_format: 1, torch.channels_last: 2,
                 torch.channels_last_3d: 3}
LAYOUT = {torch.strided: 0, torch.sparse_coo: 1}


def scalar_type(dtype: torch.dtype) -> int:
    try:
        return SCALAR_TYPE[dtype]
    except KeyError:
        raise ValueError(f"dtype {dtype} cannot be stored in a .pte") from None


def _example_value(s) -> int:
    """A symbolic size's example value; for a data-dependent one (no example) its upper bound."""
    if s.node.hint is not None:
        return int(s.node.hint)
    try:
        return int(s.node.shape_env.bound_sympy(s.node.expr).upper)
    except (TypeError, AttributeError, OverflowError):
        return 2 ** 31  # unbounded: it only orders strides here


def dim_order(t: torch.Tensor) -> list:
    """Dimension order of a tensor's layout, outermost first (contiguous: ``[0, 1, ..., n-1]``).
    Symbolic strides (dynamic shapes) are ordered by their example values."""
    strides = [s if isinstance(s, int) else _example_value(s) for s in t.stride()]
    return sorted(range(t.dim()), key=lambda d: (-strides[d], d))


def tensor_bytes(tensor: torch.Tensor) -> bytes:
    """The bytes of ``tensor``'s elements in contiguous (row-major) order, as a ``.pte`` or ``.ptd`` stores them."""
    t = tensor.detach().contiguous()
    return t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
