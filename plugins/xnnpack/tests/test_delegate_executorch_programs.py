"""ExecuTorch-made XNNPACK programs run through etkit's runtime and the etkit XNNPACK delegate.

The programs come from ExecuTorch 1.5.1 itself (``scripts/et_make_samples.py`` run in the oracle
environment of ``tests/interop/oracle.py``, in a separate process), together with torch-eager outputs
for the same inputs. So these tests prove that the delegate reads ExecuTorch's XNNPACK payload (XH00
header, XN01 flatbuffer, weights as named data keyed by sha256) and computes what eager computes.

Tolerance: XNNPACK's fp32 kernels reorder sums, so outputs are compared with
atol = 1e-4 * (max - min of the eager output), rtol = 0.

Skipped, with the reason, when the oracle cannot be made (e.g. PyPI unreachable) or the plugin's
native module is not built.
"""
from __future__ import annotations

import importlib.util
import struct
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.oracle

runtime = pytest.importorskip("etkit.runtime")
pytest.importorskip("etkit_xnnpack._delegate", reason="etkit-xnnpack's native module is not built")

REPO_ROOT = Path(__file__).resolve().parents[3]
MAKE_SAMPLES = REPO_ROOT / "scripts" / "et_make_samples.py"
SAMPLES = ("mlp_xnnpack", "mobilenet_v2_xnnpack")


def _load_oracle_module():
    spec = importlib.util.spec_from_file_location("etkit_interop_oracle", REPO_ROOT / "tests" / "interop" / "oracle.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def et_samples(tmp_path_factory) -> Path:
    """Directory with NAME.pte (made by ExecuTorch) and NAME.pt (eager inputs/outputs) per sample."""
    if not MAKE_SAMPLES.exists():
        pytest.skip(f"{MAKE_SAMPLES} is missing")
    oracle = _load_oracle_module()
    out = tmp_path_factory.mktemp("et_samples")
    try:
        oracle.run_in_oracle(MAKE_SAMPLES, out, "--only", *SAMPLES)
    except oracle.OracleError as exc:
        pytest.fail(f"the ExecuTorch oracle could not make the sample programs: {str(exc)[:500]}")
    return out


def _reference(samples: Path, name: str):
    ref = torch.load(samples / f"{name}.pt")
    return list(ref["inputs"]), list(ref["outputs"])


def _assert_matches_eager(actual, expected):
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        spread = (e.max() - e.min()).item()
        torch.testing.assert_close(a, e, atol=1e-4 * spread, rtol=0)


def _execute(pte: Path, inputs):
    method = runtime.Runtime.get().load_program(pte).load_method("forward")
    return method.execute(inputs)


@pytest.mark.parametrize("name", SAMPLES)
def test_executorch_program_runs_on_etkit_xnnpack_and_matches_eager(et_samples, name):
    inputs, expected = _reference(et_samples, name)
    actual = _execute(et_samples / f"{name}.pte", inputs)
    _assert_matches_eager(actual, expected)


def test_mobilenet_v2_gives_same_result_with_two_threads(et_samples):
    inputs, expected = _reference(et_samples, "mobilenet_v2_xnnpack")
    rt = runtime.Runtime.get()
    rt.set_backend_option("XnnpackBackend", "num_threads", 2)
    try:
        actual = _execute(et_samples / "mobilenet_v2_xnnpack.pte", inputs)
    finally:
        rt.set_backend_option("XnnpackBackend", "num_threads", 1)
    _assert_matches_eager(actual, expected)


def _sample_module(name: str) -> torch.nn.Module:
    """The eager module a sample was made from (et_make_samples.py builds it from fixed seeds)."""
    spec = importlib.util.spec_from_file_location("etkit_et_make_samples", MAKE_SAMPLES)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.SAMPLES[name][0]()


def test_one_loaded_method_follows_new_inputs_on_every_execute(et_samples):
    inputs, expected = _reference(et_samples, "mlp_xnnpack")
    model = _sample_module("mlp_xnnpack")
    with torch.no_grad():
        torch.testing.assert_close(model(*inputs), expected[0])  # same weights as the program
    method = runtime.Runtime.get().load_program(et_samples / "mlp_xnnpack.pte").load_method("forward")
    g = torch.Generator().manual_seed(5)
    for _ in range(3):
        x = torch.randn(inputs[0].shape, generator=g) * 3
        with torch.no_grad():
            want = model(x)
        _assert_matches_eager(method.execute([x]), [want])


# ------------------------------------------------------------------------------- corrupt payloads

def _xnnpack_payload_offset(pte: bytes) -> int:
    """Offset of the (only) XNNPACK payload in a .pte: 4 bytes before its "XH00" magic."""
    at = pte.find(b"XH00")
    assert at >= 4 and pte.find(b"XH00", at + 1) == -1, "expected exactly one XNNPACK payload"
    return at - 4


def _corrupted(pte: bytes, offset: int, new: bytes) -> bytes:
    return pte[:offset] + new + pte[offset + len(new):]


def _load_error(tmp_path, data: bytes) -> str:
    path = tmp_path / "corrupt.pte"
    path.write_bytes(data)
    with pytest.raises(runtime.EtkitRuntimeError) as info:
        runtime.Runtime.get().load_program(path).load_method("forward")
    return str(info.value)


def test_flatbuffer_offset_past_the_payload_is_rejected_with_a_message(et_samples, tmp_path):
    pte = (et_samples / "mlp_xnnpack.pte").read_bytes()
    base = _xnnpack_payload_offset(pte)
    message = _load_error(tmp_path, _corrupted(pte, base + 10, struct.pack("<I", 1 << 30)))
    assert "XnnpackBackend" in message and "flatbuffer offset" in message


def test_unknown_graph_identifier_is_rejected_with_a_message(et_samples, tmp_path):
    pte = (et_samples / "mlp_xnnpack.pte").read_bytes()
    base = _xnnpack_payload_offset(pte)
    (fb_offset,) = struct.unpack_from("<I", pte, base + 10)
    message = _load_error(tmp_path, _corrupted(pte, base + fb_offset + 4, b"QQ99"))
    assert "XnnpackBackend" in message and "QQ99" in message


def test_truncated_flatbuffer_fails_verification(et_samples, tmp_path):
    pte = (et_samples / "mlp_xnnpack.pte").read_bytes()
    base = _xnnpack_payload_offset(pte)
    message = _load_error(tmp_path, _corrupted(pte, base + 14, struct.pack("<I", 64)))
    assert "XnnpackBackend" in message and "verification" in message


def test_every_single_byte_corruption_of_the_graph_fails_cleanly_or_runs(et_samples, tmp_path):
    """No byte of the XNNGraph, when flipped, may crash the process: init either refuses the payload
    with a message naming XnnpackBackend, or builds a runtime that executes."""
    pte = (et_samples / "mlp_xnnpack.pte").read_bytes()
    base = _xnnpack_payload_offset(pte)
    fb_offset, fb_size = struct.unpack_from("<II", pte, base + 10)
    inputs, _ = _reference(et_samples, "mlp_xnnpack")
    path = tmp_path / "flipped.pte"
    rejected = 0
    for i in range(base + fb_offset, base + fb_offset + fb_size):
        data = bytearray(pte)
        data[i] ^= 0xFF
        path.write_bytes(bytes(data))
        try:
            method = runtime.Runtime.get().load_program(path).load_method("forward")
        except runtime.EtkitRuntimeError as exc:
            rejected += 1
            assert str(exc), f"flipping byte {i} gave an empty error message"
            continue
        try:
            method.execute(inputs)
        except runtime.EtkitRuntimeError:
            pass
    assert rejected > 0
