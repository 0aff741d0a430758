"""export_llm + TextLLMRunner on tiny random Llama-family models: generated tokens equal transformers' greedy
generation, the program carries the runner's metadata, and bad requests are refused with clear errors."""
from __future__ import annotations

import pytest
import torch

from etkit.llm import GenerationConfig, GenerationError, LlmConfig, LlmExportError, TextLLMRunner, export_llm
from etkit.llm.model import StaticKVDecoder, UnsupportedModelError

from .conftest import CPU_BACKEND, eager_greedy, tiny_model

PROMPT = [1, 504, 3458, 282, 4649, 314, 731, 1024]  # any ids of the shared vocabulary


def _runner(tmp_path, model, tokenizer, **config) -> TextLLMRunner:
    path = tmp_path / "model.pte"
    export_llm(model, LlmConfig(**config), progress=lambda _: None).write_to_file(str(path))
    return TextLLMRunner(str(path), tokenizer)


@pytest.mark.parametrize("backend", ["portable", CPU_BACKEND])
@pytest.mark.parametrize("model_type", ["llama", "qwen2"])
def test_greedy_tokens_equal_transformers(tmp_path, smollm2, backend, model_type):
    model = tiny_model(model_type)
    runner = _runner(tmp_path, model, smollm2[1], backend=backend, max_seq_len=16, max_context_len=64)
    got, stats = runner.generate_tokens(PROMPT, GenerationConfig(max_new_tokens=24))
    want = eager_greedy(model, PROMPT, 24)
    assert got == want
    assert stats.prompt_tokens == len(PROMPT) and stats.generated_tokens == len(got)


@pytest.mark.parametrize("dynamic", [True, False])
def test_logits_equal_eager_module_chunked_prefill(dynamic):
    """One forward per prompt chunk (dynamic) or per token (static): last-token logits equal the eager
    module's, fp32, atol 1e-4."""
    from etkit.runtime import Runtime
    model = tiny_model("mistral", seed=3, vocab_size=320)
    program = export_llm(model, LlmConfig(max_seq_len=8, max_context_len=40, backend="portable",
                                          enable_dynamic_shape=dynamic), progress=lambda _: None)
    method = Runtime.get().load_program(program.buffer).load_method("forward")
    tokens = torch.randint(0, 320, (1, 21), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        reference = model(tokens).logits[0]
    step = 8 if dynamic else 1
    for start in range(0, 21, step):
        chunk = tokens[:, start:start + step]
        (logits,) = method.execute([chunk, torch.tensor([start])])
        end = start + chunk.shape[1] - 1
        torch.testing.assert_close(logits[0], reference[end], atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("backend,quantize", [("portable", None), (CPU_BACKEND, None), (CPU_BACKEND, "4w")])
def test_fp16_logits_equal_eager_fp16(backend, quantize):
    """dtype='fp16' (weights, activations and KV cache in float16, float32 logits; weight-only 4-bit too):
    every chunk's last-token logits equal the float16 eager module quantized the same way, within 1e-2 of
    the logits' spread (float16 rounds at 2^-11 relative and the two sides round different
    intermediates), and the caller's fp32 model is left as it was."""
    import copy

    from etkit.llm.export import _quantize
    from etkit.runtime import Runtime
    model = tiny_model("llama", seed=5, vocab_size=320)
    config = LlmConfig(max_seq_len=8, max_context_len=40, backend=backend, dtype="fp16", quantize=quantize)
    program = export_llm(model, config, progress=lambda _: None)
    assert next(model.parameters()).dtype == torch.float32
    reference = StaticKVDecoder(copy.deepcopy(model).half(), 40, generate_full_logits=True).eval()
    if quantize:
        _quantize(reference, config)
    method = Runtime.get().load_program(program.buffer).load_method("forward")
    tokens = torch.randint(0, 320, (1, 21), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        want = reference(tokens, torch.tensor([0]))[0]
    for start in range(0, 21, 8):
        chunk = tokens[:, start:start + 8]
        (logits,) = method.execute([chunk, torch.tensor([start])])
        assert logits.dtype == torch.float32
        end = start + chunk.shape[1] - 1
        spread = float(want[end].max() - want[end].min())
        torch.testing.assert_close(logits[0], want[end], atol=1e-2 * spread, rtol=0)


def test_program_metadata(tmp_path, smollm2):
    runner = _runner(tmp_path, tiny_model(), smollm2[1], max_seq_len=16, max_context_len=64, backend="portable")
    meta = runner.metadata
    assert meta["get_max_seq_len"] == 16 and meta["get_max_context_len"] == 64
    assert meta["get_vocab_size"] == 49152 and meta["get_bos_id"] == 1 and meta["get_eos_ids"] == [2]
    assert meta["use_kv_cache"] and meta["use_sdpa_with_kv_cache"] and meta["enable_dynamic_shape"]


def test_kv_cache_is_updated_in_place(tmp_path):
    """The cache update is one llama::update_cache call per cache: no copy of a whole cache per token."""
    from etkit.serialize import deserialize_pte
    program = export_llm(tiny_model(vocab_size=320), LlmConfig(max_seq_len=4, max_context_len=32, backend="portable"),
                         progress=lambda _: None)
    plan = next(p for p in deserialize_pte(program.buffer).program.executionPlan if p.name == b"forward")
    names = [(op.name.decode(), op.overload.decode()) for op in plan.operators]
    calls = [names[i.instrArgs.opIndex] for i in plan.chains[0].instructions if hasattr(i.instrArgs, "opIndex")]
    assert calls.count(("llama::update_cache", "out")) == 4  # 2 layers x (keys, values)
    assert ("aten::copy_", "") not in calls


def test_prompt_longer_than_the_context_is_refused(tmp_path, smollm2):
    runner = _runner(tmp_path, tiny_model(), smollm2[1], max_seq_len=8, max_context_len=16, backend="portable")
    with pytest.raises(GenerationError, match=r"prompt is 20 tokens.*get_max_context_len\) is 16"):
        runner.generate_tokens(list(range(3, 23)), GenerationConfig(max_new_tokens=2))
    got, stats = runner.generate_tokens(list(range(3, 23)),
                                        GenerationConfig(max_new_tokens=5, truncate_prompt=True, ignore_eos=True))
    # the last 15 prompt tokens, then one decode step fills the 16th row: two tokens sampled
    assert stats.prompt_tokens == 15 and len(got) == 2
    assert stats.stop_reason.startswith("context full (16 tokens")


def test_generation_stops_when_the_cache_is_full(tmp_path, smollm2):
    runner = _runner(tmp_path, tiny_model(), smollm2[1], max_seq_len=8, max_context_len=12, backend="portable")
    got, stats = runner.generate_tokens([5, 6, 7, 8], GenerationConfig(max_new_tokens=50, ignore_eos=True))
    assert stats.stop_reason.startswith("context full (12 tokens") and len(got) == 9


def test_tokenizer_of_another_vocabulary_is_refused(tmp_path, smollm2):
    path = tmp_path / "small.pte"
    export_llm(tiny_model(vocab_size=320), LlmConfig(max_seq_len=4, max_context_len=16, backend="portable"),
               progress=lambda _: None).write_to_file(str(path))
    with pytest.raises(GenerationError, match=r"49152 tokens but the program's vocabulary \(get_vocab_size\) is 320"):
        TextLLMRunner(str(path), smollm2[1])


def test_unsupported_architecture_and_options_are_named():
    import transformers
    gpt2 = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=64))
    with pytest.raises(UnsupportedModelError, match="model_type 'gpt2' is not supported"):
        StaticKVDecoder(gpt2, 16)
    with pytest.raises(LlmExportError, match="quantize '3da2w' is unknown"):
        export_llm(tiny_model(vocab_size=64), LlmConfig(quantize="3da2w"))
    with pytest.raises(LlmExportError, match=r"max_seq_len \(64\) exceeds max_context_len \(32\)"):
        export_llm(tiny_model(vocab_size=64), LlmConfig(max_seq_len=64, max_context_len=32))
    with pytest.raises(LlmExportError, match="quantize '8da4w' with dtype 'fp16' is not supported"):
        export_llm(tiny_model(vocab_size=64), LlmConfig(dtype="fp16", quantize="8da4w"))
    with pytest.raises(LlmExportError, match="dtype 'bf16' is unknown"):
        export_llm(tiny_model(vocab_size=64), LlmConfig(dtype="bf16"))
    with pytest.raises(LlmExportError, match="backend 'nosuchnpu' is not installed"):
        export_llm(tiny_model(vocab_size=64), LlmConfig(backend="nosuchnpu"))


def test_quantized_export_leaves_the_callers_model_unchanged():
    model = tiny_model(vocab_size=64)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    export_llm(model, LlmConfig(max_seq_len=4, max_context_len=16, quantize="8da4w", group_size=32,
                                embedding_quantize="8w"), progress=lambda _: None)
    after = model.state_dict()
    assert all(type(after[k]) is torch.Tensor and torch.equal(after[k], v) for k, v in before.items())
