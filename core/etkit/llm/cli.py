"""``etkit llm export`` and ``etkit llm generate``."""
from __future__ import annotations

import os
import sys


def _cmd_export(args) -> int:
    from .export import LlmConfig, LlmExportError, export_llm, load_model
    from .model import UnsupportedModelError
    config = LlmConfig(max_seq_len=args.max_seq_len, max_context_len=args.max_context_len, dtype=args.dtype,
                       quantize=args.quantize, group_size=args.group_size, weight_qparams=args.weight_qparams,
                       embedding_quantize=args.embedding_quantize,
                       use_sdpa_with_kv_cache=not args.no_sdpa_with_kv_cache, backend=args.backend,
                       enable_dynamic_shape=args.dynamic_shape == "on", external_constants=args.external_constants)

    def progress(line: str) -> None:
        print(f"etkit llm export: {line}", file=sys.stderr, flush=True)

    try:
        config.check()
        model, tokenizer = load_model(args.model)
        program = export_llm(model, config, progress=progress)
        os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
        program.write_to_file(args.output)
        written = [args.output]
        if args.external_constants:  # model.pte -> model.ptd beside it
            data_path = os.path.splitext(args.output)[0] + ".ptd"
            [blob] = program.data_files.values()
            with open(data_path, "wb") as f:
                f.write(blob)
            written.append(data_path)
        tokenizer_dir = args.tokenizer_dir or os.path.dirname(os.path.abspath(args.output))
        tokenizer.save_pretrained(tokenizer_dir)
        files = ["tokenizer.json"] + _write_chat_turn(os.path.join(tokenizer_dir, "tokenizer.json"))
    except (LlmExportError, UnsupportedModelError, OSError) as exc:
        print(f"etkit llm export: {exc}", file=sys.stderr)
        return 2
    sizes = " and ".join(f"{path} ({os.path.getsize(path) / 1e6:.1f} MB)" for path in written)
    print(f"wrote {sizes} and the tokenizer to {tokenizer_dir} ({', '.join(files)})")
    return 0


def _write_chat_turn(tokenizer_json: str) -> list:
    """Writes chat_turn.json (for etkit_llm_runner --chat) when the tokenizer has a chat template; the
    files written, as names."""
    from .runner import CHAT_TURN_FILE, GenerationError, Tokenizer
    if not os.path.isfile(tokenizer_json):  # a tokenizer saved in another format
        return []
    tokenizer = Tokenizer(tokenizer_json)
    if not tokenizer.chat_template:
        return []
    try:
        tokenizer.write_chat_turn()
    except GenerationError as exc:  # the Python runner still renders the template itself
        print(f"etkit llm export: no {CHAT_TURN_FILE} (etkit_llm_runner --chat will refuse): {exc}", file=sys.stderr)
        return []
    return [CHAT_TURN_FILE]


def _cmd_generate(args) -> int:
    from .runner import GenerationConfig, GenerationError, TextLLMRunner
    from etkit.runtime import set_num_threads
    try:
        set_num_threads(args.threads)
        runner = TextLLMRunner(args.model, args.tokenizer, data_path=args.data_path)
        config = GenerationConfig(max_new_tokens=args.max_new_tokens, temperature=args.temperature, top_p=args.top_p,
                                  seed=args.seed, echo=args.echo, num_bos=args.num_bos,
                                  apply_chat_template=args.chat, truncate_prompt=args.truncate_prompt)
        _, stats = runner.generate(args.prompt, config,
                                   token_callback=lambda piece: print(piece, end="", flush=True))
    except (GenerationError, OSError, ValueError) as exc:
        print(f"\netkit llm generate: {exc}", file=sys.stderr)
        return 2
    print()
    print(stats.line(), file=sys.stderr)
    return 0


def add_subcommand(subparsers) -> None:
    """Add ``llm export`` / ``llm generate`` to the ``etkit`` command's subparsers."""
    p = subparsers.add_parser("llm", help="export a decoder-only language model and generate text with it")
    sub = p.add_subparsers(dest="llm_command", required=True)
    p = sub.add_parser("export", help="export a Llama-family model (Hugging Face directory or .gguf) to a .pte "
                                      "with a KV cache")
    p.add_argument("--model", required=True, help="a Hugging Face model directory or a .gguf file")
    p.add_argument("-o", "--output", required=True, help="the .pte to write")
    p.add_argument("--tokenizer-dir", default=None,
                   help="where to save tokenizer.json and its chat template (default: beside the .pte)")
    p.add_argument("--backend", default="portable",
                   help="a backend plugin as `etkit backends` lists it (e.g. the CPU delegate), or portable "
                        "(default)")
    p.add_argument("--max-seq-len", type=int, default=128, help="most tokens per forward call (default 128)")
    p.add_argument("--max-context-len", type=int, default=512, help="KV cache rows (default 512)")
    p.add_argument("--dtype", default="fp32", choices=["fp32", "fp16"])
    p.add_argument("--quantize", default=None, choices=["8da4w", "8da8w", "4w", "8w"],
                   help="linear layers' quantization (torchao)")
    p.add_argument("--group-size", type=int, default=32, help="4-bit weight group size (0: per channel)")
    p.add_argument("--weight-qparams", choices=["hqq", "minmax", "gguf"], default="hqq",
                   help="how 4-bit weight scales are chosen: hqq (half-quadratic search, default), minmax, or gguf "
                        "(keep a Q4_1 GGUF file's own 4-bit blocks exactly; int8 output projection sharing the "
                        "8w embedding's bytes)")
    p.add_argument("--embedding-quantize", default=None, help="embedding table quantization: 8w, 4w or '<bits>,<group size>' (e.g. 4,32)")
    p.add_argument("--no-sdpa-with-kv-cache", action="store_true",
                   help="attention by ATen SDPA instead of llama::custom_sdpa")
    p.add_argument("--external-constants", action="store_true",
                   help="keep the weights in a .ptd data file beside the .pte (same name, .ptd)")
    p.add_argument("--dynamic-shape", default="on", choices=["on", "off"],
                   help="on: one forward takes 1..max_seq_len tokens (default); off: one token per call")
    p.set_defaults(fn=_cmd_export)
    p = sub.add_parser("generate", help="generate text from a .pte made by `etkit llm export`")
    p.add_argument("--model", required=True, help="the .pte")
    p.add_argument("--tokenizer", required=True, help="tokenizer.json (or a SentencePiece / tiktoken model)")
    p.add_argument("--data-path", default=None, help="the .ptd data file of a program exported with "
                                                     "--external-constants")
    p.add_argument("--prompt", required=True)
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--temperature", type=float, default=0.0, help="0: greedy (default)")
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--num-bos", type=int, default=0, help="BOS tokens to put before the prompt")
    p.add_argument("--chat", action="store_true", help="wrap the prompt in the tokenizer's chat template")
    p.add_argument("--echo", action="store_true", help="print the prompt before the generated text")
    p.add_argument("--truncate-prompt", action="store_true", help="keep the end of a prompt too long for the cache")
    p.add_argument("--threads", type=int, default=1, help="CPU threads for delegates (default 1)")
    p.set_defaults(fn=_cmd_generate)
