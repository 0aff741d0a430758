"""A decoder-only transformer with a static KV cache, built from a transformers model, ready to export.

The module computes what the transformers model computes (Llama family: RMSNorm, rotary embeddings,
grouped-query attention, SwiGLU MLP; Qwen2's q/k/v biases and Mistral's shapes follow from the same
config fields) with the weights it is given, but with the state an on-device runner needs:

- ``forward(tokens, input_pos)``: ``tokens`` int64 [1, S] (1 <= S <= ``max_seq_len``), ``input_pos`` int64
  [1] the position of the first token; returns float logits [1, vocab] of the last token (or
  [1, S, vocab] with ``generate_full_logits``). ExecuTorch's runner calling convention (seed page
  "Running LLMs with C++").
- One key and one value cache per layer, mutable buffers of shape [1, max_context_len, n_kv_heads,
  head_dim], updated in place by ``llama::update_cache``; attention by ``llama::custom_sdpa`` over the
  first ``input_pos + S`` rows, causal mask computed by the kernel (:mod:`etkit.llm.custom_ops`).
- Rotary tables precomputed for every position, sliced at ``input_pos`` (see ``_rotate``).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..dialects import quantized_embedding  # noqa: F401  (registers quantized_decomposed::embedding_*)
from . import custom_ops  # noqa: F401  (registers torch.ops.llama)

#: transformers ``model_type`` values whose decoder this module reproduces exactly.
SUPPORTED_MODEL_TYPES = ("llama", "mistral", "qwen2")


class UnsupportedModelError(ValueError):
    """A model this module cannot reproduce (architecture, attention variant or activation)."""


@dataclass
class DecoderShape:
    """The dimensions a runner needs to know (ExecuTorch's constant-method names in comments)."""

    vocab_size: int       # get_vocab_size
    dim: int
    n_layers: int         # get_n_layers
    n_heads: int
    n_kv_heads: int       # get_n_kv_heads
    head_dim: int         # get_head_dim
    max_context_len: int  # get_max_context_len


def _config_value(config, *names, default=None):
    for name in names:
        value = getattr(config, name, None)
        if value is not None:
            return value
    return default


def _stacked_linear(*linears: nn.Linear) -> nn.Linear:
    """One ``nn.Linear`` whose output is the given layers' outputs side by side: their weights (and biases, a
    missing one as zeros) stacked by output row. Each output row keeps its own weights, so a per-row or per-group
    weight quantization gives the rows the values it gives the separate layers; the input is read (and, with
    dynamic activation quantization, quantized) once instead of once per layer."""
    weight = torch.cat([linear.weight.detach() for linear in linears], dim=0)
    fused = nn.Linear(weight.shape[1], weight.shape[0], bias=any(l.bias is not None for l in linears),
                      device="meta")
    fused.weight = nn.Parameter(weight, requires_grad=False)
    if fused.bias is not None:
        fused.bias = nn.Parameter(torch.cat([l.bias.detach() if l.bias is not None else
                                             weight.new_zeros(l.weight.shape[0]) for l in linears]),
                                  requires_grad=False)
    return fused


class _Attention(nn.Module):
    def __init__(self, hf_attn, shape: DecoderShape, use_sdpa_with_kv_cache: bool, dtype: torch.dtype) -> None:
        super().__init__()
        # q, k and v in one matmul: [.., n_heads * head_dim | n_kv_heads * head_dim | n_kv_heads * head_dim]
        self.qkv_proj = _stacked_linear(hf_attn.q_proj, hf_attn.k_proj, hf_attn.v_proj)
        self.o_proj = hf_attn.o_proj
        self.n_heads, self.n_kv_heads, self.head_dim = shape.n_heads, shape.n_kv_heads, shape.head_dim
        self.scale = float(getattr(hf_attn, "scaling", shape.head_dim ** -0.5))
        self.use_sdpa_with_kv_cache = use_sdpa_with_kv_cache
        cache_shape = (1, shape.max_context_len, shape.n_kv_heads, shape.head_dim)
        self.register_buffer("k_cache", torch.zeros(cache_shape, dtype=dtype), persistent=False)
        self.register_buffer("v_cache", torch.zeros(cache_shape, dtype=dtype), persistent=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, start_pos) -> torch.Tensor:
        batch, seq, _ = x.shape
        heads, kv_heads, head_dim = self.n_heads, self.n_kv_heads, self.head_dim
        # [B, S, heads + 2 kv_heads, head_dim]: query heads, key heads, value heads
        qkv = self.qkv_proj(x).view(batch, seq, heads + 2 * kv_heads, head_dim)
        # the rotary embedding once over the query and key heads together
        qk = _rotate(qkv[:, :, :heads + kv_heads], cos, sin)
        q, k = qk[:, :, :heads], qk[:, :, heads:]
        v = qkv[:, :, heads + kv_heads:]
        torch.ops.llama.update_cache(k, self.k_cache, start_pos)
        torch.ops.llama.update_cache(v, self.v_cache, start_pos)
        if self.use_sdpa_with_kv_cache:
            y = torch.ops.llama.custom_sdpa(q, self.k_cache, self.v_cache, start_pos, None, 0.0, True, self.scale)
        else:  # ATen attention over the whole cache with an explicit mask (for backends that take sdpa)
            length = self.k_cache.size(1)
            groups = self.n_heads // self.n_kv_heads
            keys = self.k_cache.transpose(1, 2).repeat_interleave(groups, 1)
            values = self.v_cache.transpose(1, 2).repeat_interleave(groups, 1)
            rows = torch.arange(seq).unsqueeze(1) + start_pos
            mask = torch.arange(length).unsqueeze(0) <= rows
            y = torch.nn.functional.scaled_dot_product_attention(q.transpose(1, 2), keys, values, attn_mask=mask,
                                                                 scale=self.scale).transpose(1, 2)
        return self.o_proj(y.reshape(batch, seq, self.n_heads * self.head_dim))


def _rotate(x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding of x [B, S, H, D] (transformers' rotate-half layout) with tables [S, 1, D]:
    ``x * cos + cat(-x2, x1) * sin`` computed as ``x * cos + cat(x2, x1) * signed_sin``, where
    ``signed_sin`` is ``sin`` with its first half negated (the same products, one negation fewer), and
    the tables already broadcast over the heads (no unsqueeze per layer)."""
    half = x.size(-1) // 2
    swapped = torch.cat((x[..., half:], x[..., :half]), dim=-1)
    return x * cos + swapped * signed_sin


class _RMSNorm(nn.Module):
    def __init__(self, hf_norm) -> None:
        super().__init__()
        self.weight = hf_norm.weight
        self.eps = float(_config_value(hf_norm, "variance_epsilon", "eps", default=1e-6))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.to(torch.float32)
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(x.dtype)


class _Layer(nn.Module):
    def __init__(self, hf_layer, shape: DecoderShape, use_sdpa_with_kv_cache: bool, dtype: torch.dtype) -> None:
        super().__init__()
        self.input_layernorm = _RMSNorm(hf_layer.input_layernorm)
        self.self_attn = _Attention(hf_layer.self_attn, shape, use_sdpa_with_kv_cache, dtype)
        self.post_attention_layernorm = _RMSNorm(hf_layer.post_attention_layernorm)
        mlp = hf_layer.mlp
        self.hidden = mlp.gate_proj.weight.shape[0]
        self.gate_up_proj = _stacked_linear(mlp.gate_proj, mlp.up_proj)  # [.., gate | up]
        self.down_proj = mlp.down_proj

    def forward(self, x, cos, sin, start_pos):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, start_pos)
        gate_up = self.gate_up_proj(self.post_attention_layernorm(x))
        return x + self.down_proj(torch.nn.functional.silu(gate_up[..., :self.hidden]) * gate_up[..., self.hidden:])


class StaticKVDecoder(nn.Module):
    """A transformers causal LM as ``forward(tokens, input_pos) -> logits`` with a static KV cache.

    Args:
        hf_model: a transformers ``*ForCausalLM`` of the Llama family (``config.model_type`` in
            :data:`SUPPORTED_MODEL_TYPES`). Its modules (and so its weights) are shared, not copied, but for
            each layer's q/k/v and gate/up projections, stacked into one linear each (``qkv_proj``,
            ``gate_up_proj``: one matmul where there were three and two).
        max_context_len: rows of each KV cache; positions ``0 .. max_context_len - 1``.
        use_sdpa_with_kv_cache: attention by ``llama::custom_sdpa`` (the default) or by ATen's SDPA
            over the whole cache with a mask.
        generate_full_logits: return logits for every input token instead of the last one only.
    Raises:
        UnsupportedModelError: the architecture, activation, rope type or attention variant differs from
            what this module computes (the message names it).
    """

    def __init__(self, hf_model, max_context_len: int, use_sdpa_with_kv_cache: bool = True,
                 generate_full_logits: bool = False) -> None:
        super().__init__()
        config = hf_model.config
        _check_supported(config)
        inner = hf_model.model
        dtype = inner.embed_tokens.weight.dtype
        n_heads = config.num_attention_heads
        self.shape = DecoderShape(
            vocab_size=config.vocab_size, dim=config.hidden_size, n_layers=config.num_hidden_layers, n_heads=n_heads,
            n_kv_heads=_config_value(config, "num_key_value_heads", default=n_heads),
            head_dim=_config_value(config, "head_dim", default=config.hidden_size // n_heads),
            max_context_len=max_context_len)
        self.generate_full_logits = generate_full_logits
        self.embed_tokens = inner.embed_tokens
        self.layers = nn.ModuleList(_Layer(layer, self.shape, use_sdpa_with_kv_cache, dtype) for layer in inner.layers)
        self.norm = _RMSNorm(inner.norm)
        self.lm_head = hf_model.lm_head
        rotary = inner.rotary_emb
        positions = torch.arange(max_context_len, dtype=torch.float32)
        freqs = positions[:, None] * rotary.inv_freq.to(torch.float32)[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        scaling = float(getattr(rotary, "attention_scaling", 1.0))
        signed_sin = torch.cat((-freqs.sin(), freqs.sin()), dim=-1)  # see _rotate
        # [max_context_len, 1, head_dim]: a slice of rows broadcasts over [B, S, H, head_dim]
        self.register_buffer("rope_cos", (emb.cos() * scaling).to(dtype).unsqueeze(1), persistent=False)
        self.register_buffer("rope_sin", (signed_sin * scaling).to(dtype).unsqueeze(1), persistent=False)

    def forward(self, tokens: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
        seq = tokens.size(1)
        start_pos = input_pos[0].item()
        torch._check(start_pos >= 0)
        torch._check(start_pos + seq <= self.shape.max_context_len)
        cos = self.rope_cos.narrow(0, start_pos, seq)
        sin = self.rope_sin.narrow(0, start_pos, seq)
        x = self.embed_tokens(tokens)
        for layer in self.layers:
            x = layer(x, cos, sin, start_pos)
        if not self.generate_full_logits:
            x = x[:, -1, :]
        return self.lm_head(self.norm(x)).to(torch.float32)  # runners read float32 logits whatever the dtype

    def reset_cache(self) -> None:
        """Zero every KV cache (eager use: start a new sequence)."""
        for layer in self.layers:
            layer.self_attn.k_cache.zero_()
            layer.self_attn.v_cache.zero_()


def _check_supported(config) -> None:
    model_type = getattr(config, "model_type", None)
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise UnsupportedModelError(
            f"model_type {model_type!r} is not supported by etkit.llm; supported: {', '.join(SUPPORTED_MODEL_TYPES)} "
            f"(decoder-only Llama-family models)")
    act = _config_value(config, "hidden_act", default="silu")
    if act != "silu":
        raise UnsupportedModelError(f"{model_type}: hidden_act {act!r} is not supported (SwiGLU with silu only)")
    rope = _config_value(config, "rope_parameters", "rope_scaling", default=None) or {}
    rope_type = rope.get("rope_type", rope.get("type", "default")) if isinstance(rope, dict) else "default"
    if rope_type not in ("default", "llama3", "linear"):
        raise UnsupportedModelError(f"{model_type}: rope type {rope_type!r} is not supported "
                                    f"(default, linear, llama3)")
    if getattr(config, "mlp_bias", False):
        raise UnsupportedModelError(f"{model_type}: mlp_bias=True is not supported")
    window = getattr(config, "sliding_window", None)
    if window and getattr(config, "use_sliding_window", model_type == "mistral"):
        raise UnsupportedModelError(f"{model_type}: sliding-window attention (window {window}) is not supported")


__all__ = ["DecoderShape", "StaticKVDecoder", "SUPPORTED_MODEL_TYPES", "UnsupportedModelError"]
