"""Method.execute with numpy arrays: numpy in, numpy out, the same numbers as with torch tensors, and the
dtype/shape checks name both sides."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import etkit
from etkit.runtime import Runtime


class _Model(torch.nn.Module):
    def forward(self, x, ids):
        return torch.nn.functional.relu(x @ x.transpose(0, 1)) + ids.sum(), (ids * 2).to(torch.int32)


def _method():
    example = (torch.randn(3, 4), torch.tensor([1, 2, 3]))
    program = etkit.to_edge(torch.export.export(_Model(), example)).to_executorch().buffer
    return Runtime.get().load_program(program).load_method("forward")


def test_numpy_inputs_give_numpy_outputs_equal_to_eager():
    method = _method()
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    ids = np.array([4, 5, 6], dtype=np.int64)
    y, doubled = method.execute([x, ids])
    assert isinstance(y, np.ndarray) and y.dtype == np.float32 and doubled.dtype == np.int32
    want_y, want_doubled = _Model()(torch.from_numpy(x), torch.from_numpy(ids))
    np.testing.assert_allclose(y, want_y.numpy(), atol=1e-5, rtol=1e-5)
    np.testing.assert_array_equal(doubled, want_doubled.numpy())
    (ty, _) = method.execute([torch.from_numpy(x), torch.from_numpy(ids)])
    assert isinstance(ty, torch.Tensor) and np.array_equal(ty.numpy(), y)


def test_numpy_input_of_the_wrong_dtype_or_shape_is_refused():
    method = _method()
    with pytest.raises(ValueError, match="input 0 expects dtype float32, got float64"):
        method.execute([np.zeros((3, 4)), np.zeros(3, dtype=np.int64)])
    with pytest.raises(ValueError, match=r"input 1 expects shape \[3\], got \[4\]"):
        method.execute([np.zeros((3, 4), dtype=np.float32), np.zeros(4, dtype=np.int64)])


class _ForeignTensor:
    """A DLPack producer that is neither numpy nor torch (as a JAX or CuPy array is to etkit)."""

    def __init__(self, array, device=(1, 0)):
        self._array, self._device = array, device

    def __dlpack__(self, **kwargs):
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._device


def test_dlpack_and_buffer_protocol_inputs_give_numpy_outputs():
    """Any host DLPack tensor or buffer-protocol object is read as numpy (the same numbers as numpy inputs);
    a DLPack tensor on a device is refused, naming the input."""
    import array

    method = _method()
    x = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    ids = np.array([4, 5, 6], dtype=np.int64)
    want = method.execute([x, ids])
    dlpack = method.execute([_ForeignTensor(x), _ForeignTensor(ids)])
    buffers = method.execute([memoryview(x.tobytes()).cast("f", (3, 4)), array.array("q", [4, 5, 6])])
    for got in (dlpack, buffers):
        assert all(isinstance(g, np.ndarray) for g in got)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
    with pytest.raises(ValueError, match=r"input 0: this _ForeignTensor is on DLPack device \(2, 0\), not the host"):
        method.execute([_ForeignTensor(x, device=(2, 0)), ids])
    with pytest.raises(ValueError, match=r"input 1 expects dtype int64, got int32"):
        method.execute([x, array.array("i", [4, 5, 6])])
