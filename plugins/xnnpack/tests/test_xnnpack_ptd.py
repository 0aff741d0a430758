"""XNNPACK weights in a .ptd data file: with ExecutorchBackendConfig(external_constants=True) the delegate's
named data (its weights) go to the data file, the .pte keeps the graph, and the delegate reads them from the
mapped file. Outputs are compared with eager (float32, within 1e-4)."""
from __future__ import annotations

import pytest
import torch

runtime = pytest.importorskip("etkit.runtime")
pytest.importorskip("etkit_xnnpack._delegate", reason="etkit-xnnpack's native module is not built")

import etkit  # noqa: E402
from etkit.serialize.ptd import deserialize_ptd  # noqa: E402
from helpers import lower  # noqa: E402


class _Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(256, 512)
        self.b = torch.nn.Linear(512, 64)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def _mapped(path: str) -> bool:
    with open("/proc/self/maps") as f:
        return any(line.rstrip().endswith(path) for line in f)


def test_delegate_weights_come_from_the_mapped_data_file(tmp_path):
    torch.manual_seed(0)
    model = _Mlp().eval()
    x = torch.randn(3, 256)
    with torch.no_grad():
        want = model(x)
    manager, _ = lower(model, (x,))
    program = manager.to_executorch(etkit.ExecutorchBackendConfig(external_constants=True))
    inline = lower(model, (x,))[0].to_executorch()
    weight_bytes = 4 * (256 * 512 + 512 + 512 * 64 + 64)
    assert len(program.buffer) < 64 * 1024 < weight_bytes < len(inline.buffer)
    [name] = program.data_files
    entries = deserialize_ptd(program.data_files[name])
    assert sum(len(e.data) for e in entries.values()) == weight_bytes  # XNNPACK's named data, no layouts
    assert all(e.layout is None for e in entries.values())

    pte = tmp_path / "mlp.pte"
    program.write_to_file(str(pte))
    [ptd] = program.write_tensor_data_to_file(tmp_path)
    loaded = runtime.Runtime.get().load_program(pte, data_path=ptd)
    assert _mapped(ptd)  # read in place, not copied into memory
    out = loaded.load_method("forward").execute([x])[0]
    torch.testing.assert_close(out, want, atol=1e-4, rtol=1e-4)

    with pytest.raises(runtime.EtkitRuntimeError,
                       match=r"stored as named data .* load the program together with its \.ptd"):
        runtime.Runtime.get().load_program(pte).load_method("forward")


def test_named_data_can_stay_in_the_program(tmp_path):
    """external_named_data=False: constants outside, the delegate's weights inside (nothing here is left for the
    data file, so the program has none)."""
    torch.manual_seed(1)
    model = _Mlp().eval()
    x = torch.randn(2, 256)
    manager, _ = lower(model, (x,))
    program = manager.to_executorch(etkit.ExecutorchBackendConfig(external_constants=True, external_named_data=False))
    assert program.data_files == {}
    out = runtime.Runtime.get().load_program(program.buffer).load_method("forward").execute([x])[0]
    with torch.no_grad():
        torch.testing.assert_close(out, model(x), atol=1e-4, rtol=1e-4)
