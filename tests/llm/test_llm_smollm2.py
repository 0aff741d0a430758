"""SmolLM2-135M-Instruct with its real weights: the fp32 program generates the same 64 greedy tokens as
transformers eager on 5 prompts, through the Python TextLLMRunner and the native etkit_llm_runner, and the
CLI exports and generates from the GGUF file."""
from __future__ import annotations

import subprocess
import sys

import pytest

from etkit.llm import GenerationConfig, LlmConfig, TextLLMRunner, Tokenizer, export_llm

from .conftest import CPU_BACKEND, eager_greedy, smollm2_gguf
from .test_llm_cpp_runner import _ids, _run, llm_runner  # noqa: F401  (llm_runner is a fixture)

PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a small village by the sea,",
    "def fibonacci(n):",
    "Water boils at a temperature of",
    "The three primary colors are",
]



@pytest.fixture(scope="module")
def smollm2_program(smollm2, tmp_path_factory):
    model, tokenizer = smollm2
    path = tmp_path_factory.mktemp("smollm2") / "model.pte"
    export_llm(model, LlmConfig(max_seq_len=32, max_context_len=128, backend=CPU_BACKEND),
               progress=lambda _: None).write_to_file(str(path))
    return str(path)


def test_fp32_greedy_tokens_equal_transformers(smollm2, smollm2_program):
    model, tokenizer_path = smollm2
    runner = TextLLMRunner(smollm2_program, tokenizer_path)
    tokenizer = Tokenizer(tokenizer_path)
    for prompt in PROMPTS:
        ids = tokenizer.encode(prompt)
        runner.reset()
        got, _ = runner.generate_tokens(ids, GenerationConfig(max_new_tokens=64))
        want = eager_greedy(model, ids, 64)
        assert got == want, \
            f"{prompt!r}: first difference at token {next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), None)}"


@pytest.mark.slow
def test_cpp_runner_greedy_tokens_equal_transformers(smollm2, smollm2_program, llm_runner):
    model, tokenizer_path = smollm2
    tokenizer = Tokenizer(tokenizer_path)
    for prompt in PROMPTS:
        ids = tokenizer.encode(prompt)
        out = _run(llm_runner, "--model_path", smollm2_program, "--prompt_tokens", ",".join(map(str, ids)),
                   "--max_new_tokens", "64")
        assert out.returncode == 0, out.stderr
        got, want = _ids(out.stdout), eager_greedy(model, ids, 64)
        assert got == want, \
            f"{prompt!r}: first difference at token {next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), None)}"


def test_text_generation_with_the_chat_template(smollm2, smollm2_program):
    runner = TextLLMRunner(smollm2_program, smollm2[1])
    pieces = []
    text, stats = runner.generate("What is the capital of France?",
                                  GenerationConfig(max_new_tokens=24, apply_chat_template=True), pieces.append)
    assert "Paris" in text and "".join(pieces) == text
    assert stats.prompt_tokens > 10 and stats.time_to_first_token_ms > 0 and stats.decode_tokens_per_s > 0


@pytest.mark.slow
def test_cli_export_and_generate(tmp_path):
    """`etkit llm export` from the GGUF file writes the .pte, its weights in a .ptd (--external-constants) and
    tokenizer.json; `etkit llm generate --data-path` streams the text and prints the stats line."""
    pte = tmp_path / "smollm2.pte"
    export = subprocess.run([sys.executable, "-m", "etkit", "llm", "export", "--model", smollm2_gguf(), "-o", str(pte),
                             "--backend", CPU_BACKEND, "--max-context-len", "96", "--max-seq-len", "32",
                             "--external-constants"], capture_output=True, text=True)
    assert export.returncode == 0, export.stderr
    ptd = tmp_path / "smollm2.ptd"
    assert ptd.stat().st_size > 100 * pte.stat().st_size  # the weights are in the data file
    assert "torch.export:" in export.stderr and (tmp_path / "tokenizer.json").exists()
    assert "<|im_start|>user" in (tmp_path / "chat_turn.json").read_text()  # for etkit_llm_runner --chat
    generate = subprocess.run([sys.executable, "-m", "etkit", "llm", "generate", "--model", str(pte), "--tokenizer",
                               str(tmp_path / "tokenizer.json"), "--data-path", str(ptd), "--prompt",
                               "The capital of France is", "--max-new-tokens", "8"], capture_output=True, text=True)
    assert generate.returncode == 0, generate.stderr
    assert "Paris" in generate.stdout and "decode" in generate.stderr and "tok/s" in generate.stderr
    too_long = subprocess.run([sys.executable, "-m", "etkit", "llm", "generate", "--model", str(pte), "--tokenizer",
                               str(tmp_path / "tokenizer.json"), "--data-path", str(ptd), "--prompt", "word " * 200],
                              capture_output=True, text=True)
    assert too_long.returncode == 2 and "get_max_context_len) is 96" in too_long.stderr
