"""``export_llm``: a decoder-only transformer to a ``.pte`` a text runner can drive.

Names follow ExecuTorch's ``export_llm`` / ``LlmConfig`` (seed pages "Exporting LLMs", "Exporting custom
LLMs"): ``max_seq_len``, ``max_context_len``, ``dtype``, ``quantize``, ``group_size``, ``use_kv_cache``,
``use_sdpa_with_kv_cache``, ``enable_dynamic_shape``, ``backend``; the program carries ExecuTorch's runner
metadata as constant methods (``get_max_seq_len``, ``get_max_context_len``, ``get_vocab_size``,
``get_bos_id``, ``get_eos_ids``, ``use_kv_cache``, ``use_sdpa_with_kv_cache``, ``enable_dynamic_shape``, ...).
"""
from __future__ import annotations

import copy
import logging
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch

from .model import StaticKVDecoder

log = logging.getLogger("etkit.llm")

QUANTIZE_MODES = ("8da4w", "8da8w", "4w", "8w")
WEIGHT_QPARAMS = ("hqq", "minmax", "gguf")
DTYPES = {"fp32": torch.float32, "fp16": torch.float16}


class LlmExportError(ValueError):
    """An ``LlmConfig`` that cannot be exported (the message names the option and what to do)."""


@dataclass
class LlmConfig:
    """How :func:`export_llm` exports a model.

    Attributes:
        max_seq_len: most tokens one ``forward`` call takes (the prefill chunk); with a static shape
            (``enable_dynamic_shape=False``) every call takes exactly one token.
        max_context_len: rows of the KV cache: the longest prompt plus generated text.
        dtype: ``"fp32"`` or ``"fp16"`` (weights, activations and KV cache in float16; attention and norms
            accumulate in float32; logits are returned as float32). fp16 takes weight-only quantization
            (``"4w"``, ``"8w"``) but not the ``8da`` forms.
        quantize: linear layers' quantization: ``"8da4w"`` (int8 dynamic activations, int4 weights per
            ``group_size``), ``"8da8w"`` (int8 weights per channel), ``"4w"`` / ``"8w"`` (weight-only), or
            ``None``. Uses torchao's ``quantize_``; a CPU delegate runs the 8da forms as dynamically quantized
            fully connected layers, and the weight-only forms on the stored int8 / int4 weights with float32
            activations where it has such kernels (the CPU plugin's README says which: per-group int4 may be
            dequantized to float32 weights in its payload, and the ``.pte`` is then no smaller).
        group_size: weights per quantization group for 4-bit weights (what the backend supports, often a
            multiple of 32);
            0 means per output channel.
        weight_qparams: how the scales of 4-bit weights are chosen: ``"hqq"`` (default: torchao's
            half-quadratic scale search, symmetric, so the same format and speed; for SmolLM2-135M 8da4w with
            an 8-bit embedding it lowers the program's perplexity on tests/llm/data/passage.txt from 43.4
            to 37.1, fp32 eager: 28.2) or
            ``"minmax"`` (max |w| per group, ExecuTorch's choice; export is ~7 s faster on that model), or
            ``"gguf"``: keep the 4-bit grid of a Q4_1 GGUF file's weights exactly (``etkit.llm.weight_grid``:
            int4 weights with the file's scales plus a float32 matmul of the input's block sums for the
            blocks' offsets; ``group_size`` must be the file's 32), and quantize the output projection to
            int8 per channel with the scales of an ``"8w"`` embedding, so the tied table is stored once. A
            layer whose weights are not on such a grid is refused, named. On SmolLM2-135M's Q4_1 file the
            8da4w + 8w program's perplexity over that passage is 28.55, +1.35% of fp32 eager's 28.17
            (tests/llm/test_llm_perplexity.py prints it); decoding costs more (bench/llm.py, 8da4w-gguf).
            8-bit weights always use min/max.
        embedding_quantize: the embedding table's quantization, ExecuTorch's ``"<bits>,<group size>"``
            (``"8,0"``: int8 per row, ``"4,32"``: int4 per 32 columns) or ``"8w"`` / ``"4w"`` (per row), or
            ``None``. Looked-up rows are dequantized by ``quantized_decomposed::embedding_byte`` /
            ``embedding_4bit``, never the whole table.
        use_kv_cache: keep keys and values in static caches (mutable buffers); ``False`` is refused for now.
        use_sdpa_with_kv_cache: attention by ``llama::custom_sdpa`` over the cache (default) or by ATen SDPA.
        enable_dynamic_shape: one ``forward`` takes 1..``max_seq_len`` tokens (``None``: yes); ``False``
            exports a program that takes one token per call (the prompt is prefilled token by token).
        backend: a backend plugin's name or id as ``etkit backends`` lists it, or ``"portable"`` (the
            default, as in ExecuTorch's ``LlmConfig``) for the portable kernels only.
        generate_full_logits: ``forward`` returns logits of every token ([1, S, vocab]) instead of the last.
        bos_id, eos_ids: written as ``get_bos_id`` / ``get_eos_ids``; :func:`export_llm` fills them from the
            model's ``generation_config`` / ``config`` when ``None``.
        external_constants: keep the weights (constants and the backend's named data) in a ``.ptd`` data file
            instead of the ``.pte`` (``ExecutorchBackendConfig(external_constants=True)``); write it with
            ``program.write_tensor_data_to_file(dir)`` and pass it as ``TextLLMRunner(..., data_path=)`` /
            ``etkit_llm_runner --data_path``.
    """

    max_seq_len: int = 128
    max_context_len: int = 512
    dtype: str = "fp32"
    quantize: Optional[str] = None
    group_size: int = 32
    weight_qparams: str = "hqq"
    embedding_quantize: Optional[str] = None
    use_kv_cache: bool = True
    use_sdpa_with_kv_cache: bool = True
    enable_dynamic_shape: Optional[bool] = None
    backend: str = "portable"
    generate_full_logits: bool = False
    bos_id: Optional[int] = None
    eos_ids: Optional[list] = None
    extra_metadata: dict = field(default_factory=dict)
    external_constants: bool = False

    def embedding_bits(self) -> tuple:
        """``(bits, group size)`` of :attr:`embedding_quantize` (group size 0: per row).

        Raises:
            LlmExportError: an unknown form.
        """
        spec = self.embedding_quantize.strip().lower()
        bits, _, group = spec.partition(",")
        bits = bits[:-1] if bits.endswith("w") else bits
        try:
            result = int(bits), int(group or 0)
        except ValueError:
            result = (0, 0)
        if result[0] not in (4, 8) or result[1] < 0:
            raise LlmExportError(f"embedding_quantize {self.embedding_quantize!r} is unknown; use '8w', '4w' or "
                                 f"'<4|8>,<group size>' (group size 0: per row)")
        return result

    def check(self) -> None:
        """Raises :class:`LlmExportError` naming the first option that cannot be honoured."""
        if self.dtype not in DTYPES:
            raise LlmExportError(f"dtype {self.dtype!r} is unknown; choose one of {', '.join(DTYPES)}")
        if self.dtype == "fp16" and self.quantize is not None and self.quantize.startswith("8da"):
            raise LlmExportError(f"quantize {self.quantize!r} with dtype 'fp16' is not supported (dynamically "
                                 f"quantized activations are float32 here); use dtype 'fp32' with {self.quantize!r}, "
                                 f"or fp16 with weight-only '4w' / '8w'")
        if self.quantize is not None and self.quantize not in QUANTIZE_MODES:
            raise LlmExportError(f"quantize {self.quantize!r} is unknown; choose one of {', '.join(QUANTIZE_MODES)}")
        if self.weight_qparams not in WEIGHT_QPARAMS:
            raise LlmExportError(f"weight_qparams {self.weight_qparams!r} is unknown; choose one of "
                                 f"{', '.join(WEIGHT_QPARAMS)}")
        if self.weight_qparams == "gguf" and (self.quantize not in ("8da4w", "4w") or self.group_size <= 0):
            raise LlmExportError(f"weight_qparams 'gguf' keeps a GGUF file's 4-bit blocks: it needs quantize '8da4w' "
                                 f"or '4w' (got {self.quantize!r}) and the file's group_size, 32 for Q4_1 "
                                 f"(got {self.group_size})")
        if self.embedding_quantize is not None:
            self.embedding_bits()
        if not self.use_kv_cache:
            raise LlmExportError("use_kv_cache=False is not supported; etkit exports a static KV cache")
        if self.max_seq_len < 1 or self.max_context_len < 1:
            raise LlmExportError(f"max_seq_len ({self.max_seq_len}) and max_context_len ({self.max_context_len}) "
                                 f"must be positive")
        if self.max_seq_len > self.max_context_len:
            raise LlmExportError(f"max_seq_len ({self.max_seq_len}) exceeds max_context_len ({self.max_context_len}): "
                                 f"a prompt chunk must fit in the KV cache")
        if self.group_size < 0:
            raise LlmExportError(f"group_size {self.group_size} must be >= 0 (0: per channel)")


@contextmanager
def _stage(name: str, progress: Callable[[str], None]):
    start = time.perf_counter()
    progress(f"{name}...")
    yield
    progress(f"{name}: {time.perf_counter() - start:.1f} s")


def _special_ids(hf_model, config: LlmConfig) -> tuple:
    gen = getattr(hf_model, "generation_config", None)
    bos = config.bos_id
    if bos is None:
        bos = getattr(gen, "bos_token_id", None) if gen is not None else None
        bos = bos if bos is not None else getattr(hf_model.config, "bos_token_id", None)
    eos = config.eos_ids
    if eos is None:
        eos = getattr(gen, "eos_token_id", None) if gen is not None else None
        eos = eos if eos is not None else getattr(hf_model.config, "eos_token_id", None)
    eos = [] if eos is None else ([eos] if isinstance(eos, int) else list(eos))
    return (-1 if bos is None else int(bos)), [int(e) for e in eos]


def _quantize_gguf_grid(module: torch.nn.Module, config: LlmConfig) -> None:
    """``weight_qparams="gguf"``: the linears keep their GGUF 4-bit grid; the output projection is int8 per
    channel with the per-row scales an ``"8w"`` embedding table gets, so both hold the same bytes."""
    from .weight_grid import GridError, int_weight, quantize_on_grid
    dynamic = config.quantize.startswith("8da")
    try:
        quantize_on_grid(module, config.group_size, activations=dynamic, skip=("lm_head",))
    except GridError as exc:
        raise LlmExportError(str(exc)) from None
    from ..dialects.quantized_embedding import quantize_rows
    head = module.lm_head
    weight = head.weight.detach()
    q, scales = quantize_rows(weight, bits=8, group=weight.shape[1])  # QuantizedEmbedding's rounding: equal bytes
    head.weight = torch.nn.Parameter(int_weight(q, scales, weight.shape[1], weight.dtype, dynamic, bits=8),
                                     requires_grad=False)


def _quantize(module: torch.nn.Module, config: LlmConfig) -> None:
    if config.weight_qparams == "gguf":
        return _quantize_gguf_grid(module, config)
    from torchao.quantization import Int8DynamicActivationIntxWeightConfig, IntxWeightOnlyConfig, quantize_
    from torchao.quantization.granularity import PerAxis, PerGroup
    bits4 = config.quantize in ("8da4w", "4w")
    granularity = PerGroup(config.group_size) if bits4 and config.group_size else PerAxis(0)
    weight_dtype = torch.int4 if bits4 else torch.int8
    from torchao.quantization.quantize_.workflows.intx.intx_choose_qparams_algorithm import (
        IntxChooseQParamsAlgorithm)
    algorithm = IntxChooseQParamsAlgorithm.HQQ_SCALE_ONLY if bits4 and config.weight_qparams == "hqq" \
        else IntxChooseQParamsAlgorithm.AFFINE
    if config.quantize.startswith("8da"):
        qconfig = Int8DynamicActivationIntxWeightConfig(weight_dtype=weight_dtype, weight_granularity=granularity,
                                                        intx_choose_qparams_algorithm=algorithm)
    else:
        qconfig = IntxWeightOnlyConfig(weight_dtype=weight_dtype, granularity=granularity,
                                       intx_choose_qparams_algorithm=algorithm)
    if bits4 and config.group_size:
        for name, sub in module.named_modules():
            if isinstance(sub, torch.nn.Linear) and sub.in_features % config.group_size:
                raise LlmExportError(f"group_size {config.group_size} does not divide {name}'s {sub.in_features} "
                                     f"input features; pick a divisor (e.g. 32) or 0 for per channel")
    quantize_(module, qconfig, filter_fn=lambda m, _: isinstance(m, torch.nn.Linear))


def _partitioners(backend: str) -> list:
    if backend == "portable":
        return []
    from ..plugins import get_plugin_manager
    from ..plugins.spec import load_object
    specs = get_plugin_manager().registry.find(backend)
    if not specs:
        known = ", ".join(get_plugin_manager().registry.names()) or "none"
        raise LlmExportError(f"backend {backend!r} is not installed (installed: {known}; or 'portable'); "
                             f"pip install its plugin, then check `etkit backends`")
    partitioners = []
    for spec in specs:
        if not spec.partitioners:
            raise LlmExportError(f"backend {spec.backend_id!r} declares no partitioner")
        partitioners.append(load_object(next(iter(spec.partitioners.values())))())
    return partitioners


def load_model(path: str, dtype: torch.dtype = torch.float32):
    """A transformers causal LM and its tokenizer from a Hugging Face directory or a ``.gguf`` file.

    GGUF weights are dequantized to ``dtype`` by transformers (needs the ``gguf`` package).

    Raises:
        LlmExportError: the path does not exist, or transformers cannot read it (message says why).
    """
    import os
    from transformers import AutoModelForCausalLM, AutoTokenizer
    if not os.path.exists(path):
        raise LlmExportError(f"model path {path!r} does not exist (give a Hugging Face model directory or a .gguf file)")
    kwargs = {}
    directory = path
    if path.endswith(".gguf"):
        directory, kwargs["gguf_file"] = os.path.dirname(os.path.abspath(path)), os.path.basename(path)
    try:
        model = AutoModelForCausalLM.from_pretrained(directory, dtype=dtype, **kwargs).eval()
        tokenizer = AutoTokenizer.from_pretrained(directory, **kwargs)
    except (ValueError, OSError, KeyError) as exc:
        raise LlmExportError(f"transformers cannot load {path!r}: {exc}") from exc
    return model, tokenizer


def export_llm(model, config: Optional[LlmConfig] = None, progress: Optional[Callable[[str], None]] = None):
    """Export a decoder-only LM with a static KV cache to an ``ExecutorchProgramManager``.

    Args:
        model: a transformers ``*ForCausalLM`` of the Llama family (``etkit.llm.model.SUPPORTED_MODEL_TYPES``),
            or a path to a Hugging Face directory or ``.gguf`` file (see :func:`load_model`).
        config: :class:`LlmConfig` (defaults: fp32, portable, max_seq_len 128, max_context_len 512).
        progress: called with a line per stage and its duration (default: the ``etkit.llm`` logger).
    Returns:
        ``ExecutorchProgramManager`` with method ``forward(tokens int64 [1, S], input_pos int64 [1]) ->
        logits float32 [1, vocab]`` and the runner's constant methods. ``write_to_file`` writes the ``.pte``.
    Raises:
        LlmExportError: a config option cannot be honoured, or the backend is not installed.
        etkit.llm.model.UnsupportedModelError: the model's architecture is not supported.
    """
    import etkit
    config = config or LlmConfig()
    config.check()
    progress = progress or log.info
    if isinstance(model, str):
        with _stage(f"load {model}", progress):
            model, _ = load_model(model)
    dynamic = config.enable_dynamic_shape is not False
    partitioners = _partitioners(config.backend)
    with _stage("build the decoder with a static KV cache", progress):
        # the decoder shares the model's modules; quantization and casting replace their weights, so work
        # on a copy
        dtype = DTYPES[config.dtype]
        changes = config.quantize or next(model.parameters()).dtype != dtype
        source = copy.deepcopy(model).to(dtype) if changes else model
        module = StaticKVDecoder(source, config.max_context_len, config.use_sdpa_with_kv_cache,
                                 config.generate_full_logits).eval()
        if config.quantize:
            _quantize(module, config)
        if config.embedding_quantize:
            from ..dialects.quantized_embedding import QuantizedEmbedding
            bits, group = config.embedding_bits()
            try:
                module.embed_tokens = QuantizedEmbedding(module.embed_tokens, bits, group)
            except ValueError as exc:
                raise LlmExportError(f"embedding_quantize {config.embedding_quantize!r}: {exc}") from None
    bos, eos = _special_ids(model, config)
    shape = module.shape
    seq = min(2, config.max_seq_len) if dynamic else 1
    example = (torch.zeros(1, seq, dtype=torch.long), torch.tensor([0], dtype=torch.long))
    dynamic_shapes = ({1: torch.export.Dim("seq_len", min=1, max=config.max_seq_len)}, None) if dynamic and \
        config.max_seq_len > 1 else None
    with _stage("torch.export", progress), torch.no_grad():
        ep = torch.export.export(module, example, dynamic_shapes=dynamic_shapes, strict=False)
    metadata = {
        "get_max_seq_len": config.max_seq_len,
        "get_max_context_len": config.max_context_len,
        "get_vocab_size": shape.vocab_size,
        "get_n_layers": shape.n_layers,
        "get_n_kv_heads": shape.n_kv_heads,
        "get_head_dim": shape.head_dim,
        "get_max_batch_size": 1,
        "get_bos_id": bos,
        "get_eos_ids": eos,
        "use_kv_cache": config.use_kv_cache,
        "use_sdpa_with_kv_cache": config.use_sdpa_with_kv_cache,
        "enable_dynamic_shape": bool(dynamic),
        **config.extra_metadata,
    }
    with _stage(f"lower to {config.backend}", progress):
        edge = etkit.to_edge_transform_and_lower(ep, partitioner=partitioners, constant_methods=metadata)
    with _stage("emit the program", progress):
        program = edge.to_executorch(etkit.ExecutorchBackendConfig(external_constants=config.external_constants))
        size = len(program.buffer)
    data = sum(len(blob) for blob in program.data_files.values())
    progress(f"program: {size / 1e6:.1f} MB" + (f", data file: {data / 1e6:.1f} MB" if data else ""))
    return program
