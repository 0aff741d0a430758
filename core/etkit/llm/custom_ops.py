"""The LLM operators, under ExecuTorch's names and schemas (``extension/llm/custom_ops``):

- ``llama::update_cache(Tensor value, Tensor(a!) cache, SymInt start_pos) -> Tensor`` writes
  ``value`` [B, S, H, D] into ``cache`` [B, max_S, H, D] at rows ``start_pos .. start_pos+S`` in place
  and returns a 1-element placeholder tensor (as ExecuTorch's does).
- ``llama::custom_sdpa(Tensor query, Tensor key, Tensor value, SymInt start_pos, Tensor? attn_mask=None,
  float drpout_p=0.0, bool is_causal=False, float? scale=None) -> Tensor``: attention of ``query``
  [B, S, H, D] over the first ``start_pos + S`` rows of ``key``/``value`` caches [B, max_S, H_kv, D]
  (grouped-query attention when ``H_kv`` divides ``H``). With ``is_causal``, query row ``i`` sees key
  rows ``0 .. start_pos + i``; the mask is computed, never materialized. Returns [B, S, H, D].

Both have ``.out`` variants, which the runtime's kernels implement (``runtime-cpp/kernels/llm/``). The
functions here are the eager reference and the fake (meta) implementations used by ``torch.export``.
Importing this module registers the ops; when ExecuTorch's own library already defined them in this
process, its definitions are used (same schemas).
"""
from __future__ import annotations

import math
from typing import Optional

import torch

_SCHEMAS = {
    "update_cache": "update_cache(Tensor value, Tensor(a!) cache, SymInt start_pos) -> Tensor",
    "update_cache.out": "update_cache.out(Tensor value, Tensor(a!) cache, SymInt start_pos, *, Tensor(b!) out) "
                        "-> Tensor(b!)",
    "custom_sdpa": "custom_sdpa(Tensor query, Tensor key, Tensor value, SymInt start_pos, Tensor? attn_mask=None, "
                   "float drpout_p=0.0, bool is_causal=False, float? scale=None) -> Tensor",
    "custom_sdpa.out": "custom_sdpa.out(Tensor query, Tensor key, Tensor value, SymInt start_pos, "
                       "Tensor? attn_mask=None, float drpout_p=0.0, bool is_causal=False, float? scale=None, *, "
                       "Tensor(a!) out) -> Tensor(a!)",
}


def _check_update(value: torch.Tensor, cache: torch.Tensor, start_pos) -> None:
    torch._check(value.dim() == 4 and cache.dim() == 4,
                 lambda: f"llama::update_cache: value and cache must be 4-D [B, S, H, D], got {value.dim()}-D and "
                         f"{cache.dim()}-D")
    torch._check(value.dtype == cache.dtype,
                 lambda: f"llama::update_cache: value is {value.dtype} but the cache is {cache.dtype}")
    for d in (0, 2, 3):
        torch._check(value.size(d) == cache.size(d),
                     lambda: f"llama::update_cache: value {list(value.shape)} and cache {list(cache.shape)} differ "
                             f"in dim {d}")
    torch._check(start_pos >= 0, lambda: f"start_pos {start_pos} is negative")
    torch._check(start_pos + value.size(1) <= cache.size(1),
                 lambda: f"llama::update_cache: start_pos {start_pos} + {value.size(1)} rows exceed the cache's "
                         f"{cache.size(1)} rows")


def _check_sdpa(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, start_pos) -> None:
    torch._check(query.dim() == 4 and key.dim() == 4 and value.dim() == 4,
                 lambda: "llama::custom_sdpa: query, key and value must be 4-D [B, S, H, D]")
    torch._check(key.shape == value.shape,
                 lambda: f"llama::custom_sdpa: key {list(key.shape)} and value {list(value.shape)} differ")
    torch._check(query.size(0) == key.size(0) and query.size(3) == key.size(3),
                 lambda: f"llama::custom_sdpa: query {list(query.shape)} and key {list(key.shape)} differ in "
                         f"batch or head size")
    torch._check(query.size(2) % key.size(2) == 0,
                 lambda: f"llama::custom_sdpa: {query.size(2)} query heads are not a multiple of {key.size(2)} "
                         f"key/value heads")
    torch._check(start_pos >= 0, lambda: f"start_pos {start_pos} is negative")
    torch._check(start_pos + query.size(1) <= key.size(1),
                 lambda: f"llama::custom_sdpa: start_pos {start_pos} + {query.size(1)} rows exceed the cache's "
                         f"{key.size(1)} rows")


def update_cache_reference(value: torch.Tensor, cache: torch.Tensor, start_pos: int) -> torch.Tensor:
    _check_update(value, cache, start_pos)
    cache[:, start_pos:start_pos + value.size(1)] = value
    return torch.empty((1,), dtype=value.dtype, device=value.device)


def custom_sdpa_reference(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, start_pos: int,
                          attn_mask: Optional[torch.Tensor] = None, drpout_p: float = 0.0, is_causal: bool = False,
                          scale: Optional[float] = None) -> torch.Tensor:
    _check_sdpa(query, key, value, start_pos)
    if attn_mask is not None or drpout_p != 0.0:
        raise NotImplementedError("llama::custom_sdpa: etkit supports attn_mask=None and drpout_p=0 only")
    seq, length = query.size(1), start_pos + query.size(1)
    groups = query.size(2) // key.size(2)
    q = query.transpose(1, 2).float()                                   # [B, H, S, D]
    k = key[:, :length].transpose(1, 2).repeat_interleave(groups, 1).float()
    v = value[:, :length].transpose(1, 2).repeat_interleave(groups, 1).float()
    scores = (q @ k.transpose(-1, -2)) * (scale if scale is not None else 1.0 / math.sqrt(query.size(3)))
    if is_causal:
        rows = torch.arange(seq).unsqueeze(1) + start_pos
        scores = scores.masked_fill(torch.arange(length).unsqueeze(0) > rows, float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v
    return out.transpose(1, 2).to(query.dtype).contiguous()


def _register() -> None:
    namespace = getattr(torch.ops, "llama", None)
    if namespace is not None and hasattr(namespace, "custom_sdpa") and hasattr(namespace, "update_cache"):
        return  # ExecuTorch's library (or an earlier import) defined them with the same schemas
    lib = torch.library.Library("llama", "FRAGMENT")
    _register.lib = lib  # the library must outlive this call
    for schema in _SCHEMAS.values():
        lib.define(schema)

    def update_cache_out(value, cache, start_pos, *, out):
        update_cache_reference(value, cache, start_pos)
        return out

    def custom_sdpa_out(query, key, value, start_pos, attn_mask=None, drpout_p=0.0, is_causal=False, scale=None,
                        *, out):
        out.copy_(custom_sdpa_reference(query, key, value, start_pos, attn_mask, drpout_p, is_causal, scale))
        return out

    lib.impl("update_cache", update_cache_reference, "CompositeExplicitAutograd")
    lib.impl("update_cache.out", update_cache_out, "CompositeExplicitAutograd")
    lib.impl("custom_sdpa", custom_sdpa_reference, "CompositeExplicitAutograd")
    lib.impl("custom_sdpa.out", custom_sdpa_out, "CompositeExplicitAutograd")

    def update_cache_fake(value, cache, start_pos):
        _check_update(value, cache, start_pos)
        return value.new_empty((1,))

    def custom_sdpa_fake(query, key, value, start_pos, attn_mask=None, drpout_p=0.0, is_causal=False, scale=None):
        _check_sdpa(query, key, value, start_pos)
        return torch.empty_like(query, memory_format=torch.contiguous_format)

    torch.library.register_fake("llama::update_cache", update_cache_fake, lib=lib)
    torch.library.register_fake("llama::custom_sdpa", custom_sdpa_fake, lib=lib)


_register()

#: ``torch.ops.llama.update_cache.default`` and ``torch.ops.llama.custom_sdpa.default``.
update_cache = torch.ops.llama.update_cache.default
custom_sdpa = torch.ops.llama.custom_sdpa.default
