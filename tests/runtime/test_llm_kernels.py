"""The LLM kernels of runtime-cpp/kernels/llm/: llama::custom_sdpa.out and llama::update_cache.out.

custom_sdpa runs in programs exported from torch (key/value caches as plain user inputs, start_pos read
from a tensor input with .item()) and is compared with etkit.llm.custom_ops.custom_sdpa_reference and
torch's scaled_dot_product_attention. Argument errors the exporter cannot produce (bad head counts,
attn_mask, dropout, dtypes, layouts) use small programs built directly with the flatbuffers classes.
Every error must be a clear exception naming the op, never a crash.
"""
from __future__ import annotations

import math

import flatbuffers
import pytest
import torch
import torch.nn.functional as F

import etkit
from etkit.llm.custom_ops import custom_sdpa_reference, update_cache_reference
from etkit.runtime import EtkitRuntimeError, Runtime

ATOL = RTOL = 1e-5


# ------------------------------------------------------------------ exported programs

class Sdpa(torch.nn.Module):
    def __init__(self, is_causal: bool, scale: float | None):
        super().__init__()
        self.is_causal = is_causal
        self.scale = scale

    def forward(self, q, k, v, pos):
        start = pos[0].item()
        return torch.ops.llama.custom_sdpa(q, k, v, start, None, 0.0, self.is_causal, self.scale)


def _export_sdpa(q, k, v, start_pos, is_causal, scale):
    ep = torch.export.export(Sdpa(is_causal, scale), (q, k, v, torch.tensor([start_pos])))
    buf = etkit.to_edge(ep).to_executorch().buffer
    return Runtime.get().load_program(buf).load_method("forward")


def _torch_sdpa(q, k, v, start_pos, is_causal, scale):
    """torch's SDPA on the first start_pos + S cache rows, kv heads repeated for GQA."""
    seq, heads = q.size(1), q.size(2)
    length = start_pos + seq
    groups = heads // k.size(2)
    qt = q.transpose(1, 2)
    kt = k[:, :length].transpose(1, 2).repeat_interleave(groups, 1)
    vt = v[:, :length].transpose(1, 2).repeat_interleave(groups, 1)
    mask = None
    if is_causal:  # query row i sees key rows 0 .. start_pos + i
        mask = torch.arange(length).unsqueeze(0) <= (torch.arange(seq).unsqueeze(1) + start_pos)
    out = F.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask, scale=scale)
    return out.transpose(1, 2)


# (B, S, H, H_kv, D, max_S, start_pos, is_causal, scale)
SDPA_CASES = [
    pytest.param(1, 1, 4, 2, 16, 300, 0, True, None, id="decode-pos0-gqa"),
    pytest.param(1, 1, 4, 2, 16, 300, 280, True, None, id="decode-pos280-gqa-2tiles"),
    pytest.param(2, 5, 4, 4, 8, 300, 0, True, 0.3, id="prefill-mha-scale"),
    pytest.param(1, 7, 4, 2, 32, 600, 400, True, None, id="prefill-pos400-gqa-3tiles"),
    pytest.param(2, 4, 2, 2, 16, 64, 10, False, None, id="noncausal-mha"),
    pytest.param(1, 3, 4, 2, 16, 520, 250, False, 0.125, id="noncausal-gqa-tile-boundary-scale"),
    pytest.param(1, 3, 4, 1, 20, 40, 2, True, None, id="mqa-odd-head-dim"),
    pytest.param(1, 6, 8, 2, 64, 1030, 1024, True, None, id="prefill-pos1024-5tiles"),
    # groups of 3, 5 (4 + 1) and 6 (4 + 2) query heads per kv head; head dims shorter than a lane block
    pytest.param(1, 2, 6, 2, 24, 300, 100, True, None, id="gqa-groups3"),
    pytest.param(2, 2, 10, 2, 12, 270, 200, False, None, id="gqa-groups5"),
    pytest.param(1, 1, 12, 2, 5, 300, 290, True, 0.7, id="gqa-groups6-headdim5"),
    # scores spread over hundreds: most exponents fall below the vector exp's -87 cut-off (they give 0)
    pytest.param(1, 4, 6, 2, 32, 300, 120, True, 8.0, id="sharp-scores-underflow"),
]


@pytest.mark.parametrize("B,S,H,H_kv,D,max_S,start_pos,is_causal,scale", SDPA_CASES)
def test_custom_sdpa_matches_reference_and_torch(B, S, H, H_kv, D, max_S, start_pos, is_causal, scale):
    torch.manual_seed(B * 1000 + S * 100 + start_pos)
    q = torch.randn(B, S, H, D)
    k = torch.randn(B, max_S, H_kv, D)
    v = torch.randn(B, max_S, H_kv, D)
    method = _export_sdpa(q, k, v, start_pos, is_causal, scale)
    (got,) = method.execute([q, k, v, torch.tensor([start_pos])])
    assert got.shape == (B, S, H, D) and got.dtype == torch.float32
    ref = custom_sdpa_reference(q, k, v, start_pos, None, 0.0, is_causal, scale)
    torch.testing.assert_close(got, ref, atol=ATOL, rtol=RTOL)
    torch.testing.assert_close(got, _torch_sdpa(q, k, v, start_pos, is_causal, scale), atol=ATOL, rtol=RTOL)


_CAPABILITY_CHILD = """
import sys, torch
sys.path.insert(0, {tests!r})
from etkit import _runtime
from test_llm_kernels import SDPA_CASES, _export_sdpa, _torch_sdpa, ATOL, RTOL
print(_runtime.kernel_cpu_capability())
for case in SDPA_CASES:
    B, S, H, H_kv, D, max_S, start_pos, is_causal, scale = case.values
    torch.manual_seed(7)
    q, k, v = torch.randn(B, S, H, D), torch.randn(B, max_S, H_kv, D), torch.randn(B, max_S, H_kv, D)
    (got,) = _export_sdpa(q, k, v, start_pos, is_causal, scale).execute([q, k, v, torch.tensor([start_pos])])
    torch.testing.assert_close(got, _torch_sdpa(q, k, v, start_pos, is_causal, scale), atol=ATOL, rtol=RTOL)
"""


@pytest.mark.parametrize("capability", ["generic", "avx2", "avx512"])
def test_custom_sdpa_every_instruction_set_copy_matches_torch(capability):
    """Each copy of the attention math (attention_<isa>.cpp), forced with ETKIT_CPU_CAPABILITY in a fresh
    process, matches torch's SDPA on every case above; a copy this CPU cannot run is skipped."""
    import os
    import subprocess
    import sys
    from etkit import _runtime
    order = ["generic", "avx2", "avx512"]
    if order.index(capability) > order.index(_runtime.kernel_cpu_capability()):
        pytest.skip(f"this CPU runs at most the {_runtime.kernel_cpu_capability()} copy")
    code = _CAPABILITY_CHILD.format(tests=os.path.dirname(__file__))
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                         env={**os.environ, "ETKIT_CPU_CAPABILITY": capability})
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.splitlines()[0] == capability


@pytest.mark.parametrize("threads", [2, 3])
def test_custom_sdpa_on_the_worker_pool_equals_one_thread(threads):
    """With the runtime's worker pool (set_num_threads), every item is computed as on one thread: the
    outputs are bit-identical, for prefill (many items) and decode past several tiles."""
    from etkit import _runtime
    for B, S, H, H_kv, D, max_S, start_pos in [(2, 37, 8, 2, 32, 600, 300), (1, 1, 12, 4, 16, 1100, 1050)]:
        torch.manual_seed(S)
        q, k, v = torch.randn(B, S, H, D), torch.randn(B, max_S, H_kv, D), torch.randn(B, max_S, H_kv, D)
        method = _export_sdpa(q, k, v, start_pos, True, None)
        args = [q, k, v, torch.tensor([start_pos])]
        try:
            _runtime.set_kernel_threads(1)
            (one,) = method.execute(args)
            _runtime.set_kernel_threads(threads)
            assert _runtime.kernel_threads() == threads
            for _ in range(3):
                (many,) = method.execute(args)
                assert torch.equal(many, one)
        finally:
            _runtime.set_kernel_threads(1)
        torch.testing.assert_close(one, custom_sdpa_reference(q, k, v, start_pos, is_causal=True), atol=ATOL,
                                   rtol=RTOL)


def test_custom_sdpa_start_pos_is_read_at_run_time():
    """One program, several start_pos values (and fresh caches) per execute."""
    torch.manual_seed(0)
    B, S, H, H_kv, D, max_S = 1, 2, 4, 2, 16, 400
    q, k, v = torch.randn(B, S, H, D), torch.randn(B, max_S, H_kv, D), torch.randn(B, max_S, H_kv, D)
    method = _export_sdpa(q, k, v, 0, True, None)
    for start_pos in (0, 1, 255, 256, 300, max_S - S):
        q, k, v = torch.randn(B, S, H, D), torch.randn(B, max_S, H_kv, D), torch.randn(B, max_S, H_kv, D)
        (got,) = method.execute([q, k, v, torch.tensor([start_pos])])
        torch.testing.assert_close(got, custom_sdpa_reference(q, k, v, start_pos, is_causal=True),
                                   atol=ATOL, rtol=RTOL)


def test_custom_sdpa_ignores_cache_rows_past_the_window():
    """Rows at and after start_pos + S (causal: past each query row's position) must not matter, even
    when they hold huge values or NaN."""
    torch.manual_seed(1)
    B, S, H, H_kv, D, max_S, start_pos = 1, 3, 2, 1, 8, 300, 260
    q, k, v = torch.randn(B, S, H, D), torch.randn(B, max_S, H_kv, D), torch.randn(B, max_S, H_kv, D)
    method = _export_sdpa(q, k, v, start_pos, True, None)
    (clean,) = method.execute([q, k, v, torch.tensor([start_pos])])
    k2, v2 = k.clone(), v.clone()
    k2[:, start_pos + S:] = float("nan")
    v2[:, start_pos + S:] = 1e30
    (dirty,) = method.execute([q, k2, v2, torch.tensor([start_pos])])
    assert torch.equal(clean, dirty)
    torch.testing.assert_close(clean, custom_sdpa_reference(q, k, v, start_pos, is_causal=True),
                               atol=ATOL, rtol=RTOL)


def test_custom_sdpa_propagates_nan_to_the_rows_that_see_it():
    """A NaN in a query row, or in a key row inside the window, makes NaN exactly the outputs that attend
    to it (the vector exp must not turn a NaN score into a probability of 0); the other outputs equal
    torch's SDPA on clean inputs. (torch's masked SDPA spreads a NaN key to every query row, masked or
    not, so it is not the reference for which rows are NaN.)"""
    torch.manual_seed(2)
    B, S, H, H_kv, D, max_S, start_pos = 1, 20, 6, 2, 32, 64, 10
    q, k, v = torch.randn(B, S, H, D), torch.randn(B, max_S, H_kv, D), torch.randn(B, max_S, H_kv, D)
    clean = _torch_sdpa(q, k, v, start_pos, True, None)
    q[0, 3, 4, 7] = float("nan")               # query position 3, head 4
    k[0, start_pos + 12, 0, 5] = float("nan")  # seen by query positions 12.. of kv head 0 (heads 0-2)
    (got,) = _export_sdpa(q, k, v, start_pos, True, None).execute([q, k, v, torch.tensor([start_pos])])
    expected_nan = torch.zeros(B, S, H, dtype=torch.bool)
    expected_nan[0, 3, 4] = True
    expected_nan[0, 12:, 0:3] = True
    assert torch.equal(got.isnan().any(-1), expected_nan)
    assert got[expected_nan].isnan().all()
    torch.testing.assert_close(got[~expected_nan], clean[~expected_nan], atol=ATOL, rtol=RTOL)


@pytest.mark.parametrize("start_pos", [299, 1000, -1], ids=["just-past-end", "far-past-end", "negative"])
def test_custom_sdpa_start_pos_out_of_range_at_run_time_raises(start_pos):
    torch.manual_seed(2)
    B, S, H, H_kv, D, max_S = 1, 2, 4, 2, 16, 300
    q, k, v = torch.randn(B, S, H, D), torch.randn(B, max_S, H_kv, D), torch.randn(B, max_S, H_kv, D)
    method = _export_sdpa(q, k, v, 0, True, None)
    with pytest.raises((EtkitRuntimeError, ValueError)) as info:
        method.execute([q, k, v, torch.tensor([start_pos])])
    msg = str(info.value)
    assert "llama::custom_sdpa" in msg and "start_pos" in msg, msg
    # The method still works afterwards.
    (got,) = method.execute([q, k, v, torch.tensor([5])])
    torch.testing.assert_close(got, custom_sdpa_reference(q, k, v, 5, is_causal=True), atol=ATOL, rtol=RTOL)


# ------------------------------------------------------------------ hand-built programs

def _program(op_name: str, values: list, inputs: list[int], outputs: list[int], args: list[int],
             memory: int) -> bytes:
    """One KernelCall of `op_name`.out on `values` (EValueTs; tensors planned in memory id 1)."""
    from etkit.fb.Buffer import BufferT
    from etkit.fb.Chain import ChainT
    from etkit.fb.ExecutionPlan import ExecutionPlanT
    from etkit.fb.Instruction import InstructionT
    from etkit.fb.InstructionArguments import InstructionArguments
    from etkit.fb.KernelCall import KernelCallT
    from etkit.fb.Operator import OperatorT
    from etkit.fb.Program import ProgramT

    kc = KernelCallT()
    kc.opIndex = 0
    kc.args = args
    ins = InstructionT()
    ins.instrArgsType = InstructionArguments.KernelCall
    ins.instrArgs = kc
    chain = ChainT()
    chain.inputs = inputs
    chain.outputs = outputs
    chain.instructions = [ins]
    op = OperatorT()
    op.name = op_name
    op.overload = "out"
    plan = ExecutionPlanT()
    plan.name = "forward"
    plan.values = values
    plan.inputs = inputs
    plan.outputs = outputs
    plan.chains = [chain]
    plan.operators = [op]
    plan.delegates = []
    plan.nonConstBufferSizes = [0, memory]
    program = ProgramT()
    program.version = 0
    program.executionPlan = [plan]
    program.backendDelegateData = []
    empty = BufferT()
    empty.storage = []
    program.constantBuffer = [empty]
    builder = flatbuffers.Builder(1024)
    builder.Finish(program.Pack(builder), file_identifier=b"ET12")
    return bytes(builder.Output())


class _Values:
    """EValueTs with tensors laid out one after the other in memory id 1."""

    def __init__(self):
        self.values: list = []
        self.memory = 0

    def _add(self, kind, val) -> int:
        from etkit.fb.EValue import EValueT

        v = EValueT()
        v.valType = kind
        v.val = val
        self.values.append(v)
        return len(self.values) - 1

    def tensor(self, sizes, scalar_type=None, dim_order=None) -> int:
        from etkit.fb.AllocationDetails import AllocationDetailsT
        from etkit.fb.KernelTypes import KernelTypes
        from etkit.fb.ScalarType import ScalarType
        from etkit.fb.Tensor import TensorT

        scalar_type = ScalarType.FLOAT if scalar_type is None else scalar_type
        t = TensorT()
        t.scalarType = scalar_type
        t.sizes = list(sizes)
        t.dimOrder = list(dim_order if dim_order is not None else range(len(sizes)))
        t.allocationInfo = AllocationDetailsT()
        t.allocationInfo.memoryId = 1
        t.allocationInfo.memoryOffsetLow = self.memory
        t.allocationInfo.memoryOffsetHigh = 0
        element = {ScalarType.FLOAT: 4, ScalarType.HALF: 2, ScalarType.LONG: 8, ScalarType.DOUBLE: 8}[scalar_type]
        self.memory += (math.prod(sizes) * element + 63) // 64 * 64
        return self._add(KernelTypes.Tensor, t)

    def int(self, x: int) -> int:
        from etkit.fb.Int import IntT
        from etkit.fb.KernelTypes import KernelTypes

        return self._add(KernelTypes.Int, IntT(intVal=x))

    def double(self, x: float) -> int:
        from etkit.fb.Double import DoubleT
        from etkit.fb.KernelTypes import KernelTypes

        return self._add(KernelTypes.Double, DoubleT(doubleVal=x))

    def bool(self, x: bool) -> int:
        from etkit.fb.Bool import BoolT
        from etkit.fb.KernelTypes import KernelTypes

        return self._add(KernelTypes.Bool, BoolT(boolVal=x))

    def none(self) -> int:
        from etkit.fb.KernelTypes import KernelTypes
        from etkit.fb.Null import NullT

        return self._add(KernelTypes.Null, NullT())


def _sdpa_method(q_shape, kv_shape, *, scalar_type=None, kv_dim_order=None, mask_shape=None, dropout=0.0,
                 is_causal=True, scale=None, out_is_query=False):
    """forward(query, key, value, start_pos[, attn_mask]) -> llama::custom_sdpa.out(...); with ``out_is_query`` the
    out argument is the query value itself (one planned tensor)."""
    vals = _Values()
    q = vals.tensor(q_shape, scalar_type)
    k = vals.tensor(kv_shape, scalar_type, kv_dim_order)
    v = vals.tensor(kv_shape, scalar_type, kv_dim_order)
    pos = vals.int(0)
    mask = vals.tensor(mask_shape) if mask_shape is not None else vals.none()
    drop = vals.double(dropout)
    causal = vals.bool(is_causal)
    sc = vals.double(scale) if scale is not None else vals.none()
    out = q if out_is_query else vals.tensor(q_shape, scalar_type)
    inputs = [q, k, v, pos] + ([mask] if mask_shape is not None else [])
    buf = _program("llama::custom_sdpa", vals.values, inputs, [out],
                   [q, k, v, pos, mask, drop, causal, sc, out, out], vals.memory)
    return Runtime.get().load_program(buf).load_method("forward")


def _update_cache_method(value_shape, cache_shape, *, scalar_type=None):
    """forward(value, cache, start_pos) -> (placeholder, cache) with llama::update_cache.out."""
    vals = _Values()
    value = vals.tensor(value_shape, scalar_type)
    cache = vals.tensor(cache_shape, scalar_type)
    pos = vals.int(0)
    out = vals.tensor([1], scalar_type)
    buf = _program("llama::update_cache", vals.values, [value, cache, pos], [out, cache],
                   [value, cache, pos, out, out], vals.memory)
    return Runtime.get().load_program(buf).load_method("forward")


def test_hand_built_custom_sdpa_matches_reference():
    """The hand-built program path agrees with the exported one (sanity check of the builder)."""
    torch.manual_seed(3)
    q, k, v = torch.randn(1, 2, 4, 8), torch.randn(1, 270, 2, 8), torch.randn(1, 270, 2, 8)
    method = _sdpa_method([1, 2, 4, 8], [1, 270, 2, 8], scale=0.5)
    (got,) = method.execute([q, k, v, 260])
    torch.testing.assert_close(got, custom_sdpa_reference(q, k, v, 260, is_causal=True, scale=0.5),
                               atol=ATOL, rtol=RTOL)


def _expect_sdpa_error(method, inputs, *words):
    with pytest.raises((EtkitRuntimeError, ValueError)) as info:
        method.execute(inputs)
    msg = str(info.value)
    assert "llama::custom_sdpa" in msg, msg
    for w in words:
        assert w in msg, msg


def test_custom_sdpa_heads_not_a_multiple_of_kv_heads_raises():
    method = _sdpa_method([1, 2, 3, 8], [1, 16, 2, 8])
    _expect_sdpa_error(method, [torch.randn(1, 2, 3, 8), torch.randn(1, 16, 2, 8), torch.randn(1, 16, 2, 8), 0],
                       "3 query heads", "2 key/value heads")


def test_custom_sdpa_shape_mismatches_raise():
    method = _sdpa_method([1, 2, 4, 8], [1, 16, 2, 4])
    _expect_sdpa_error(method, [torch.randn(1, 2, 4, 8), torch.randn(1, 16, 2, 4), torch.randn(1, 16, 2, 4), 0],
                       "head size")
    method = _sdpa_method([2, 2, 4, 8], [1, 16, 2, 8])
    _expect_sdpa_error(method, [torch.randn(2, 2, 4, 8), torch.randn(1, 16, 2, 8), torch.randn(1, 16, 2, 8), 0],
                       "batch")
    method = _sdpa_method([1, 2, 4, 8, 1], [1, 16, 2, 8])
    _expect_sdpa_error(method, [torch.randn(1, 2, 4, 8, 1), torch.randn(1, 16, 2, 8), torch.randn(1, 16, 2, 8), 0],
                       "4-D")


def test_custom_sdpa_start_pos_past_the_cache_raises_in_hand_built_program():
    method = _sdpa_method([1, 4, 2, 8], [1, 16, 2, 8])
    args = [torch.randn(1, 4, 2, 8), torch.randn(1, 16, 2, 8), torch.randn(1, 16, 2, 8)]
    _expect_sdpa_error(method, args + [13], "start_pos 13", "16 rows")
    _expect_sdpa_error(method, args + [-3], "start_pos -3", "negative")
    (got,) = method.execute(args + [12])  # the last valid window still runs
    torch.testing.assert_close(got, custom_sdpa_reference(*args, 12, is_causal=True), atol=ATOL, rtol=RTOL)


def test_custom_sdpa_scale_outside_float32_range_is_refused():
    """A program's scale is a double; one past float32's range (a conversion with undefined behaviour) is refused,
    while the largest float32 still runs."""
    args = [torch.randn(1, 2, 2, 8), torch.randn(1, 16, 2, 8), torch.randn(1, 16, 2, 8), 3]
    _expect_sdpa_error(_sdpa_method([1, 2, 2, 8], [1, 16, 2, 8], scale=1e300), args, "scale 1e+300",
                       "outside float32's range")
    (got,) = _sdpa_method([1, 2, 2, 8], [1, 16, 2, 8], scale=0.25).execute(args)
    torch.testing.assert_close(got, custom_sdpa_reference(*args, is_causal=True, scale=0.25), atol=ATOL, rtol=RTOL)


def test_custom_sdpa_out_sharing_the_query_is_refused():
    """out planned on the query's own bytes (an exact alias, which the load-time overlap check lets through for
    in-place ops) would be written while the query is read: refused instead of wrong numbers."""
    method = _sdpa_method([1, 2, 2, 8], [1, 16, 2, 8], out_is_query=True)
    _expect_sdpa_error(method, [torch.randn(1, 2, 2, 8), torch.randn(1, 16, 2, 8), torch.randn(1, 16, 2, 8), 0],
                       "'out' shares memory with 'query'")


def test_custom_sdpa_attn_mask_and_dropout_are_refused():
    method = _sdpa_method([1, 2, 2, 8], [1, 16, 2, 8], mask_shape=[2, 16])
    _expect_sdpa_error(method, [torch.randn(1, 2, 2, 8), torch.randn(1, 16, 2, 8), torch.randn(1, 16, 2, 8), 0,
                                torch.zeros(2, 16)], "attn_mask")
    method = _sdpa_method([1, 2, 2, 8], [1, 16, 2, 8], dropout=0.1)
    _expect_sdpa_error(method, [torch.randn(1, 2, 2, 8), torch.randn(1, 16, 2, 8), torch.randn(1, 16, 2, 8), 0],
                       "drpout_p")


@pytest.mark.parametrize("B,S,H,H_kv,D,max_S,start_pos,is_causal,scale", [
    SDPA_CASES[1], SDPA_CASES[3], SDPA_CASES[8], SDPA_CASES[10]])
def test_custom_sdpa_float16_matches_the_float32_reference(B, S, H, H_kv, D, max_S, start_pos, is_causal, scale):
    """float16 tensors: products and sums in float32, the output rounded once, so the result is the float32
    reference on the same (float16) values within float16's rounding (atol 2e-3: |out| < 4, step 2^-9)."""
    torch.manual_seed(B * 1000 + S * 100 + start_pos)
    q, k, v = (torch.randn(B, n, h, D).half() for n, h in ((S, H), (max_S, H_kv), (max_S, H_kv)))
    method = _export_sdpa(q, k, v, start_pos, is_causal, scale)
    (got,) = method.execute([q, k, v, torch.tensor([start_pos])])
    assert got.dtype == torch.float16
    ref = custom_sdpa_reference(q.float(), k.float(), v.float(), start_pos, None, 0.0, is_causal, scale)
    torch.testing.assert_close(got.float(), ref, atol=2e-3, rtol=0)


def test_custom_sdpa_other_dtypes_are_refused_naming_the_dtype():
    from etkit.fb.ScalarType import ScalarType

    method = _sdpa_method([1, 2, 2, 8], [1, 16, 2, 8], scalar_type=ScalarType.DOUBLE)
    d = torch.float64
    _expect_sdpa_error(method, [torch.randn(1, 2, 2, 8, dtype=d), torch.randn(1, 16, 2, 8, dtype=d),
                                torch.randn(1, 16, 2, 8, dtype=d), 0], "Double", "'query'", "Float and Half")


def test_custom_sdpa_non_contiguous_cache_is_refused():
    method = _sdpa_method([1, 2, 2, 8], [1, 16, 2, 8], kv_dim_order=[0, 2, 1, 3])
    _expect_sdpa_error(method, [torch.randn(1, 2, 2, 8), torch.randn(1, 16, 2, 8), torch.randn(1, 16, 2, 8), 0],
                       "'key'", "contiguous")


# ------------------------------------------------------------------ update_cache

@pytest.mark.parametrize("B,S,H,D,max_S,start_pos", [
    (1, 1, 2, 8, 300, 0), (1, 1, 2, 8, 300, 299), (2, 5, 3, 4, 40, 17), (1, 7, 2, 16, 7, 0)])
def test_update_cache_writes_the_window_in_place(B, S, H, D, max_S, start_pos):
    torch.manual_seed(4)
    value, cache = torch.randn(B, S, H, D), torch.randn(B, max_S, H, D)
    method = _update_cache_method([B, S, H, D], [B, max_S, H, D])
    placeholder, got = method.execute([value, cache, start_pos])
    expected = cache.clone()
    update_cache_reference(value, expected, start_pos)
    assert placeholder.shape == (1,) and placeholder.item() == 0
    assert torch.equal(got, expected)


def test_update_cache_errors_name_the_op():
    method = _update_cache_method([1, 3, 2, 8], [1, 10, 2, 8])
    value, cache = torch.randn(1, 3, 2, 8), torch.randn(1, 10, 2, 8)
    for pos, words in ((8, ("start_pos 8", "10 rows")), (-1, ("negative",))):
        with pytest.raises((EtkitRuntimeError, ValueError)) as info:
            method.execute([value, cache, pos])
        msg = str(info.value)
        assert "llama::update_cache" in msg and all(w in msg for w in words), msg
    method = _update_cache_method([1, 3, 2, 8], [1, 10, 4, 8])
    with pytest.raises((EtkitRuntimeError, ValueError)) as info:
        method.execute([value, torch.randn(1, 10, 4, 8), 0])
    assert "llama::update_cache" in str(info.value) and "dim 2" in str(info.value), str(info.value)


# ------------------------------------------------------------------ update_cache + custom_sdpa, exported

class CachedAttention(torch.nn.Module):
    """KV caches as mutable buffers, written by llama::update_cache, read by llama::custom_sdpa."""

    def __init__(self, max_S: int, H_kv: int, D: int):
        super().__init__()
        self.register_buffer("k_cache", torch.zeros(1, max_S, H_kv, D))
        self.register_buffer("v_cache", torch.zeros(1, max_S, H_kv, D))

    def forward(self, q, k, v, pos):
        start = pos[0].item()
        torch.ops.llama.update_cache(k, self.k_cache, start)
        torch.ops.llama.update_cache(v, self.v_cache, start)
        return torch.ops.llama.custom_sdpa(q, self.k_cache, self.v_cache, start, None, 0.0, True, None)


@pytest.mark.parametrize("S,H,H_kv,D,max_S", [(1, 4, 2, 16, 64), (130, 4, 2, 16, 400), (3, 2, 2, 8, 12)],
                         ids=["decode-gqa", "chunked-prefill-gqa-tiles", "mha"])
def test_update_cache_then_custom_sdpa_on_buffers_over_several_steps(S, H, H_kv, D, max_S):
    """The caches persist across executes: step t writes rows t*S .. t*S+S-1 and attends over all so far.
    (Uses the emitter's in-place update of mutable buffers, core/etkit/emit/method_emitter.py.)"""
    torch.manual_seed(5)
    model = CachedAttention(max_S, H_kv, D)
    example = (torch.randn(1, S, H, D), torch.randn(1, S, H_kv, D), torch.randn(1, S, H_kv, D), torch.tensor([0]))
    ep = torch.export.export(model, example)
    method = Runtime.get().load_program(etkit.to_edge(ep).to_executorch().buffer).load_method("forward")
    k_cache, v_cache = torch.zeros(1, max_S, H_kv, D), torch.zeros(1, max_S, H_kv, D)
    for start_pos in range(0, max_S - S + 1, S)[:4]:
        q, k, v = torch.randn(1, S, H, D), torch.randn(1, S, H_kv, D), torch.randn(1, S, H_kv, D)
        (got,) = method.execute([q, k, v, torch.tensor([start_pos])])
        update_cache_reference(k, k_cache, start_pos)
        update_cache_reference(v, v_cache, start_pos)
        ref = custom_sdpa_reference(q, k_cache, v_cache, start_pos, is_causal=True)
        torch.testing.assert_close(got, ref, atol=ATOL, rtol=RTOL)
    # A step past the end of the cache fails cleanly, naming update_cache (the first op to see it).
    with pytest.raises((EtkitRuntimeError, ValueError)) as info:
        method.execute([q, k, v, torch.tensor([max_S - S + 1])])
    assert "llama::update_cache" in str(info.value), str(info.value)
